/* VmConfig: struct vm_config's lifetime and its JSON form. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "config/vm-config-json.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "disk-config-internal.h"
#include "config/shim-error.h"
#include "json/bounded-json.h"
#include "json/vjson.h"

/* ---- struct vm_config ---------------------------------------------------- */

/* Cloud Hypervisor's defaults: 1 vCPU, 512 MiB, serial Null, the
 * virtio-console on Tty (the shim's stdout, and its stdin when that is a
 * terminal or a pipe). */
struct vm_config *vm_config_new_default(void)
{
    struct vm_config *cfg = g_new0(struct vm_config, 1);
    cfg->cpus.boot_vcpus = 1;
    cfg->cpus.max_vcpus = 1;
    cfg->memory.size = 512ull << 20;
    cfg->serial.mode = CONSOLE_MODE_NULL;
    cfg->console.mode = CONSOLE_MODE_TTY;
    cfg->vsock.readiness_port = VSNAP_DEFAULT_READINESS_PORT;
    cfg->vsock.notify_port = VSNAP_DEFAULT_NOTIFY_PORT;
    return cfg;
}

static void console_config_copy(struct console_config *to, const struct console_config *from)
{
    to->mode = from->mode;
    to->file = g_strdup(from->file);
    to->socket = g_strdup(from->socket);
}

static void console_config_clear(struct console_config *c)
{
    g_clear_pointer(&c->file, g_free);
    g_clear_pointer(&c->socket, g_free);
}

static void smbios_system_copy(struct smbios_system_config *to, const struct smbios_system_config *from)
{
    to->manufacturer = g_strdup(from->manufacturer);
    to->product_name = g_strdup(from->product_name);
    to->version = g_strdup(from->version);
    to->sku_number = g_strdup(from->sku_number);
    to->family = g_strdup(from->family);
}

static void platform_config_copy(struct platform_config *to, const struct platform_config *from)
{
    to->uuid = g_strdup(from->uuid);
    to->serial_number = g_strdup(from->serial_number);
    to->oem_strings = g_strdupv(from->oem_strings);
    smbios_system_copy(&to->system, &from->system);
}

static void platform_config_clear(struct platform_config *p)
{
    g_clear_pointer(&p->uuid, g_free);
    g_clear_pointer(&p->serial_number, g_free);
    g_clear_pointer(&p->oem_strings, g_strfreev);
    g_clear_pointer(&p->system.manufacturer, g_free);
    g_clear_pointer(&p->system.product_name, g_free);
    g_clear_pointer(&p->system.version, g_free);
    g_clear_pointer(&p->system.sku_number, g_free);
    g_clear_pointer(&p->system.family, g_free);
}

struct vm_config *vm_config_copy(const struct vm_config *cfg)
{
    struct vm_config *copy = g_memdup2(cfg, sizeof(*cfg));
    copy->payload.kernel = g_strdup(cfg->payload.kernel);
    copy->payload.cmdline = g_strdup(cfg->payload.cmdline);
    copy->payload.initramfs = g_strdup(cfg->payload.initramfs);
    copy->payload.firmware = g_strdup(cfg->payload.firmware);
    console_config_copy(&copy->serial, &cfg->serial);
    console_config_copy(&copy->console, &cfg->console);
    copy->vsock.socket = g_strdup(cfg->vsock.socket);
    copy->rng.src = g_strdup(cfg->rng.src);
    platform_config_copy(&copy->platform, &cfg->platform);
    copy->vsnap_work_dir = g_strdup(cfg->vsnap_work_dir);
    copy->nets = g_new0(struct net_config, cfg->nnets);
    for (unsigned i = 0; i < cfg->nnets; i++)
        net_config_copy(&copy->nets[i], &cfg->nets[i]);
    copy->disks = g_new0(struct disk_config, cfg->ndisks);
    for (unsigned i = 0; i < cfg->ndisks; i++)
        disk_config_copy(&copy->disks[i], &cfg->disks[i]);
    return copy;
}

void vm_config_free(struct vm_config *cfg)
{
    if (!cfg)
        return;
    g_free(cfg->payload.kernel);
    g_free(cfg->payload.cmdline);
    g_free(cfg->payload.initramfs);
    g_free(cfg->payload.firmware);
    console_config_clear(&cfg->serial);
    console_config_clear(&cfg->console);
    g_free(cfg->vsock.socket);
    g_free(cfg->rng.src);
    platform_config_clear(&cfg->platform);
    for (unsigned i = 0; i < cfg->ndisks; i++)
        disk_config_clear(&cfg->disks[i]);
    g_free(cfg->disks);
    g_free(cfg->vsnap_work_dir);
    for (unsigned i = 0; i < cfg->nnets; i++)
        net_config_clear(&cfg->nets[i]);
    g_free(cfg->nets);
    g_free(cfg);
}

static const char *const console_mode_names[] = {
    [CONSOLE_MODE_OFF] = "Off",   [CONSOLE_MODE_NULL] = "Null", [CONSOLE_MODE_FILE] = "File",
    [CONSOLE_MODE_TTY] = "Tty",   [CONSOLE_MODE_PTY] = "Pty",   [CONSOLE_MODE_SOCKET] = "Socket",
};

const char *console_mode_to_string(enum console_mode mode)
{
    if ((size_t)mode < G_N_ELEMENTS(console_mode_names))
        return console_mode_names[mode];
    return "Invalid";
}

