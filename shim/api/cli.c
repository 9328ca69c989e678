/* Command line: GOption for the options, Cloud Hypervisor's key=value syntax
 * inside their values. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "api/cli.h"

#include <string.h>

#include "api/options.h"
#include "config/shim-error.h"
#include "config/vm-config-json.h"

struct raw_options {
    char *kernel, *initramfs, *cmdline, *memory, *cpus, *serial, *console, *vsock, *rng, *platform;
    char **disks; /* one --disk each */
    char **nets;  /* one --net each */
    char *seccomp, *confine;
};

static void raw_options_clear(struct raw_options *raw)
{
    g_free(raw->kernel);
    g_free(raw->initramfs);
    g_free(raw->cmdline);
    g_free(raw->memory);
    g_free(raw->cpus);
    g_free(raw->serial);
    g_free(raw->console);
    g_free(raw->vsock);
    g_free(raw->rng);
    g_free(raw->platform);
    g_strfreev(raw->disks);
    g_strfreev(raw->nets);
    g_free(raw->seccomp);
    g_free(raw->confine);
}

static bool set_mode_with_value(struct console_config *out, enum console_mode mode,
                                const char *option, const char *key, const char *value,
                                GError **error)
{
    if (!value || !*value) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "%s: %s= needs a path", option, key);
        return false;
    }
    out->mode = mode;
    if (mode == CONSOLE_MODE_FILE)
        out->file = g_strdup(value);
    else
        out->socket = g_strdup(value);
    return true;
}

/* "off", "null", "tty", "pty", "file=F", "socket=P" */
bool cli_parse_console(const char *option, const char *spec, struct console_config *out,
                       GError **error)
{
    static const char *const keys[] = { "off", "null", "tty", "pty", "file", "socket", NULL };
    static const struct { const char *word; enum console_mode mode; } bare[] = {
        { "off", CONSOLE_MODE_OFF }, { "null", CONSOLE_MODE_NULL },
        { "tty", CONSOLE_MODE_TTY }, { "pty", CONSOLE_MODE_PTY },
    };
    g_autoptr(option_list) opts = option_list_parse(option, spec, keys, error);
    if (!opts)
        return false;
    if (strchr(spec, ',')) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "%s: give one of off, null, tty, pty, file=<path>, socket=<path>", option);
        return false;
    }
    g_clear_pointer(&out->file, g_free);
    g_clear_pointer(&out->socket, g_free);
    const char *key = option_list_first_key(opts);
    const char *value = option_list_get(opts, key);
    if (strcmp(key, "file") == 0)
        return set_mode_with_value(out, CONSOLE_MODE_FILE, option, key, value, error);
    if (strcmp(key, "socket") == 0)
        return set_mode_with_value(out, CONSOLE_MODE_SOCKET, option, key, value, error);
    for (size_t i = 0; i < G_N_ELEMENTS(bare); i++) {
        if (strcmp(key, bare[i].word) == 0 && !*value) {
            out->mode = bare[i].mode;
            return true;
        }
    }
    g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "%s: '%s' takes no value", option, key);
    return false;
}

static bool get_bool(const struct option_list *opts, const char *option, const char *key,
                     bool *out, GError **error)
{
    const char *value = option_list_get(opts, key);
    if (!value)
        return true;
    if (!parse_bool(value, out, error)) {
        g_prefix_error(error, "%s %s=: ", option, key);
        return false;
    }
    return true;
}

bool cli_parse_memory(const char *spec, struct memory_config *out, GError **error)
{
    static const char *const keys[] = { "size", "shared", "hugepages", "hugepage_size", "prefault", NULL };
    g_autoptr(option_list) opts = option_list_parse("--memory", spec, keys, error);
    if (!opts)
        return false;
    const char *size = option_list_get(opts, "size");
    if (size && !parse_size(size, &out->size, error)) {
        g_prefix_error(error, "--memory size=: ");
        return false;
    }
    const char *huge = option_list_get(opts, "hugepage_size");
    if (huge && !parse_size(huge, &out->hugepage_size, error)) {
        g_prefix_error(error, "--memory hugepage_size=: ");
        return false;
    }
    return get_bool(opts, "--memory", "shared", &out->shared, error) &&
           get_bool(opts, "--memory", "hugepages", &out->hugepages, error) &&
           get_bool(opts, "--memory", "prefault", &out->prefault, error);
}

