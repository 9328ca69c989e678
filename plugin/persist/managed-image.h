/* A domain's managed save image on disk: a snapshot directory as the shim
 * wrote it, plus what a later `start` restores with. It lives in the
 * domain's save area (save-area.h):
 *
 *   <state_dir>/saves/<name>/managed/
 *       config.json state.json <layer>   written by the shim (vm.snapshot)
 *       domain.xml                       the definition to restore with
 *       managed-save.ini                 [image] paused=; written last: the
 *                                        image exists once this file does
 *   <state_dir>/saves/<name>/managed.tmp/  the image while it is taken,
 *                                        renamed to managed/ when complete
 *
 * Errors are VSNAP_VIR_ERROR GErrors naming the file. */
#pragma once

#include <glib.h>
#include <stdbool.h>

char *managed_image_dir(const char *state_dir, const char *domain);
char *managed_image_tmp_dir(const char *state_dir, const char *domain);
bool managed_image_exists(const char *state_dir, const char *domain);
/* The commit point of a new image in dir. */
bool managed_image_write_info(const char *dir, const char *domain_xml, bool paused,
                              GError **error);
/* The definition and the state to restore into. */
bool managed_image_read_info(const char *dir, char **domain_xml, bool *paused, GError **error);

