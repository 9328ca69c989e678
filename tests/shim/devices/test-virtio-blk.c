/* virtio-blk without KVM: the device on a bus and guest RAM of its own, driven
 * by a driver written here, over an in-memory struct blk_backend that fails
 * the test if the device ever calls it outside the disk. Requests of every
 * type, chains cut in odd places, malformed chains, backend failures,
 * pausing, dirty marking and snapshot state. A sanitizer build checks that
 * no chain makes the device touch memory it must not.
 */
#include <errno.h>
#include <gio/gio.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>
#include <string.h>

#include "block/blk-backend.h"
#include "platform/bus.h"
#include "config/vm-config.h"
#include "devices/virtio-blk.h"
#include "devices/virtio-queue.h"
#include "platform/memory.h"
#include "json/vjson.h"

#define RAM_SIZE (32ull << 20)
#define QSIZE 16u
#define DESC_GPA 0x10000ull
#define AVAIL_GPA 0x11000ull
#define USED_GPA 0x12000ull
#define HDR_GPA 0x20000ull
#define STATUS_GPA 0x21000ull
#define DATA_GPA 0x100000ull
#define DISK_BYTES (1u << 20)
#define OUTSIDE_RAM 0x4000000000ull

/* ---- an in-memory backend that checks the contract ---- */

struct mem_backend {
    struct blk_backend base;
    uint8_t *data;
    int fail_writes; /* -errno for every write, 0 for none */
    unsigned calls;
};

static void check_range(struct blk_backend *b, uint64_t offset, uint64_t len)
{
    g_assert_cmpuint(offset % BLK_SECTOR_SIZE, ==, 0);
    g_assert_cmpuint(len % BLK_SECTOR_SIZE, ==, 0);
    g_assert_cmpuint(offset, <=, b->capacity);
    g_assert_cmpuint(len, <=, b->capacity - offset);
}

static size_t iov_len(const struct iovec *iov, unsigned n)
{
    size_t total = 0;
    for (unsigned i = 0; i < n; i++)
        total += iov[i].iov_len;
    return total;
}

static int mem_transfer(struct blk_backend *b, uint64_t offset, const struct iovec *iov, unsigned n, bool write)
{
    struct mem_backend *m = (struct mem_backend *)b;
    m->calls++;
    check_range(b, offset, iov_len(iov, n));
    if (write && m->fail_writes)
        return m->fail_writes;
    g_assert_false(write && b->readonly);
    for (unsigned i = 0; i < n; i++) {
        if (write)
            memcpy(m->data + offset, iov[i].iov_base, iov[i].iov_len);
        else
            memcpy(iov[i].iov_base, m->data + offset, iov[i].iov_len);
        offset += iov[i].iov_len;
    }
    return 0;
}

static int mem_readv(struct blk_backend *b, uint64_t offset, const struct iovec *iov, unsigned n)
{
    return mem_transfer(b, offset, iov, n, false);
}

static int mem_writev(struct blk_backend *b, uint64_t offset, const struct iovec *iov, unsigned n)
{
    return mem_transfer(b, offset, iov, n, true);
}

static int mem_flush(struct blk_backend *b)
{
    ((struct mem_backend *)b)->calls++;
    return 0;
}

static int mem_zero(struct blk_backend *b, uint64_t offset, uint64_t len, bool may_unmap)
{
    struct mem_backend *m = (struct mem_backend *)b;
    m->calls++;
    check_range(b, offset, len);
    g_assert_false(b->readonly);
    memset(m->data + offset, 0, len);
    return 0;
}

static int mem_discard(struct blk_backend *b, uint64_t offset, uint64_t len)
{
    return mem_zero(b, offset, len, true);
}

static void mem_close(struct blk_backend *b)
{
    g_free(((struct mem_backend *)b)->data);
    g_free(b);
}

static const struct blk_backend_ops mem_ops = {
    .readv = mem_readv, .writev = mem_writev, .flush = mem_flush,
    .discard = mem_discard, .write_zeroes = mem_zero, .close = mem_close,
};

static struct mem_backend *mem_backend_new(bool readonly)
{
    struct mem_backend *m = g_new0(struct mem_backend, 1);
    m->base = (struct blk_backend){ .ops = &mem_ops, .capacity = DISK_BYTES, .block_size = 512,
                                    .readonly = readonly, .can_discard = !readonly, .name = "memory" };
    m->data = g_malloc0(DISK_BYTES);
    for (unsigned i = 0; i < DISK_BYTES; i++)
        m->data[i] = (uint8_t)(i * 7 + i / 512);
    return m;
}