static bool get_uint(const struct option_list *opts, const char *option, const char *key,
                     uint64_t max, uint64_t *out, GError **error)
{
    const char *value = option_list_get(opts, key);
    if (!value)
        return true;
    if (!parse_uint(value, max, out, error)) {
        g_prefix_error(error, "%s %s=: ", option, key);
        return false;
    }
    return true;
}

bool cli_parse_cpus(const char *spec, struct cpus_config *out, GError **error)
{
    static const char *const keys[] = { "boot", "max", NULL };
    g_autoptr(option_list) opts = option_list_parse("--cpus", spec, keys, error);
    uint64_t boot = out->boot_vcpus, max = 0;

    if (!opts || !get_uint(opts, "--cpus", "boot", UINT32_MAX, &boot, error) ||
        !get_uint(opts, "--cpus", "max", UINT32_MAX, &max, error))
        return false;
    out->boot_vcpus = (unsigned)boot;
    out->max_vcpus = option_list_has(opts, "max") ? (unsigned)max : (unsigned)boot;
    return true;
}

bool cli_parse_vsock(const char *spec, struct vsock_config *out, GError **error)
{
    static const char *const keys[] = { "cid", "socket", "readiness_port", "notify_port", NULL };
    g_autoptr(option_list) opts = option_list_parse("--vsock", spec, keys, error);
    uint64_t cid = 0, port = out->readiness_port, notify_port = out->notify_port;

    if (!opts || !get_uint(opts, "--vsock", "cid", UINT32_MAX, &cid, error) ||
        !get_uint(opts, "--vsock", "readiness_port", UINT32_MAX, &port, error) ||
        !get_uint(opts, "--vsock", "notify_port", UINT32_MAX, &notify_port, error))
        return false;
    if (!option_list_has(opts, "cid") || !option_list_has(opts, "socket")) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "--vsock: cid= and socket= are required");
        return false;
    }
    out->present = true;
    out->cid = (uint32_t)cid;
    out->readiness_port = (uint32_t)port;
    out->notify_port = (uint32_t)notify_port;
    g_free(out->socket);
    out->socket = g_strdup(option_list_get(opts, "socket"));
    return true;
}

/* Cloud Hypervisor's --rng src=<path>; vsnap adds a byte rate limit. */
bool cli_parse_rng(const char *spec, struct rng_config *out, GError **error)
{
    static const char *const keys[] = { "src", "bw_size", "bw_one_time_burst", "bw_refill_time", NULL };
    g_autoptr(option_list) opts = option_list_parse("--rng", spec, keys, error);
    if (!opts || !get_uint(opts, "--rng", "bw_size", UINT64_MAX, &out->bandwidth.size, error) ||
        !get_uint(opts, "--rng", "bw_one_time_burst", UINT64_MAX, &out->bandwidth.one_time_burst, error) ||
        !get_uint(opts, "--rng", "bw_refill_time", UINT64_MAX, &out->bandwidth.refill_time_ms, error))
        return false;
    out->present = true;
    g_free(out->src);
    const char *src = option_list_get(opts, "src");
    out->src = g_strdup(src && *src ? src : VSNAP_DEFAULT_RNG_SOURCE);
    return true;
}

