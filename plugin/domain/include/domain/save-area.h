/* A domain's save area: every file its saves and managed saves write, and
 * nothing of any other domain's. All shims run as one user, so what keeps
 * one VM's shim from another guest's RAM (a managed save image, a save's
 * staging files) is its jail, which binds its own domain's area alone
 * (jail.c). The path rule lives here and nowhere else:
 *
 *   <state_dir>/saves/<name>/              0700; the shims' user's while the
 *                                          domain runs confined, root's else
 *   <state_dir>/saves/<name>/managed/      the managed save image
 *                                          (persist/managed-image.h)
 *   <state_dir>/saves/<name>/managed.tmp/  that image while it is taken
 *   <state_dir>/saves/<name>/work-<uuid>/  a save's or a restore's files
 *                                          while it runs
 *   <state_dir>/saves/<name>/.*.partial-*  the shim's partial directories
 *                                          of those (snapshot/directory.h)
 *
 * Everything but managed/ is transient: what a start-up finds of it was
 * left by a daemon or shim that died. */
#pragma once

#include <glib.h>
#include <stdbool.h>

/* <state_dir>/saves/<domain>. */
char *save_area_dir(const char *state_dir, const char *domain);
/* The managed save image's directory, and its temporary name. */
char *save_area_managed_dir(const char *state_dir, const char *domain);
char *save_area_managed_tmp_dir(const char *state_dir, const char *domain);
/* A new work directory's path (not created). */
char *save_area_new_work_dir(const char *state_dir, const char *domain);

/* Remove what is transient in domain's area (call when none of its saves
 * runs: at start-up). */
void save_area_remove_leftovers(const char *state_dir, const char *domain);
/* Remove domain's area when it holds nothing (an undefined domain's). */
void save_area_remove_if_empty(const char *state_dir, const char *domain);
/* The domains that have an area. */
GPtrArray *save_area_list(const char *state_dir);