/* ---- the machine around the device ---- */

struct rig {
    struct guest_memory mem;
    struct bus mmio;
    struct virtio_host host;
    struct mem_backend *backend; /* owned by dev */
    struct virtio_blk *dev;
    uint8_t *dirty;              /* one byte per page the device marked */
    uint16_t avail_idx, used_seen;
};

static void mark_dirty(void *opaque, uint64_t gpa, uint64_t len)
{
    struct rig *r = opaque;
    for (uint64_t page = gpa / 4096; page <= (gpa + len - 1) / 4096; page++)
        if (page < RAM_SIZE / 4096)
            __atomic_store_n(&r->dirty[page], 1, __ATOMIC_RELAXED);
}

static void set_irq_level(void *opaque, unsigned gsi, bool level)
{
}

static bool refuse_ioeventfd(void *opaque, int fd, uint64_t addr, unsigned len, uint64_t datamatch, bool assign)
{
    errno = ENOSYS;
    return false;
}

static bool refuse_irqfd(void *opaque, int fd, unsigned gsi, bool assign)
{
    errno = ENOSYS;
    return false;
}

static void *gpa(struct rig *r, uint64_t addr)
{
    void *p = guest_memory_ptr(&r->mem, addr, 1);
    g_assert_nonnull(p);
    return p;
}

static void reg_write(struct rig *r, uint64_t offset, uint32_t value)
{
    g_assert_true(bus_write(&r->mmio, MMIO_VIRTIO_BASE + offset, (const uint8_t *)&value, 4));
}

static uint32_t reg_read(struct rig *r, uint64_t offset)
{
    uint32_t value;
    g_assert_true(bus_read(&r->mmio, MMIO_VIRTIO_BASE + offset, (uint8_t *)&value, 4));
    return value;
}