/* Cloud Hypervisor's --platform serial_number=..,uuid=..,oem_strings=[a,b]. */
bool cli_parse_platform(const char *spec, struct platform_config *out, GError **error)
{
    static const char *const keys[] = { "serial_number", "uuid", "oem_strings", NULL };
    g_autoptr(option_list) opts = option_list_parse("--platform", spec, keys, error);
    if (!opts)
        return false;
    const char *serial = option_list_get(opts, "serial_number");
    const char *uuid = option_list_get(opts, "uuid");
    const char *oem = option_list_get(opts, "oem_strings");
    if (serial) {
        g_free(out->serial_number);
        out->serial_number = g_strdup(serial);
    }
    if (uuid) {
        g_free(out->uuid);
        out->uuid = g_strdup(uuid);
    }
    if (oem) {
        char **list = parse_list(oem, error);
        if (!list) {
            g_prefix_error(error, "--platform oem_strings=: ");
            return false;
        }
        g_strfreev(out->oem_strings);
        out->oem_strings = list;
    }
    return true;
}

static void get_string(const struct option_list *opts, const char *key, char **out)
{
    const char *value = option_list_get(opts, key);
    if (value) {
        g_free(*out);
        *out = g_strdup(value);
    }
}

/* Cloud Hypervisor spells image types in lower case on its command line. */
static void set_image_type(const struct option_list *opts, struct disk_config *out)
{
    const char *value = option_list_get(opts, "image_type");
    if (!value)
        return;
    g_free(out->image_type);
    out->image_type = g_ascii_strcasecmp(value, "raw") == 0 ? g_strdup("Raw") : g_strdup(value);
}

bool cli_parse_disk(const char *spec, struct disk_config *out, GError **error)
{
    static const char *const keys[] = { "path", "readonly", "direct", "sparse", "id", "serial",
                                        "num_queues", "queue_size", "image_type", "vsnap_io", NULL };
    g_autoptr(option_list) opts = option_list_parse("--disk", spec, keys, error);
    uint64_t queues = out->num_queues, size = out->queue_size;

    if (!opts || !get_bool(opts, "--disk", "readonly", &out->readonly, error) ||
        !get_bool(opts, "--disk", "direct", &out->direct, error) ||
        !get_bool(opts, "--disk", "sparse", &out->sparse, error) ||
        !get_uint(opts, "--disk", "num_queues", UINT32_MAX, &queues, error) ||
        !get_uint(opts, "--disk", "queue_size", UINT32_MAX, &size, error))
        return false;
    if (!option_list_has(opts, "path") || !*option_list_get(opts, "path")) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "--disk: path= is required");
        return false;
    }
    get_string(opts, "path", &out->path);
    get_string(opts, "id", &out->id);
    get_string(opts, "serial", &out->serial);
    get_string(opts, "vsnap_io", &out->vsnap_io);
    set_image_type(opts, out);
    out->num_queues = (uint32_t)queues;
    out->queue_size = (uint32_t)size;
    return true;
}

static bool add_disks(char **specs, struct vm_config *cfg, GError **error)
{
    for (char **spec = specs; spec && *spec; spec++) {
        struct disk_config disk;
        disk_config_init(&disk);
        bool ok = cli_parse_disk(*spec, &disk, error);
        if (ok)
            vm_config_add_disk(cfg, &disk);
        disk_config_clear(&disk);
        if (!ok)
            return false;
    }
    vm_config_name_disks(cfg);
    return true;
}

/* Cloud Hypervisor's --net: tap=,ip=,mask=,mac=,host_mac=,mtu=,num_queues=,
 * queue_size=,id=,offload_csum= (its fd= takes inherited descriptors, which
 * only the API's SCM_RIGHTS hands over here). */
