#include "host/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <libvirt/libvirt.h>
#include <string.h>
#include <unistd.h>

#include "util/virt-error.h"

/* The daemon moves itself into this leaf of its own cgroup when v2 asks
 * for an empty parent (enable_v2_controllers). */
#define DAEMON_LEAF "virtvsnapd"
/* cgroup v2 lets a weight be 1..10000 (libvirt's range for <shares> there). */
#define V2_WEIGHT_MIN 1
#define V2_WEIGHT_MAX 10000

const struct cgroup_host cgroup_host_system = {
    .root = "/sys/fs/cgroup",
    .self = "/proc/self/cgroup",
};

/* ---- where ---- */

static bool controller_in(const char *list, const char *controller)
{
    g_auto(GStrv) names = g_strsplit(list, ",", -1);
    return g_strv_contains((const char *const *)names, controller);
}

/* The daemon's cgroup in a hierarchy: the path of the /proc/self/cgroup
 * line whose controller list holds `controller` (NULL: v2's "0::" line). */
static char *own_cgroup(const struct cgroup_host *host, const char *controller)
{
    g_autofree char *text = NULL;
    if (!g_file_get_contents(host->self, &text, NULL, NULL))
        return NULL;
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++) {
        g_auto(GStrv) f = g_strsplit(*l, ":", 3);
        if (g_strv_length(f) != 3)
            continue;
        if (controller ? controller_in(f[1], controller) : g_str_equal(f[0], "0") && !*f[1])
            return g_strdup(f[2]);
    }
    return NULL;
}

/* Where cgroup v2 is mounted: /sys/fs/cgroup on a unified host, its
 * unified/ directory on a hybrid one. */
static char *v2_mount(const struct cgroup_host *host)
{
    static const char *const under[] = {"", "unified"};
    for (size_t i = 0; i < G_N_ELEMENTS(under); i++) {
        g_autofree char *dir = g_build_filename(host->root, under[i], NULL);
        g_autofree char *file = g_build_filename(dir, "cgroup.controllers", NULL);
        if (g_file_test(file, G_FILE_TEST_EXISTS))
            return g_steal_pointer(&dir);
    }
    return NULL;
}

/* The daemon's v2 cgroup as it was before it moved into DAEMON_LEAF: the
 * domains' cgroups go beside that leaf, so every start and every removal
 * (of a cgroup made before the move) finds the same parent. */
static char *v2_home(const struct cgroup_host *host)
{
    g_autofree char *own = own_cgroup(host, NULL);
    if (!own)
        return NULL;
    g_autofree char *base = g_path_get_basename(own);
    return g_str_equal(base, DAEMON_LEAF) ? g_path_get_dirname(own) : g_steal_pointer(&own);
}

/* The v2 directory the daemon's domains go under, when that cgroup offers
 * both controllers the limits need. */
static char *v2_parent(const struct cgroup_host *host)
{
    g_autofree char *mount = v2_mount(host);
    g_autofree char *home = mount ? v2_home(host) : NULL;
    if (!home)
        return NULL;
    g_autofree char *dir = g_build_filename(mount, home, NULL);
    g_autofree char *file = g_build_filename(dir, "cgroup.controllers", NULL);
    g_autofree char *text = NULL;
    if (!g_file_get_contents(file, &text, NULL, NULL))
        return NULL;
    g_auto(GStrv) names = g_strsplit_set(g_strstrip(text), " ", -1);
    if (!g_strv_contains((const char *const *)names, "memory") ||
        !g_strv_contains((const char *const *)names, "cpu"))
        return NULL;
    return g_steal_pointer(&dir);
}

/* The v1 directory of a controller the domains go under. */
static char *v1_parent(const struct cgroup_host *host, const char *controller)
{
    g_autofree char *mount = g_build_filename(host->root, controller, NULL);
    g_autofree char *own = own_cgroup(host, controller);
    g_autofree char *tasks = g_build_filename(mount, "cgroup.procs", NULL);
    if (!own || !g_file_test(tasks, G_FILE_TEST_EXISTS))
        return NULL;
    return g_build_filename(mount, own, NULL);
}

static char *leaf_name(const char *run_dir, const char *name)
{
    g_autofree char *hash = g_compute_checksum_for_string(G_CHECKSUM_SHA256, run_dir, -1);
    return g_strdup_printf("vsnap-%s-%.8s", name, hash);
}

/* ---- writing ---- */