bool console_mode_from_string(const char *text, enum console_mode *out)
{
    for (size_t i = 0; i < G_N_ELEMENTS(console_mode_names); i++) {
        if (g_strcmp0(text, console_mode_names[i]) == 0) {
            *out = (enum console_mode)i;
            return true;
        }
    }
    return false;
}

/* ---- JSON schema ----------------------------------------------------------- */

enum field_kind {
    FIELD_STRING,      /* char *, null allowed */
    FIELD_U64,
    FIELD_OPT_U64,     /* uint64_t, null allowed: 0, unset (Cloud Hypervisor's Option<u64>) */
    FIELD_U32,
    FIELD_BOOL,
    FIELD_STRV,        /* char **, an array of strings, null allowed */
    FIELD_MODE,        /* enum console_mode, spelled as Cloud Hypervisor does */
    FIELD_OBJECT,
    FIELD_DISKS,       /* the disks array: struct disk_config each */
    FIELD_NETS,        /* the net array: struct net_config each */
    FIELD_FDS,         /* a net's descriptors: an array of integers (see vm-config-json.h) */
    FIELD_UNSUPPORTED, /* Cloud Hypervisor has it; vsnap accepts only its "unset" value */
};

#define NO_PRESENCE ((size_t)-1)

struct field {
    const char *name;
    enum field_kind kind;
    size_t offset;                /* into the struct being filled (vm_config, disk_config) */
    const struct field *members;  /* FIELD_OBJECT, NULL-name terminated */
    size_t presence;              /* FIELD_OBJECT: bool set when the object is given */
};

#define CFG(member) offsetof(struct vm_config, member)
#define LEAF(n, k, member) { .name = n, .kind = k, .offset = CFG(member) }
#define UNSUPPORTED(n) { .name = n, .kind = FIELD_UNSUPPORTED }
#define OBJECT(n, m, p) { .name = n, .kind = FIELD_OBJECT, .members = m, .presence = p }
#define DISK(n, k, member) { .name = n, .kind = k, .offset = offsetof(struct disk_config, member) }
#define NET(n, k, member) { .name = n, .kind = k, .offset = offsetof(struct net_config, member) }

static const struct field payload_fields[] = {
    LEAF("kernel", FIELD_STRING, payload.kernel),
    LEAF("cmdline", FIELD_STRING, payload.cmdline),
    LEAF("initramfs", FIELD_STRING, payload.initramfs),
    LEAF("firmware", FIELD_STRING, payload.firmware),
    UNSUPPORTED("host_data"), UNSUPPORTED("igvm"),
    { 0 },
};

static const struct field cpus_fields[] = {
    LEAF("boot_vcpus", FIELD_U32, cpus.boot_vcpus),
    LEAF("max_vcpus", FIELD_U32, cpus.max_vcpus),
    UNSUPPORTED("topology"), UNSUPPORTED("kvm_hyperv"), UNSUPPORTED("max_phys_bits"),
    UNSUPPORTED("affinity"), UNSUPPORTED("features"), UNSUPPORTED("nested"),
    UNSUPPORTED("core_scheduling"),
    { 0 },
};

static const struct field memory_fields[] = {
    LEAF("size", FIELD_U64, memory.size),
    LEAF("shared", FIELD_BOOL, memory.shared),
    LEAF("hugepages", FIELD_BOOL, memory.hugepages),
    LEAF("hugepage_size", FIELD_OPT_U64, memory.hugepage_size),
    LEAF("prefault", FIELD_BOOL, memory.prefault),
    UNSUPPORTED("hotplug_size"), UNSUPPORTED("hotplugged_size"), UNSUPPORTED("mergeable"),
    UNSUPPORTED("hotplug_method"), UNSUPPORTED("thp"),
    UNSUPPORTED("zones"),
    { 0 },
};

static const struct field serial_fields[] = {
    LEAF("mode", FIELD_MODE, serial.mode),
    LEAF("file", FIELD_STRING, serial.file),
    LEAF("socket", FIELD_STRING, serial.socket),
    UNSUPPORTED("iommu"),
    { 0 },
};

static const struct field console_fields[] = {
    LEAF("mode", FIELD_MODE, console.mode),
    LEAF("file", FIELD_STRING, console.file),
    LEAF("socket", FIELD_STRING, console.socket),
    UNSUPPORTED("iommu"),
    { 0 },
};

static const struct field vsock_fields[] = {
    LEAF("cid", FIELD_U32, vsock.cid),
    LEAF("socket", FIELD_STRING, vsock.socket),
    LEAF("readiness_port", FIELD_U32, vsock.readiness_port),
    LEAF("notify_port", FIELD_U32, vsock.notify_port),
    UNSUPPORTED("iommu"), UNSUPPORTED("pci_segment"), UNSUPPORTED("id"),
    { 0 },
};

static const struct field bandwidth_fields[] = {
    LEAF("size", FIELD_U64, rng.bandwidth.size),
    LEAF("one_time_burst", FIELD_U64, rng.bandwidth.one_time_burst),
    LEAF("refill_time", FIELD_U64, rng.bandwidth.refill_time_ms),
    { 0 },
};

static const struct field rate_limiter_fields[] = {
    OBJECT("bandwidth", bandwidth_fields, NO_PRESENCE),
    UNSUPPORTED("ops"),
    { 0 },
};

