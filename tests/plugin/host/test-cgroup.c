/* plugin/host/cgroup.c against directories LAID OUT LIKE cgroup mounts, not
 * against the kernel: a temporary directory holds the files the kernel
 * would show (cgroup.controllers, a domain cgroup's interface files, empty
 * until written) and a stand-in for /proc/self/cgroup. What this checks is
 * the choice of hierarchy and directory and what is written to which file;
 * the kernel's own rules (a cgroup with processes refusing controllers for
 * its children, what a write of "0" to cgroup.procs moves) are not
 * exercised. These hosts have no controller in their unified hierarchy, so
 * the v2 path cannot run against the kernel here. */
#include <glib.h>
#include <glib/gstdio.h>
#include <libvirt/virterror.h>
#include <string.h>
#include <unistd.h>

#include "host/cgroup.h"
#include "util/virt-error.h"

#define MIB 1024ull

struct layout {
    char *root;
    char *self;
    struct cgroup_host host;
};

static void put(const char *dir, const char *file, const char *text)
{
    g_assert_cmpint(g_mkdir_with_parents(dir, 0755), ==, 0);
    g_autofree char *path = g_build_filename(dir, file, NULL);
    g_assert_true(g_file_set_contents(path, text, -1, NULL));
}

static char *get(const char *dir, const char *file)
{
    g_autofree char *path = g_build_filename(dir, file, NULL);
    char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        g_error("%s was not written", path);
    return text;
}

static void layout_init(struct layout *l, const char *self_text)
{
    l->root = g_dir_make_tmp("vsnap-cgroup-XXXXXX", NULL);
    g_assert_nonnull(l->root);
    l->self = g_build_filename(l->root, "self-cgroup", NULL);
    put(l->root, "self-cgroup", self_text);
    l->host = (struct cgroup_host){.root = l->root, .self = l->self};
}

static void remove_tree(const char *dir)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        g_autofree char *path = g_build_filename(dir, name, NULL);
        if (g_file_test(path, G_FILE_TEST_IS_DIR))
            remove_tree(path);
        else
            g_unlink(path);
    }
    g_rmdir(dir);
}

static void layout_clear(struct layout *l)
{
    remove_tree(l->root);
    g_free(l->root);
    g_free(l->self);
}

/* A domain cgroup as the kernel makes it on mkdir: its interface files. */
static void kernel_files(const char *dir, const char *const *files)
{
    for (const char *const *f = files; *f; f++)
        put(dir, *f, "");
}

static const char *const v2_files[] = {"cgroup.procs", "memory.max", "memory.high", "memory.swap.max",
                                       "cpu.weight", "cpu.max", NULL};

static struct domain_def *tuned(uint64_t shares, uint64_t quota)
{
    struct domain_def *def = g_new0(struct domain_def, 1);
    def->name = g_strdup("d1");
    def->memtune.hard_limit_kib = 256 * MIB;
    def->memtune.soft_limit_kib = 192 * MIB;
    def->memtune.swap_hard_limit_kib = 320 * MIB;
    def->cputune.shares = shares;
    def->cputune.period_us = 100000;
    def->cputune.quota_us = quota;
    return def;
}

static void close_procs(GArray *procs)
{
    for (guint i = 0; i < procs->len; i++)
        close(g_array_index(procs, int, i));
    g_array_unref(procs);
}

/* A unified host whose daemon cgroup (/svc) offers memory and cpu: one v2
 * cgroup beside the daemon, libvirt's values in v2's files. */
