/* The on-demand server's insides, shared by uffd.c (the server, its handler
 * and prefetch threads) and uffd-workset.c (recording the working set and
 * prefetching a recorded one). Not an interface: ram-snapshot/uffd.h is. */
#pragma once

#include "ram-snapshot/uffd.h"

#include <glib.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* First touches recorded, and the record in use (uffd-workset.c). */
struct uffd_workset {
    GMutex lock;              /* touched, touched_bits, stats.prefetch_misses */
    int recording;            /* atomic: faults are first touches to record */
    GArray *touched;          /* uint64_t blocks, first-touch order */
    uint64_t *touched_bits;   /* bit per block */
    /* The record in use (read-only once the threads run): its blocks in
     * first-touch order, and each block's place there + 1 (0: not in it). */
    GArray *order;            /* uint64_t blocks; NULL: no record */
    uint32_t *place;
    uint64_t jump;            /* atomic: the guest faulted at order[jump - ahead]: serve from here on */
    pthread_t thread;
    bool running;
};

struct snap_uffd {
    struct snap_chain *chain;
    uint8_t *host;
    uint64_t npages;
    uint64_t block_pages;
    uint64_t nblocks;
    uint64_t host_page;        /* bytes of one page of the RAM mapping: 4 KiB, or 2 MiB */
    bool readahead;
    uint8_t *bounce[3];        /* huge pages only: the handler's, the prefetcher's, the workset's */
    const uint8_t *zeros;      /* huge pages only: host_page bytes that read as zero */
    int uffd;
    int wake_fd;               /* eventfd: tells the threads to stop */
    uint64_t *served;          /* bit per page */
    snap_uffd_error_fn on_error;
    void *opaque;
    pthread_t handler, prefetcher;
    bool handler_running, prefetch_running;
    int stopping;              /* atomic */
    int failed;                /* atomic: set once, on_error called by the setter */
    struct snap_uffd_stats stats; /* counters updated atomically */
    struct uffd_workset ws;       /* uffd-workset.c */
};


/* Serve the pages of [first, end) not served yet; data_only leaves zero
 * pages alone. buf: the calling thread's host_page bytes (huge pages only). */
bool uffd_serve_pages(struct snap_uffd *u, uint64_t first, uint64_t end, bool data_only, GError **error);
bool uffd_serve_huge_pages(struct snap_uffd *u, uint64_t first, uint64_t end, bool data_only, uint8_t *buf,
                           GError **error);
bool uffd_serve_block(struct snap_uffd *u, uint64_t block, bool data_only, uint8_t *buf, GError **error);
bool uffd_block_served(struct snap_uffd *u, uint64_t block, bool data_only);
bool uffd_should_stop(struct snap_uffd *u);
/* A server thread met a bad block: the first one reports it, once (frees err). */
void uffd_report_failure(struct snap_uffd *u, GError *err);

/* uffd-workset.c */
void uffd_workset_init(struct snap_uffd *u, const struct snap_uffd_config *cfg);
/* A fault on block, from the handler: counted against the record, and kept
 * while the record is open. */
void uffd_workset_note_fault(struct snap_uffd *u, uint64_t block);
bool uffd_workset_recording(struct snap_uffd *u);
/* After a fault on a recorded block, on the handler: the recorded blocks
 * that follow it, which the workset thread now skips. */
void uffd_workset_after_fault(struct snap_uffd *u, uint64_t block);
bool uffd_workset_start_thread(struct snap_uffd *u, GError **error);
/* After the threads stopped. */
void uffd_workset_release(struct snap_uffd *u);