static bool write_file(const char *dir, const char *file, const char *value, GError **error)
{
    g_autofree char *path = g_build_filename(dir, file, NULL);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : write(fd, value, strlen(value));
    int err = errno;
    if (fd >= 0)
        close(fd);
    if (n < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot write %s to %s: %s",
                    value, path, g_strerror(err));
        return false;
    }
    return true;
}

static bool write_u64(const char *dir, const char *file, uint64_t value, GError **error)
{
    g_autofree char *text = g_strdup_printf("%" G_GUINT64_FORMAT, value);
    return write_file(dir, file, text, error);
}

/* As libvirt: <shares> is cpu.weight itself on v2, in v2's range (v1's
 * cpu.shares goes up to 262144, so a definition may hold what v2 refuses). */
static bool write_weight(const char *dir, uint64_t shares, GError **error)
{
    if (shares < V2_WEIGHT_MIN || shares > V2_WEIGHT_MAX) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<cputune><shares> %" G_GUINT64_FORMAT " is outside %d..%d, the range of "
                    "cpu.weight on this host's cgroup v2", shares, V2_WEIGHT_MIN, V2_WEIGHT_MAX);
        return false;
    }
    return write_u64(dir, "cpu.weight", shares, error);
}

static bool apply_v2(const char *dir, const struct domain_def *def, GError **error)
{
    uint64_t hard = def->memtune.hard_limit_kib, swap = def->memtune.swap_hard_limit_kib;
    bool ok = true;
    if (hard)
        ok = write_u64(dir, "memory.max", hard * 1024, error);
    if (ok && def->memtune.soft_limit_kib)
        ok = write_u64(dir, "memory.high", def->memtune.soft_limit_kib * 1024, error);
    /* swap_hard_limit is memory plus swap, as in v1; v2 limits swap alone. */
    if (ok && swap)
        ok = write_u64(dir, "memory.swap.max", swap > hard ? (swap - hard) * 1024 : 0, error);
    if (ok && def->cputune.shares)
        ok = write_weight(dir, def->cputune.shares, error);
    if (ok && (def->cputune.quota_us || def->cputune.period_us)) {
        uint64_t period = def->cputune.period_us ? def->cputune.period_us : 100000;
        g_autofree char *max = def->cputune.quota_us
                                   ? g_strdup_printf("%" G_GUINT64_FORMAT " %" G_GUINT64_FORMAT,
                                                     def->cputune.quota_us, period)
                                   : g_strdup_printf("max %" G_GUINT64_FORMAT, period);
        ok = write_file(dir, "cpu.max", max, error);
    }
    return ok;
}

static bool apply_v1_memory(const char *dir, const struct domain_def *def, GError **error)
{
    bool ok = true;
    if (def->memtune.hard_limit_kib)
        ok = write_u64(dir, "memory.limit_in_bytes", def->memtune.hard_limit_kib * 1024, error);
    if (ok && def->memtune.soft_limit_kib)
        ok = write_u64(dir, "memory.soft_limit_in_bytes", def->memtune.soft_limit_kib * 1024,
                       error);
    if (ok && def->memtune.swap_hard_limit_kib)
        ok = write_u64(dir, "memory.memsw.limit_in_bytes",
                       def->memtune.swap_hard_limit_kib * 1024, error);
    return ok;
}

static bool apply_v1_cpu(const char *dir, const struct domain_def *def, GError **error)
{
    bool ok = true;
    if (def->cputune.shares)
        ok = write_u64(dir, "cpu.shares", def->cputune.shares, error);
    if (ok && def->cputune.period_us)
        ok = write_u64(dir, "cpu.cfs_period_us", def->cputune.period_us, error);
    if (ok && def->cputune.quota_us)
        ok = write_u64(dir, "cpu.cfs_quota_us", def->cputune.quota_us, error);
    return ok;
}

/* ---- v2's rule of no processes in inner nodes ---- */

/* Controllers are handed to children through subtree_control, which a
 * cgroup holding processes (the daemon's, under systemd) refuses: the
 * daemon moves into a leaf of its own first. */
static bool enable_v2_controllers(const char *parent, GError **error)
{
    g_autoptr(GError) local = NULL;
    if (write_file(parent, "cgroup.subtree_control", "+memory +cpu", &local))
        return true;
    g_autofree char *leaf = g_build_filename(parent, DAEMON_LEAF, NULL);
    if (g_mkdir_with_parents(leaf, 0755) < 0 || !write_file(leaf, "cgroup.procs", "0", error))
        return false;
    return write_file(parent, "cgroup.subtree_control", "+memory +cpu", error);
}

/* ---- the interface ---- */

