/* The host paths of a snapshot that came from a store (its directory has the
 * snapshot library's mark, snap_dir_is_from_store): whoever wrote the store
 * chose its config.json, so vm.restore takes no host path or host resource
 * from it. Every one comes from the caller's config_overrides, or (the disks'
 * new overlays) from the VM's own work directory:
 *
 *   payload.kernel, .initramfs, .firmware   config_overrides.payload (a
 *                                           vm.reboot boots them)
 *   serial / console .file, .socket         config_overrides.serial / .console
 *   vsock.socket                            config_overrides.vsock.socket
 *   rng.src                                 config_overrides.rng.src
 *   disks[i].path (.vsnap_chain, .vsnap_overlay: the restore's own)
 *                                           config_overrides.disks [{id, path, readonly}]
 *   net[i].tap, .fds, .ip, .mask, .host_mac config_overrides.net, net_fds
 *   vsnap_work_dir                          config_overrides.vsnap_work_dir, else a new one
 *
 * A restore that lacks one a device needs is refused (400) naming the device
 * and the override that gives it, before any file is opened. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>

/* Remove every member above from config (config.json's root, before the
 * overrides are applied). */
void host_paths_drop(JsonObject *config);

/* After the overrides: every device that needs a host path has one.
 * PERSIST_ERROR_INVALID naming dir, the device and the override otherwise. */
bool host_paths_check(JsonObject *config, const char *dir, GError **error);