static const struct field rng_fields[] = {
    LEAF("src", FIELD_STRING, rng.src),
    OBJECT("rate_limiter", rate_limiter_fields, NO_PRESENCE),
    UNSUPPORTED("iommu"),
    { 0 },
};

static const struct field smbios_system_fields[] = {
    LEAF("manufacturer", FIELD_STRING, platform.system.manufacturer),
    LEAF("product_name", FIELD_STRING, platform.system.product_name),
    LEAF("version", FIELD_STRING, platform.system.version),
    LEAF("sku_number", FIELD_STRING, platform.system.sku_number),
    LEAF("family", FIELD_STRING, platform.system.family),
    { 0 },
};

static const struct field platform_fields[] = {
    LEAF("uuid", FIELD_STRING, platform.uuid),
    LEAF("serial_number", FIELD_STRING, platform.serial_number),
    LEAF("oem_strings", FIELD_STRV, platform.oem_strings),
    OBJECT("system", smbios_system_fields, NO_PRESENCE),
    UNSUPPORTED("num_pci_segments"), UNSUPPORTED("iommu_segments"), UNSUPPORTED("iommu_address_width"),
    UNSUPPORTED("tdx"), UNSUPPORTED("sev_snp"),
    { 0 },
};

/* Cloud Hypervisor's DiskConfig (vmm/src/api/openapi/cloud-hypervisor.yaml). */
static const struct field disk_fields[] = {
    DISK("path", FIELD_STRING, path),
    DISK("readonly", FIELD_BOOL, readonly),
    DISK("direct", FIELD_BOOL, direct),
    DISK("sparse", FIELD_BOOL, sparse),
    DISK("id", FIELD_STRING, id),
    DISK("serial", FIELD_STRING, serial),
    DISK("num_queues", FIELD_U32, num_queues),
    DISK("queue_size", FIELD_U32, queue_size),
    DISK("image_type", FIELD_STRING, image_type),
    DISK("vsnap_chain", FIELD_STRV, vsnap_chain),
    DISK("vsnap_overlay", FIELD_STRING, vsnap_overlay),
    DISK("vsnap_write_through", FIELD_BOOL, vsnap_write_through),
    DISK("vsnap_ignore_flush", FIELD_BOOL, vsnap_ignore_flush),
    DISK("vsnap_discard_unmap", FIELD_BOOL, vsnap_discard_unmap),
    DISK("vsnap_detect_zeroes", FIELD_STRING, vsnap_detect_zeroes),
    DISK("vsnap_io", FIELD_STRING, vsnap_io),
    UNSUPPORTED("iommu"), UNSUPPORTED("vhost_user"), UNSUPPORTED("vhost_socket"),
    UNSUPPORTED("rate_limiter_config"), UNSUPPORTED("pci_segment"), UNSUPPORTED("pci_device_id"),
    UNSUPPORTED("rate_limit_group"), UNSUPPORTED("queue_affinity"), UNSUPPORTED("backing_files"),
    UNSUPPORTED("lock_granularity"),
    { 0 },
};

/* Cloud Hypervisor's NetConfig (the openapi file, plus `fds`, which its
 * NetConfig has and its API fills from SCM_RIGHTS). */
static const struct field net_fields[] = {
    NET("tap", FIELD_STRING, tap),
    NET("ip", FIELD_STRING, ip),
    NET("mask", FIELD_STRING, mask),
    NET("mac", FIELD_STRING, mac),
    NET("host_mac", FIELD_STRING, host_mac),
    NET("mtu", FIELD_U32, mtu),
    NET("num_queues", FIELD_U32, num_queues),
    NET("queue_size", FIELD_U32, queue_size),
    NET("id", FIELD_STRING, id),
    NET("offload_tso", FIELD_BOOL, offload_tso),
    NET("offload_ufo", FIELD_BOOL, offload_ufo),
    NET("offload_csum", FIELD_BOOL, offload_csum),
    NET("vhost_mode", FIELD_STRING, vhost_mode),
    { .name = "fds", .kind = FIELD_FDS },
    UNSUPPORTED("iommu"), UNSUPPORTED("vhost_user"), UNSUPPORTED("vhost_socket"),
    UNSUPPORTED("pci_segment"), UNSUPPORTED("pci_device_id"), UNSUPPORTED("rate_limiter_config"),
    { 0 },
};

static const struct field vm_config_fields[] = {
    OBJECT("payload", payload_fields, NO_PRESENCE),
    OBJECT("cpus", cpus_fields, NO_PRESENCE),
    OBJECT("memory", memory_fields, NO_PRESENCE),
    OBJECT("serial", serial_fields, NO_PRESENCE),
    OBJECT("console", console_fields, NO_PRESENCE),
    OBJECT("vsock", vsock_fields, CFG(vsock.present)),
    OBJECT("rng", rng_fields, CFG(rng.present)),
    OBJECT("platform", platform_fields, NO_PRESENCE),
    { .name = "disks", .kind = FIELD_DISKS, .members = disk_fields },
    LEAF("vsnap_work_dir", FIELD_STRING, vsnap_work_dir),
    { .name = "net", .kind = FIELD_NETS, .members = net_fields },
    UNSUPPORTED("balloon"),
    UNSUPPORTED("fs"), UNSUPPORTED("pmem"), UNSUPPORTED("debug_console"),
    UNSUPPORTED("devices"), UNSUPPORTED("user_devices"), UNSUPPORTED("vdpa"),
    UNSUPPORTED("sgx_epc"), UNSUPPORTED("numa"), UNSUPPORTED("iommu"),
    UNSUPPORTED("watchdog"), UNSUPPORTED("pvpanic"), UNSUPPORTED("pci_segments"),
    UNSUPPORTED("tpm"), UNSUPPORTED("landlock_enable"),
    UNSUPPORTED("landlock_rules"), UNSUPPORTED("rate_limit_groups"),
    UNSUPPORTED("preserved_fds"), UNSUPPORTED("ivshmem"),
    UNSUPPORTED("generic_vhost_user"),
    { 0 },
};