static void add_dir(GPtrArray *dirs, char *parent, const char *leaf)
{
    if (parent)
        g_ptr_array_add(dirs, g_build_filename(parent, leaf, NULL));
    g_free(parent);
}

/* The domain's cgroup directories; *v2 says which version they are. */
static GPtrArray *domain_dirs(const struct cgroup_host *host, const char *run_dir,
                              const char *name, bool *v2)
{
    g_autofree char *leaf = leaf_name(run_dir, name);
    GPtrArray *dirs = g_ptr_array_new_with_free_func(g_free);
    char *v2_dir = v2_parent(host);
    *v2 = v2_dir != NULL;
    if (v2_dir) {
        add_dir(dirs, v2_dir, leaf);
        return dirs;
    }
    add_dir(dirs, v1_parent(host, "memory"), leaf);
    add_dir(dirs, v1_parent(host, "cpu"), leaf);
    return dirs;
}

GPtrArray *cgroup_dirs_on(const struct cgroup_host *host, const char *run_dir, const char *name)
{
    bool v2;
    return domain_dirs(host, run_dir, name, &v2);
}

static bool open_procs(const char *dir, GArray *procs, GError **error)
{
    g_autofree char *path = g_build_filename(dir, "cgroup.procs", NULL);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot open %s: %s", path,
                    g_strerror(errno));
        return false;
    }
    g_array_append_val(procs, fd);
    return true;
}

static bool has_limits(const struct domain_def *def)
{
    return def->memtune.hard_limit_kib || def->memtune.soft_limit_kib ||
           def->memtune.swap_hard_limit_kib || def->cputune.shares || def->cputune.period_us ||
           def->cputune.quota_us;
}

static bool create_one(const struct cgroup_host *host, const char *dir, bool v2,
                       const struct domain_def *def, GArray *procs, GError **error)
{
    if (v2) {
        g_autofree char *parent = g_path_get_dirname(dir);
        if (!enable_v2_controllers(parent, error))
            return false;
    }
    if (g_mkdir(dir, 0755) < 0 && errno != EEXIST) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot create the cgroup %s: %s",
                    dir, g_strerror(errno));
        return false;
    }
    g_autofree char *memory_root = g_strconcat(host->root, "/memory/", NULL);
    bool memory = g_str_has_prefix(dir, memory_root);
    bool ok = v2 ? apply_v2(dir, def, error)
                 : memory ? apply_v1_memory(dir, def, error) : apply_v1_cpu(dir, def, error);
    return ok && open_procs(dir, procs, error);
}

bool cgroup_create_on(const struct cgroup_host *host, const char *run_dir,
                      const struct domain_def *def, GArray **procs, GError **error)
{
    *procs = g_array_new(FALSE, FALSE, sizeof(int));
    bool v2;
    g_autoptr(GPtrArray) dirs = domain_dirs(host, run_dir, def->name, &v2);
    g_autoptr(GError) local = NULL;
    for (guint i = 0; i < dirs->len; i++) {
        if (create_one(host, dirs->pdata[i], v2, def, *procs, &local))
            continue;
        if (has_limits(def)) {
            g_propagate_prefixed_error(error, g_steal_pointer(&local),
                                       "cannot apply <memtune>/<cputune>: ");
            return false;
        }
        g_warning("domain %s runs without a cgroup of its own: %s", def->name, local->message);
        g_clear_error(&local);
    }
    if (dirs->len == 0 && has_limits(def)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "cannot apply <memtune>/<cputune>: this host has neither cgroup v2 with the "
                    "memory and cpu controllers nor their v1 hierarchies");
        return false;
    }
    return true;
}

void cgroup_remove_on(const struct cgroup_host *host, const char *run_dir, const char *name)
{
    g_autoptr(GPtrArray) dirs = cgroup_dirs_on(host, run_dir, name);
    for (guint i = 0; i < dirs->len; i++)
        if (g_rmdir(dirs->pdata[i]) < 0 && errno != ENOENT)
            g_message("cannot remove the cgroup %s: %s", (char *)dirs->pdata[i],
                      g_strerror(errno));
}

bool cgroup_create(const char *run_dir, const struct domain_def *def, GArray **procs,
                   GError **error)
{
    return cgroup_create_on(&cgroup_host_system, run_dir, def, procs, error);
}

void cgroup_remove(const char *run_dir, const char *name)
{
    cgroup_remove_on(&cgroup_host_system, run_dir, name);
}

GPtrArray *cgroup_dirs(const char *run_dir, const char *name)
{
    return cgroup_dirs_on(&cgroup_host_system, run_dir, name);
}
