/* The virtio-vsock device as a hostile guest drives it: a real device
 * (virtio_vsock_new: transport, queues, connections, the hybrid UNIX side,
 * a port served inside the shim) over a fake guest RAM, a heap buffer, so
 * AddressSanitizer sees any access outside it. The harness plays the guest
 * driver; each input is a program for it, one command byte then its
 * operands (zeros once the input runs out):
 *
 *   0 tx      send a packet: a virtio_vsock_hdr (44 bytes; unless the
 *             command's bit 7 is set, from guest CID 3 to host CID 2), a
 *             payload length (2 bytes) and the payload, in one descriptor
 *             or (bit 6) two
 *   1 rx      post receive buffers: count (1 byte), size (2 bytes)
 *   2 run     let the device handle its queues, as after a notification
 *   3 reap    take what the device put in the used rings, checking it
 *   4 mmio-w  write a transport register: offset (1 byte, times 4), value (4)
 *   5 mmio-r  read one: offset (1 byte)
 *   6 poke    write guest RAM: offset (2 bytes, times 4), length (1), bytes
 *   7 host    a host program connects to the vsock socket and sends
 *             "CONNECT <port>\n" (port: 2 bytes)
 *   8 event   post a buffer on the event queue
 *
 * Guest connections to port 1024 reach an echo service inside the shim, to
 * port 5000 a UNIX listener of the harness's, to any other port nobody.
 * Every write the device makes into RAM must be marked dirty inside RAM;
 * unless the program poked the rings or wrote registers itself, every used
 * element must name a descriptor and stay within the largest buffer posted
 * at that descriptor. The device is reset between inputs. */
#include <errno.h>
#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_vsock.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "platform/bus.h"
#include "devices/virtio-vsock-priv.h"
#include "fuzz-common.h"
#include "platform/memory.h"

#define RAM_SIZE (256u * 1024)
#define QSIZE 16u
#define SLOTS 8u
#define SLOT_BYTES 0x2000u
#define MAX_COMMANDS 64
#define ECHO_PORT 1024u
#define LISTEN_PORT 5000u
#define MAX_HOST_CONNECTIONS 8u

/* Where each queue's rings and buffers live in guest RAM. */
static const uint64_t ring_base[VSOCK_NQUEUES] = {0x0000, 0x0400, 0x0800};
static const uint64_t buf_base[VSOCK_NQUEUES] = {0x1000, 0x12000, 0x23000};
#define DESC(q) (ring_base[q])
#define AVAIL(q) (ring_base[q] + 0x100)
#define USED(q) (ring_base[q] + 0x200)

static struct guest_memory ram;
static struct bus bus;
static struct virtio_host host;
static struct virtio_vsock *dev;
static int listener = -1;
static char *vsock_path;

/* The guest driver's view of each queue. */
struct driver_queue {
    uint16_t avail_idx, used_seen;
    uint32_t posted_len[QSIZE];   /* writable bytes of the chain at each head */
};
static struct driver_queue drv[VSOCK_NQUEUES];
static bool tampered;   /* rings or registers changed behind the driver's back */
static GArray *host_fds;

/* ---- the host side of the VM ---- */

static void on_dirty(void *opaque, uint64_t gpa, uint64_t len)
{
    if (gpa > RAM_SIZE || len > RAM_SIZE - gpa)
        g_error("the device marked 0x%" G_GINT64_MODIFIER "x+%" G_GUINT64_FORMAT
                " dirty: outside guest RAM", gpa, len);
}

static void on_irq(void *opaque, unsigned gsi, bool level)
{
}

static bool refuse_ioeventfd(void *opaque, int fd, uint64_t addr, unsigned len, uint64_t datamatch,
                             bool assign)
{
    errno = ENOSYS;
    return false;
}

static bool refuse_irqfd(void *opaque, int fd, unsigned gsi, bool assign)
{
    errno = ENOSYS;
    return false;
}

/* The echo service: what the guest sends comes back. */
static void *echo_open(void *opaque)
{
    return g_malloc0(1);
}

static bool echo_receive(void *opaque, void *session, const uint8_t *data, size_t len,
                         GByteArray *reply)
{
    g_byte_array_append(reply, data, (guint)len);
    return len == 0 || data[0] != 0xff;   /* a leading 0xff byte resets */
}

static void echo_close(void *opaque, void *session)
{
    g_free(session);
}

static const struct vsock_port_handler echo = {
    .port = ECHO_PORT, .open = echo_open, .receive = echo_receive, .close = echo_close,
};

