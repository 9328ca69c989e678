/* A domain's managed save image on disk: a snapshot directory as the shim
 * wrote it, plus what a later `start` restores with.
 *
 *   <state_dir>/managedsave/<name>/
 *       config.json state.json <layer>   written by the shim (vm.snapshot)
 *       domain.xml                       the definition to restore with
 *       managed-save.ini                 [image] paused=; written last: the
 *                                        image exists once this file does
 *   <state_dir>/managedsave/<name>.tmp/  the image while it is taken, renamed
 *                                        to <name>/ when complete
 *
 * Errors are VSNAP_VIR_ERROR GErrors naming the file. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#define MANAGED_TMP_SUFFIX ".tmp"

char *managed_image_dir(const char *state_dir, const char *domain);
/* Remove images never renamed into place and the shim's partial directories
 * (call when no managed save runs: at start-up). */
void managed_image_remove_leftovers(const char *state_dir);
bool managed_image_exists(const char *state_dir, const char *domain);
/* The commit point of a new image in dir. */
bool managed_image_write_info(const char *dir, const char *domain_xml, bool paused,
                              GError **error);
/* The definition and the state to restore into. */
bool managed_image_read_info(const char *dir, char **domain_xml, bool *paused, GError **error);
