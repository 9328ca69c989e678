/* struct domain_def to the Cloud Hypervisor VmConfig that vm.create takes.
 * Only fields the shim knows are written (it refuses unknown ones). Memory is
 * <memory>: the shim has no balloon, and the parser makes <currentMemory>
 * equal to it. */
#include "conf/domain-conf.h"

#include <json-glib/json-glib.h>

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
    json_builder_set_member_name(b, "payload");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "kernel");
    json_builder_add_string_value(b, def->kernel);
    if (def->initrd) {
        json_builder_set_member_name(b, "initramfs");
        json_builder_add_string_value(b, def->initrd);
    }
    g_autofree char *cmdline = payload_cmdline(def);
    if (cmdline) {
        json_builder_set_member_name(b, "cmdline");
        json_builder_add_string_value(b, cmdline);
    }
    json_builder_end_object(b);
}

static void add_cpus_memory(JsonBuilder *b, const struct domain_def *def)
{
    json_builder_set_member_name(b, "cpus");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "boot_vcpus");
    json_builder_add_int_value(b, def->vcpus);
    json_builder_set_member_name(b, "max_vcpus");
    json_builder_add_int_value(b, def->vcpus);
    json_builder_end_object(b);

    json_builder_set_member_name(b, "memory");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "size");
    json_builder_add_int_value(b, (gint64)(def->memory_kib * 1024));
    if (def->memory_backing.hugepages) {
        json_builder_set_member_name(b, "hugepages");
        json_builder_add_boolean_value(b, TRUE);
        json_builder_set_member_name(b, "hugepage_size");
        json_builder_add_int_value(b, 2 << 20);
    }
    json_builder_end_object(b);
}

/* Serial: a pty serial is the shim's "Pty": the shim holds the master and
 * reports the slave's path in vm.info (vsnap.serial_pty), which the live
 * XML shows and consoles open, as libvirt's QEMU driver does with QEMU's. */
void domain_def_add_vm_serial(JsonBuilder *b, const struct domain_def *def)
{
    json_builder_set_member_name(b, "serial");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "mode");
    switch (def->serial.type) {
    case DOMAIN_CHR_NONE:
        json_builder_add_string_value(b, "Null");
        break;
    case DOMAIN_CHR_FILE:
        json_builder_add_string_value(b, "File");
        json_builder_set_member_name(b, "file");
        json_builder_add_string_value(b, def->serial.path);
        break;
    case DOMAIN_CHR_PTY:
        json_builder_add_string_value(b, "Pty");
        break;
    }
    json_builder_end_object(b);

    /* <console> is the serial port (see the parser); the virtio console is off. */
    json_builder_set_member_name(b, "console");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "mode");
    json_builder_add_string_value(b, "Off");
    json_builder_end_object(b);
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
    json_builder_set_member_name(b, "vsnap_chain");
    json_builder_begin_array(b);
    for (guint i = n - 1; i >= 1; i--)
        json_builder_add_string_value(b, disk->chain[i]);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "vsnap_overlay");
    json_builder_add_string_value(b, disk->chain[0]);
}

static void add_vm_disk(JsonBuilder *b, const struct domain_disk *disk)
{
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "path");
    json_builder_add_string_value(b, disk->path);
    json_builder_set_member_name(b, "readonly");
    json_builder_add_boolean_value(b, disk->readonly);
    json_builder_set_member_name(b, "id");
    json_builder_add_string_value(b, disk->target);
    if (disk->serial) {
        json_builder_set_member_name(b, "serial");
        json_builder_add_string_value(b, disk->serial);
    }
    json_builder_set_member_name(b, "image_type");
    json_builder_add_string_value(b, "Raw");
    add_vm_disk_chain(b, disk);
    json_builder_end_object(b);
}

void domain_def_add_vm_disks(JsonBuilder *b, const struct domain_def *def)
{
    if (def->n_disks == 0)
        return;
    json_builder_set_member_name(b, "disks");
    json_builder_begin_array(b);
    for (size_t i = 0; i < def->n_disks; i++)
        add_vm_disk(b, &def->disks[i]);
    json_builder_end_array(b);
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
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "id");
    json_builder_add_string_value(b, id);
    if (!with_fds && net->ifname) {
        json_builder_set_member_name(b, "tap");
        json_builder_add_string_value(b, net->ifname);
    }
    json_builder_set_member_name(b, "mac");
    json_builder_add_string_value(b, mac);
    if (net->mtu) {
        json_builder_set_member_name(b, "mtu");
        json_builder_add_int_value(b, net->mtu);
    }
    json_builder_set_member_name(b, "num_queues");
    json_builder_add_int_value(b, 2);
    if (with_fds) {
        json_builder_set_member_name(b, "fds");
        json_builder_begin_array(b);
        json_builder_add_int_value(b, -1);
        json_builder_end_array(b);
    }
    json_builder_end_object(b);
}

