/* The recorded working set, the VM's side (ram-snapshot/uffd.h records and
 * serves it, snapshot/workset.h is its file). A VM restored on demand from
 * directory dir records the guest's first touches until its READY plus
 * PERSIST_WORKSET_GRACE_MS, and keeps them in dir for the restores after it;
 * a restore that finds a record of that snapshot serves it from the start.
 * A record that this restore's misses outweigh (more blocks touched outside
 * it than it holds: their overlap is then surely under half) is replaced by
 * what this restore faulted. A restore asked to hand the record over (its
 * client, the daemon, owns the snapshot directory and writes it there) keeps
 * the record's text instead and tells the client (held). Main thread only. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>

#include "ram-snapshot/uffd.h"
#include "snapshot/layer.h"

#define PERSIST_WORKSET_GRACE_MS 200
/* A guest that has not announced READY by then never records: readahead,
 * which waits while recording, starts. */
#define PERSIST_WORKSET_READY_WITHIN_MS 5000

enum persist_record {
    PERSIST_RECORD_NONE,      /* none kept: recording, none wanted, or it could not be written */
    PERSIST_RECORD_RECORDED,  /* this restore recorded one */
    PERSIST_RECORD_USED,      /* this restore served the snapshot's record */
    PERSIST_RECORD_REFRESHED, /* it served one and replaced it */
};

struct persist_workset {
    char *dir;                /* the snapshot directory restored; NULL: no recording */
    snap_id layer_id;
    struct snap_workset *loaded; /* until the server has taken its copy */
    enum persist_record record;
    bool using_record;
    char *error;              /* the record could not be written: why */
    /* Handed over instead of written: the record's text (snapshot/workset.h),
     * and who is told it is there. */
    bool hand_over;
    char *held;
    void (*on_held)(void *opaque);
    void *held_opaque;
    gint64 started_us, ready_us;
    guint grace_source;
};

/* Before the server starts: read dir's record of layer_id into cfg (a stale
 * or corrupt one is logged and left alone: this restore records anew). */
void persist_workset_prepare(struct persist_workset *w, const char *dir, const snap_id *layer_id,
                             struct snap_uffd_config *cfg);
/* Hand the record over instead of writing it: on_held(opaque) once it is
 * held (persist_workset_held). Before persist_workset_started. */
void persist_workset_hand_over(struct persist_workset *w, void (*on_held)(void *opaque), void *opaque);
/* The record's text held for the client, NULL when none. */
const char *persist_workset_held(const struct persist_workset *w);
/* The server has started (and copied the record). */
void persist_workset_started(struct persist_workset *w, struct snap_uffd *u);
/* The guest announced READY: end the recording after the grace period. */
void persist_workset_ready(struct persist_workset *w, struct snap_uffd *u);
/* vm.info: "prefetch_hits", "prefetch_misses", "workset_ms", "record" (+ "record_error"). */
void persist_workset_add_info(const struct persist_workset *w, const struct snap_uffd_stats *st, JsonBuilder *b);
void persist_workset_clear(struct persist_workset *w);