static uint64_t device_features(struct rig *r)
{
    reg_write(r, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
    uint64_t hi = reg_read(r, VIRTIO_MMIO_DEVICE_FEATURES);
    reg_write(r, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
    return hi << 32 | reg_read(r, VIRTIO_MMIO_DEVICE_FEATURES);
}

/* What a driver does: features, queue 0, DRIVER_OK. */
static void driver_start(struct rig *r)
{
    uint64_t features = device_features(r);
    reg_write(r, VIRTIO_MMIO_STATUS, 0);
    reg_write(r, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
    for (unsigned sel = 0; sel < 2; sel++) {
        reg_write(r, VIRTIO_MMIO_DRIVER_FEATURES_SEL, sel);
        reg_write(r, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)(features >> (32 * sel)));
    }
    reg_write(r, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK);
    reg_write(r, VIRTIO_MMIO_QUEUE_SEL, 0);
    g_assert_cmpuint(reg_read(r, VIRTIO_MMIO_QUEUE_NUM_MAX), >=, QSIZE);
    reg_write(r, VIRTIO_MMIO_QUEUE_NUM, QSIZE);
    reg_write(r, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)DESC_GPA);
    reg_write(r, VIRTIO_MMIO_QUEUE_AVAIL_LOW, (uint32_t)AVAIL_GPA);
    reg_write(r, VIRTIO_MMIO_QUEUE_USED_LOW, (uint32_t)USED_GPA);
    reg_write(r, VIRTIO_MMIO_QUEUE_READY, 1);
    reg_write(r, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
                                         VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK);
    g_assert_cmpuint(reg_read(r, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET, ==, 0);
}

static struct virtio_blk *new_device(struct rig *r, struct mem_backend *backend, GError **error)
{
    struct disk_config cfg;
    disk_config_init(&cfg);
    cfg.id = g_strdup("d0");
    cfg.serial = g_strdup("serial-of-d0");
    cfg.queue_size = QSIZE;
    struct virtio_blk *dev = virtio_blk_new(&r->host, 0, &cfg, &backend->base, error);
    disk_config_clear(&cfg);
    return dev;
}

static void rig_init(struct rig *r, bool readonly)
{
    memset(r, 0, sizeof *r);
    g_autoptr(GError) error = NULL;
    g_assert_true(guest_memory_init(&r->mem, RAM_SIZE, &error));
    bus_init(&r->mmio);
    r->dirty = g_malloc0(RAM_SIZE / 4096);
    r->host = (struct virtio_host){ .mmio = &r->mmio, .mem = &r->mem, .mark_dirty = mark_dirty,
                                    .set_irq_level = set_irq_level, .bind_ioeventfd = refuse_ioeventfd,
                                    .bind_irqfd = refuse_irqfd, .opaque = r };
    r->backend = mem_backend_new(readonly);
    r->dev = new_device(r, r->backend, &error);
    g_assert_no_error(error);
    driver_start(r);
}

static void rig_free(struct rig *r)
{
    virtio_blk_free(r->dev);
    bus_release(&r->mmio);
    guest_memory_release(&r->mem);
    g_free(r->dirty);
}

/* ---- requests ---- */

static struct vring_desc *desc(struct rig *r, unsigned i)
{
    return (struct vring_desc *)gpa(r, DESC_GPA) + i;
}

static void set_desc(struct rig *r, unsigned i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
    *desc(r, i) = (struct vring_desc){ .addr = addr, .len = len, .flags = flags, .next = next };
}

static void header(struct rig *r, uint32_t type, uint64_t sector)
{
    *(struct virtio_blk_outhdr *)gpa(r, HDR_GPA) = (struct virtio_blk_outhdr){ .type = type, .sector = sector };
    *(uint8_t *)gpa(r, STATUS_GPA) = 0xee;
}

static void publish(struct rig *r, uint16_t head)
{
    uint16_t *avail = gpa(r, AVAIL_GPA);
    avail[2 + r->avail_idx % QSIZE] = head;
    __atomic_store_n(&avail[1], ++r->avail_idx, __ATOMIC_RELEASE);
}

static void notify(struct rig *r)
{
    reg_write(r, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
}

/* The next used element, waiting up to 5 s. */
static struct vring_used_elem wait_used(struct rig *r)
{
    uint16_t *used_idx = (uint16_t *)gpa(r, USED_GPA) + 1;
    gint64 deadline = g_get_monotonic_time() + 5 * G_USEC_PER_SEC;
    while (__atomic_load_n(used_idx, __ATOMIC_ACQUIRE) == r->used_seen) {
        g_assert_cmpint(g_get_monotonic_time(), <, deadline);
        g_usleep(100);
    }
    struct vring_used_elem *ring = (struct vring_used_elem *)((uint8_t *)gpa(r, USED_GPA) + 4);
    return ring[r->used_seen++ % QSIZE];
}

static uint8_t status_byte(struct rig *r)
{
    return *(uint8_t *)gpa(r, STATUS_GPA);
}

/* Publish the chain at descriptor 0, notify, expect (status, used length). */
static void run(struct rig *r, int status, uint32_t used_len)
{
    publish(r, 0);
    notify(r);
    struct vring_used_elem e = wait_used(r);
    g_assert_cmpuint(e.id, ==, 0);
    g_assert_cmpuint(e.len, ==, used_len);
    if (status >= 0)
        g_assert_cmpint(status_byte(r), ==, status);
}

/* A plain request: header, one data buffer (if len), status. */
static void simple(struct rig *r, uint32_t type, uint64_t sector, uint32_t len, bool device_writes)
{
    header(r, type, sector);
    set_desc(r, 0, HDR_GPA, 16, VRING_DESC_F_NEXT, 1);
    if (len) {
        set_desc(r, 1, DATA_GPA, len, VRING_DESC_F_NEXT | (device_writes ? VRING_DESC_F_WRITE : 0), 2);
        set_desc(r, 2, STATUS_GPA, 1, VRING_DESC_F_WRITE, 0);
    } else {
        set_desc(r, 1, STATUS_GPA, 1, VRING_DESC_F_WRITE, 0);
    }
}

static JsonObject *counters(struct rig *r, JsonNode **root)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    virtio_blk_add_counters(r->dev, b);
    vjson_object_end(b);
    *root = json_builder_get_root(b);
    return json_object_get_object_member(json_node_get_object(*root), "d0");
}

static gint64 counter(struct rig *r, const char *name)
{
    JsonNode *root;
    JsonObject *c = counters(r, &root);
    gint64 v = json_object_get_int_member(c, name);
    json_node_unref(root);
    return v;
}

/* ---- tests ---- */

static void test_config_space(void)
{
    struct rig r;
    rig_init(&r, false);
    g_assert_cmpuint(reg_read(&r, VIRTIO_MMIO_DEVICE_ID), ==, VIRTIO_ID_BLOCK);
    uint64_t f = device_features(&r);
    g_assert_true(f & (1ull << VIRTIO_F_VERSION_1));
    g_assert_true(f & (1ull << VIRTIO_BLK_F_FLUSH) && f & (1ull << VIRTIO_BLK_F_SEG_MAX) &&
                  f & (1ull << VIRTIO_BLK_F_BLK_SIZE) && f & (1ull << VIRTIO_BLK_F_DISCARD) &&
                  f & (1ull << VIRTIO_BLK_F_WRITE_ZEROES));
    g_assert_false(f & (1ull << VIRTIO_BLK_F_RO));
    g_assert_false(f & (1ull << VIRTIO_BLK_F_MQ));
    g_assert_cmpuint(reg_read(&r, 0x100), ==, DISK_BYTES / 512); /* capacity, low word */
    g_assert_cmpuint(reg_read(&r, 0x104), ==, 0);
    g_assert_cmpuint(reg_read(&r, 0x100 + 12), ==, VIRTQ_MAX_CHAIN - 2); /* seg_max */
    g_assert_cmpuint(reg_read(&r, 0x100 + 20), ==, 512);                 /* blk_size */
    rig_free(&r);

    rig_init(&r, true);
    f = device_features(&r);
    g_assert_true(f & (1ull << VIRTIO_BLK_F_RO));
    g_assert_false(f & (1ull << VIRTIO_BLK_F_DISCARD) || f & (1ull << VIRTIO_BLK_F_WRITE_ZEROES));
    rig_free(&r);
}

static void test_read_write(void)
{
    struct rig r;
    rig_init(&r, false);
    /* A read of 3 sectors at sector 5, the data cut in two, the status in
     * the same descriptor as the data's tail. */
    header(&r, VIRTIO_BLK_T_IN, 5);
    memset(r.dirty, 0, RAM_SIZE / 4096);
    set_desc(&r, 0, HDR_GPA, 16, VRING_DESC_F_NEXT, 1);
    set_desc(&r, 1, DATA_GPA, 700, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2);
    set_desc(&r, 2, DATA_GPA + 0x3000, 3 * 512 - 700 + 1, VRING_DESC_F_WRITE, 0);
    publish(&r, 0);
    notify(&r);
    struct vring_used_elem e = wait_used(&r);
    g_assert_cmpuint(e.len, ==, 3 * 512 + 1);
    g_assert_cmpmem(gpa(&r, DATA_GPA), 700, r.backend->data + 5 * 512, 700);
    g_assert_cmpmem(gpa(&r, DATA_GPA + 0x3000), 3 * 512 - 700, r.backend->data + 5 * 512 + 700, 3 * 512 - 700);
    g_assert_cmpint(*(uint8_t *)gpa(&r, DATA_GPA + 0x3000 + 3 * 512 - 700), ==, VIRTIO_BLK_S_OK);
    /* Every page the device wrote was marked: data, status, used ring. */
    g_assert_true(r.dirty[DATA_GPA / 4096] && r.dirty[(DATA_GPA + 0x3000) / 4096] && r.dirty[USED_GPA / 4096]);
    g_assert_false(r.dirty[HDR_GPA / 4096]);

    /* A write of 2 sectors at the last sector but one. */
    memset(gpa(&r, DATA_GPA), 0x5a, 1024);
    simple(&r, VIRTIO_BLK_T_OUT, DISK_BYTES / 512 - 2, 1024, false);
    run(&r, VIRTIO_BLK_S_OK, 1);
    for (unsigned i = 0; i < 1024; i++)
        g_assert_cmpuint(r.backend->data[DISK_BYTES - 1024 + i], ==, 0x5a);
    g_assert_cmpint(counter(&r, "write_bytes"), ==, 1024);
    g_assert_cmpint(counter(&r, "read_bytes"), ==, 3 * 512);

    simple(&r, VIRTIO_BLK_T_FLUSH, 0, 0, false);
    run(&r, VIRTIO_BLK_S_OK, 1);
    g_assert_cmpint(counter(&r, "flush_ops"), ==, 1);

    simple(&r, VIRTIO_BLK_T_GET_ID, 0, 20, true);
    run(&r, VIRTIO_BLK_S_OK, 21);
    g_assert_cmpstr((const char *)gpa(&r, DATA_GPA), ==, "serial-of-d0");

    /* WRITE_ZEROES of 4 sectors at 8, then DISCARD of 8 at 16. */
    struct virtio_blk_discard_write_zeroes *seg = gpa(&r, DATA_GPA);
    *seg = (struct virtio_blk_discard_write_zeroes){ .sector = 8, .num_sectors = 4 };
    simple(&r, VIRTIO_BLK_T_WRITE_ZEROES, 0, sizeof *seg, false);
    run(&r, VIRTIO_BLK_S_OK, 1);
    for (unsigned i = 0; i < 4 * 512; i++)
        g_assert_cmpuint(r.backend->data[8 * 512 + i], ==, 0);
    g_assert_cmpuint(r.backend->data[12 * 512], !=, 0);
    *seg = (struct virtio_blk_discard_write_zeroes){ .sector = 16, .num_sectors = 8 };
    simple(&r, VIRTIO_BLK_T_DISCARD, 0, sizeof *seg, false);
    run(&r, VIRTIO_BLK_S_OK, 1);
    *seg = (struct virtio_blk_discard_write_zeroes){ .sector = 16, .num_sectors = 8,
                                                     .flags = VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP };
    run(&r, VIRTIO_BLK_S_UNSUPP, 1); /* the unmap flag on a discard */
    rig_free(&r);
}

/* Chains a driver must not send: IOERR where the status byte can be found,
 * the chain back with nothing written where it cannot; the backend never
 * sees a request outside the disk (mem_backend asserts that). */
static void test_malformed(void)
{
    struct rig r;
    rig_init(&r, false);
    const uint64_t last = DISK_BYTES / 512;
    struct {
        const char *what;
        uint32_t type;
        uint64_t sector;
        uint32_t len;
        bool device_writes;
        void (*tweak)(struct rig *r);
        int status;
        uint32_t used_len;
    } cases[] = {
        { "beyond the end", VIRTIO_BLK_T_IN, last - 1, 1024, true, NULL, VIRTIO_BLK_S_IOERR, 1 },
        { "at the end", VIRTIO_BLK_T_OUT, last, 512, false, NULL, VIRTIO_BLK_S_IOERR, 1 },
        { "sector wraps", VIRTIO_BLK_T_IN, ~0ull - 1, 1024, true, NULL, VIRTIO_BLK_S_IOERR, 1 },
        { "not whole sectors", VIRTIO_BLK_T_IN, 0, 513, true, NULL, VIRTIO_BLK_S_IOERR, 1 },
        { "IN with readable data", VIRTIO_BLK_T_IN, 0, 512, false, NULL, VIRTIO_BLK_S_IOERR, 1 },
        { "OUT with writable data", VIRTIO_BLK_T_OUT, 0, 512, true, NULL, VIRTIO_BLK_S_IOERR, 1 },
        { "FLUSH with data", VIRTIO_BLK_T_FLUSH, 0, 512, true, NULL, VIRTIO_BLK_S_IOERR, 1 },
        { "unknown type", 77, 0, 0, false, NULL, VIRTIO_BLK_S_UNSUPP, 1 },
        { "ranges: not whole segments", VIRTIO_BLK_T_DISCARD, 0, 20, false, NULL, VIRTIO_BLK_S_IOERR, 1 },
    };
    for (unsigned i = 0; i < G_N_ELEMENTS(cases); i++) {
        g_test_message("case: %s", cases[i].what);
        simple(&r, cases[i].type, cases[i].sector, cases[i].len, cases[i].device_writes);
        run(&r, cases[i].status, cases[i].used_len);
    }
    /* A discard segment beyond the end. */
    *(struct virtio_blk_discard_write_zeroes *)gpa(&r, DATA_GPA) =
        (struct virtio_blk_discard_write_zeroes){ .sector = last - 1, .num_sectors = 2 };
    simple(&r, VIRTIO_BLK_T_WRITE_ZEROES, 0, 16, false);
    run(&r, VIRTIO_BLK_S_IOERR, 1);

    /* Buffers outside RAM, in the header and in the data: IOERR through the tail. */
    simple(&r, VIRTIO_BLK_T_IN, 0, 512, true);
    desc(&r, 1)->addr = OUTSIDE_RAM;
    run(&r, VIRTIO_BLK_S_IOERR, 1);
    simple(&r, VIRTIO_BLK_T_IN, 0, 512, true);
    desc(&r, 1)->addr = RAM_SIZE - 256; /* straddles the end of RAM */
    run(&r, VIRTIO_BLK_S_IOERR, 1);
    simple(&r, VIRTIO_BLK_T_OUT, 0, 512, false);
    desc(&r, 0)->addr = OUTSIDE_RAM;
    run(&r, VIRTIO_BLK_S_IOERR, 1);
    /* The status byte itself outside RAM: nothing written anywhere. */
    simple(&r, VIRTIO_BLK_T_IN, 0, 512, true);
    desc(&r, 2)->addr = OUTSIDE_RAM;
    run(&r, -1, 0);
    /* The status readable, after a writable data buffer: order violated. */
    simple(&r, VIRTIO_BLK_T_IN, 0, 512, true);
    desc(&r, 2)->flags = 0;
    run(&r, 0xee, 0);
    /* A loop, and a next index out of range: no tail to answer through. */
    simple(&r, VIRTIO_BLK_T_IN, 0, 512, true);
    desc(&r, 2)->flags = VRING_DESC_F_WRITE | VRING_DESC_F_NEXT;
    desc(&r, 2)->next = 0;
    run(&r, 0xee, 0);
    simple(&r, VIRTIO_BLK_T_IN, 0, 512, true);
    desc(&r, 1)->next = QSIZE + 3;
    run(&r, 0xee, 0);
    /* A read cut into 14 descriptors is fine (the limit is VIRTQ_MAX_CHAIN). */
    header(&r, VIRTIO_BLK_T_IN, 0);
    set_desc(&r, 0, HDR_GPA, 16, VRING_DESC_F_NEXT, 1);
    for (unsigned i = 1; i < QSIZE - 1; i++)
        set_desc(&r, i, DATA_GPA + 512 * i, 512, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, i + 1);
    set_desc(&r, QSIZE - 1, STATUS_GPA, 1, VRING_DESC_F_WRITE, 0);
    run(&r, VIRTIO_BLK_S_OK, (QSIZE - 2) * 512 + 1);
    /* A header shorter than 16 bytes. */
    simple(&r, VIRTIO_BLK_T_IN, 0, 512, true);
    desc(&r, 0)->len = 12;
    run(&r, VIRTIO_BLK_S_IOERR, 1);
    g_assert_cmpint(counter(&r, "guest_errors"), ==, 17);
    g_assert_cmpint(counter(&r, "unsupported"), ==, 1);

    /* An available ring naming a descriptor past the table: dropped, never used. */
    uint16_t *avail = gpa(&r, AVAIL_GPA);
    avail[2 + r.avail_idx % QSIZE] = QSIZE + 1;
    __atomic_store_n(&avail[1], ++r.avail_idx, __ATOMIC_RELEASE);
    /* ... and the device still serves the next good request. */
    simple(&r, VIRTIO_BLK_T_IN, 2, 512, true);
    run(&r, VIRTIO_BLK_S_OK, 513);
    g_assert_cmpmem(gpa(&r, DATA_GPA), 512, r.backend->data + 1024, 512);
    rig_free(&r);
}

static void test_readonly_and_failures(void)
{
    struct rig r;
    rig_init(&r, true);
    unsigned calls = r.backend->calls;
    simple(&r, VIRTIO_BLK_T_OUT, 0, 512, false);
    run(&r, VIRTIO_BLK_S_IOERR, 1);
    *(struct virtio_blk_discard_write_zeroes *)gpa(&r, DATA_GPA) =
        (struct virtio_blk_discard_write_zeroes){ .sector = 0, .num_sectors = 1 };
    simple(&r, VIRTIO_BLK_T_WRITE_ZEROES, 0, 16, false);
    run(&r, VIRTIO_BLK_S_IOERR, 1);
    g_assert_cmpuint(r.backend->calls, ==, calls); /* nothing reached the store */
    simple(&r, VIRTIO_BLK_T_IN, 0, 512, true);
    run(&r, VIRTIO_BLK_S_OK, 513);
    rig_free(&r);

    rig_init(&r, false);
    r.backend->fail_writes = -ENOSPC;
    simple(&r, VIRTIO_BLK_T_OUT, 0, 4096, false);
    g_test_expect_message("vsnap-shim", G_LOG_LEVEL_WARNING, "disk d0: write at sector 0 failed: No space left*");
    run(&r, VIRTIO_BLK_S_IOERR, 1);
    g_test_assert_expected_messages();
    g_assert_cmpint(counter(&r, "io_errors"), ==, 1);
    g_assert_cmpint(counter(&r, "write_ops"), ==, 0);
    r.backend->fail_writes = 0;
    run(&r, VIRTIO_BLK_S_OK, 1);
    rig_free(&r);
}

/* Pause completes what was published (even unnotified) and then holds; a
 * paused disk takes nothing until resumed; pauses nest. */
static void test_pause(void)
{
    struct rig r;
    rig_init(&r, false);
    g_autoptr(GError) error = NULL;
    simple(&r, VIRTIO_BLK_T_IN, 0, 512, true);
    publish(&r, 0); /* published, no notification */
    g_assert_true(virtio_blk_pause(r.dev, &error));
    uint16_t *used_idx = (uint16_t *)gpa(&r, USED_GPA) + 1;
    g_assert_cmpuint(__atomic_load_n(used_idx, __ATOMIC_ACQUIRE), ==, 1);
    wait_used(&r);
    g_assert_true(virtio_blk_pause(r.dev, &error)); /* nested */
    publish(&r, 0);
    notify(&r);
    g_usleep(200 * 1000);
    g_assert_cmpuint(__atomic_load_n(used_idx, __ATOMIC_ACQUIRE), ==, 1);
    virtio_blk_resume(r.dev);
    g_usleep(100 * 1000);
    g_assert_cmpuint(__atomic_load_n(used_idx, __ATOMIC_ACQUIRE), ==, 1);
    virtio_blk_resume(r.dev);
    wait_used(&r);
    rig_free(&r);
}

/* The transport saved from one device drives the same rings in another. */
static void test_state(void)
{
    struct rig r;
    rig_init(&r, false);
    simple(&r, VIRTIO_BLK_T_IN, 1, 512, true);
    run(&r, VIRTIO_BLK_S_OK, 513);
    g_autoptr(GError) error = NULL;
    g_assert_true(virtio_blk_pause(r.dev, &error));
    g_autoptr(JsonBuilder) b = json_builder_new();
    virtio_blk_save_state(r.dev, b);
    g_autoptr(JsonNode) state = json_builder_get_root(b);
    virtio_blk_resume(r.dev);
    virtio_blk_free(r.dev);
    bus_release(&r.mmio);
    bus_init(&r.mmio);

    /* A store of another size is refused by name. */
    struct mem_backend *small = mem_backend_new(false);
    small->base.capacity = DISK_BYTES / 2;
    struct virtio_blk *dev = new_device(&r, small, &error);
    g_assert_no_error(error);
    g_assert_false(virtio_blk_restore_state(dev, json_node_get_object(state), &error));
    g_assert_nonnull(strstr(error->message, "d0"));
    g_clear_error(&error);
    virtio_blk_free(dev);
    bus_release(&r.mmio);
    bus_init(&r.mmio);

    r.backend = mem_backend_new(false);
    r.dev = new_device(&r, r.backend, &error);
    g_assert_no_error(error);
    g_assert_true(virtio_blk_restore_state(r.dev, json_node_get_object(state), &error));
    g_assert_no_error(error);
    simple(&r, VIRTIO_BLK_T_IN, 3, 512, true);
    run(&r, VIRTIO_BLK_S_OK, 513); /* no driver set-up: the restored queue is live */
    g_assert_cmpmem(gpa(&r, DATA_GPA), 512, r.backend->data + 3 * 512, 512);
    rig_free(&r);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/virtio-blk/config-space", test_config_space);
    g_test_add_func("/virtio-blk/read-write", test_read_write);
    g_test_add_func("/virtio-blk/malformed", test_malformed);
    g_test_add_func("/virtio-blk/readonly-and-failures", test_readonly_and_failures);
    g_test_add_func("/virtio-blk/pause", test_pause);
    g_test_add_func("/virtio-blk/state", test_state);
    return g_test_run();
}
