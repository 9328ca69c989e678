/* struct domain_def to the Cloud Hypervisor VmConfig that vm.create takes.
 * Only fields the shim knows are written (it refuses unknown ones). Memory is
 * <memory>: the shim has no balloon, and the parser makes <currentMemory>
 * equal to it. */
#include "conf/domain-conf.h"

#include <json-glib/json-glib.h>

#include "json/vjson.h"

/* systemd (256 and later) takes vmm.notify_socket from the kernel command line. */
static char *payload_cmdline(const struct domain_def *def)
{
    if (!def->vsock.present || def->notify.no_credential)
        return g_strdup(def->cmdline);
    g_autofree char *address = domain_notify_socket_address(def);
    return g_strdup_printf("%s%ssystemd.set_credential=vmm.notify_socket:%s", def->cmdline ? def->cmdline : "",
                           def->cmdline && *def->cmdline ? " " : "", address);
}

static void add_payload(JsonBuilder *b, const struct domain_def *def)
{
    vjson_object_begin(b, "payload");
    vjson_str(b, "kernel", def->kernel);
    vjson_str_opt(b, "initramfs", def->initrd);
    g_autofree char *cmdline = payload_cmdline(def);
    vjson_str_opt(b, "cmdline", cmdline);
    vjson_object_end(b);
}

static void add_cpus_memory(JsonBuilder *b, const struct domain_def *def)
{
    vjson_object_begin(b, "cpus");
    vjson_int(b, "boot_vcpus", def->vcpus);
    vjson_int(b, "max_vcpus", def->vcpus);
    vjson_object_end(b);

    vjson_object_begin(b, "memory");
    vjson_int(b, "size", (gint64)(def->memory_kib * 1024));
    if (def->memory_backing.hugepages) {
        vjson_bool(b, "hugepages", TRUE);
        vjson_int(b, "hugepage_size", 2 << 20);
    }
    vjson_object_end(b);
}

/* Serial: a pty serial is the shim's "Pty": the shim holds the master and
 * reports the slave's path in vm.info (vsnap.serial_pty), which the live
 * XML shows and consoles open, as libvirt's QEMU driver does with QEMU's. */
void domain_def_add_vm_serial(JsonBuilder *b, const struct domain_def *def)
{
    vjson_object_begin(b, "serial");
    switch (def->serial.type) {
    case DOMAIN_CHR_NONE:
        vjson_str(b, "mode", "Null");
        break;
    case DOMAIN_CHR_FILE:
        vjson_str(b, "mode", "File");
        vjson_str(b, "file", def->serial.path);
        break;
    case DOMAIN_CHR_PTY:
        vjson_str(b, "mode", "Pty");
        break;
    }
    vjson_object_end(b);

    /* <console> is the serial port (see the parser); the virtio console is off. */
    vjson_object_begin(b, "console");
    vjson_str(b, "mode", "Off");
    vjson_object_end(b);
}

/* Cloud Hypervisor's DiskConfig (openapi: path, readonly, id, serial,
 * image_type, ...). libvirt's ch driver sends only path and readonly, so
 * Cloud Hypervisor names its disks _disk0, _disk1, ...; vsnap sends the
 * target name as the id instead, because that is how libvirt clients name
 * a disk (domblkstat vda) and what the daemon finds the shim's per-disk
 * counters under. The image type is explicit: the shim refuses any other. */
/* A disk that has snapshots continues on its chain and overlay (after a
 * shutdown or a host restart); domain_disk.chain is top first. */
static void add_vm_disk_chain(JsonBuilder *b, const struct domain_disk *disk)
{
    guint n = disk->chain ? g_strv_length(disk->chain) : 0;
    if (n == 0)
        return;
    vjson_array_begin(b, "vsnap_chain");
    for (guint i = n - 1; i >= 1; i--)
        vjson_str(b, NULL, disk->chain[i]);
    vjson_array_end(b);
    vjson_str(b, "vsnap_overlay", disk->chain[0]);
}

/* libvirt's <driver> modes as the shim's DiskConfig carries them:
 *  cache none, directsync        O_DIRECT on the image (direct)
 *  cache writethrough, directsync a flush after every write (vsnap_write_through)
 *  cache unsafe                  the guest's FLUSH ignored (vsnap_ignore_flush)
 *  cache writeback, default      the page cache, FLUSH honoured (as without cache=)
 *  discard unmap                 holes punched in the image; on layers, the blocks recorded as
 *                                zeroes in the active overlay (sparse, vsnap_discard_unmap)
 *  discard ignore                no DISCARD offered, zeroes written out (sparse false)
 *  no discard                    Cloud Hypervisor's default sparse: holes in the image, DISCARD on
 *                                layers a no-op (vsnap before these modes; libvirt's default would be ignore)
 *  detect_zeroes on, unmap       an all-zero write becomes a WRITE_ZEROES; unmap frees space only with
 *                                discard='unmap', as libvirt's QEMU driver has it
 *  io native, threads            one transfer at a time (preadv/pwritev on the disk's thread)
 *  io io_uring                   the guest's queued reads and writes in flight together on an io_uring
 *                                (vsnap_io; the shim falls back to one at a time without one) */