bool cli_parse_net(const char *spec, struct net_config *out, GError **error)
{
    static const char *const keys[] = { "tap", "ip", "mask", "mac", "host_mac", "mtu", "num_queues", "queue_size",
                                        "id", "offload_csum", NULL };
    g_autoptr(option_list) opts = option_list_parse("--net", spec, keys, error);
    uint64_t mtu = out->mtu, queues = out->num_queues, size = out->queue_size;
    if (!opts || !get_uint(opts, "--net", "mtu", UINT32_MAX, &mtu, error) ||
        !get_uint(opts, "--net", "num_queues", UINT32_MAX, &queues, error) ||
        !get_uint(opts, "--net", "queue_size", UINT32_MAX, &size, error) ||
        !get_bool(opts, "--net", "offload_csum", &out->offload_csum, error))
        return false;
    const char *const strings[] = { "tap", "ip", "mask", "mac", "host_mac", "id" };
    char **slots[] = { &out->tap, &out->ip, &out->mask, &out->mac, &out->host_mac, &out->id };
    for (unsigned i = 0; i < G_N_ELEMENTS(strings); i++) {
        const char *value = option_list_get(opts, strings[i]);
        if (value && *value) /* Cloud Hypervisor's "tap=" is no tap */
            get_string(opts, strings[i], slots[i]);
    }
    out->mtu = (uint32_t)mtu;
    out->num_queues = (uint32_t)queues;
    out->queue_size = (uint32_t)size;
    return true;
}

static bool add_nets(char **specs, struct vm_config *cfg, GError **error)
{
    for (char **spec = specs; spec && *spec; spec++) {
        struct net_config net;
        net_config_init(&net);
        bool ok = cli_parse_net(*spec, &net, error);
        if (ok)
            vm_config_add_net(cfg, &net);
        net_config_clear(&net);
        if (!ok)
            return false;
    }
    vm_config_name_nets(cfg);
    return true;
}

struct events *cli_open_event_monitor(const char *spec, GError **error)
{
    static const char *const keys[] = { "path", "fd", NULL };
    g_autoptr(option_list) opts = option_list_parse("--event-monitor", spec, keys, error);
    if (!opts)
        return NULL;
    const char *path = option_list_get(opts, "path");
    const char *fd_text = option_list_get(opts, "fd");
    if ((path == NULL) == (fd_text == NULL)) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "--event-monitor: give exactly one of path=<file> or fd=<n>");
        return NULL;
    }
    uint64_t fd = 0;
    struct events *events = NULL;
    if (path)
        events = events_open_path(path, error);
    else if (!parse_uint(fd_text, G_MAXINT, &fd, error))
        g_prefix_error(error, "fd=: ");
    else
        events = events_adopt_fd((int)fd, error);
    if (!events)
        g_prefix_error(error, "--event-monitor: ");
    return events;
}

static gboolean count_verbose(const char *name, const char *value, gpointer data, GError **error)
{
    struct shim_options *out = data;
    out->verbosity++;
    return true;
}

static bool build_direct_config(const struct raw_options *raw, struct shim_options *out,
                                GError **error)
{
    g_autoptr(vm_config) cfg = vm_config_new_default();

    cfg->payload.kernel = g_strdup(raw->kernel);
    cfg->payload.initramfs = g_strdup(raw->initramfs);
    cfg->payload.cmdline = g_strdup(raw->cmdline);
    if ((raw->memory && !cli_parse_memory(raw->memory, &cfg->memory, error)) ||
        (raw->cpus && !cli_parse_cpus(raw->cpus, &cfg->cpus, error)) ||
        (raw->serial && !cli_parse_console("--serial", raw->serial, &cfg->serial, error)) ||
        (raw->console && !cli_parse_console("--console", raw->console, &cfg->console, error)) ||
        (raw->vsock && !cli_parse_vsock(raw->vsock, &cfg->vsock, error)) ||
        (raw->rng && !cli_parse_rng(raw->rng, &cfg->rng, error)) ||
        (raw->platform && !cli_parse_platform(raw->platform, &cfg->platform, error)) ||
        !add_disks(raw->disks, cfg, error) || !add_nets(raw->nets, cfg, error))
        return false;
    if (!vm_config_validate(cfg, error))
        return false;
    out->direct_config = g_steal_pointer(&cfg);
    return true;
}

/* Options of the direct mode without --kernel would be silently unused. */
static bool check_direct_options(const struct raw_options *raw, GError **error)
{
    if (raw->kernel)
        return true;
    if (raw->initramfs || raw->cmdline || raw->memory || raw->cpus || raw->serial ||
        raw->console || raw->vsock || raw->rng || raw->platform || raw->disks || raw->nets) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "--initramfs, --cmdline, --memory, --cpus, --serial, --console, --vsock, --rng, "
                    "--platform, --disk and --net need --kernel (or send them in vm.create)");
        return false;
    }
    return true;
}

