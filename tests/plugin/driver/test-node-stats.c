/* driver/node-stats.c against files laid out like /proc, /sys and
 * /sys/class/dmi/id, and driver/keycodes.c's translation. */
#include <glib.h>
#include <glib/gstdio.h>
#include <libvirt/libvirt.h>
#include <string.h>
#include <unistd.h>

#include "driver/node-stats.h"
#include "util/virt-error.h"
#include "driver/keycodes.h"

static void put(const char *dir, const char *name, const char *text)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autofree char *parent = g_path_get_dirname(path);
    g_assert_cmpint(g_mkdir_with_parents(parent, 0700), ==, 0);
    g_assert_true(g_file_set_contents(path, text, -1, NULL));
}

static uint64_t value_of(const struct node_stat *s, unsigned n, const char *field)
{
    for (unsigned i = 0; i < n; i++)
        if (g_str_equal(s[i].field, field))
            return s[i].value;
    g_error("no field %s", field);
}

static void test_memory_two_nodes(void)
{
    g_autofree char *root = g_dir_make_tmp("node-stats-XXXXXX", NULL);
    put(root, "proc/meminfo", "MemTotal:       1000 kB\nMemFree:         400 kB\nMemAvailable: 600 kB\n"
                              "Buffers:          20 kB\nCached:          300 kB\nSwapCached: 7 kB\n");
    put(root, "sys/devices/system/node/node0/meminfo", "Node 0 MemTotal: 600 kB\nNode 0 MemFree: 250 kB\n");
    put(root, "sys/devices/system/node/node1/meminfo", "Node 1 MemTotal: 400 kB\nNode 1 MemFree: 150 kB\n");
    g_autofree char *proc = g_build_filename(root, "proc", NULL);
    g_autofree char *sys = g_build_filename(root, "sys", NULL);
    struct node_stat s[NODE_STATS_MAX];
    unsigned n;
    g_assert_true(node_memory_stats(proc, sys, VIR_NODE_MEMORY_STATS_ALL_CELLS, s, &n, NULL));
    g_assert_cmpuint(n, ==, 4);
    g_assert_cmpuint(value_of(s, n, VIR_NODE_MEMORY_STATS_TOTAL), ==, 1000);
    g_assert_cmpuint(value_of(s, n, VIR_NODE_MEMORY_STATS_FREE), ==, 400);
    g_assert_cmpuint(value_of(s, n, VIR_NODE_MEMORY_STATS_BUFFERS), ==, 20);
    g_assert_cmpuint(value_of(s, n, VIR_NODE_MEMORY_STATS_CACHED), ==, 300); /* not SwapCached */
    g_assert_true(node_memory_stats(proc, sys, 1, s, &n, NULL));
    g_assert_cmpuint(n, ==, 2);
    g_assert_cmpuint(value_of(s, n, VIR_NODE_MEMORY_STATS_TOTAL), ==, 400);
    GError *error = NULL;
    g_assert_false(node_memory_stats(proc, sys, 2, s, &n, &error));
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG);
    g_clear_error(&error);

    uint64_t cells[4];
    g_assert_true(node_cells_free_memory(proc, sys, 0, 4, cells, &n, NULL));
    g_assert_cmpuint(n, ==, 2);
    g_assert_cmpuint(cells[0], ==, 250 * 1024);
    g_assert_cmpuint(cells[1], ==, 150 * 1024);
    g_assert_true(node_cells_free_memory(proc, sys, 1, 1, cells, &n, NULL));
    g_assert_cmpuint(n, ==, 1);
    g_assert_cmpuint(cells[0], ==, 150 * 1024);
    g_assert_false(node_cells_free_memory(proc, sys, 2, 1, cells, &n, &error));
    g_assert_nonnull(strstr(error->message, "start cell 2 out of range (0-1)"));
    g_clear_error(&error);
    /* Without NUMA nodes, node 0 is the whole host. */
    g_autofree char *nosys = g_build_filename(root, "nosys", NULL);
    g_assert_true(node_cells_free_memory(proc, nosys, 0, 4, cells, &n, NULL));
    g_assert_cmpuint(n, ==, 1);
    g_assert_cmpuint(cells[0], ==, 400 * 1024);
}

