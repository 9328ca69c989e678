/* A live snapshot (persist.h, README.md "Live snapshots"): its steps
 * (live-snapshot.c) and the job that runs them (live-job.c): the passes and
 * the layer's write on a worker thread, the stop and the end on the VM's
 * owner. */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

#include "disk-layers.h"
#include "persist/persist.h"
#include "ram-snapshot/save.h"
#include "ram-snapshot/scratch.h"
#include "snapshot-internal.h"

/* A pass is copied in steps of this many pages (16 MiB: a few ms of
 * copying), a cancel is seen between two. */
#define LIVE_STEP_PAGES 4096u

enum live_phase { LIVE_PHASE_PRECOPY, LIVE_PHASE_STOP, LIVE_PHASE_WRITING };

/* What vm.info shows of the job (vsnap.snapshot_job), under the job's lock. */
struct live_progress {
    enum live_phase phase;
    unsigned pass;
    uint64_t pass_copied;       /* pages of this pass copied so far */
    uint64_t pass_total;        /* pages this pass copies */
    uint64_t copied;            /* pages copied, every pass */
    uint64_t dirty_pages_per_s; /* the guest's rewrites during the last pass */
    uint64_t written_pages;     /* pages of the layer's candidates read so far (phase writing) */
};

struct live {
    /* A snapshot of a paused VM (no "live"), run as the same job so the API
     * answers and a cancel ends it meanwhile: no passes and no scratch
     * image, every device quiesced from the stop to the end, the layer
     * written straight from guest RAM. */
    bool paused;
    struct vm *vm;
    struct vm_config *cfg;
    struct persist_vm *p;
    struct persist_snapshot_request req; /* its strings and node owned */
    char *dest, *tmp;
    snap_id id, parent;
    struct snap_ram ram;                 /* guest RAM */
    struct snap_scratch *scratch;
    uint64_t words;
    uint64_t *in_layer;  /* pages copied into the scratch image: what the layer holds */
    uint64_t *collected; /* every bit taken from the dirty log: the next snapshot's if this one fails */
    struct disk_layers *disks; /* sealed by live_write, switched by live_end */
    bool stopped;        /* the stop took the instant: the disks wait (paused) until live_end */
    struct persist_snapshot_result result;
    struct live_progress progress; /* the worker's own, published by live_report */
    struct persist_live_job *job;
};

/* live-snapshot.c. On the owner: */
bool live_prepare(struct live *l, struct vm *vm, struct vm_config *cfg, const struct persist_snapshot_request *req,
                  GError **error);
JsonNode *live_stop_and_take(struct live *l, uint64_t *rest, GError **error);
void live_end(struct live *l, bool ok);
/* On the worker: */
bool live_precopy(struct live *l, uint64_t **rest, GError **error);
bool live_write(struct live *l, JsonNode *state, GError **error);

/* live-job.c, for the steps: false (PERSIST_ERROR_CANCELLED) once the job
 * was cancelled. */
bool live_go_on(struct live *l, GError **error);
void live_report(struct live *l);
