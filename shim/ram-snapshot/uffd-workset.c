/* The working set of an on-demand restore (ram-snapshot/uffd.h): recording
 * the guest's first touches, and serving a recorded set from the start.
 *
 * While recording, readahead waits, so every block the guest touches first
 * is a fault the handler sees, in order. A record given at start is served
 * by a thread of its own before the vCPUs run and racing them, a megabyte of
 * consecutive recorded pages per call; a fault on a block the record does
 * not hold is a miss. The record only orders reads: every page still comes
 * from the chain, through the same checks as a fault's. */
#include "uffd-internal.h"

#include "sandbox/syscall-filter.h"

#include <string.h>

#define WORKSET_BATCH_PAGES 256u /* 1 MiB of consecutive recorded pages per serve */

static bool bit_get(const uint64_t *bits, uint64_t i)
{
    return bits[i / 64] >> (i % 64) & 1;
}

static void bit_set(uint64_t *bits, uint64_t i)
{
    bits[i / 64] |= 1ull << (i % 64);
}

/* The record's runs, and its blocks as bits for the handler's miss count. */
static void take_workset(struct snap_uffd *u, const struct snap_workset *ws)
{
    struct uffd_workset *w = &u->ws;
    w->record_bits = g_new0(uint64_t, (u->nblocks + 63) / 64);
    w->record_runs = g_array_new(FALSE, FALSE, sizeof(struct snap_workset_run));
    for (guint i = 0; i < ws->runs->len; i++) {
        struct snap_workset_run r = g_array_index(ws->runs, struct snap_workset_run, i);
        if (r.first >= u->npages)
            continue;
        r.pages = MIN(r.pages, u->npages - r.first);
        g_array_append_val(w->record_runs, r);
        for (uint64_t b = r.first / u->block_pages; b <= (r.first + r.pages - 1) / u->block_pages; b++) {
            if (!bit_get(w->record_bits, b))
                u->stats.workset_blocks++;
            bit_set(w->record_bits, b);
        }
    }
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

void uffd_workset_note_fault(struct snap_uffd *u, uint64_t block)
{
    struct uffd_workset *w = &u->ws;
    if (!uffd_workset_recording(u))
        return;
    g_mutex_lock(&w->lock);
    if (w->touched && !bit_get(w->touched_bits, block)) {
        bit_set(w->touched_bits, block);
        g_array_append_val(w->touched, block);
        if (w->record_bits && !bit_get(w->record_bits, block))
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

/* Blocks of [first, end) not served yet: what this serve brings before the
 * guest asks (a block the guest is faulting on right now counts too). */
static uint64_t blocks_unserved(struct snap_uffd *u, uint64_t first, uint64_t end)
{
    uint64_t n = 0;
    for (uint64_t b = first / u->block_pages; b <= (end - 1) / u->block_pages; b++)
        n += !uffd_block_served(u, b, false);
    return n;
}

/* Every page of the run, zero pages too: the guest touched them last time,
 * and each would cost a fault. */
static bool serve_run(struct snap_uffd *u, const struct snap_workset_run *r, GError **error)
{
    for (uint64_t p = r->first; p < r->first + r->pages;) {
        if (uffd_should_stop(u))
            return false;
        uint64_t end = MIN(p + WORKSET_BATCH_PAGES, r->first + r->pages);
        if (u->host_page > SNAP_PAGE_SIZE) { /* whole huge pages */
            uint64_t hp = u->host_page / SNAP_PAGE_SIZE;
            p -= p % hp;
            end = MIN(u->npages, (end + hp - 1) / hp * hp);
        }
        __atomic_fetch_add(&u->stats.prefetch_hits, blocks_unserved(u, p, end), __ATOMIC_RELAXED);
        bool ok = u->host_page > SNAP_PAGE_SIZE ? uffd_serve_huge_pages(u, p, end, false, u->bounce[2], error)
                                                : uffd_serve_pages(u, p, end, false, error);
        if (!ok)
            return false;
        p = end;
    }
    return true;
}

static void *workset_thread(void *arg)
{
    struct snap_uffd *u = arg;
    sandbox_seccomp_enter_thread(SANDBOX_THREAD_UFFD);
    GArray *runs = u->ws.record_runs;
    GError *err = NULL;
    for (guint i = 0; i < runs->len; i++) {
        if (!serve_run(u, &g_array_index(runs, struct snap_workset_run, i), &err)) {
            if (err && !uffd_should_stop(u))
                uffd_report_failure(u, err);
            else
                g_clear_error(&err);
            return NULL;
        }
    }
    __atomic_store_n(&u->stats.workset_done, true, __ATOMIC_RELEASE);
    return NULL;
}

bool uffd_workset_start_thread(struct snap_uffd *u, GError **error)
{
    if (!u->ws.record_runs)
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
    if (w->record_runs)
        g_array_unref(w->record_runs);
    g_free(w->touched_bits);
    g_free(w->record_bits);
    g_mutex_clear(&w->lock);
}