static GOptionContext *make_context(struct shim_options *out, struct raw_options *raw)
{
    /* raw->seccomp and raw->confine are parsed after GOption is done. */
    const GOptionEntry entries[] = {
        { "api-socket", 0, 0, G_OPTION_ARG_STRING, &out->api_socket,
          "Serve the REST API on a UNIX socket", "path=<socket>|fd=<n>" },
        { "event-monitor", 0, 0, G_OPTION_ARG_STRING, &out->event_monitor,
          "Write one JSON event per line", "path=<file>|fd=<n>" },
        { "log-file", 0, 0, G_OPTION_ARG_FILENAME, &out->log_file, "Log to a file", "<file>" },
        { "verbose", 'v', G_OPTION_FLAG_NO_ARG, G_OPTION_ARG_CALLBACK, (gpointer)count_verbose,
          "More log output (repeat for more)", NULL },
        { "version", 'V', 0, G_OPTION_ARG_NONE, &out->version, "Print the version", NULL },
        { "seccomp", 0, 0, G_OPTION_ARG_STRING, &raw->seccomp,
          "Per-thread system call allow-lists (default true; log: report, do not kill)",
          "true|false|log" },
        { "confine", 0, 0, G_OPTION_ARG_STRING, &raw->confine,
          "Run in namespaces and a jail of only the listed paths, as an unprivileged user once "
          "the guest starts",
          "root=<dir>,user=<name>|uid=<n>,gid=<n>[,paths=<file>][,hostname=<name>]" },
        { "store-config", 0, 0, G_OPTION_ARG_FILENAME, &out->store_config,
          "Store settings for store URLs in vm.snapshot / vm.restore: [store] connections, range_size, "
          "threads, level, frame_size, cache_dir, cache_size; [s3] endpoint, region, access_key, secret_key "
          "(else the AWS_* environment)",
          "<file>" },
        { "store-cache-dir", 0, 0, G_OPTION_ARG_FILENAME, &out->store_cache_dir,
          "Layer cache of store URLs (default: [store] cache_dir, else /var/cache/vsnap for root, "
          "$XDG_CACHE_HOME/vsnap otherwise)",
          "<dir>" },
        { "kernel", 0, 0, G_OPTION_ARG_FILENAME, &raw->kernel,
          "Create and boot a VM with this kernel at once", "<bzImage|vmlinux>" },
        { "initramfs", 0, 0, G_OPTION_ARG_FILENAME, &raw->initramfs, "Initramfs", "<file>" },
        { "cmdline", 0, 0, G_OPTION_ARG_STRING, &raw->cmdline, "Kernel command line", "<text>" },
        { "memory", 0, 0, G_OPTION_ARG_STRING, &raw->memory, "Guest RAM",
          "size=<512M>[,shared=on|off][,hugepages=on|off][,hugepage_size=2M][,prefault=on|off]" },
        { "cpus", 0, 0, G_OPTION_ARG_STRING, &raw->cpus, "vCPUs", "boot=<n>[,max=<n>]" },
        { "serial", 0, 0, G_OPTION_ARG_STRING, &raw->serial, "Serial port output",
          "off|null|tty|pty|file=<path>|socket=<path>" },
        { "console", 0, 0, G_OPTION_ARG_STRING, &raw->console,
          "virtio-console output (default tty)", "off|null|tty|pty|file=<path>|socket=<path>" },
        { "vsock", 0, 0, G_OPTION_ARG_STRING, &raw->vsock, "virtio-vsock device",
          "cid=<n>,socket=<path>[,readiness_port=<n>][,notify_port=<n>]" },
        { "rng", 0, 0, G_OPTION_ARG_STRING, &raw->rng, "virtio-rng device",
          "src=</dev/urandom>[,bw_size=<bytes>,bw_refill_time=<ms>[,bw_one_time_burst=<bytes>]]" },
        { "platform", 0, 0, G_OPTION_ARG_STRING, &raw->platform, "SMBIOS system identity",
          "[serial_number=<text>][,uuid=<uuid>][,oem_strings=[<text>,...]]" },
        { "disk", 0, 0, G_OPTION_ARG_STRING_ARRAY, &raw->disks, "virtio-blk disk (repeat for more)",
          "path=<raw image|block device>[,readonly=on][,direct=on][,sparse=off][,id=<id>][,serial=<s>]"
          "[,num_queues=<n>][,queue_size=<n>][,image_type=raw]" },
        { "net", 0, 0, G_OPTION_ARG_STRING_ARRAY, &raw->nets, "virtio-net on a tap (repeat for more)",
          "[tap=<name>][,mac=<mac>][,ip=<a.b.c.d>,mask=<a.b.c.d>][,host_mac=<mac>][,mtu=<n>][,id=<id>]"
          "[,num_queues=2][,queue_size=<n>][,offload_csum=on|off]" },
        { NULL },
    };
    GOptionContext *context = g_option_context_new("- a KVM VMM with Cloud Hypervisor's API");
    GOptionGroup *group = g_option_group_new("vsnap-shim", "vsnap-shim options", "Show options",
                                             out, NULL);
    g_option_group_add_entries(group, entries);
    g_option_context_set_main_group(context, group);
    g_option_context_set_description(context,
        "Either --api-socket (then vm.create / vm.boot over the API) or --kernel (create and\n"
        "boot at once), or both. Sizes take K, M or G suffixes.\n"
        "vm.restore's source_url may be a store ref (http(s)://host/prefix/ID, s3://bucket/prefix/ID) and\n"
        "vm.snapshot's destination_url a store prefix: imported through and pushed from the layer cache\n"
        "(--store-cache-dir); not in a confined shim (--confine).");
    return context;
}