/* ---- JSON -> struct ------------------------------------------------------- */

static bool invalid(GError **error, const char *path, const char *why)
{
    g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "invalid field '%s': %s", path, why);
    return false;
}

static const struct field *find_field(const struct field *fields, const char *name)
{
    for (; fields->name; fields++)
        if (strcmp(fields->name, name) == 0)
            return fields;
    return NULL;
}

/* What a client that does not use the feature sends: null, false, 0, "", [], {}. */
static bool is_unset_value(JsonNode *node)
{
    switch (json_node_get_node_type(node)) {
    case JSON_NODE_NULL:
        return true;
    case JSON_NODE_ARRAY:
        return json_array_get_length(json_node_get_array(node)) == 0;
    case JSON_NODE_OBJECT:
        return json_object_get_size(json_node_get_object(node)) == 0;
    case JSON_NODE_VALUE:
        break;
    }
    GType type = json_node_get_value_type(node);
    if (type == G_TYPE_BOOLEAN)
        return !json_node_get_boolean(node);
    if (type == G_TYPE_INT64)
        return json_node_get_int(node) == 0;
    if (type == G_TYPE_STRING)
        return json_node_get_string(node)[0] == '\0';
    return false;
}

static bool is_value_of(JsonNode *node, GType type)
{
    return JSON_NODE_HOLDS_VALUE(node) && json_node_get_value_type(node) == type;
}

static bool parse_uint_field(JsonNode *node, const char *path, uint64_t max, uint64_t *out,
                             GError **error)
{
    if (!is_value_of(node, G_TYPE_INT64))
        return invalid(error, path, "expected an unsigned integer");
    gint64 value = json_node_get_int(node);
    if (value < 0 || (uint64_t)value > max)
        return invalid(error, path, "out of range");
    *out = (uint64_t)value;
    return true;
}

static bool parse_string_field(JsonNode *node, const char *path, char **slot, GError **error)
{
    if (JSON_NODE_HOLDS_NULL(node)) {
        g_clear_pointer(slot, g_free);
        return true;
    }
    if (!is_value_of(node, G_TYPE_STRING))
        return invalid(error, path, "expected a string");
    g_free(*slot);
    *slot = g_strdup(json_node_get_string(node));
    return true;
}

static bool parse_strv_field(JsonNode *node, const char *path, char ***slot, GError **error)
{
    if (JSON_NODE_HOLDS_NULL(node)) {
        g_clear_pointer(slot, g_strfreev);
        return true;
    }
    if (!JSON_NODE_HOLDS_ARRAY(node))
        return invalid(error, path, "expected an array of strings");
    JsonArray *array = json_node_get_array(node);
    g_autoptr(GStrvBuilder) builder = g_strv_builder_new();
    for (guint i = 0; i < json_array_get_length(array); i++) {
        JsonNode *item = json_array_get_element(array, i);
        if (!is_value_of(item, G_TYPE_STRING))
            return invalid(error, path, "expected an array of strings");
        g_strv_builder_add(builder, json_node_get_string(item));
    }
    g_strfreev(*slot);
    *slot = g_strv_builder_end(builder);
    return true;
}

static bool parse_mode_field(JsonNode *node, const char *path, enum console_mode *slot,
                             GError **error)
{
    if (!is_value_of(node, G_TYPE_STRING))
        return invalid(error, path, "expected a string (Off, Pty, Tty, File, Socket or Null)");
    if (!console_mode_from_string(json_node_get_string(node), slot))
        return invalid(error, path, "expected one of Off, Pty, Tty, File, Socket, Null");
    return true;
}

static bool parse_object(JsonNode *node, const struct field *fields, const char *prefix,
                         void *target, GError **error);

/* disks: an array of DiskConfig objects; null or [] is no disk. */
static bool parse_disks(JsonNode *node, const struct field *fields, const char *path,
                        struct vm_config *cfg, GError **error)
{
    if (JSON_NODE_HOLDS_NULL(node))
        return true;
    if (!JSON_NODE_HOLDS_ARRAY(node))
        return invalid(error, path, "expected an array of disk objects");
    JsonArray *array = json_node_get_array(node);
    for (guint i = 0; i < json_array_get_length(array); i++) {
        g_autofree char *item = g_strdup_printf("%s[%u]", path, i);
        struct disk_config disk;
        disk_config_init(&disk);
        bool ok = parse_object(json_array_get_element(array, i), fields, item, &disk, error);
        if (ok)
            vm_config_add_disk(cfg, &disk);
        disk_config_clear(&disk);
        if (!ok)
            return false;
    }
    return true;
}

