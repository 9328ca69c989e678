/* The working set of an on-demand restore (ram-snapshot/uffd.h): recording
 * the guest's first touches, and serving a recorded set from the start.
 *
 * While recording, readahead waits, so every block the guest touches first
 * is a fault the handler sees, in order. A record given at start is served
 * by a thread of its own before the vCPUs run and racing them, up to a
 * megabyte of consecutive recorded blocks per call; when the guest overtakes
 * it, it jumps ahead of the guest. A fault on a block the record does not
 * hold is a miss. The record only orders reads: every page still comes
 * from the chain, through the same checks as a fault's. */
#include "uffd-internal.h"

#include "sandbox/syscall-filter.h"

#include <string.h>

#define WORKSET_BATCH_PAGES 256u /* 1 MiB of consecutive recorded blocks per serve */

static bool bit_get(const uint64_t *bits, uint64_t i)
{
    return bits[i / 64] >> (i % 64) & 1;
}

static void bit_set(uint64_t *bits, uint64_t i)
{
    bits[i / 64] |= 1ull << (i % 64);
}

/* The record's blocks, each once, in first-touch order. */
static void take_workset(struct snap_uffd *u, const struct snap_workset *ws)
{
    struct uffd_workset *w = &u->ws;
    w->order = g_array_new(FALSE, FALSE, sizeof(uint64_t));
    w->place = g_new0(uint32_t, u->nblocks);
    for (guint i = 0; i < ws->runs->len; i++) {
        struct snap_workset_run r = g_array_index(ws->runs, struct snap_workset_run, i);
        if (r.first >= u->npages)
            continue;
        uint64_t last = (MIN(r.first + r.pages, u->npages) - 1) / u->block_pages;
        for (uint64_t b = r.first / u->block_pages; b <= last; b++) {
            if (w->place[b])
                continue;
            g_array_append_val(w->order, b);
            w->place[b] = w->order->len;
        }
    }
    u->stats.workset_blocks = w->order->len;
}

void uffd_workset_init(struct snap_uffd *u, const struct snap_uffd_config *cfg)
{
    struct uffd_workset *w = &u->ws;
    g_mutex_init(&w->lock);
    if (cfg->record) {
        w->touched = g_array_new(FALSE, FALSE, sizeof(uint64_t));
        w->touched_bits = g_new0(uint64_t, (u->nblocks + 63) / 64);
        w->recording = 1;
    }
    if (cfg->workset && cfg->workset->runs->len)
        take_workset(u, cfg->workset);
}

bool uffd_workset_recording(struct snap_uffd *u)
{
    return __atomic_load_n(&u->ws.recording, __ATOMIC_ACQUIRE);
}

/* The guest overtook the workset thread (a fault on a recorded block not
 * served yet): the handler serves the JUMP_AHEAD recorded blocks after it
 * (uffd_workset_after_fault) and the thread jumps past them, instead of
 * serving, one step behind the guest, the blocks it is faulting on. */
#define JUMP_AHEAD 16

void uffd_workset_note_fault(struct snap_uffd *u, uint64_t block)
{
    struct uffd_workset *w = &u->ws;
    if (w->place && w->place[block]) {
        uint64_t to = w->place[block] + JUMP_AHEAD, now = __atomic_load_n(&w->jump, __ATOMIC_RELAXED);
        while (to > now && !__atomic_compare_exchange_n(&w->jump, &now, to, true, __ATOMIC_RELAXED,
                                                        __ATOMIC_RELAXED))
            ;
    }
    if (!uffd_workset_recording(u))
        return;
    g_mutex_lock(&w->lock);
    if (w->touched && !bit_get(w->touched_bits, block)) {
        bit_set(w->touched_bits, block);
        g_array_append_val(w->touched, block);
        if (w->place && !w->place[block])
            __atomic_fetch_add(&u->stats.prefetch_misses, 1, __ATOMIC_RELAXED);
    }
    g_mutex_unlock(&w->lock);
}

struct snap_workset *snap_uffd_end_record(struct snap_uffd *u, const snap_id *layer_id)
{
    struct uffd_workset *w = &u->ws;
    if (!__atomic_exchange_n(&w->recording, 0, __ATOMIC_ACQ_REL))
        return NULL;
    struct snap_workset *ws = snap_workset_new(layer_id, u->npages);
    g_mutex_lock(&w->lock);
    for (guint i = 0; i < w->touched->len; i++) {
        uint64_t b = g_array_index(w->touched, uint64_t, i);
        snap_workset_add(ws, b * u->block_pages, u->block_pages);
    }
    g_mutex_unlock(&w->lock);
    return ws;
}