static void test_v2_files(void)
{
    struct layout l;
    layout_init(&l, "0::/svc\n");
    put(l.root, "cgroup.controllers", "cpuset cpu io memory pids\n");
    g_autofree char *svc = g_build_filename(l.root, "svc", NULL);
    put(svc, "cgroup.controllers", "cpuset cpu io memory pids\n");
    put(svc, "cgroup.subtree_control", "");
    g_autoptr(GPtrArray) dirs = cgroup_dirs_on(&l.host, "/run/x", "d1");
    g_assert_cmpuint(dirs->len, ==, 1);
    const char *dir = dirs->pdata[0];
    g_autofree char *parent = g_path_get_dirname(dir);
    g_assert_cmpstr(parent, ==, svc);
    kernel_files(dir, v2_files);

    g_autoptr(domain_def) def = tuned(512, 50000);
    GArray *procs = NULL;
    g_autoptr(GError) error = NULL;
    g_assert_true(cgroup_create_on(&l.host, "/run/x", def, &procs, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(procs->len, ==, 1);
    close_procs(procs);
    g_autofree char *subtree = get(svc, "cgroup.subtree_control");
    g_autofree char *max = get(dir, "memory.max"), *high = get(dir, "memory.high");
    g_autofree char *swap = get(dir, "memory.swap.max"), *weight = get(dir, "cpu.weight");
    g_autofree char *cpu_max = get(dir, "cpu.max");
    g_assert_cmpstr(subtree, ==, "+memory +cpu");
    g_assert_cmpstr(max, ==, "268435456");
    g_assert_cmpstr(high, ==, "201326592");
    g_assert_cmpstr(swap, ==, "67108864");      /* swap_hard_limit is memory plus swap */
    g_assert_cmpstr(weight, ==, "512");         /* libvirt: <shares> is cpu.weight on v2 */
    g_assert_cmpstr(cpu_max, ==, "50000 100000");
    layout_clear(&l);
}

static void test_v2_period_alone_and_weight_range(void)
{
    struct layout l;
    layout_init(&l, "0::/\n");
    put(l.root, "cgroup.controllers", "cpu memory\n");
    put(l.root, "cgroup.subtree_control", "");
    g_autoptr(GPtrArray) dirs = cgroup_dirs_on(&l.host, "/run/x", "d1");
    kernel_files(dirs->pdata[0], v2_files);
    g_autoptr(domain_def) def = tuned(0, 0);
    GArray *procs = NULL;
    g_autoptr(GError) error = NULL;
    g_assert_true(cgroup_create_on(&l.host, "/run/x", def, &procs, &error));
    close_procs(procs);
    g_autofree char *cpu_max = get(dirs->pdata[0], "cpu.max");
    g_assert_cmpstr(cpu_max, ==, "max 100000");
    /* v1's shares go to 262144; v2's weight stops at 10000. */
    g_autoptr(domain_def) heavy = tuned(20000, 0);
    g_assert_false(cgroup_create_on(&l.host, "/run/x", heavy, &procs, &error));
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED);
    g_assert_nonnull(strstr(error->message, "outside 1..10000"));
    close_procs(procs);
    layout_clear(&l);
}

/* Once the daemon moved itself into its leaf (its cgroup held processes),
 * /proc/self/cgroup names the leaf: the next domain's cgroup, and the
 * removal of the first one's, are still beside the leaf, not inside it. */
static void test_v2_parent_after_the_daemon_moved(void)
{
    struct layout l;
    layout_init(&l, "0::/svc\n");
    put(l.root, "cgroup.controllers", "cpu memory\n");
    g_autofree char *svc = g_build_filename(l.root, "svc", NULL);
    g_autofree char *leaf = g_build_filename(svc, "virtvsnapd", NULL);
    put(svc, "cgroup.controllers", "cpu memory\n");
    put(leaf, "cgroup.controllers", "cpu memory\n");
    g_autoptr(GPtrArray) before = cgroup_dirs_on(&l.host, "/run/x", "d1");
    put(l.root, "self-cgroup", "0::/svc/virtvsnapd\n");
    g_autoptr(GPtrArray) after = cgroup_dirs_on(&l.host, "/run/x", "d1");
    g_assert_cmpuint(after->len, ==, 1);
    g_assert_cmpstr(after->pdata[0], ==, before->pdata[0]);
    g_autofree char *parent = g_path_get_dirname(after->pdata[0]);
    g_assert_cmpstr(parent, ==, svc);
    /* So the removal finds it. */
    g_assert_cmpint(g_mkdir(after->pdata[0], 0755), ==, 0);
    cgroup_remove_on(&l.host, "/run/x", "d1");
    g_assert_false(g_file_test(after->pdata[0], G_FILE_TEST_EXISTS));
    layout_clear(&l);
}

/* A hybrid host (these machines): a unified mount with no controllers, so
 * the v1 memory and cpu hierarchies, each at the daemon's own cgroup. */
static void test_hybrid_uses_v1(void)
{
    struct layout l;
    layout_init(&l, "4:memory:/m\n1:cpu:/c\n0::/\n");
    g_autofree char *unified = g_build_filename(l.root, "unified", NULL);
    put(unified, "cgroup.controllers", "hugetlb\n");
    g_autofree char *memory = g_build_filename(l.root, "memory", NULL);
    g_autofree char *cpu = g_build_filename(l.root, "cpu", NULL);
    put(memory, "cgroup.procs", "");
    put(cpu, "cgroup.procs", "");
    g_autoptr(GPtrArray) dirs = cgroup_dirs_on(&l.host, "/run/x", "d1");
    g_assert_cmpuint(dirs->len, ==, 2);
    g_assert_true(g_str_has_prefix(dirs->pdata[0], memory));
    g_assert_true(g_str_has_prefix(dirs->pdata[1], cpu));
    static const char *const v1_memory[] = {"cgroup.procs", "memory.limit_in_bytes", "memory.soft_limit_in_bytes",
                                            "memory.memsw.limit_in_bytes", NULL};
    static const char *const v1_cpu[] = {"cgroup.procs", "cpu.shares", "cpu.cfs_period_us", "cpu.cfs_quota_us",
                                         NULL};
    kernel_files(dirs->pdata[0], v1_memory);
    kernel_files(dirs->pdata[1], v1_cpu);
    g_autoptr(domain_def) def = tuned(20000, 50000);   /* a v1 weight v2 would refuse */
    GArray *procs = NULL;
    g_autoptr(GError) error = NULL;
    g_assert_true(cgroup_create_on(&l.host, "/run/x", def, &procs, &error));
    g_assert_cmpuint(procs->len, ==, 2);
    close_procs(procs);
    g_autofree char *limit = get(dirs->pdata[0], "memory.limit_in_bytes");
    g_autofree char *memsw = get(dirs->pdata[0], "memory.memsw.limit_in_bytes");
    g_autofree char *shares = get(dirs->pdata[1], "cpu.shares");
    g_autofree char *quota = get(dirs->pdata[1], "cpu.cfs_quota_us");
    g_assert_cmpstr(limit, ==, "268435456");
    g_assert_cmpstr(memsw, ==, "335544320");
    g_assert_cmpstr(shares, ==, "20000");
    g_assert_cmpstr(quota, ==, "50000");
    layout_clear(&l);
}

/* v2 whose daemon cgroup lacks cpu, and no v1 hierarchies: limits cannot be
 * applied, and the start says so. */
static void test_v2_without_cpu_refuses_limits(void)
{
    struct layout l;
    layout_init(&l, "0::/\n");
    put(l.root, "cgroup.controllers", "memory pids\n");
    g_autoptr(GPtrArray) dirs = cgroup_dirs_on(&l.host, "/run/x", "d1");
    g_assert_cmpuint(dirs->len, ==, 0);
    g_autoptr(domain_def) def = tuned(512, 0);
    GArray *procs = NULL;
    g_autoptr(GError) error = NULL;
    g_assert_false(cgroup_create_on(&l.host, "/run/x", def, &procs, &error));
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED);
    close_procs(procs);
    layout_clear(&l);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/cgroup/v2/files", test_v2_files);
    g_test_add_func("/cgroup/v2/period-alone-and-weight-range", test_v2_period_alone_and_weight_range);
    g_test_add_func("/cgroup/v2/parent-after-the-daemon-moved", test_v2_parent_after_the_daemon_moved);
    g_test_add_func("/cgroup/hybrid-uses-v1", test_hybrid_uses_v1);
    g_test_add_func("/cgroup/v2/without-cpu-refuses-limits", test_v2_without_cpu_refuses_limits);
    return g_test_run();
}