/* net: an array of NetConfig objects; null or [] is no interface. */
static bool parse_nets(JsonNode *node, const struct field *fields, const char *path,
                       struct vm_config *cfg, GError **error)
{
    if (JSON_NODE_HOLDS_NULL(node))
        return true;
    if (!JSON_NODE_HOLDS_ARRAY(node))
        return invalid(error, path, "expected an array of NetConfig objects");
    JsonArray *array = json_node_get_array(node);
    for (guint i = 0; i < json_array_get_length(array); i++) {
        g_autofree char *item = g_strdup_printf("%s[%u]", path, i);
        struct net_config net;
        net_config_init(&net);
        bool ok = parse_object(json_array_get_element(array, i), fields, item, &net, error);
        if (ok) { /* the config takes the descriptors over */
            cfg->nets = g_renew(struct net_config, cfg->nets, cfg->nnets + 1);
            cfg->nets[cfg->nnets++] = net;
        } else {
            net_config_clear(&net);
            return false;
        }
    }
    return true;
}

/* fds: descriptors the API received with the request, put in place of the
 * client's numbers before parsing (vm-config-json.h); the config owns a
 * duplicate of each (the request's own are closed when it is answered); -1
 * is one that did not come. */
static bool parse_fds(JsonNode *node, const char *path, struct net_config *net, GError **error)
{
    if (JSON_NODE_HOLDS_NULL(node))
        return true;
    if (!JSON_NODE_HOLDS_ARRAY(node))
        return invalid(error, path, "expected an array of descriptors");
    JsonArray *array = json_node_get_array(node);
    guint n = json_array_get_length(array);
    if (n > 64)
        return invalid(error, path, "too many descriptors");
    for (guint i = 0; i < n; i++)
        if (!is_value_of(json_array_get_element(array, i), G_TYPE_INT64))
            return invalid(error, path, "expected an array of integers");
    for (unsigned i = 0; i < net->nfds; i++)
        if (net->fds[i] >= 0)
            close(net->fds[i]);
    g_free(net->fds);
    net->fds = g_new(int, MAX(n, 1));
    net->nfds = n;
    for (guint i = 0; i < n; i++) {
        gint64 fd = json_node_get_int(json_array_get_element(array, i));
        net->fds[i] = fd >= 0 && fd <= INT32_MAX ? fcntl((int)fd, F_DUPFD_CLOEXEC, 3) : -1;
        if (fd >= 0 && net->fds[i] < 0)
            return invalid(error, path, "a descriptor that came with the request cannot be duplicated");
    }
    return true;
}

static bool parse_leaf(JsonNode *node, const struct field *f, const char *path,
                       void *target, GError **error)
{
    char *base = (char *)target + f->offset;
    uint64_t value;

    switch (f->kind) {
    case FIELD_STRING:
        return parse_string_field(node, path, (char **)base, error);
    case FIELD_U64:
        return parse_uint_field(node, path, UINT64_MAX, (uint64_t *)base, error);
    case FIELD_OPT_U64:
        if (JSON_NODE_HOLDS_NULL(node)) {
            *(uint64_t *)base = 0;
            return true;
        }
        return parse_uint_field(node, path, UINT64_MAX, (uint64_t *)base, error);
    case FIELD_U32:
        if (!parse_uint_field(node, path, UINT32_MAX, &value, error))
            return false;
        *(uint32_t *)base = (uint32_t)value;
        return true;
    case FIELD_BOOL:
        if (!is_value_of(node, G_TYPE_BOOLEAN))
            return invalid(error, path, "expected true or false");
        *(bool *)base = json_node_get_boolean(node);
        return true;
    case FIELD_MODE:
        return parse_mode_field(node, path, (enum console_mode *)base, error);
    case FIELD_STRV:
        return parse_strv_field(node, path, (char ***)base, error);
    case FIELD_OBJECT:
        if (f->presence != NO_PRESENCE && !JSON_NODE_HOLDS_NULL(node))
            *(bool *)((char *)target + f->presence) = true;
        if (f->presence != NO_PRESENCE && JSON_NODE_HOLDS_NULL(node))
            return true;
        return parse_object(node, f->members, path, target, error);
    case FIELD_DISKS:
        return parse_disks(node, f->members, path, target, error);
    case FIELD_NETS:
        return parse_nets(node, f->members, path, target, error);
    case FIELD_FDS:
        return parse_fds(node, path, target, error);
    case FIELD_UNSUPPORTED:
        if (is_unset_value(node))
            return true;
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_UNSUPPORTED,
                    "field '%s' is not supported by vsnap yet", path);
        return false;
    }
    g_assert_not_reached();
}

static bool parse_object(JsonNode *node, const struct field *fields, const char *prefix,
                         void *target, GError **error)
{
    if (!JSON_NODE_HOLDS_OBJECT(node)) {
        if (prefix)
            return invalid(error, prefix, "expected an object");
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "the VmConfig must be a JSON object");
        return false;
    }
    JsonObjectIter iter;
    const char *name;
    JsonNode *member;
    json_object_iter_init(&iter, json_node_get_object(node));
    while (json_object_iter_next(&iter, &name, &member)) {
        g_autofree char *path = prefix ? g_strdup_printf("%s.%s", prefix, name) : g_strdup(name);
        const struct field *f = find_field(fields, name);
        if (!f) {
            g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "unknown field '%s'", path);
            return false;
        }
        if (!parse_leaf(member, f, path, target, error))
            return false;
    }
    return true;
}

