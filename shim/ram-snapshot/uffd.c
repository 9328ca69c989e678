/* The userfaultfd server: a handler thread answering faults, an optional
 * prefetch thread, and the block serving both share. A per-page "served" bitmap
 * (atomic bit operations) lets prefetch skip what faults already brought in; two
 * threads racing on the same page is harmless because UFFDIO_COPY of a page
 * that exists fails with EEXIST and changes nothing. */
#include "ram-snapshot/uffd.h"
#include "sandbox/syscall-filter.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define DEFAULT_BLOCK_SIZE (64u << 10)
#define MAX_BLOCK_SIZE (2u << 20)
#define MSGS_PER_READ 32

struct snap_uffd {
    struct snap_chain *chain;
    uint8_t *host;
    uint64_t npages;
    uint64_t block_pages;
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
};

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
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_UFFD,
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
static int open_and_handshake(enum snap_uffd_open mode, GError **error)
{
    int fd = open_uffd(mode, error);
    if (fd < 0)
        return -1;
    struct uffdio_api api = { .api = UFFD_API };
    if (ioctl(fd, UFFDIO_API, &api) < 0) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_UFFD, "userfaultfd API handshake failed: %s",
                    g_strerror(errno));
        close(fd);
        return -1;
    }
    close(fd);
    fd = open_uffd(mode, error);
    if (fd < 0)
        return -1;
    uint64_t wanted = api.features & UFFD_FEATURE_MISSING_SHMEM;
    api = (struct uffdio_api){ .api = UFFD_API, .features = wanted };
    if (ioctl(fd, UFFDIO_API, &api) < 0) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_UFFD, "userfaultfd API handshake failed: %s",
                    g_strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static bool register_ram(struct snap_uffd *u, uint64_t size, GError **error)
{
    struct uffdio_register reg = {
        .range = { .start = (uintptr_t)u->host, .len = size },
        .mode = UFFDIO_REGISTER_MODE_MISSING,
    };
    if (ioctl(u->uffd, UFFDIO_REGISTER, &reg) < 0) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_UFFD,
                    "cannot register guest RAM with userfaultfd: %s", g_strerror(errno));
        return false;
    }
    uint64_t need = (1ull << _UFFDIO_COPY) | (1ull << _UFFDIO_ZEROPAGE) | (1ull << _UFFDIO_WAKE);
    if ((reg.ioctls & need) != need) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_UFFD,
                    "userfaultfd on this RAM mapping does not offer COPY and ZEROPAGE");
        return false;
    }
    return true;
}

/* ---- serving pages ---- */

static bool page_served(struct snap_uffd *u, uint64_t p)
{
    return __atomic_load_n(&u->served[p / 64], __ATOMIC_ACQUIRE) >> (p % 64) & 1;
}

static void mark_served(struct snap_uffd *u, uint64_t first, uint64_t n)
{
    for (uint64_t p = first; p < first + n; p++)
        __atomic_fetch_or(&u->served[p / 64], 1ull << (p % 64), __ATOMIC_RELEASE);
}

static bool ioctl_failed(const char *what, uint64_t offset, GError **error)
{
    /* The kernel could not read the source: the layer's mapping lost it. */
    if (errno == EFAULT) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_FORMAT,
                    "userfaultfd %s at RAM offset 0x%" G_GINT64_MODIFIER "x: the snapshot layer "
                    "cannot be read (truncated while in use, or its storage failed)", what, offset);
        return false;
    }
    g_set_error(error, SNAP_ERROR, SNAP_ERROR_UFFD,
                "userfaultfd %s at RAM offset 0x%" G_GINT64_MODIFIER "x failed: %s", what, offset,
                g_strerror(errno));
    return false;
}

/* UFFDIO_COPY (src != NULL) or UFFDIO_ZEROPAGE over [off, off + len). Pages that
 * exist already (EEXIST: the other thread won the race) are skipped. */
static bool fill_range(struct snap_uffd *u, uint64_t off, uint64_t len, const uint8_t *src,
                       GError **error)
{
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
        if (done <= 0)
            done = errno == EEXIST ? SNAP_PAGE_SIZE : 0; /* the first page exists: skip it */
        off += (uint64_t)done;
        len -= (uint64_t)done;
        if (src)
            src += done;
    }
    return true;
}

