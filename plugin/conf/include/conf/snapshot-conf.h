/* libvirt's <domainsnapshot> as vsnap keeps it: name, description, state of
 * the domain when taken, parent, creation time, memory (vsnap snapshots
 * always hold guest RAM: 'internal'), each disk's part of it (<disks>), and
 * the domain definition at that time. Validated against xml/snapshot.rng;
 * anything else is refused with VIR_ERR_CONFIG_UNSUPPORTED naming the element.
 *
 * Disks follow libvirt's external model: a writable disk's part of a
 * snapshot is a file of its own, the sealed disk layer in the snapshot's
 * directory, holding the blocks written since the parent snapshot (below it
 * the parents' layers and the image); <disk name='vda' snapshot='external'
 * type='file'><source file='.../disk-vda.layer'/></disk>. A disk the
 * snapshot holds nothing of (read-only) is <disk name='vdb' snapshot='no'/>.
 *
 * libvirt's <cookie> holds a driver's private data (the QEMU driver keeps
 * its CPU and migration state there); vsnap keeps the snapshot's place in a
 * snapshot store there, in the namespace urn:vsnap:snapshot:1.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "conf/domain-conf.h"

#define VSNAP_SNAPSHOT_NS "urn:vsnap:snapshot:1"

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

struct snapshot_disk {
    char *name;              /* the disk's target, vdX */
    bool external;           /* snapshot='external', else 'no' */
    char *file;              /* external: the disk layer; NULL when not given */
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
    bool disks_given;          /* <disks> present */
    struct snapshot_disk *disks;
    size_t n_disks;
    /* <cookie><vsnap:store url id parent/></cookie>: where the snapshot is
     * in a snapshot store, so another host can learn it (redefine) and pull
     * it at revert. id: the manifest's, which is the memory layer's; parent:
     * the id of the snapshot its memory layer is a diff on (absent: full). */
    struct {
        char *url, *id, *parent;
    } store;
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