/* Serve the consecutive blocks [first, first + n): every page, zero pages
 * too (the guest touched them last time, and each would cost a fault). */
static bool serve_blocks(struct snap_uffd *u, uint64_t first, uint64_t n, uint8_t *buf, GError **error)
{
    uint64_t hits = 0;
    for (uint64_t b = first; b < first + n; b++)
        hits += !uffd_block_served(u, b, false);
    if (!hits)
        return true;
    __atomic_fetch_add(&u->stats.prefetch_hits, hits, __ATOMIC_RELAXED);
    uint64_t p = first * u->block_pages, end = MIN((first + n) * u->block_pages, u->npages);
    if (u->host_page > SNAP_PAGE_SIZE)
        return uffd_serve_huge_pages(u, p, end, false, buf, error);
    return uffd_serve_pages(u, p, end, false, error);
}

/* Consecutive blocks of the order from i on, at most a batch. */
static uint64_t batch_at(struct snap_uffd *u, GArray *order, guint i)
{
    uint64_t first = g_array_index(order, uint64_t, i), n = 1;
    while (i + n < order->len && n < MAX(1, WORKSET_BATCH_PAGES / u->block_pages) &&
           g_array_index(order, uint64_t, i + n) == first + n)
        n++;
    return n;
}

void uffd_workset_after_fault(struct snap_uffd *u, uint64_t block)
{
    GArray *order = u->ws.order;
    if (!order || !u->ws.place[block])
        return;
    guint end = MIN(u->ws.place[block] + JUMP_AHEAD, order->len);
    for (guint i = u->ws.place[block]; i < end;) {
        uint64_t n = MIN(batch_at(u, order, i), end - i);
        GError *err = NULL;
        if (!serve_blocks(u, g_array_index(order, uint64_t, i), n, u->bounce[0], &err)) {
            g_error_free(err); /* a bad block is the guest's business once it touches it */
            return;
        }
        i += (guint)n;
    }
}

/* One pass over the order; with jumps, it skips ahead of the guest. */
static bool serve_order(struct snap_uffd *u, bool jumps, GError **error)
{
    GArray *order = u->ws.order;
    for (guint i = 0; i < order->len;) {
        if (uffd_should_stop(u))
            return false;
        uint64_t jump = jumps ? __atomic_load_n(&u->ws.jump, __ATOMIC_RELAXED) : 0;
        if (jump > i) {
            i = (guint)MIN(jump, order->len);
            continue;
        }
        uint64_t n = batch_at(u, order, i);
        if (!serve_blocks(u, g_array_index(order, uint64_t, i), n, u->bounce[2], error))
            return false;
        i += (guint)n;
    }
    return true;
}

/* The record in order, jumping ahead where the guest overtook; then once
 * more for what the jumps left behind. */
static void *workset_thread(void *arg)
{
    struct snap_uffd *u = arg;
    sandbox_seccomp_enter_thread(SANDBOX_THREAD_UFFD);
    GError *err = NULL;
    if (serve_order(u, true, &err) && serve_order(u, false, &err)) {
        __atomic_store_n(&u->stats.workset_done, true, __ATOMIC_RELEASE);
        return NULL;
    }
    if (err && !uffd_should_stop(u))
        uffd_report_failure(u, err);
    else
        g_clear_error(&err);
    return NULL;
}

bool uffd_workset_start_thread(struct snap_uffd *u, GError **error)
{
    if (!u->ws.order)
        return true;
    int rc = pthread_create(&u->ws.thread, NULL, workset_thread, u);
    if (rc) {
        g_set_error(error, SNAP_UFFD_ERROR, SNAP_UFFD_ERROR_FAILED, "cannot start the workset thread: %s",
                    g_strerror(rc));
        return false;
    }
    u->ws.running = true;
    return true;
}

void uffd_workset_release(struct snap_uffd *u)
{
    struct uffd_workset *w = &u->ws;
    if (w->touched)
        g_array_unref(w->touched);
    if (w->order)
        g_array_unref(w->order);
    g_free(w->touched_bits);
    g_free(w->place);
    g_mutex_clear(&w->lock);
}
