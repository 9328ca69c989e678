/* The userfaultfd server: a handler thread answering faults, an optional
 * prefetch thread, and the block serving both share. A per-page "served" bitmap
 * (atomic bit operations) lets prefetch skip what faults already brought in; two
 * threads racing on the same page is harmless because UFFDIO_COPY of a page
 * that exists fails with EEXIST and changes nothing.
 *
 * RAM on huge pages (hugetlbfs) is filled a whole 2 MiB page at a time:
 * userfaultfd takes only UFFDIO_COPY of whole huge pages there (no
 * ZEROPAGE). A huge page the chain has as one run of one layer is copied
 * straight from the layer, an all-zero one from a zero mapping; one made of
 * several runs is put together first in the serving thread's own 2 MiB
 * buffer. The served bitmap stays in 4 KiB pages, as the chain is.
 *
 * The chain's longer zero runs are not registered at all (uffd-holes.h):
 * the guest's first touch there is a fresh zero page from the kernel, as in
 * a booted VM, instead of a fault round trip; they count as served.
 *
 * Readahead (config.readahead): a fault costs far more than the copy it
 * waits for (two thread wake-ups; ~165 us on a nested host, docs/host-limits.md),
 * and a guest reading its working set back reads it in order. So after each
 * fault the handler, while no other fault waits, serves the blocks after the
 * faulting one: a window that doubles while faults keep landing in or at the
 * end of the last window, and starts small again after a jump; after a
 * jump it first serves the snapshot data of the aligned 2 MiB around the
 * fault (a guest's code, stack and tables lie close together, and each
 * scattered first touch costs a whole fault). It runs on
 * the handler thread, between faults, so a real fault never waits behind
 * more than one block. Unlike prefetch it serves zero pages too: they cost
 * a page of memory each on memfd RAM, at most a window (16 MiB) past what
 * the guest touched. */
#include "ram-snapshot/uffd.h"
#include "uffd-holes.h"
#include "uffd-internal.h"
#include "sandbox/syscall-filter.h"
#include "snapshot/mapped-read.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

G_DEFINE_QUARK(vsnap-uffd-error-quark, snap_uffd_error)

#define DEFAULT_BLOCK_SIZE (64u << 10)
#define MAX_BLOCK_SIZE (2u << 20)
#define HUGE_PAGE_SIZE (2u << 20)   /* hugetlbfs RAM: x86-64 2 MiB pages */
#define MSGS_PER_READ 32
#define READAHEAD_FIRST (256u << 10)  /* the first window after a jump */
#define READAHEAD_AROUND (2u << 20)   /* after a jump: the data of the aligned 2 MiB around the fault */
#define READAHEAD_MAX (16u << 20)     /* the window stops doubling here */


/* ---- opening userfaultfd ---- */

static int open_uffd_syscall(int *err)
{
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    *err = fd < 0 ? errno : 0;
    return fd;
}

static int open_uffd_device(int *err)
{
    int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
    if (dev < 0) {
        *err = errno;
        return -1;
    }
    int fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
    *err = fd < 0 ? errno : 0;
    close(dev);
    return fd;
}

static int open_uffd(enum snap_uffd_open mode, GError **error)
{
    int sys_err = ENOSYS, dev_err = ENOSYS, fd = -1;
    if (mode != SNAP_UFFD_OPEN_DEVICE)
        fd = open_uffd_syscall(&sys_err);
    if (fd < 0 && mode != SNAP_UFFD_OPEN_SYSCALL)
        fd = open_uffd_device(&dev_err);
    if (fd < 0)
        g_set_error(error, SNAP_UFFD_ERROR, SNAP_UFFD_ERROR_FAILED,
                    "on-demand restore needs userfaultfd, which is not available here "
                    "(userfaultfd(2): %s; /dev/userfaultfd: %s); use memory_restore_mode copy "
                    "or merge, or allow userfaultfd (sysctl vm.unprivileged_userfaultfd=1 or "
                    "access to /dev/userfaultfd)",
                    mode == SNAP_UFFD_OPEN_DEVICE ? "not tried" : g_strerror(sys_err),
                    mode == SNAP_UFFD_OPEN_SYSCALL ? "not tried" : g_strerror(dev_err));
    return fd;
}