static int listen_unix(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    g_strlcpy(addr.sun_path, path, sizeof addr.sun_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(fd, 64) < 0)
        g_error("fuzz: cannot listen on %s: %s", path, g_strerror(errno));
    return fd;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init_logging();
    ram.host = g_malloc0(RAM_SIZE);
    ram.size = RAM_SIZE;
    ram.fd = -1;
    ram.nregions = 1;
    ram.regions[0] = (struct guest_region){.gpa = 0, .size = RAM_SIZE, .ram_offset = 0};
    bus_init(&bus);
    host = (struct virtio_host){.mmio = &bus, .mem = &ram, .mark_dirty = on_dirty,
                                .set_irq_level = on_irq, .bind_ioeventfd = refuse_ioeventfd,
                                .bind_irqfd = refuse_irqfd};
    vsock_path = fuzz_path("vsock.sock");
    struct vsock_config cfg = {.present = true, .cid = 3, .socket = vsock_path,
                               .readiness_port = ECHO_PORT};
    g_autoptr(GError) error = NULL;
    dev = virtio_vsock_new(&host, 0, &cfg, &error);
    if (!dev || !virtio_vsock_serve_port(dev, &echo, &error))
        g_error("fuzz: no vsock device: %s", error->message);
    g_autofree char *dial = g_strdup_printf("%s_%u", vsock_path, LISTEN_PORT);
    listener = listen_unix(dial);
    host_fds = g_array_new(FALSE, FALSE, sizeof(int));
    return 0;
}

/* ---- the guest driver ---- */

static void mmio_write(uint32_t offset, uint32_t value)
{
    bus_write(&bus, MMIO_VIRTIO_BASE + offset, (const uint8_t *)&value, 4);
}

static uint32_t mmio_read(uint32_t offset)
{
    uint32_t value = 0;
    bus_read(&bus, MMIO_VIRTIO_BASE + offset, (uint8_t *)&value, 4);
    return value;
}

static void *gpa(uint64_t addr)
{
    return ram.host + addr;
}