static bool has_member(JsonNode *root, const char *object, const char *member)
{
    JsonObject *o = json_node_get_object(root);
    if (!object)
        return json_object_has_member(o, member);
    JsonNode *child = json_object_get_member(o, object);
    return child && JSON_NODE_HOLDS_OBJECT(child) &&
           json_object_has_member(json_node_get_object(child), member);
}

struct vm_config *vm_config_from_json(JsonNode *root, GError **error)
{
    g_autoptr(vm_config) cfg = vm_config_new_default();

    if (!parse_object(root, vm_config_fields, NULL, cfg, error))
        return NULL;
    if (!has_member(root, NULL, "payload")) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "missing field 'payload'");
        return NULL;
    }
    /* Cloud Hypervisor would refuse boot_vcpus > 1 without max_vcpus; taking
     * max = boot is what every client means. */
    if (!has_member(root, "cpus", "max_vcpus"))
        cfg->cpus.max_vcpus = cfg->cpus.boot_vcpus;
    if (cfg->vsock.present && !has_member(root, "vsock", "cid")) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "missing field 'vsock.cid'");
        return NULL;
    }
    if (cfg->rng.present && !cfg->rng.src)
        cfg->rng.src = g_strdup(VSNAP_DEFAULT_RNG_SOURCE);
    vm_config_name_disks(cfg);
    vm_config_name_nets(cfg);
    if (!vm_config_validate(cfg, error))
        return NULL;
    return g_steal_pointer(&cfg);
}

/* A VmConfig is a few hundred bytes; as a vm.create body it is at most 1 MiB. */
#define VM_CONFIG_TEXT_MAX_BYTES (1u << 20)

static JsonNode *parse_text(JsonParser *parser, const char *text, gssize len, const char *what,
                            GError **error)
{
    g_autoptr(GError) parse_error = NULL;

    if (len < 0)
        len = (gssize)strlen(text);
    if (!bounded_json_load_data(parser, text, (size_t)len, VM_CONFIG_TEXT_MAX_BYTES, &parse_error)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "the body is not valid JSON: %s",
                    parse_error->message);
        return NULL;
    }
    JsonNode *root = json_parser_get_root(parser);
    if (!root)
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "the body is empty: a %s is required", what);
    return root;
}

bool net_config_from_json_node(JsonNode *root, struct net_config *out, GError **error)
{
    if (!root || !JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "the NetConfig must be a JSON object");
        return false;
    }
    net_config_init(out);
    if (parse_object(root, net_fields, NULL, out, error))
        return true;
    net_config_clear(out);
    return false;
}

bool disk_config_from_json_text(const char *text, gssize len, struct disk_config *out, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonNode *root = parse_text(parser, text, len, "DiskConfig", error);
    if (!root)
        return false;
    if (!JSON_NODE_HOLDS_OBJECT(root)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "the DiskConfig must be a JSON object");
        return false;
    }
    disk_config_init(out);
    if (parse_object(root, disk_fields, NULL, out, error))
        return true;
    disk_config_clear(out);
    return false;
}

struct vm_config *vm_config_from_json_text(const char *text, gssize len, GError **error)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    JsonNode *root = parse_text(parser, text, len, "VmConfig", error);
    return root ? vm_config_from_json(root, error) : NULL;
}

/* ---- checks ---------------------------------------------------------------- */

uint64_t memory_config_page_size(const struct memory_config *m)
{
    return m->hugepages ? VSNAP_HUGEPAGE_SIZE : 4096;
}

/* Cloud Hypervisor's rules (a size needs hugepages, and is a power of two),
 * then vsnap's: 2 MiB pages only, and RAM made of whole ones. */
static bool check_hugepages(const struct memory_config *m, GError **error)
{
    if (m->hugepage_size && !m->hugepages)
        return invalid(error, "memory.hugepage_size", "given without memory.hugepages");
    if (m->hugepage_size & (m->hugepage_size - 1))
        return invalid(error, "memory.hugepage_size", "not a power of two");
    if (m->hugepage_size && m->hugepage_size != VSNAP_HUGEPAGE_SIZE) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_UNSUPPORTED,
                    "invalid field 'memory.hugepage_size': %" G_GUINT64_FORMAT " bytes is not supported by "
                    "vsnap: guest RAM is backed by 2 MiB huge pages (2097152) only", m->hugepage_size);
        return false;
    }
    if (m->hugepages && m->size % VSNAP_HUGEPAGE_SIZE) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "invalid field 'memory.size': %" G_GUINT64_FORMAT " bytes is not a whole number of 2 MiB "
                    "huge pages (memory.hugepages)", m->size);
        return false;
    }
    return true;
}

static bool check_memory(const struct memory_config *m, GError **error)
{
    if (m->size < VSNAP_MIN_MEMORY || m->size > VSNAP_MAX_MEMORY) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "invalid field 'memory.size': %" G_GUINT64_FORMAT " bytes is outside %llu MiB .. %llu GiB",
                    m->size, VSNAP_MIN_MEMORY >> 20, VSNAP_MAX_MEMORY >> 30);
        return false;
    }
    if (m->size % 4096)
        return invalid(error, "memory.size", "not a multiple of 4 KiB");
    return check_hugepages(m, error);
}

