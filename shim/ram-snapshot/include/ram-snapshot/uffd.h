/* On-demand restore: guest RAM registered with userfaultfd (MISSING mode) and
 * filled, on first touch, from the topmost layer of a chain that holds each
 * page (or with a zero page). The handler is a thread inside the shim.
 *
 * Faults are served a block at a time: the aligned block_size block around the
 * faulting address, each page from its own layer. A data block whose checksum
 * fails is never served: the server stops answering, and on_error is called
 * once (from the handler or prefetch thread). A thread blocked on a fault that
 * will never be answered cannot be released by anything but the end of the
 * process (a signal interrupts the wait, but the access faults again; stopping
 * the server would hand it zero pages instead of the data), and any thread may
 * fault next, so on_error must end the process (shim: vm_report_fatal).
 * snap_uffd_fill_all, which runs on its caller's thread, does not call
 * on_error: it returns the error, and its caller decides.
 *
 * Lifetime: the chain and the RAM mapping must outlive the server. Stopping
 * unregisters RAM; pages not served by then read as zero afterwards. That is
 * right for pages the snapshot has as zero, so once every data page is served
 * (stats.complete: after snap_uffd_fill_all() or a finished prefetch) the
 * server can be stopped and its chain closed while the VM keeps running.
 * Before that, stop only when the VM is being torn down. */
#pragma once

#include "snapshot/chain.h"
#include "snapshot/workset.h"

enum snap_uffd_open {
    SNAP_UFFD_OPEN_AUTO = 0,     /* userfaultfd(2), then /dev/userfaultfd */
    SNAP_UFFD_OPEN_SYSCALL,      /* only userfaultfd(2) */
    SNAP_UFFD_OPEN_DEVICE,       /* only /dev/userfaultfd (USERFAULTFD_IOC_NEW) */
};

/* userfaultfd unavailable or failed: the host's trouble, not the snapshot's
 * (a bad layer under the server is still the snapshot library's SNAP_ERROR). */
#define SNAP_UFFD_ERROR (snap_uffd_error_quark())
GQuark snap_uffd_error_quark(void);

enum snap_uffd_error_code {
    SNAP_UFFD_ERROR_FAILED,
};

typedef void (*snap_uffd_error_fn)(void *opaque, const GError *error);

struct snap_uffd_config {
    struct snap_chain *chain;  /* full chain, RAM size == size */
    uint8_t *host;             /* RAM mapping: fresh anonymous or memfd (MAP_SHARED), untouched */
    uint64_t size;
    uint64_t page_size;        /* the mapping's pages: 0 or 4 KiB, or 2 MiB (hugetlbfs: filled a whole huge
                                * page at a time, from layers that are still in 4 KiB pages) */
    uint64_t block_size;       /* power of two, 4 KiB .. 2 MiB, at least page_size; 0 means 64 KiB (or
                                * page_size if larger) */
    bool readahead;            /* after each fault, serve the blocks after it while no fault waits
                                * (a window that grows while faults go on in order) */
    bool record;               /* record the guest's first touches (faults) until snap_uffd_end_record;
                                * readahead waits till then, so that every first touch is a fault */
    const struct snap_workset *workset; /* NULL, or a recorded working set to serve from the start, in
                                * its order, racing the vCPUs (copied: need not outlive the call) */
    snap_uffd_error_fn on_error;
    void *opaque;
    enum snap_uffd_open open_mode;
};

struct snap_uffd_stats {
    uint64_t faults;           /* fault messages handled */
    uint64_t pages_copied;     /* pages served with UFFDIO_COPY */
    uint64_t pages_zeroed;     /* pages served with UFFDIO_ZEROPAGE */
    uint64_t blocks_prefetched;
    uint64_t blocks_read_ahead; /* blocks the handler served after a fault, before they were touched */
    uint64_t pages_unregistered; /* zero pages never registered: the kernel's fresh pages at first touch */
    uint64_t prefetch_hits;    /* blocks of the workset served before the guest asked for them */
    uint64_t prefetch_misses;  /* blocks the guest touched first that the workset does not hold */
    uint64_t workset_blocks;   /* blocks of the workset given */
    bool workset_done;         /* every block of the workset is served */
    bool prefetch_done;        /* the prefetch thread has finished */
    bool complete;             /* every page holding snapshot data is served */
    bool failed;               /* a block failed (on_error was called) */
};

struct snap_uffd;

/* Register RAM and start the fault handler thread. Fails with SNAP_UFFD_ERROR
 * and a clear message if userfaultfd is not available; there is no fallback. */
struct snap_uffd *snap_uffd_start(const struct snap_uffd_config *config, GError **error);

/* Start the background prefetch thread: every page holding snapshot data not
 * served yet, in block order, racing safely with faults (zero pages are left
 * to faults: see uffd.c). Call once the vCPUs run. */
bool snap_uffd_start_prefetch(struct snap_uffd *u, GError **error);

/* Serve every page holding snapshot data not served yet, in the calling thread
 * (before a full snapshot of a VM restored on demand, or for prefault=true).
 * Afterwards stats.complete is true. A bad block stops serving for every
 * thread, as in the server threads, but is only returned (see above). */
bool snap_uffd_fill_all(struct snap_uffd *u, GError **error);

void snap_uffd_get_stats(struct snap_uffd *u, struct snap_uffd_stats *stats);

/* End the recording (config.record): readahead starts, and the first touches
 * seen so far come back as a workset of layer_id (caller frees), in the order
 * the guest made them, each a whole fault block. NULL if not recording. */
struct snap_workset *snap_uffd_end_record(struct snap_uffd *u, const snap_id *layer_id);

/* Stop the threads (eventfd wake-up, join), unregister, close. NULL is fine. */
void snap_uffd_stop(struct snap_uffd *u);
