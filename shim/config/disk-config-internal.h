/* What vm-config.c (VmConfig's schema, checks and JSON) needs of
 * disk-config.c and net-config.c (the disks' and interfaces' part of them),
 * and what all three share. Private to config/. */
#pragma once

#include <json-glib/json-glib.h>
#include <stdbool.h>

#include "config/vm-config.h"

/* Values: ids unique and present, paths given, queues and queue sizes in
 * range, image_type Raw, no more devices than interrupt lines. */
bool vm_config_check_disks(const struct vm_config *cfg, GError **error);

/* One element of VmConfig's "disks", every field vsnap knows. */
void disk_config_add_json(JsonBuilder *b, const struct disk_config *disk);

/* An id vm.counters uses for something else ("serial", "vcpu0", ...). */
bool disk_config_id_is_reserved(const char *id);

/* net-config.c: ids unique among nets and disks, one queue pair, sizes and
 * MTU in range, addresses well formed, descriptors received. */
bool vm_config_check_nets(const struct vm_config *cfg, GError **error);
/* One element of VmConfig's "net" (never its descriptors). */
void net_config_add_json(JsonBuilder *b, const struct net_config *net);