static bool check_cpus(const struct cpus_config *c, GError **error)
{
    if (c->boot_vcpus == 0 || c->boot_vcpus > VSNAP_MAX_VCPUS) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "invalid field 'cpus.boot_vcpus': %u is outside 1 .. %d", c->boot_vcpus,
                    VSNAP_MAX_VCPUS);
        return false;
    }
    if (c->max_vcpus > VSNAP_MAX_VCPUS)
        return invalid(error, "cpus.max_vcpus", "more than vsnap supports (64)");
    if (c->boot_vcpus > c->max_vcpus)
        return invalid(error, "cpus.boot_vcpus", "greater than cpus.max_vcpus");
    return true;
}

static bool check_console(const struct console_config *c, const char *name, GError **error)
{
    g_autofree char *file_path = g_strdup_printf("%s.file", name);
    g_autofree char *socket_path = g_strdup_printf("%s.socket", name);

    if (c->mode == CONSOLE_MODE_FILE && !c->file)
        return invalid(error, file_path, "required when mode is File");
    if (c->mode == CONSOLE_MODE_SOCKET && !c->socket)
        return invalid(error, socket_path, "required when mode is Socket");
    return true;
}

static bool check_vsock(const struct vsock_config *v, GError **error)
{
    if (!v->present)
        return true;
    if (v->cid < 3 || v->cid == UINT32_MAX)
        return invalid(error, "vsock.cid", "must be at least 3 (0-2 are reserved) and below 2^32-1");
    if (!v->socket || !*v->socket)
        return invalid(error, "vsock.socket", "required");
    if (v->readiness_port == 0)
        return invalid(error, "vsock.readiness_port", "must not be 0");
    if (v->notify_port == 0)
        return invalid(error, "vsock.notify_port", "must not be 0");
    if (v->notify_port == v->readiness_port)
        return invalid(error, "vsock.notify_port", "must differ from vsock.readiness_port");
    return true;
}

static bool check_rng(const struct rng_config *r, GError **error)
{
    if (!r->present)
        return true;
    if (!r->src || !*r->src)
        return invalid(error, "rng.src", "required");
    if (r->bandwidth.size && r->bandwidth.refill_time_ms == 0)
        return invalid(error, "rng.rate_limiter.bandwidth.refill_time", "must not be 0 when size is set");
    return true;
}

/* 32 hex digits, with or without the four dashes of the textual form. */
static bool is_uuid_text(const char *text)
{
    unsigned digits = 0;
    for (const char *p = text; *p; p++) {
        if (g_ascii_isxdigit(*p))
            digits++;
        else if (*p != '-')
            return false;
    }
    return digits == 32 && strlen(text) <= 36;
}

/* SMBIOS strings end at a NUL and an empty one cannot be told from "none". */
static bool check_smbios_string(const char *value, const char *path, GError **error)
{
    if (value && !*value)
        return invalid(error, path, "must not be empty (leave it out instead)");
    return true;
}

static bool check_platform(const struct platform_config *p, GError **error)
{
    if (p->uuid && !is_uuid_text(p->uuid))
        return invalid(error, "platform.uuid", "expected a UUID (32 hex digits, dashes allowed)");
    if (!check_smbios_string(p->serial_number, "platform.serial_number", error) ||
        !check_smbios_string(p->system.manufacturer, "platform.system.manufacturer", error) ||
        !check_smbios_string(p->system.product_name, "platform.system.product_name", error) ||
        !check_smbios_string(p->system.version, "platform.system.version", error) ||
        !check_smbios_string(p->system.sku_number, "platform.system.sku_number", error) ||
        !check_smbios_string(p->system.family, "platform.system.family", error))
        return false;
    for (char **s = p->oem_strings; s && *s; s++)
        if (!check_smbios_string(*s, "platform.oem_strings", error))
            return false;
    return true;
}

bool vm_config_validate(const struct vm_config *cfg, GError **error)
{
    if (!cfg->payload.kernel || !*cfg->payload.kernel) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "missing field 'payload.kernel'");
        return false;
    }
    if (!check_memory(&cfg->memory, error) || !check_cpus(&cfg->cpus, error) ||
        !check_console(&cfg->serial, "serial", error) ||
        !check_console(&cfg->console, "console", error) || !check_vsock(&cfg->vsock, error) ||
        !check_rng(&cfg->rng, error) || !check_platform(&cfg->platform, error) ||
        !vm_config_check_disks(cfg, error) || !vm_config_check_nets(cfg, error))
        return false;
    /* As Cloud Hypervisor: one terminal cannot feed two devices' input. */
    if (cfg->console.mode == CONSOLE_MODE_TTY && cfg->serial.mode == CONSOLE_MODE_TTY) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "invalid field 'console.mode': Tty for both serial and console (one of them may use "
                    "the terminal; the console's default is Tty, so give it another mode)");
        return false;
    }
    return true;
}

static bool check_readable_file(const char *path, const char *field, GError **error)
{
    struct stat st;

    if (stat(path, &st) != 0 || access(path, R_OK) != 0) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "invalid field '%s': %s: %s", field,
                    path, g_strerror(errno));
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "invalid field '%s': %s: not a regular file", field, path);
        return false;
    }
    return true;
}