static void test_cpu(void)
{
    g_autofree char *root = g_dir_make_tmp("node-stats-XXXXXX", NULL);
    put(root, "stat", "cpu  10 1 5 100 3 2 1 0 0 0\ncpu0 4 0 2 50 1 1 1 0 0 0\ncpu1 6 1 3 50 2 1 0 0 0 0\n"
                      "intr 0\n");
    uint64_t tick = 1000000000ull / (uint64_t)sysconf(_SC_CLK_TCK);
    struct node_stat s[NODE_STATS_MAX];
    unsigned n;
    g_assert_true(node_cpu_stats(root, VIR_NODE_CPU_STATS_ALL_CPUS, s, &n, NULL));
    g_assert_cmpuint(n, ==, 4);
    g_assert_cmpuint(value_of(s, n, VIR_NODE_CPU_STATS_KERNEL), ==, (5 + 2 + 1) * tick);
    g_assert_cmpuint(value_of(s, n, VIR_NODE_CPU_STATS_USER), ==, (10 + 1) * tick);
    g_assert_cmpuint(value_of(s, n, VIR_NODE_CPU_STATS_IDLE), ==, 100 * tick);
    g_assert_cmpuint(value_of(s, n, VIR_NODE_CPU_STATS_IOWAIT), ==, 3 * tick);
    g_assert_true(node_cpu_stats(root, 1, s, &n, NULL));
    g_assert_cmpuint(value_of(s, n, VIR_NODE_CPU_STATS_USER), ==, 7 * tick);
    GError *error = NULL;
    g_assert_false(node_cpu_stats(root, 2, s, &n, &error));
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG);
    g_clear_error(&error);
    g_assert_false(node_cpu_stats(root, -2, s, &n, &error));
    g_clear_error(&error);
}

static void test_sysinfo(void)
{
    g_autofree char *dmi = g_dir_make_tmp("dmi-XXXXXX", NULL);
    GError *error = NULL;
    g_assert_null(node_sysinfo_xml(dmi, &error));
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR);
    g_assert_nonnull(strstr(error->message, "Host SMBIOS information is not available"));
    g_clear_error(&error);
    put(dmi, "bios_vendor", "SeaBIOS\n");
    put(dmi, "bios_version", "1.16\n");
    put(dmi, "sys_vendor", "ACME & Sons\n");
    put(dmi, "product_name", "Box <1>\n");
    put(dmi, "product_serial", "\n"); /* empty: left out */
    put(dmi, "chassis_asset_tag", "A-7\n");
    g_autofree char *xml = node_sysinfo_xml(dmi, &error);
    g_assert_no_error(error);
    g_assert_cmpstr(xml, ==,
                    "<sysinfo type='smbios'>\n"
                    "  <bios>\n    <entry name='vendor'>SeaBIOS</entry>\n    <entry name='version'>1.16</entry>\n  </bios>\n"
                    "  <system>\n    <entry name='manufacturer'>ACME &amp; Sons</entry>\n"
                    "    <entry name='product'>Box &lt;1&gt;</entry>\n  </system>\n"
                    "  <chassis>\n    <entry name='asset'>A-7</entry>\n  </chassis>\n"
                    "</sysinfo>\n");
}

static void test_keycodes(void)
{
    uint8_t press[8], release[8];
    unsigned np, nr;
    const uint32_t keys[] = { 42, 97 }; /* KEY_LEFTSHIFT, KEY_RIGHTCTRL */
    g_assert_true(keycodes_to_scancodes(VIR_KEYCODE_SET_LINUX, keys, 2, press, &np, release, &nr, NULL));
    const uint8_t want_press[] = { 0x2a, 0xe0, 0x1d }, want_release[] = { 0xe0, 0x9d, 0xaa };
    g_assert_cmpmem(press, np, want_press, sizeof(want_press));
    g_assert_cmpmem(release, nr, want_release, sizeof(want_release));
    const uint32_t up = 0xe048;
    g_assert_true(keycodes_to_scancodes(VIR_KEYCODE_SET_ATSET1, &up, 1, press, &np, release, &nr, NULL));
    g_assert_cmpmem(press, np, ((const uint8_t[]){ 0xe0, 0x48 }), 2);
    GError *error = NULL;
    g_assert_false(keycodes_to_scancodes(VIR_KEYCODE_SET_XT, &up, 1, press, &np, release, &nr, &error));
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG);
    g_clear_error(&error);
    const uint32_t zero = 0;
    g_assert_false(keycodes_to_scancodes(VIR_KEYCODE_SET_QNUM, &zero, 1, press, &np, release, &nr, &error));
    g_clear_error(&error);
    g_assert_false(keycodes_to_scancodes(VIR_KEYCODE_SET_OSX, keys, 1, press, &np, release, &nr, &error));
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_ARGUMENT_UNSUPPORTED);
    g_assert_nonnull(strstr(error->message, "os_x"));
    g_clear_error(&error);
    g_assert_false(keycodes_to_scancodes(42, keys, 1, press, &np, release, &nr, &error));
    g_assert_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG);
    g_clear_error(&error);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/node-stats/memory-two-nodes", test_memory_two_nodes);
    g_test_add_func("/node-stats/cpu", test_cpu);
    g_test_add_func("/node-stats/sysinfo", test_sysinfo);
    g_test_add_func("/node-stats/keycodes", test_keycodes);
    return g_test_run();
}