/* The API handshake may be done once per fd: probe features on one fd, then
 * open the real one asking for what we need (shmem support for memfd RAM). */
static int open_and_handshake(enum snap_uffd_open mode, bool huge, GError **error)
{
    int fd = open_uffd(mode, error);
    if (fd < 0)
        return -1;
    struct uffdio_api api = { .api = UFFD_API };
    if (ioctl(fd, UFFDIO_API, &api) < 0) {
        g_set_error(error, SNAP_UFFD_ERROR, SNAP_UFFD_ERROR_FAILED, "userfaultfd API handshake failed: %s",
                    g_strerror(errno));
        close(fd);
        return -1;
    }
    close(fd);
    fd = open_uffd(mode, error);
    if (fd < 0)
        return -1;
    if (huge && !(api.features & UFFD_FEATURE_MISSING_HUGETLBFS)) {
        g_set_error(error, SNAP_UFFD_ERROR, SNAP_UFFD_ERROR_FAILED, "this kernel's userfaultfd cannot serve RAM on huge pages "
                    "(no UFFD_FEATURE_MISSING_HUGETLBFS); use memory_restore_mode copy or merge");
        close(fd);
        return -1;
    }
    uint64_t wanted = api.features & (huge ? UFFD_FEATURE_MISSING_HUGETLBFS : UFFD_FEATURE_MISSING_SHMEM);
    api = (struct uffdio_api){ .api = UFFD_API, .features = wanted };
    if (ioctl(fd, UFFDIO_API, &api) < 0) {
        g_set_error(error, SNAP_UFFD_ERROR, SNAP_UFFD_ERROR_FAILED, "userfaultfd API handshake failed: %s",
                    g_strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static bool page_served(struct snap_uffd *u, uint64_t p)
{
    return __atomic_load_n(&u->served[p / 64], __ATOMIC_ACQUIRE) >> (p % 64) & 1;
}

static void mark_served(struct snap_uffd *u, uint64_t first, uint64_t n)
{
    for (uint64_t p = first; p < first + n; p++)
        __atomic_fetch_or(&u->served[p / 64], 1ull << (p % 64), __ATOMIC_RELEASE);
}

/* mark_served for a long range, a word at a time: only before the server's
 * threads start (plain stores). 8 GiB of holes are 2 M pages. */
static void set_served_before_start(struct snap_uffd *u, uint64_t first, uint64_t n)
{
    uint64_t p = first, end = first + n;
    for (; p < end && p % 64; p++)
        u->served[p / 64] |= 1ull << (p % 64);
    if (end - p >= 64) {
        memset(&u->served[p / 64], 0xff, (end - p) / 64 * sizeof(uint64_t));
        p += (end - p) / 64 * 64;
    }
    for (; p < end; p++)
        u->served[p / 64] |= 1ull << (p % 64);
}

static bool register_range(struct snap_uffd *u, uint64_t off, uint64_t len, GError **error)
{
    struct uffdio_register reg = {
        .range = { .start = (uintptr_t)u->host + off, .len = len },
        .mode = UFFDIO_REGISTER_MODE_MISSING,
    };
    if (ioctl(u->uffd, UFFDIO_REGISTER, &reg) < 0) {
        g_set_error(error, SNAP_UFFD_ERROR, SNAP_UFFD_ERROR_FAILED,
                    "cannot register guest RAM with userfaultfd: %s", g_strerror(errno));
        return false;
    }
    /* hugetlbfs has no ZEROPAGE: zero huge pages are copied from zeros. */
    bool huge = u->host_page > SNAP_PAGE_SIZE;
    uint64_t need = (1ull << _UFFDIO_COPY) | (huge ? 0 : 1ull << _UFFDIO_ZEROPAGE) | (1ull << _UFFDIO_WAKE);
    if ((reg.ioctls & need) != need) {
        g_set_error(error, SNAP_UFFD_ERROR, SNAP_UFFD_ERROR_FAILED,
                    "userfaultfd on this RAM mapping does not offer COPY%s", huge ? "" : " and ZEROPAGE");
        return false;
    }
    return true;
}

/* RAM but the chain's longer zero runs (uffd-holes.h), which count as
 * served: nothing ever fills them, and a first touch there costs what a
 * fresh page costs instead of a fault round trip. */
static bool register_ram(struct snap_uffd *u, GError **error)
{
    g_autoptr(GArray) holes = uffd_holes_find(u->chain, u->npages, u->host_page / SNAP_PAGE_SIZE);
    uint64_t at = 0;
    for (guint i = 0; i <= holes->len; i++) {
        struct uffd_hole end = { u->npages, 0 };
        struct uffd_hole *h = i < holes->len ? &g_array_index(holes, struct uffd_hole, i) : &end;
        if (h->first > at && !register_range(u, at * SNAP_PAGE_SIZE, (h->first - at) * SNAP_PAGE_SIZE, error))
            return false;
        if (h->n) {
            set_served_before_start(u, h->first, h->n);
            u->stats.pages_unregistered += h->n;
        }
        at = h->first + h->n;
    }
    return true;
}

/* ---- serving pages ---- */

static bool ioctl_failed(const char *what, uint64_t offset, GError **error)
{
    /* The kernel could not read the source: the layer's mapping lost it. */
    if (errno == EFAULT) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_FORMAT,
                    "userfaultfd %s at RAM offset 0x%" G_GINT64_MODIFIER "x: the snapshot layer "
                    "cannot be read (truncated while in use, or its storage failed)", what, offset);
        return false;
    }
    g_set_error(error, SNAP_UFFD_ERROR, SNAP_UFFD_ERROR_FAILED,
                "userfaultfd %s at RAM offset 0x%" G_GINT64_MODIFIER "x failed: %s", what, offset,
                g_strerror(errno));
    return false;
}

/* UFFDIO_COPY (src != NULL) or UFFDIO_ZEROPAGE over [off, off + len). Pages that
 * exist already (EEXIST: the other thread won the race) are skipped and
 * counted in *skipped (4 KiB pages). */
static bool fill_range(struct snap_uffd *u, uint64_t off, uint64_t len, const uint8_t *src, uint64_t *skipped,
                       GError **error)
{
    *skipped = 0;
    while (len) {
        int64_t done;
        int rc;
        if (src) {
            struct uffdio_copy c = { .dst = (uintptr_t)u->host + off, .src = (uintptr_t)src, .len = len };
            rc = ioctl(u->uffd, UFFDIO_COPY, &c);
            done = c.copy;
        } else {
            struct uffdio_zeropage z = { .range = { .start = (uintptr_t)u->host + off, .len = len } };
            rc = ioctl(u->uffd, UFFDIO_ZEROPAGE, &z);
            done = z.zeropage;
        }
        if (rc == 0)
            return true;
        if (errno != EEXIST && errno != EAGAIN)
            return ioctl_failed(src ? "COPY" : "ZEROPAGE", off, error);
        if (done <= 0 && errno == EEXIST) { /* the first page exists: skip it */
            done = (int64_t)u->host_page;
            *skipped += u->host_page / SNAP_PAGE_SIZE;
        }
        if (done <= 0)
            done = 0;
        off += (uint64_t)done;
        len -= (uint64_t)done;
        if (src)
            src += done;
    }
    return true;
}

/* Count n pages as served by counter before they are filled, and take back
 * those another thread had filled: a thread the copy wakes (a vCPU done
 * reading RAM) then never sees a count short of what it read. */
static bool fill_counted(struct snap_uffd *u, uint64_t *counter, uint64_t off, uint64_t n, const uint8_t *src,
                         GError **error)
{
    uint64_t skipped = 0;
    __atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
    bool ok = fill_range(u, off, n * SNAP_PAGE_SIZE, src, &skipped, error);
    __atomic_fetch_sub(counter, ok ? MIN(skipped, n) : n, __ATOMIC_RELAXED);
    return ok;
}

static bool page_has_data(struct snap_uffd *u, uint64_t p)
{
    return snap_chain_page_has_data(u->chain, p);
}

/* Serve the pages of [first, end) not served yet, each from its own layer;
 * with data_only, leave zero pages alone (see prefetch_thread). */
bool uffd_serve_pages(struct snap_uffd *u, uint64_t first, uint64_t end, bool data_only,
                        GError **error)
{
    struct snap_chain *c = u->chain;
    for (uint64_t p = first; p < end;) {
        if (page_served(u, p) || (data_only && !page_has_data(u, p))) {
            p++;
            continue;
        }
        enum snap_page_kind kind;
        unsigned layer = 0;
        uint64_t dp = 0, n = snap_chain_run(c, p, end - p, &kind, &layer, &dp);
        for (uint64_t k = 1; k < n; k++)
            if (page_served(u, p + k)) {
                n = k;
                break;
            }
        const uint8_t *src = NULL;
        if (kind == SNAP_PAGE_KIND_DATA) {
            if (!snap_layer_verify_data(c->layers[layer], dp, n, error))
                return false;
            src = snap_layer_data_page(c->layers[layer], dp);
        }
        uint64_t *counter = src ? &u->stats.pages_copied : &u->stats.pages_zeroed;
        if (!fill_counted(u, counter, p * SNAP_PAGE_SIZE, n, src, error))
            return false;
        mark_served(u, p, n);
        p += n;
    }
    return true;
}

static bool range_has_data(struct snap_uffd *u, uint64_t first, uint64_t n)
{
    for (uint64_t p = first; p < first + n; p++)
        if (page_has_data(u, p))
            return true;
    return false;
}

/* The source of the huge page at [first, first + n): straight from a layer
 * or the zeros when one run covers it, else put together in buf. Data
 * blocks are checked first; *data counts the pages holding data. */
static const uint8_t *huge_page_source(struct snap_uffd *u, uint64_t first, uint64_t n, uint8_t *buf,
                                       uint64_t *data, GError **error)
{
    struct snap_chain *c = u->chain;
    *data = 0;
    for (uint64_t p = first; p < first + n;) {
        enum snap_page_kind kind;
        unsigned layer = 0;
        uint64_t dp = 0, len = snap_chain_run(c, p, first + n - p, &kind, &layer, &dp);
        uint8_t *at = buf + (p - first) * SNAP_PAGE_SIZE;
        if (kind != SNAP_PAGE_KIND_DATA) {
            if (len == n)
                return u->zeros;
            memset(at, 0, len * SNAP_PAGE_SIZE);
        } else {
            if (!snap_layer_verify_data(c->layers[layer], dp, len, error))
                return NULL;
            const uint8_t *src = snap_layer_data_page(c->layers[layer], dp);
            *data += len;
            if (len == n)
                return src;
            if (!snap_mapped_copy(at, src, len * SNAP_PAGE_SIZE)) {
                g_set_error(error, SNAP_ERROR, SNAP_ERROR_FORMAT, "snapshot layer %s cannot be read (truncated "
                            "while in use, or its storage failed)", c->layers[layer]->path);
                return NULL;
            }
        }
        p += len;
    }
    return buf;
}

/* Serve the huge pages of [first, end) not served yet; with data_only,
 * leave those that hold no data at all alone. */
bool uffd_serve_huge_pages(struct snap_uffd *u, uint64_t first, uint64_t end, bool data_only, uint8_t *buf,
                             GError **error)
{
    uint64_t n = u->host_page / SNAP_PAGE_SIZE;
    for (uint64_t p = first; p < end; p += n) {
        if (page_served(u, p) || (data_only && !range_has_data(u, p, n)))
            continue;
        uint64_t data = 0, skipped = 0;
        const uint8_t *src = huge_page_source(u, p, n, buf, &data, error);
        if (!src)
            return false;
        /* Counted first, as fill_counted does; one huge page is filled whole or skipped whole. */
        __atomic_fetch_add(&u->stats.pages_copied, data, __ATOMIC_RELAXED);
        __atomic_fetch_add(&u->stats.pages_zeroed, n - data, __ATOMIC_RELAXED);
        bool ok = fill_range(u, p * SNAP_PAGE_SIZE, u->host_page, src, &skipped, error);
        if (!ok || skipped) {
            __atomic_fetch_sub(&u->stats.pages_copied, data, __ATOMIC_RELAXED);
            __atomic_fetch_sub(&u->stats.pages_zeroed, n - data, __ATOMIC_RELAXED);
        }
        if (!ok)
            return false;
        mark_served(u, p, n);
    }
    return true;
}

/* buf: the calling thread's host_page bytes (huge pages only). */
bool uffd_serve_block(struct snap_uffd *u, uint64_t block, bool data_only, uint8_t *buf, GError **error)
{
    uint64_t first = block * u->block_pages, end = MIN(first + u->block_pages, u->npages);
    if (u->host_page > SNAP_PAGE_SIZE)
        return uffd_serve_huge_pages(u, first, end, data_only, buf, error);
    return uffd_serve_pages(u, first, end, data_only, error);
}

/* Every page of the block is served already; with data_only, every page
 * that holds snapshot data. */
bool uffd_block_served(struct snap_uffd *u, uint64_t block, bool data_only)
{
    uint64_t first = block * u->block_pages, end = MIN(first + u->block_pages, u->npages);
    for (uint64_t p = first; p < end;) {
        if (p % 64 == 0 && end - p >= 64 &&
            __atomic_load_n(&u->served[p / 64], __ATOMIC_ACQUIRE) == ~0ull) {
            p += 64;
            continue;
        }
        if (!page_served(u, p) && (!data_only || page_has_data(u, p)))
            return false;
        p++;
    }
    return true;
}

/* The first failure stops all serving; true for the caller that set it. */
static bool mark_failed(struct snap_uffd *u)
{
    int expected = 0;
    return __atomic_compare_exchange_n(&u->failed, &expected, 1, false, __ATOMIC_ACQ_REL,
                                       __ATOMIC_ACQUIRE);
}

/* A server thread met a bad block: the first one reports it, once. */
void uffd_report_failure(struct snap_uffd *u, GError *err)
{
    if (mark_failed(u)) {
        if (u->on_error)
            u->on_error(u->opaque, err);
        else
            g_warning("on-demand restore stopped: %s", err->message);
    }
    g_error_free(err);
}

bool uffd_should_stop(struct snap_uffd *u)
{
    return __atomic_load_n(&u->stopping, __ATOMIC_ACQUIRE) ||
           __atomic_load_n(&u->failed, __ATOMIC_ACQUIRE);
}

/* ---- the threads ---- */

/* The handler's readahead (its thread's own state): blocks [next, end)
 * of each range are still to be served, around's first. */
struct ra_range {
    uint64_t next, end;
};

struct readahead {
    struct ra_range around;  /* after a jump: data pages only */
    struct ra_range ahead;   /* the window after the fault: every page */
    uint64_t window;         /* blocks of the window set up last */
    uint64_t last_fault;     /* block of the last fault */
    bool started;
};

static uint64_t blocks_in(struct snap_uffd *u, uint64_t bytes)
{
    return MAX(1, bytes / (u->block_pages * SNAP_PAGE_SIZE));
}

static bool readahead_pending(const struct readahead *ra)
{
    return ra->around.next < ra->around.end || ra->ahead.next < ra->ahead.end;
}

/* A fault after the last one, in or just past its window, continues a
 * stream: the window doubles. Anything else starts a new stream, and the
 * data around the fault comes first. */
static void readahead_after_fault(struct snap_uffd *u, struct readahead *ra, uint64_t block)
{
    /* past what the last fault's ranges served (around's too), the stream goes on */
    bool stream = ra->started && block > ra->last_fault && block <= MAX(ra->ahead.end, ra->around.end);
    ra->window = stream ? MIN(ra->window * 2, blocks_in(u, READAHEAD_MAX)) : blocks_in(u, READAHEAD_FIRST);
    ra->started = true;
    ra->last_fault = block;
    ra->ahead = (struct ra_range){ block + 1, MIN(block + 1 + ra->window, u->nblocks) };
    uint64_t n = blocks_in(u, READAHEAD_AROUND), first = block - block % n;
    ra->around = stream ? (struct ra_range){ 0, 0 } : (struct ra_range){ first, MIN(first + n, u->nblocks) };
}

/* One block: around's (its data pages), else ahead's (zero pages included:
 * the guest is expected to read them next, and each would cost a fault). A
 * block that fails its check ends its range: it is the guest's business
 * only if the guest touches it, and that fault reports it. */
static void readahead_step(struct snap_uffd *u, struct readahead *ra)
{
    bool around = ra->around.next < ra->around.end;
    struct ra_range *r = around ? &ra->around : &ra->ahead;
    uint64_t block = r->next++;
    if (uffd_block_served(u, block, around))
        return;
    GError *err = NULL;
    if (uffd_serve_block(u, block, around, u->bounce[0], &err)) {
        __atomic_fetch_add(&u->stats.blocks_read_ahead, 1, __ATOMIC_RELAXED);
        return;
    }
    g_error_free(err);
    r->next = r->end;
}

static void handle_fault(struct snap_uffd *u, struct readahead *ra, uint64_t address)
{
    uint64_t off = address - (uintptr_t)u->host;
    uint64_t page = off / SNAP_PAGE_SIZE;
    if (page >= u->npages || __atomic_load_n(&u->failed, __ATOMIC_ACQUIRE))
        return; /* after a failure faults are left unanswered, never served */
    __atomic_fetch_add(&u->stats.faults, 1, __ATOMIC_RELAXED);
    GError *err = NULL;
    if (!uffd_serve_block(u, page / u->block_pages, false, u->bounce[0], &err)) {
        uffd_report_failure(u, err);
        return;
    }
    /* The page may have been filled by the other thread just before this fault
     * was read; its copy woke the waiter, but waking again is harmless. */
    uint64_t start = off - off % u->host_page;
    struct uffdio_range wake = { .start = (uintptr_t)u->host + start, .len = u->host_page };
    ioctl(u->uffd, UFFDIO_WAKE, &wake);
    uffd_workset_note_fault(u, page / u->block_pages);
    uffd_workset_after_fault(u, page / u->block_pages);
    if (u->readahead && !uffd_workset_recording(u))
        readahead_after_fault(u, ra, page / u->block_pages);
}

static void read_faults(struct snap_uffd *u, struct readahead *ra)
{
    struct uffd_msg msgs[MSGS_PER_READ];
    for (;;) {
        ssize_t n = read(u->uffd, msgs, sizeof msgs);
        if (n <= 0)
            return; /* EAGAIN: drained */
        for (ssize_t i = 0; i < n / (ssize_t)sizeof msgs[0]; i++)
            if (msgs[i].event == UFFD_EVENT_PAGEFAULT)
                handle_fault(u, ra, msgs[i].arg.pagefault.address);
    }
}

/* Waits for faults; with readahead to do, only looks (poll timeout 0) and
 * serves one block of it when no fault is waiting. */
static void *handler_thread(void *arg)
{
    struct snap_uffd *u = arg;
    sandbox_seccomp_enter_thread(SANDBOX_THREAD_UFFD);
    struct pollfd fds[2] = { { .fd = u->uffd, .events = POLLIN }, { .fd = u->wake_fd, .events = POLLIN } };
    struct readahead ra = { 0 };
    while (!__atomic_load_n(&u->stopping, __ATOMIC_ACQUIRE)) {
        bool ahead = readahead_pending(&ra) && !__atomic_load_n(&u->failed, __ATOMIC_ACQUIRE);
        if (poll(fds, 2, ahead ? 0 : -1) < 0) {
            if (errno == EINTR)
                continue;
            uffd_report_failure(u, g_error_new(SNAP_UFFD_ERROR, SNAP_UFFD_ERROR_FAILED,
                                          "userfaultfd handler: poll failed: %s", g_strerror(errno)));
            break;
        }
        if (fds[1].revents)
            break;
        if (fds[0].revents & POLLIN)
            read_faults(u, &ra);
        else if (fds[0].revents & (POLLERR | POLLHUP))
            break;
        else if (ahead)
            readahead_step(u, &ra);
    }
    return NULL;
}

static bool serve_everything(struct snap_uffd *u, bool count_prefetch, uint8_t *buf, GError **error)
{
    for (uint64_t b = 0; b < u->nblocks; b++) {
        if (uffd_should_stop(u)) {
            g_set_error(error, SNAP_UFFD_ERROR, SNAP_UFFD_ERROR_FAILED, "on-demand restore %s",
                        __atomic_load_n(&u->failed, __ATOMIC_ACQUIRE) ? "has failed" : "was stopped");
            return false;
        }
        if (uffd_block_served(u, b, true))
            continue;
        if (!uffd_serve_block(u, b, true, buf, error))
            return false;
        if (count_prefetch)
            __atomic_fetch_add(&u->stats.blocks_prefetched, 1, __ATOMIC_RELAXED);
    }
    return true;
}

/* Prefetch (and fill_all) serve only pages that hold snapshot data: a page the
 * snapshot has as zero reads as zero anyway once RAM is unregistered, so
 * filling those would only cost memory (a whole page each on memfd RAM) and
 * time. Once every data page is served the server may be stopped safely. */
static void *prefetch_thread(void *arg)
{
    struct snap_uffd *u = arg;
    sandbox_seccomp_enter_thread(SANDBOX_THREAD_UFFD);
    GError *err = NULL;
    if (serve_everything(u, true, u->bounce[1], &err)) {
        __atomic_store_n(&u->stats.prefetch_done, true, __ATOMIC_RELEASE);
        __atomic_store_n(&u->stats.complete, true, __ATOMIC_RELEASE);
    }
    else if (uffd_should_stop(u))
        g_clear_error(&err); /* stopped, or someone else reported the failure */
    else
        uffd_report_failure(u, err);
    return NULL;
}

/* ---- public ---- */

static bool check_config(const struct snap_uffd_config *cfg, uint64_t host_page, uint64_t block_size,
                         GError **error)
{
    const char *problem = NULL;
    if (!cfg->chain || cfg->chain->partial)
        problem = "no chain, or the chain has no base layer";
    else if (cfg->size != cfg->chain->ram_size)
        problem = "RAM size differs from the snapshot's";
    else if (host_page != SNAP_PAGE_SIZE && host_page != HUGE_PAGE_SIZE)
        problem = "RAM pages must be of 4 KiB or 2 MiB";
    else if (!cfg->host || (uintptr_t)cfg->host % host_page || cfg->size % host_page)
        problem = "RAM is not a mapping of whole, aligned pages";
    else if (block_size < SNAP_PAGE_SIZE || block_size > MAX_BLOCK_SIZE ||
             (block_size & (block_size - 1)))
        problem = "fault block size must be a power of two from 4 KiB to 2 MiB";
    else if (block_size < host_page)
        problem = "RAM on 2 MiB huge pages is served 2 MiB at a time: the fault block size cannot be smaller";
    if (problem)
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_INVALID, "on-demand restore: %s", problem);
    return !problem;
}