bool vm_config_check_files(const struct vm_config *cfg, GError **error)
{
    if (!check_readable_file(cfg->payload.kernel, "payload.kernel", error))
        return false;
    if (cfg->payload.initramfs &&
        !check_readable_file(cfg->payload.initramfs, "payload.initramfs", error))
        return false;
    for (unsigned i = 0; i < cfg->ndisks; i++) {
        g_autofree char *field = g_strdup_printf("disks[%u].path", i);
        if (!disk_config_check_image(&cfg->disks[i], field, error))
            return false;
    }
    return disk_config_check_distinct(cfg, error);
}

/* ---- struct -> JSON ------------------------------------------------------- */

static void add_console(JsonBuilder *b, const char *name, const struct console_config *c)
{
    vjson_object_begin(b, name);
    vjson_str(b, "mode", console_mode_to_string(c->mode));
    vjson_str(b, "file", c->file);
    vjson_str(b, "socket", c->socket);
    vjson_object_end(b);
}

static void add_vsock(JsonBuilder *b, const struct vsock_config *v)
{
    if (!v->present) {
        vjson_null(b, "vsock");
        return;
    }
    vjson_object_begin(b, "vsock");
    vjson_int(b, "cid", v->cid);
    vjson_str(b, "socket", v->socket);
    vjson_int(b, "readiness_port", v->readiness_port);
    vjson_int(b, "notify_port", v->notify_port);
    vjson_object_end(b);
}

static void add_rng(JsonBuilder *b, const struct rng_config *r)
{
    if (!r->present) {
        vjson_null(b, "rng");
        return;
    }
    vjson_object_begin(b, "rng");
    vjson_str(b, "src", r->src);
    if (r->bandwidth.size) {
        vjson_object_begin(b, "rate_limiter");
        vjson_object_begin(b, "bandwidth");
        vjson_int(b, "size", (gint64)r->bandwidth.size);
        vjson_int(b, "one_time_burst", (gint64)r->bandwidth.one_time_burst);
        vjson_int(b, "refill_time", (gint64)r->bandwidth.refill_time_ms);
        vjson_object_end(b);
        vjson_object_end(b);
    }
    vjson_object_end(b);
}

static void add_platform(JsonBuilder *b, const struct platform_config *p)
{
    vjson_object_begin(b, "platform");
    vjson_str(b, "uuid", p->uuid);
    vjson_str(b, "serial_number", p->serial_number);
    vjson_strv(b, "oem_strings", p->oem_strings);
    vjson_object_begin(b, "system");
    vjson_str(b, "manufacturer", p->system.manufacturer);
    vjson_str(b, "product_name", p->system.product_name);
    vjson_str(b, "version", p->system.version);
    vjson_str(b, "sku_number", p->system.sku_number);
    vjson_str(b, "family", p->system.family);
    vjson_object_end(b);
    vjson_object_end(b);
}

JsonNode *vm_config_to_json(const struct vm_config *cfg)
{
    g_autoptr(JsonBuilder) b = json_builder_new();

    vjson_object_begin(b, NULL);
    vjson_object_begin(b, "payload");
    vjson_str(b, "kernel", cfg->payload.kernel);
    vjson_str(b, "cmdline", cfg->payload.cmdline);
    vjson_str(b, "initramfs", cfg->payload.initramfs);
    vjson_str(b, "firmware", cfg->payload.firmware);
    vjson_object_end(b);

    vjson_object_begin(b, "cpus");
    vjson_int(b, "boot_vcpus", cfg->cpus.boot_vcpus);
    vjson_int(b, "max_vcpus", cfg->cpus.max_vcpus);
    vjson_object_end(b);

    vjson_object_begin(b, "memory");
    vjson_int(b, "size", (gint64)cfg->memory.size);
    vjson_bool(b, "shared", cfg->memory.shared);
    vjson_bool(b, "hugepages", cfg->memory.hugepages);
    if (cfg->memory.hugepage_size)
        vjson_int(b, "hugepage_size", (gint64)cfg->memory.hugepage_size);
    else
        vjson_null(b, "hugepage_size"); /* unset, as Cloud Hypervisor shows it */
    vjson_bool(b, "prefault", cfg->memory.prefault);
    vjson_object_end(b);

    add_console(b, "serial", &cfg->serial);
    add_console(b, "console", &cfg->console);
    add_vsock(b, &cfg->vsock);
    add_rng(b, &cfg->rng);
    add_platform(b, &cfg->platform);
    if (cfg->ndisks == 0) {
        vjson_null(b, "disks"); /* as Cloud Hypervisor shows a VM without disks */
    } else {
        vjson_array_begin(b, "disks");
        for (unsigned i = 0; i < cfg->ndisks; i++)
            disk_config_add_json(b, &cfg->disks[i]);
        vjson_array_end(b);
    }
    vjson_str(b, "vsnap_work_dir", cfg->vsnap_work_dir);
    if (cfg->nnets == 0) {
        vjson_null(b, "net");
    } else {
        vjson_array_begin(b, "net");
        for (unsigned i = 0; i < cfg->nnets; i++)
            net_config_add_json(b, &cfg->nets[i]);
        vjson_array_end(b);
    }
    vjson_object_end(b);
    return json_builder_get_root(b);
}