static void add_vm_disk_modes(JsonBuilder *b, const struct domain_disk *disk)
{
    enum domain_disk_cache c = disk->cache;
    if (c == DOMAIN_DISK_CACHE_NONE || c == DOMAIN_DISK_CACHE_DIRECTSYNC)
        vjson_bool(b, "direct", true);
    if (c == DOMAIN_DISK_CACHE_WRITETHROUGH || c == DOMAIN_DISK_CACHE_DIRECTSYNC)
        vjson_bool(b, "vsnap_write_through", true);
    if (c == DOMAIN_DISK_CACHE_UNSAFE)
        vjson_bool(b, "vsnap_ignore_flush", true);
    if (disk->discard == DOMAIN_DISK_DISCARD_IGNORE)
        vjson_bool(b, "sparse", false);
    if (disk->discard == DOMAIN_DISK_DISCARD_UNMAP) {
        vjson_bool(b, "sparse", true);
        vjson_bool(b, "vsnap_discard_unmap", true);
    }
    enum domain_disk_detect_zeroes dz = disk->detect_zeroes;
    if (dz == DOMAIN_DISK_DETECT_ZEROES_UNMAP && disk->discard != DOMAIN_DISK_DISCARD_UNMAP)
        dz = DOMAIN_DISK_DETECT_ZEROES_ON;
    if (dz != DOMAIN_DISK_DETECT_ZEROES_ABSENT)
        vjson_str(b, "vsnap_detect_zeroes", domain_disk_detect_zeroes_names[dz]);
    if (disk->io == DOMAIN_DISK_IO_URING)
        vjson_str(b, "vsnap_io", "io_uring");
}

static void add_vm_disk(JsonBuilder *b, const struct domain_disk *disk)
{
    vjson_object_begin(b, NULL);
    vjson_str(b, "path", disk->path);
    vjson_bool(b, "readonly", disk->readonly);
    vjson_str(b, "id", disk->target);
    vjson_str_opt(b, "serial", disk->serial);
    vjson_str(b, "image_type", "Raw");
    add_vm_disk_modes(b, disk);
    add_vm_disk_chain(b, disk);
    vjson_object_end(b);
}

void domain_def_add_vm_disks(JsonBuilder *b, const struct domain_def *def)
{
    if (def->n_disks == 0)
        return;
    vjson_array_begin(b, "disks");
    for (size_t i = 0; i < def->n_disks; i++)
        add_vm_disk(b, &def->disks[i]);
    vjson_array_end(b);
}

/* Cloud Hypervisor's NetConfig (openapi: tap, mac, mtu, id, fds,
 * num_queues, queue_size, ...), one RX/TX queue pair. The daemon opens the
 * tap (the shim may not) and sends its descriptor with the request: then
 * "fds" stands for it and "tap" is not given (the shim takes one or the
 * other). */
static void add_vm_net(JsonBuilder *b, const struct domain_net *net, size_t index, bool with_fds)
{
    char mac[DOMAIN_NET_MAC_LEN];
    domain_mac_format(net->mac, mac);
    g_autofree char *id = domain_net_id(index);
    vjson_object_begin(b, NULL);
    vjson_str(b, "id", id);
    if (!with_fds && net->ifname) {
        vjson_str(b, "tap", net->ifname);
    }
    vjson_str(b, "mac", mac);
    if (net->mtu) {
        vjson_int(b, "mtu", net->mtu);
    }
    vjson_int(b, "num_queues", 2);
    if (with_fds) {
        vjson_array_begin(b, "fds");
        vjson_int(b, NULL, -1);
        vjson_array_end(b);
    }
    vjson_object_end(b);
}

static void add_disk_overrides(JsonBuilder *b, const struct domain_def *def)
{
    if (def->n_disks == 0)
        return;
    vjson_array_begin(b, "disks");
    for (size_t i = 0; i < def->n_disks; i++) {
        vjson_object_begin(b, NULL);
        vjson_str(b, "id", def->disks[i].target);
        vjson_str(b, "path", def->disks[i].path);
        vjson_bool(b, "readonly", def->disks[i].readonly);
        vjson_object_end(b);
    }
    vjson_array_end(b);
}

void domain_def_add_vm_file_overrides(JsonBuilder *b, const struct domain_def *def)
{
    if (def->kernel) {
        vjson_object_begin(b, "payload");
        vjson_str(b, "kernel", def->kernel);
        vjson_str_opt(b, "initramfs", def->initrd);
        vjson_object_end(b);
    }
    if (def->rng.present && def->rng.backend) {
        vjson_object_begin(b, "rng");
        vjson_str(b, "src", def->rng.backend);
        vjson_object_end(b);
    }
    add_disk_overrides(b, def);
}

/* vm.restore's config_overrides.net: what the host gives a restored
 * interface - its tap (the descriptor) and the MAC of the definition being
 * restored; the rest is the guest's, from the snapshot. */