static void driver_init(void)
{
    memset(ram.host, 0, RAM_SIZE);
    memset(drv, 0, sizeof drv);
    tampered = false;
    mmio_write(VIRTIO_MMIO_STATUS, 0);
    mmio_write(VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
    mmio_write(VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
    mmio_write(VIRTIO_MMIO_DRIVER_FEATURES, 1u << (VIRTIO_F_VERSION_1 - 32));
    uint32_t status = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
                      VIRTIO_CONFIG_S_FEATURES_OK;
    mmio_write(VIRTIO_MMIO_STATUS, status);
    for (unsigned q = 0; q < VSOCK_NQUEUES; q++) {
        mmio_write(VIRTIO_MMIO_QUEUE_SEL, q);
        mmio_write(VIRTIO_MMIO_QUEUE_NUM, QSIZE);
        mmio_write(VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)DESC(q));
        mmio_write(VIRTIO_MMIO_QUEUE_AVAIL_LOW, (uint32_t)AVAIL(q));
        mmio_write(VIRTIO_MMIO_QUEUE_USED_LOW, (uint32_t)USED(q));
        mmio_write(VIRTIO_MMIO_QUEUE_READY, 1);
    }
    mmio_write(VIRTIO_MMIO_STATUS, status | VIRTIO_CONFIG_S_DRIVER_OK);
}

struct input {
    const uint8_t *p;
    size_t left;
};

static void take(struct input *in, void *dst, size_t n)
{
    size_t k = MIN(n, in->left);
    memcpy(dst, in->p, k);
    memset((uint8_t *)dst + k, 0, n - k);
    in->p += k;
    in->left -= k;
}

static uint8_t take8(struct input *in)
{
    uint8_t v;
    take(in, &v, 1);
    return v;
}

static uint16_t take16(struct input *in)
{
    uint16_t v;
    take(in, &v, 2);
    return v;
}

/* Publish a chain of one or two descriptors at slot's head. */
static void post(unsigned q, unsigned slot, uint64_t addr, uint32_t len, bool split,
                 uint16_t flags)
{
    struct vring_desc *table = gpa(DESC(q));
    uint16_t head = (uint16_t)(2 * slot);
    uint32_t first = split ? MIN(len, VSOCK_HDR_SIZE) : len;
    table[head] = (struct vring_desc){.addr = addr, .len = first, .flags = flags};
    if (split) {
        table[head].flags |= VRING_DESC_F_NEXT;
        table[head].next = head + 1;
        table[head + 1] = (struct vring_desc){.addr = addr + first, .len = len - first,
                                              .flags = flags};
    }
    if (flags & VRING_DESC_F_WRITE)
        drv[q].posted_len[head] = MAX(drv[q].posted_len[head], len);
    struct vring_avail *avail = gpa(AVAIL(q));
    avail->ring[drv[q].avail_idx % QSIZE] = head;
    __atomic_store_n(&avail->idx, ++drv[q].avail_idx, __ATOMIC_RELEASE);
}

static void cmd_tx(struct input *in, uint8_t cmd)
{
    struct virtio_vsock_hdr hdr;
    take(in, &hdr, sizeof hdr);
    if (!(cmd & 0x80)) {
        hdr.src_cid = 3;
        hdr.dst_cid = VSOCK_HOST_CID;
    }
    uint32_t len = take16(in) % (SLOT_BYTES - VSOCK_HDR_SIZE);
    unsigned slot = drv[VSOCK_QUEUE_TX].avail_idx % SLOTS;
    uint64_t addr = buf_base[VSOCK_QUEUE_TX] + slot * SLOT_BYTES;
    memcpy(gpa(addr), &hdr, sizeof hdr);
    take(in, gpa(addr + VSOCK_HDR_SIZE), len);
    post(VSOCK_QUEUE_TX, slot, addr, VSOCK_HDR_SIZE + len, cmd & 0x40, 0);
}

static void cmd_rx(struct input *in)
{
    unsigned count = take8(in) % SLOTS + 1;
    uint32_t size = take16(in) % SLOT_BYTES + 1;
    for (unsigned i = 0; i < count; i++) {
        unsigned slot = drv[VSOCK_QUEUE_RX].avail_idx % SLOTS;
        post(VSOCK_QUEUE_RX, slot, buf_base[VSOCK_QUEUE_RX] + slot * SLOT_BYTES, size, size > 64,
             VRING_DESC_F_WRITE);
    }
}

static void cmd_event(void)
{
    unsigned slot = drv[VSOCK_QUEUE_EVENT].avail_idx % SLOTS;
    post(VSOCK_QUEUE_EVENT, slot, buf_base[VSOCK_QUEUE_EVENT] + slot * 64, 64, false,
         VRING_DESC_F_WRITE);
}

/* What the device thread does for a notification of every queue. The
 * connections this destroys are freed by the device thread after its next
 * batch of events (vsock_free_dead is its alone: a batch it is about to
 * handle may still point at them). */
static void cmd_run(void)
{
    g_mutex_lock(&dev->transport.lock);
    if (virtio_mmio_is_active(&dev->transport)) {
        vsock_process_tx(dev);
        vsock_process_event(dev);
        vsock_process_rx(dev);
    }
    g_mutex_unlock(&dev->transport.lock);
}

static void cmd_reap(void)
{
    for (unsigned q = 0; q < VSOCK_NQUEUES; q++) {
        struct vring_used *used = gpa(USED(q));
        uint16_t idx = __atomic_load_n(&used->idx, __ATOMIC_ACQUIRE);
        for (; drv[q].used_seen != idx; drv[q].used_seen++) {
            struct vring_used_elem e = used->ring[drv[q].used_seen % QSIZE];
            /* A program that poked the used ring reads back its own bytes. */
            if (tampered)
                continue;
            if (e.id >= QSIZE)
                g_error("queue %u: used element names descriptor %u of %u", q, e.id, QSIZE);
            if (e.len > drv[q].posted_len[e.id])
                g_error("queue %u: the device wrote %u bytes into a %u-byte buffer", q, e.len,
                        drv[q].posted_len[e.id]);
        }
    }
}

static void cmd_poke(struct input *in)
{
    uint32_t offset = (uint32_t)take16(in) * 4;
    uint8_t len = take8(in);
    tampered |= offset < buf_base[0];
    take(in, gpa(offset), MIN((uint32_t)len, RAM_SIZE - offset));
}

/* Non-blocking: with its backlog full (the device thread accepts when it
 * gets to it), the socket refuses more, as it would a host program. */
static void cmd_host(struct input *in)
{
    uint16_t port = take16(in);
    if (host_fds->len >= MAX_HOST_CONNECTIONS)
        return;
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    g_strlcpy(addr.sun_path, vsock_path, sizeof addr.sun_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        g_debug("connect: %s", g_strerror(errno));
        if (fd >= 0)
            close(fd);
        return;
    }
    g_autofree char *line = g_strdup_printf("CONNECT %u\n", port);
    if (send(fd, line, strlen(line), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
        g_debug("CONNECT: %s", g_strerror(errno));
    g_array_append_val(host_fds, fd);
}

static void run_program(const uint8_t *data, size_t size)
{
    struct input in = {data, size};
    for (int n = 0; n < MAX_COMMANDS && in.left; n++) {
        uint8_t cmd = take8(&in);
        switch ((cmd & 0x3f) % 9) {
        case 0: cmd_tx(&in, cmd); break;
        case 1: cmd_rx(&in); break;
        case 2: cmd_run(); break;
        case 3: cmd_reap(); break;
        case 4: {
            uint32_t offset = (uint32_t)take8(&in) * 4, value;
            take(&in, &value, 4);
            mmio_write(offset, value);
            tampered = true;
            break;
        }
        case 5: mmio_read((uint32_t)take8(&in) * 4); break;
        case 6: cmd_poke(&in); break;
        case 7: cmd_host(&in); break;
        case 8: cmd_event(); break;
        }
    }
    cmd_run();
    cmd_reap();
}

/* Connections the device made to the harness's listener, and the host
 * programs' connections: closed, so nothing carries over to the next input. */
static void close_host_side(void)
{
    int fd;
    while ((fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC)) >= 0)
        close(fd);
    for (guint i = 0; i < host_fds->len; i++)
        close(g_array_index(host_fds, int, i));
    g_array_set_size(host_fds, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    driver_init();
    run_program(data, size);
    mmio_write(VIRTIO_MMIO_STATUS, 0);
    close_host_side();
    return 0;
}
