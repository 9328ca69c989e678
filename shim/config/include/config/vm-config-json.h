/* VmConfig JSON <-> struct vm_config (vm-config.h).
 *
 * Parsing refuses, with SHIM_ERROR_INVALID and the dotted path of the field
 * ("memory.size"), anything Cloud Hypervisor would not accept, and with
 * SHIM_ERROR_UNSUPPORTED anything Cloud Hypervisor accepts but vsnap cannot do
 * yet (disks, net, ...): such a field is never silently ignored.
 */
#pragma once

#include <json-glib/json-glib.h>
#include <stdbool.h>

#include "config/vm-config.h"

#define VSNAP_DEFAULT_READINESS_PORT 1024
#define VSNAP_DEFAULT_NOTIFY_PORT 1025
#define VSNAP_DEFAULT_RNG_SOURCE "/dev/urandom"

/* Parse and validate (vm_config_validate) a VmConfig. */
struct vm_config *vm_config_from_json(JsonNode *root, GError **error);
struct vm_config *vm_config_from_json_text(const char *text, gssize len, GError **error);

/* vm.add-disk's body: one DiskConfig (unknown or unsupported fields refused).
 * Only parsed: vm_config_validate checks it once it joined a config. */
bool disk_config_from_json_text(const char *text, gssize len, struct disk_config *out, GError **error);
/* vm.add-net's body: one NetConfig, parsed (its "fds" already replaced by
 * the descriptors that came with the request: see below). Checked once it
 * joined a config.
 *
 * Descriptors: a NetConfig's "fds" member, as parsed here, holds real
 * descriptors, which the config duplicates and owns (-1: one that did not
 * come). Only
 * the API puts them there: it replaces every number a client wrote in
 * "fds" with the descriptors received over SCM_RIGHTS, in order, and refuses
 * a request whose counts differ; a config read from a file never has them
 * (vm_config_to_json does not write them). */
bool net_config_from_json_node(JsonNode *root, struct net_config *out, GError **error);
/* The disk's image exists, is a regular file or a block device of at least one
 * sector, opens for reading (and writing unless readonly) and is not locked
 * by another VM against that (snapshot/image-lock.h). field names it in the
 * error ("disks[0].path"). */
bool disk_config_check_image(const struct disk_config *disk, const char *field, GError **error);
/* No two disks are one file, unless both are read-only. */
bool disk_config_check_distinct(const struct vm_config *cfg, GError **error);

/* Value checks that do not depend on JSON (also used by the command line). */
bool vm_config_validate(const struct vm_config *cfg, GError **error);
/* The files the config names exist and are readable (checked at vm.create). */
bool vm_config_check_files(const struct vm_config *cfg, GError **error);

/* The config as VmConfig JSON, every field vsnap knows, for vm.info and snapshots;
 * vm_config_from_json() accepts it back. */
JsonNode *vm_config_to_json(const struct vm_config *cfg);

/* "Off", "Null", "File", ... back to the enum. */
bool console_mode_from_string(const char *text, enum console_mode *out);
