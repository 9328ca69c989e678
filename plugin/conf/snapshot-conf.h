/* libvirt's <domainsnapshot> as vsnap keeps it: name, description, state of
 * the domain when taken, parent, creation time, memory (vsnap snapshots
 * always hold guest RAM: 'internal'), and the domain definition at that time.
 * Validated against xml/snapshot.rng; disk snapshots and anything else are
 * refused with VIR_ERR_CONFIG_UNSUPPORTED naming the element.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "domain-conf.h"

/* libvirt's virDomainSnapshotState names, in its order. */
enum snapshot_state {
    SNAPSHOT_STATE_NOSTATE,
    SNAPSHOT_STATE_RUNNING,
    SNAPSHOT_STATE_BLOCKED,
    SNAPSHOT_STATE_PAUSED,
    SNAPSHOT_STATE_SHUTDOWN,
    SNAPSHOT_STATE_SHUTOFF,
    SNAPSHOT_STATE_CRASHED,
    SNAPSHOT_STATE_PMSUSPENDED,
    SNAPSHOT_STATE_DISK_SNAPSHOT,
};

enum snapshot_memory {
    SNAPSHOT_MEMORY_DEFAULT,  /* <memory> absent: the driver decides */
    SNAPSHOT_MEMORY_INTERNAL, /* guest RAM is in the snapshot */
    SNAPSHOT_MEMORY_NO,       /* no RAM (a snapshot of a shut off domain) */
};

struct snapshot_def {
    char *name;              /* the creation time in seconds if absent, as libvirt */
    char *description;
    char *parent;            /* NULL: a root snapshot */
    int64_t creation_time;   /* seconds since the epoch; now if absent */
    bool state_set;          /* <state> given (redefine) */
    enum snapshot_state state;
    enum snapshot_memory memory;
    struct domain_def *domain; /* embedded <domain>, NULL if absent */
};

typedef struct snapshot_def snapshot_def;
void snapshot_def_free(struct snapshot_def *def);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(snapshot_def, snapshot_def_free)

/* Parse and validate; schema_dir holds snapshot.rng and domain.rng. Errors as
 * domain_def_parse_string. */
struct snapshot_def *snapshot_def_parse_string(const char *xml, const char *schema_dir, GError **error);

/* Format back, round-trip stable. The embedded domain is formatted inactive. */
char *snapshot_def_format(const struct snapshot_def *def);

const char *snapshot_state_to_string(enum snapshot_state state);