static void add_disk_overrides(JsonBuilder *b, const struct domain_def *def)
{
    if (def->n_disks == 0)
        return;
    json_builder_set_member_name(b, "disks");
    json_builder_begin_array(b);
    for (size_t i = 0; i < def->n_disks; i++) {
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "id");
        json_builder_add_string_value(b, def->disks[i].target);
        json_builder_set_member_name(b, "path");
        json_builder_add_string_value(b, def->disks[i].path);
        json_builder_set_member_name(b, "readonly");
        json_builder_add_boolean_value(b, def->disks[i].readonly);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

void domain_def_add_vm_file_overrides(JsonBuilder *b, const struct domain_def *def)
{
    if (def->kernel) {
        json_builder_set_member_name(b, "payload");
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "kernel");
        json_builder_add_string_value(b, def->kernel);
        if (def->initrd) {
            json_builder_set_member_name(b, "initramfs");
            json_builder_add_string_value(b, def->initrd);
        }
        json_builder_end_object(b);
    }
    if (def->rng.present && def->rng.backend) {
        json_builder_set_member_name(b, "rng");
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "src");
        json_builder_add_string_value(b, def->rng.backend);
        json_builder_end_object(b);
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
    json_builder_set_member_name(b, "net");
    json_builder_begin_array(b);
    for (size_t i = 0; i < def->n_nets; i++) {
        char mac[DOMAIN_NET_MAC_LEN];
        domain_mac_format(def->nets[i].mac, mac);
        g_autofree char *id = domain_net_id(i);
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "id");
        json_builder_add_string_value(b, id);
        json_builder_set_member_name(b, "mac");
        json_builder_add_string_value(b, mac);
        json_builder_set_member_name(b, "fds");
        json_builder_begin_array(b);
        json_builder_add_int_value(b, -1);
        json_builder_end_array(b);
        json_builder_end_object(b);
    }
    json_builder_end_array(b);
}

void domain_def_add_vm_nets(JsonBuilder *b, const struct domain_def *def, bool with_fds)
{
    if (def->n_nets == 0)
        return;
    json_builder_set_member_name(b, "net");
    json_builder_begin_array(b);
    for (size_t i = 0; i < def->n_nets; i++)
        add_vm_net(b, &def->nets[i], i, with_fds);
    json_builder_end_array(b);
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
    json_builder_set_member_name(b, "vsock");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "cid");
    json_builder_add_int_value(b, def->vsock.cid);
    json_builder_set_member_name(b, "socket");
    json_builder_add_string_value(b, vsock_socket_path);
    json_builder_set_member_name(b, "readiness_port");
    json_builder_add_int_value(b, def->vsnap.readiness_port);
    json_builder_set_member_name(b, "notify_port");
    json_builder_add_int_value(b, def->notify.port);
    json_builder_end_object(b);
    return true;
}

static void add_rng(JsonBuilder *b, const struct domain_def *def)
{
    if (!def->rng.present)
        return;
    json_builder_set_member_name(b, "rng");
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "src");
    json_builder_add_string_value(b, def->rng.backend);
    if (def->rng.rate_bytes) {
        /* libvirt's "bytes per period" is a bucket of that size refilled every period. */
        json_builder_set_member_name(b, "rate_limiter");
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "bandwidth");
        json_builder_begin_object(b);
        json_builder_set_member_name(b, "size");
        json_builder_add_int_value(b, (gint64)def->rng.rate_bytes);
        json_builder_set_member_name(b, "refill_time");
        json_builder_add_int_value(b, (gint64)def->rng.rate_period_ms);
        json_builder_end_object(b);
        json_builder_end_object(b);
    }
    json_builder_end_object(b);
}

static void add_optional_member(JsonBuilder *b, const char *name, const char *value)
{
    if (!value)
        return;
    json_builder_set_member_name(b, name);
    json_builder_add_string_value(b, value);
}

/* SMBIOS: the domain's UUID always; with <smbios mode='sysinfo'/> the
 * <sysinfo> system entries and OEM strings; and systemd's vmm.notify_socket
 * credential as an OEM string unless turned off. */
static void add_platform(JsonBuilder *b, const struct domain_def *def)
{
    char uuid[DOMAIN_UUID_STRING_LEN];
    domain_uuid_format(def->uuid, uuid);
    const struct domain_sysinfo *s = def->smbios_mode == DOMAIN_SMBIOS_SYSINFO ? &def->sysinfo : NULL;
    json_builder_set_member_name(b, "platform");
    json_builder_begin_object(b);
    add_optional_member(b, "uuid", uuid);
    if (s) {
        add_optional_member(b, "serial_number", s->serial);
        json_builder_set_member_name(b, "system");
        json_builder_begin_object(b);
        add_optional_member(b, "manufacturer", s->manufacturer);
        add_optional_member(b, "product_name", s->product);
        add_optional_member(b, "version", s->version);
        add_optional_member(b, "sku_number", s->sku);
        add_optional_member(b, "family", s->family);
        json_builder_end_object(b);
    }
    json_builder_set_member_name(b, "oem_strings");
    json_builder_begin_array(b);
    for (char **e = s ? s->oem_strings : NULL; e && *e; e++)
        json_builder_add_string_value(b, *e);
    if (def->vsock.present && !def->notify.no_credential) {
        g_autofree char *address = domain_notify_socket_address(def);
        g_autofree char *credential = g_strdup_printf("io.systemd.credential:vmm.notify_socket=%s", address);
        json_builder_add_string_value(b, credential);
    }
    json_builder_end_array(b);
    json_builder_end_object(b);
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
    json_builder_begin_object(b);
    add_payload(b, def);
    add_cpus_memory(b, def);
    domain_def_add_vm_serial(b, def);
    domain_def_add_vm_disks(b, def);
    if (disk_work_dir && def->n_disks > 0) {
        json_builder_set_member_name(b, "vsnap_work_dir");
        json_builder_add_string_value(b, disk_work_dir);
    }
    domain_def_add_vm_nets(b, def, true);
    if (!add_vsock(b, def, vsock_socket_path, error))
        return NULL;
    add_rng(b, def);
    add_platform(b, def);
    json_builder_end_object(b);

    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autoptr(JsonGenerator) generator = json_generator_new();
    json_generator_set_root(generator, root);
    return json_generator_to_data(generator, NULL);
}