static bool parse_sandbox_options(const struct raw_options *raw, struct shim_options *out,
                                  GError **error)
{
    out->seccomp = SANDBOX_SECCOMP_KILL;
    if (raw->seccomp && !sandbox_parse_mode(raw->seccomp, &out->seccomp, error))
        return false;
    if (!raw->confine)
        return true;
    out->confine = g_new0(struct sandbox_confine, 1);
    sandbox_confine_init(out->confine);
    return sandbox_confine_parse(raw->confine, out->confine, error);
}

bool shim_options_parse(int argc, char **argv, struct shim_options *out, GError **error)
{
    struct raw_options raw = { 0 };
    g_autoptr(GOptionContext) context = make_context(out, &raw);
    g_auto(GStrv) args = g_new0(char *, argc + 1);
    bool ok = false;

    for (int i = 0; i < argc; i++)
        args[i] = g_strdup(argv[i]);
    if (!g_option_context_parse_strv(context, &args, error))
        goto out;
    if (g_strv_length(args) > 1) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "unexpected argument '%s'", args[1]);
        goto out;
    }
    if (out->version) {
        ok = true;
        goto out;
    }
    if (!check_direct_options(&raw, error) || !parse_sandbox_options(&raw, out, error))
        goto out;
    if (!out->api_socket && !raw.kernel) {
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                    "nothing to do: give --api-socket path=<socket> or --kernel <file> (see --help)");
        goto out;
    }
    ok = !raw.kernel || build_direct_config(&raw, out, error);
out:
    raw_options_clear(&raw);
    return ok;
}

void shim_options_clear(struct shim_options *options)
{
    g_clear_pointer(&options->api_socket, g_free);
    g_clear_pointer(&options->event_monitor, g_free);
    g_clear_pointer(&options->log_file, g_free);
    g_clear_pointer(&options->store_config, g_free);
    g_clear_pointer(&options->store_cache_dir, g_free);
    g_clear_pointer(&options->direct_config, vm_config_free);
    if (options->confine) {
        sandbox_confine_clear(options->confine);
        g_clear_pointer(&options->confine, g_free);
    }
}
