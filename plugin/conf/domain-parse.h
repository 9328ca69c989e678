/* Internal to plugin/conf: the parts of <domain> parsing split by concern. */
#pragma once

#include <libxml/tree.h>

#include "conf/domain-conf.h"
#include "limits/vsnap-limits.h"

/* The shim's limits, so the daemon refuses a definition the shim would
 * refuse, at define time rather than at start. */
#define DOMAIN_MIN_MEMORY_KIB (VSNAP_MIN_MEMORY >> 10)
#define DOMAIN_MAX_MEMORY_KIB (VSNAP_MAX_MEMORY >> 10)
#define DOMAIN_MACHINE "vsnap"
#define DOMAIN_ARCH "x86_64"
#define DOMAIN_EMULATOR_BASENAME "vsnap-shim"

/* One element a parent understands, and how to parse it. Elements not in a
 * table are refused by name; elements not marked repeatable may appear once. */
struct domain_child_parser {
    const char *name;
    bool (*parse)(struct domain_def *def, const xmlNode *node, GError **error);
    bool repeatable;
};

/* Parse every element child of parent with table; bit i of *seen is set when
 * table[i] was found (at most 32 entries). */
bool domain_parse_children(struct domain_def *def, const xmlNode *parent,
                           const struct domain_child_parser *table, size_t n_table,
                           uint32_t *seen, GError **error);

/* Absolute paths only: the shim runs in its own directory. */
bool domain_check_absolute_path(const char *path, const char *what, GError **error);

bool domain_parse_os(struct domain_def *def, const xmlNode *os, GError **error);
bool domain_parse_features(struct domain_def *def, const xmlNode *features, GError **error);
bool domain_parse_cpu(struct domain_def *def, const xmlNode *cpu, GError **error);
bool domain_parse_clock(struct domain_def *def, const xmlNode *clock, GError **error);
bool domain_parse_devices(struct domain_def *def, const xmlNode *devices, GError **error);
/* One <disk>, appended to def->disks (domain-parse-disk.c). */
bool domain_parse_disk(struct domain_def *def, const xmlNode *disk, GError **error);
/* One <interface>, appended to def->nets (domain-parse-interface.c). */
bool domain_parse_interface(struct domain_def *def, const xmlNode *node, GError **error);
/* Free what a struct domain_net holds (not the struct). */
void domain_net_clear(struct domain_net *net);
/* After the whole definition: the restore mode a clone gets when its
 * metadata names none (shared; on demand with huge pages). */
void domain_default_restore_mode(struct domain_def *def);
bool domain_parse_metadata(struct domain_def *def, const xmlNode *metadata, GError **error);
/* Serialize node on its own, with the namespace declarations it uses (copied
 * into a new document, libxml2 declares them on the copy's root): one element
 * of domain_def.foreign_metadata. */
char *domain_metadata_serialize(const xmlNode *node);
bool domain_parse_sysinfo(struct domain_def *def, const xmlNode *sysinfo, GError **error);
bool domain_parse_smbios(struct domain_def *def, const xmlNode *smbios, GError **error);
bool domain_parse_memtune(struct domain_def *def, const xmlNode *memtune, GError **error);
bool domain_parse_cputune(struct domain_def *def, const xmlNode *cputune, GError **error);
bool domain_parse_memory_backing(struct domain_def *def, const xmlNode *memory_backing, GError **error);
/* Once <memory> is known: RAM on huge pages is a whole number of them. */
bool domain_check_memory_backing(const struct domain_def *def, GError **error);
bool domain_parse_rng(struct domain_def *def, const xmlNode *rng, GError **error);
/* Once everything is parsed: sysinfo and the smbios mode agree with the domain. */
bool domain_check_sysinfo(const struct domain_def *def, GError **error);