void domain_def_add_vm_net_overrides(JsonBuilder *b, const struct domain_def *def)
{
    if (def->n_nets == 0)
        return;
    vjson_array_begin(b, "net");
    for (size_t i = 0; i < def->n_nets; i++) {
        char mac[DOMAIN_NET_MAC_LEN];
        domain_mac_format(def->nets[i].mac, mac);
        g_autofree char *id = domain_net_id(i);
        vjson_object_begin(b, NULL);
        vjson_str(b, "id", id);
        vjson_str(b, "mac", mac);
        vjson_array_begin(b, "fds");
        vjson_int(b, NULL, -1);
        vjson_array_end(b);
        vjson_object_end(b);
    }
    vjson_array_end(b);
}

void domain_def_add_vm_nets(JsonBuilder *b, const struct domain_def *def, bool with_fds)
{
    if (def->n_nets == 0)
        return;
    vjson_array_begin(b, "net");
    for (size_t i = 0; i < def->n_nets; i++)
        add_vm_net(b, &def->nets[i], i, with_fds);
    vjson_array_end(b);
}

static bool add_vsock(JsonBuilder *b, const struct domain_def *def, const char *vsock_socket_path,
                      GError **error)
{
    if (!def->vsock.present)
        return true;
    if (def->vsock.cid < 3) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR,
                    "domain '%s': no vsock CID has been assigned", def->name);
        return false;
    }
    if (!vsock_socket_path) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR,
                    "domain '%s': no vsock socket path given", def->name);
        return false;
    }
    vjson_object_begin(b, "vsock");
    vjson_int(b, "cid", def->vsock.cid);
    vjson_str(b, "socket", vsock_socket_path);
    vjson_int(b, "readiness_port", def->vsnap.readiness_port);
    vjson_int(b, "notify_port", def->notify.port);
    vjson_object_end(b);
    return true;
}

static void add_rng(JsonBuilder *b, const struct domain_def *def)
{
    if (!def->rng.present)
        return;
    vjson_object_begin(b, "rng");
    vjson_str(b, "src", def->rng.backend);
    if (def->rng.rate_bytes) {
        /* libvirt's "bytes per period" is a bucket of that size refilled every period. */
        vjson_object_begin(b, "rate_limiter");
        vjson_object_begin(b, "bandwidth");
        vjson_int(b, "size", (gint64)def->rng.rate_bytes);
        vjson_int(b, "refill_time", (gint64)def->rng.rate_period_ms);
        vjson_object_end(b);
        vjson_object_end(b);
    }
    vjson_object_end(b);
}

/* SMBIOS: the domain's UUID always; with <smbios mode='sysinfo'/> the
 * <sysinfo> system entries and OEM strings; and systemd's vmm.notify_socket
 * credential as an OEM string unless turned off. */
static void add_platform(JsonBuilder *b, const struct domain_def *def)
{
    char uuid[DOMAIN_UUID_STRING_LEN];
    domain_uuid_format(def->uuid, uuid);
    const struct domain_sysinfo *s = def->smbios_mode == DOMAIN_SMBIOS_SYSINFO ? &def->sysinfo : NULL;
    vjson_object_begin(b, "platform");
    vjson_str_opt(b, "uuid", uuid);
    if (s) {
        vjson_str_opt(b, "serial_number", s->serial);
        vjson_object_begin(b, "system");
        vjson_str_opt(b, "manufacturer", s->manufacturer);
        vjson_str_opt(b, "product_name", s->product);
        vjson_str_opt(b, "version", s->version);
        vjson_str_opt(b, "sku_number", s->sku);
        vjson_str_opt(b, "family", s->family);
        vjson_object_end(b);
    }
    vjson_array_begin(b, "oem_strings");
    for (char **e = s ? s->oem_strings : NULL; e && *e; e++)
        vjson_str(b, NULL, *e);
    if (def->vsock.present && !def->notify.no_credential) {
        g_autofree char *address = domain_notify_socket_address(def);
        g_autofree char *credential = g_strdup_printf("io.systemd.credential:vmm.notify_socket=%s", address);
        vjson_str(b, NULL, credential);
    }
    vjson_array_end(b);
    vjson_object_end(b);
}

char *domain_def_to_vm_config_json(const struct domain_def *def, const char *vsock_socket_path,
                                   const char *disk_work_dir, GError **error)
{
    if (!def->kernel) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "domain '%s' has no <os><kernel> to boot", def->name);
        return NULL;
    }
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    add_payload(b, def);
    add_cpus_memory(b, def);
    domain_def_add_vm_serial(b, def);
    domain_def_add_vm_disks(b, def);
    if (disk_work_dir && def->n_disks > 0) {
        vjson_str(b, "vsnap_work_dir", disk_work_dir);
    }
    domain_def_add_vm_nets(b, def, true);
    if (!add_vsock(b, def, vsock_socket_path, error))
        return NULL;
    add_rng(b, def);
    add_platform(b, def);
    vjson_object_end(b);

    return vjson_finish(b, false);
}