/* The bounce buffers and the zeros of a server on huge pages, made here
 * (their threads may not map memory: their seccomp list has no mmap). */
static bool make_huge_buffers(struct snap_uffd *u, GError **error)
{
    void *zeros = mmap(NULL, u->host_page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (zeros == MAP_FAILED) {
        g_set_error(error, SNAP_UFFD_ERROR, SNAP_UFFD_ERROR_FAILED, "cannot map a zero huge page: %s", g_strerror(errno));
        return false;
    }
    u->zeros = zeros;
    for (unsigned i = 0; i < G_N_ELEMENTS(u->bounce); i++)
        u->bounce[i] = g_malloc(u->host_page);
    return true;
}

struct snap_uffd *snap_uffd_start(const struct snap_uffd_config *cfg, GError **error)
{
    uint64_t host_page = cfg->page_size ? cfg->page_size : SNAP_PAGE_SIZE;
    uint64_t block_size = cfg->block_size ? cfg->block_size : MAX(DEFAULT_BLOCK_SIZE, host_page);
    if (!check_config(cfg, host_page, block_size, error))
        return NULL;
    struct snap_uffd *u = g_new0(struct snap_uffd, 1);
    u->chain = cfg->chain;
    u->host = cfg->host;
    u->npages = cfg->size / SNAP_PAGE_SIZE;
    u->block_pages = block_size / SNAP_PAGE_SIZE;
    u->nblocks = (u->npages + u->block_pages - 1) / u->block_pages;
    u->readahead = cfg->readahead;
    u->host_page = host_page;
    u->on_error = cfg->on_error;
    u->opaque = cfg->opaque;
    u->served = g_new0(uint64_t, (u->npages + 63) / 64);
    u->uffd = -1;
    uffd_workset_init(u, cfg);
    u->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (u->wake_fd < 0) {
        g_set_error(error, SNAP_UFFD_ERROR, SNAP_UFFD_ERROR_FAILED, "cannot create an eventfd: %s",
                    g_strerror(errno));
        snap_uffd_stop(u);
        return NULL;
    }
    if (host_page > SNAP_PAGE_SIZE && !make_huge_buffers(u, error)) {
        snap_uffd_stop(u);
        return NULL;
    }
    u->uffd = open_and_handshake(cfg->open_mode, host_page > SNAP_PAGE_SIZE, error);
    if (u->uffd < 0 || !register_ram(u, error)) {
        snap_uffd_stop(u);
        return NULL;
    }
    int rc = pthread_create(&u->handler, NULL, handler_thread, u);
    if (rc) {
        g_set_error(error, SNAP_UFFD_ERROR, SNAP_UFFD_ERROR_FAILED, "cannot start the userfaultfd handler: %s",
                    g_strerror(rc));
        snap_uffd_stop(u);
        return NULL;
    }
    u->handler_running = true;
    if (!uffd_workset_start_thread(u, error)) {
        snap_uffd_stop(u);
        return NULL;
    }
    return u;
}

bool snap_uffd_start_prefetch(struct snap_uffd *u, GError **error)
{
    if (u->prefetch_running)
        return true;
    int rc = pthread_create(&u->prefetcher, NULL, prefetch_thread, u);
    if (rc) {
        g_set_error(error, SNAP_UFFD_ERROR, SNAP_UFFD_ERROR_FAILED, "cannot start the prefetch thread: %s",
                    g_strerror(rc));
        return false;
    }
    u->prefetch_running = true;
    return true;
}

bool snap_uffd_fill_all(struct snap_uffd *u, GError **error)
{
    GError *err = NULL;
    g_autofree uint8_t *buf = u->host_page > SNAP_PAGE_SIZE ? g_malloc(u->host_page) : NULL;
    if (serve_everything(u, false, buf, &err)) {
        __atomic_store_n(&u->stats.complete, true, __ATOMIC_RELEASE);
        return true;
    }
    mark_failed(u); /* a bad block stops serving for everyone; the caller reports it */
    g_propagate_error(error, err);
    return false;
}

void snap_uffd_get_stats(struct snap_uffd *u, struct snap_uffd_stats *st)
{
    st->faults = __atomic_load_n(&u->stats.faults, __ATOMIC_RELAXED);
    st->pages_copied = __atomic_load_n(&u->stats.pages_copied, __ATOMIC_RELAXED);
    st->pages_zeroed = __atomic_load_n(&u->stats.pages_zeroed, __ATOMIC_RELAXED);
    st->blocks_prefetched = __atomic_load_n(&u->stats.blocks_prefetched, __ATOMIC_RELAXED);
    st->blocks_read_ahead = __atomic_load_n(&u->stats.blocks_read_ahead, __ATOMIC_RELAXED);
    st->pages_unregistered = u->stats.pages_unregistered; /* set before the threads start */
    st->prefetch_hits = __atomic_load_n(&u->stats.prefetch_hits, __ATOMIC_RELAXED);
    st->prefetch_misses = __atomic_load_n(&u->stats.prefetch_misses, __ATOMIC_RELAXED);
    st->workset_blocks = u->stats.workset_blocks; /* set before the threads start */
    st->workset_done = __atomic_load_n(&u->stats.workset_done, __ATOMIC_ACQUIRE);
    st->prefetch_done = __atomic_load_n(&u->stats.prefetch_done, __ATOMIC_ACQUIRE);
    st->complete = __atomic_load_n(&u->stats.complete, __ATOMIC_ACQUIRE);
    st->failed = __atomic_load_n(&u->failed, __ATOMIC_ACQUIRE);
}

void snap_uffd_stop(struct snap_uffd *u)
{
    if (!u)
        return;
    __atomic_store_n(&u->stopping, 1, __ATOMIC_RELEASE);
    if (u->wake_fd >= 0) {
        uint64_t one = 1;
        if (write(u->wake_fd, &one, sizeof one) < 0)
            g_warning("userfaultfd stop: eventfd write failed: %s", g_strerror(errno));
    }
    if (u->prefetch_running)
        pthread_join(u->prefetcher, NULL);
    if (u->ws.running)
        pthread_join(u->ws.thread, NULL);
    if (u->handler_running)
        pthread_join(u->handler, NULL);
    if (u->uffd >= 0)
        close(u->uffd); /* unregisters the range */
    if (u->wake_fd >= 0)
        close(u->wake_fd);
    if (u->zeros)
        munmap((void *)u->zeros, u->host_page);
    for (unsigned i = 0; i < G_N_ELEMENTS(u->bounce); i++)
        g_free(u->bounce[i]);
    g_free(u->served);
    uffd_workset_release(u);
    g_free(u);
}