static bool page_has_data(struct snap_uffd *u, uint64_t p)
{
    return snap_chain_page_has_data(u->chain, p);
}

/* Serve the pages of [first, end) not served yet, each from its own layer;
 * with data_only, leave zero pages alone (see prefetch_thread). */
static bool serve_pages(struct snap_uffd *u, uint64_t first, uint64_t end, bool data_only,
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
        if (!fill_range(u, p * SNAP_PAGE_SIZE, n * SNAP_PAGE_SIZE, src, error))
            return false;
        mark_served(u, p, n);
        __atomic_fetch_add(src ? &u->stats.pages_copied : &u->stats.pages_zeroed, n, __ATOMIC_RELAXED);
        p += n;
    }
    return true;
}

static bool serve_block(struct snap_uffd *u, uint64_t block, bool data_only, GError **error)
{
    uint64_t first = block * u->block_pages;
    return serve_pages(u, first, MIN(first + u->block_pages, u->npages), data_only, error);
}

/* Every page of the block that holds snapshot data is served already. */
static bool block_data_served(struct snap_uffd *u, uint64_t block)
{
    uint64_t first = block * u->block_pages, end = MIN(first + u->block_pages, u->npages);
    for (uint64_t p = first; p < end;) {
        if (p % 64 == 0 && end - p >= 64 &&
            __atomic_load_n(&u->served[p / 64], __ATOMIC_ACQUIRE) == ~0ull) {
            p += 64;
            continue;
        }
        if (!page_served(u, p) && page_has_data(u, p))
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
static void report_failure(struct snap_uffd *u, GError *err)
{
    if (mark_failed(u)) {
        if (u->on_error)
            u->on_error(u->opaque, err);
        else
            g_warning("on-demand restore stopped: %s", err->message);
    }
    g_error_free(err);
}

static bool should_stop(struct snap_uffd *u)
{
    return __atomic_load_n(&u->stopping, __ATOMIC_ACQUIRE) ||
           __atomic_load_n(&u->failed, __ATOMIC_ACQUIRE);
}

/* ---- the threads ---- */

static void handle_fault(struct snap_uffd *u, uint64_t address)
{
    uint64_t off = address - (uintptr_t)u->host;
    uint64_t page = off / SNAP_PAGE_SIZE;
    if (page >= u->npages || __atomic_load_n(&u->failed, __ATOMIC_ACQUIRE))
        return; /* after a failure faults are left unanswered, never served */
    __atomic_fetch_add(&u->stats.faults, 1, __ATOMIC_RELAXED);
    GError *err = NULL;
    if (!serve_block(u, page / u->block_pages, false, &err)) {
        report_failure(u, err);
        return;
    }
    /* The page may have been filled by the other thread just before this fault
     * was read; its copy woke the waiter, but waking again is harmless. */
    struct uffdio_range wake = { .start = (uintptr_t)u->host + page * SNAP_PAGE_SIZE,
                                 .len = SNAP_PAGE_SIZE };
    ioctl(u->uffd, UFFDIO_WAKE, &wake);
}

static void read_faults(struct snap_uffd *u)
{
    struct uffd_msg msgs[MSGS_PER_READ];
    for (;;) {
        ssize_t n = read(u->uffd, msgs, sizeof msgs);
        if (n <= 0)
            return; /* EAGAIN: drained */
        for (ssize_t i = 0; i < n / (ssize_t)sizeof msgs[0]; i++)
            if (msgs[i].event == UFFD_EVENT_PAGEFAULT)
                handle_fault(u, msgs[i].arg.pagefault.address);
    }
}

static void *handler_thread(void *arg)
{
    struct snap_uffd *u = arg;
    sandbox_seccomp_enter_thread(SANDBOX_THREAD_UFFD);
    struct pollfd fds[2] = { { .fd = u->uffd, .events = POLLIN }, { .fd = u->wake_fd, .events = POLLIN } };
    while (!__atomic_load_n(&u->stopping, __ATOMIC_ACQUIRE)) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            report_failure(u, g_error_new(SNAP_ERROR, SNAP_ERROR_UFFD,
                                          "userfaultfd handler: poll failed: %s", g_strerror(errno)));
            break;
        }
        if (fds[1].revents)
            break;
        if (fds[0].revents & POLLIN)
            read_faults(u);
        else if (fds[0].revents & (POLLERR | POLLHUP))
            break;
    }
    return NULL;
}

