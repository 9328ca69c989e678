/* What every layer below the RPC procedures shares about one daemon: where
 * its files live, the domain list and the event queue. driver.h's entry
 * points, persist/ and process.c all work on this; it is defined here, beneath
 * them, so none of them includes the header of a layer above it. */
#pragma once

#include <stdbool.h>

#include "domain/domain.h"
#include "domain/events.h"
#include "store/store.h"

struct driver_paths {
    bool privileged;
    char *socket_dir;   /* /run/libvirt */
    char *state_dir;    /* /var/lib/vsnap: domains/, autostart/ */
    char *run_dir;      /* /run/vsnap: one directory per running domain */
    char *log_dir;      /* /var/log/vsnap */
    char *shim_path;
    char *schema_dir;
    char *network_uri;  /* the host's network driver (network:///system), for type='network' */
    char *storage_uri;  /* the host's storage driver (storage:///system), for pool and volume calls */
    bool confine;       /* shims run confined (plugin/run/include/run/jail.h); default when root */
    char *confine_user; /* the shims' user, default "vsnap" */
};

/* The snapshot store ([store] and [s3] of the configuration file): where
 * snapshots are pushed when a domain names no store of its own, and the
 * host's cache that reverts pull through. */
struct driver_store {
    char *url;                   /* NULL: no default store */
    char *cache_dir;             /* NULL: store_cache_default_dir() */
    guint64 cache_size;
    struct store_options options;
};

struct push_queue;
struct pull_jobs;

struct vsnap_driver {
    struct driver_paths paths;
    struct driver_store store;
    struct push_queue *pushes;   /* background pushes (persist/push.h) */
    struct pull_jobs *pulls;     /* imports at revert, for domjobinfo (persist/pull-job.h) */
    struct domain_list *domains;
    struct event_queue *events;
    char *hostname;
    /* Domains marked autostart when driver_load read them, for
     * driver_autostart: a mark set later waits for the next daemon start. */
    GPtrArray *autostart;
    /* A transient domain that stopped for good ceases to exist: its disks
     * are folded into their images, its snapshot and disk directories go,
     * it leaves the list. Set by driver_new (the driver owns a domain's
     * end, as it owns undefine); the layers below that see a transient
     * domain stop (its run's watcher, a revert that cannot start the
     * snapshot's VM) call it, with the domain's job held and no run. */
    void (*end_transient)(struct vsnap_driver *drv, struct vsnap_domain *dom);
};