static bool serve_everything(struct snap_uffd *u, bool count_prefetch, GError **error)
{
    uint64_t nblocks = (u->npages + u->block_pages - 1) / u->block_pages;
    for (uint64_t b = 0; b < nblocks; b++) {
        if (should_stop(u)) {
            g_set_error(error, SNAP_ERROR, SNAP_ERROR_UFFD, "on-demand restore %s",
                        __atomic_load_n(&u->failed, __ATOMIC_ACQUIRE) ? "has failed" : "was stopped");
            return false;
        }
        if (block_data_served(u, b))
            continue;
        if (!serve_block(u, b, true, error))
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
    if (serve_everything(u, true, &err)) {
        __atomic_store_n(&u->stats.prefetch_done, true, __ATOMIC_RELEASE);
        __atomic_store_n(&u->stats.complete, true, __ATOMIC_RELEASE);
    }
    else if (should_stop(u))
        g_clear_error(&err); /* stopped, or someone else reported the failure */
    else
        report_failure(u, err);
    return NULL;
}

/* ---- public ---- */

static bool check_config(const struct snap_uffd_config *cfg, uint64_t block_size, GError **error)
{
    const char *problem = NULL;
    if (!cfg->chain || cfg->chain->partial)
        problem = "no chain, or the chain has no base layer";
    else if (cfg->size != cfg->chain->ram_size)
        problem = "RAM size differs from the snapshot's";
    else if (!cfg->host || (uintptr_t)cfg->host % SNAP_PAGE_SIZE)
        problem = "RAM is not a page-aligned mapping";
    else if (block_size < SNAP_PAGE_SIZE || block_size > MAX_BLOCK_SIZE ||
             (block_size & (block_size - 1)))
        problem = "fault block size must be a power of two from 4 KiB to 2 MiB";
    if (problem)
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_INVALID, "on-demand restore: %s", problem);
    return !problem;
}

struct snap_uffd *snap_uffd_start(const struct snap_uffd_config *cfg, GError **error)
{
    uint64_t block_size = cfg->block_size ? cfg->block_size : DEFAULT_BLOCK_SIZE;
    if (!check_config(cfg, block_size, error))
        return NULL;
    struct snap_uffd *u = g_new0(struct snap_uffd, 1);
    u->chain = cfg->chain;
    u->host = cfg->host;
    u->npages = cfg->size / SNAP_PAGE_SIZE;
    u->block_pages = block_size / SNAP_PAGE_SIZE;
    u->on_error = cfg->on_error;
    u->opaque = cfg->opaque;
    u->served = g_new0(uint64_t, (u->npages + 63) / 64);
    u->uffd = -1;
    u->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (u->wake_fd < 0) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_UFFD, "cannot create an eventfd: %s",
                    g_strerror(errno));
        snap_uffd_stop(u);
        return NULL;
    }
    u->uffd = open_and_handshake(cfg->open_mode, error);
    if (u->uffd < 0 || !register_ram(u, cfg->size, error)) {
        snap_uffd_stop(u);
        return NULL;
    }
    int rc = pthread_create(&u->handler, NULL, handler_thread, u);
    if (rc) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_UFFD, "cannot start the userfaultfd handler: %s",
                    g_strerror(rc));
        snap_uffd_stop(u);
        return NULL;
    }
    u->handler_running = true;
    return u;
}

bool snap_uffd_start_prefetch(struct snap_uffd *u, GError **error)
{
    if (u->prefetch_running)
        return true;
    int rc = pthread_create(&u->prefetcher, NULL, prefetch_thread, u);
    if (rc) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_UFFD, "cannot start the prefetch thread: %s",
                    g_strerror(rc));
        return false;
    }
    u->prefetch_running = true;
    return true;
}

bool snap_uffd_fill_all(struct snap_uffd *u, GError **error)
{
    GError *err = NULL;
    if (serve_everything(u, false, &err)) {
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
    if (u->handler_running)
        pthread_join(u->handler, NULL);
    if (u->uffd >= 0)
        close(u->uffd); /* unregisters the range */
    if (u->wake_fd >= 0)
        close(u->wake_fd);
    g_free(u->served);
    g_free(u);
}
