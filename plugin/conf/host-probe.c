/* What the host is, read from /proc and /sys: UUID, CPU, topology of the
 * online CPUs and NUMA cells with their memory. */
#include "conf/capabilities.h"

#include <string.h>

#include "conf/domain-conf.h"

#define SYS_CPU "/sys/devices/system/cpu"
#define SYS_NODE "/sys/devices/system/node"

static char *read_text(const char *path, GError **error)
{
    char *text = NULL;
    g_autoptr(GError) local = NULL;
    if (!g_file_get_contents(path, &text, NULL, &local)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR, "cannot read %s: %s", path, local->message);
        return NULL;
    }
    return g_strstrip(text);
}

/* A small number from a sysfs file; fallback if the file does not exist
 * (older kernels have no die_id or cluster_id). */
static unsigned read_unsigned(const char *path, unsigned fallback)
{
    g_autofree char *text = NULL;
    if (!g_file_get_contents(path, &text, NULL, NULL))
        return fallback;
    gint64 value = g_ascii_strtoll(text, NULL, 10);
    return value >= 0 && value <= G_MAXINT ? (unsigned)value : fallback;
}

/* SMBIOS product UUID first (what libvirt reports), else machine-id. An
 * all-zero or all-ones SMBIOS UUID is a firmware placeholder. */
static void probe_uuid(struct host_info *host)
{
    static const char *const sources[] = {"/sys/class/dmi/id/product_uuid", "/etc/machine-id"};
    static const unsigned char zeros[16], ones[16] = {
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    for (size_t i = 0; i < G_N_ELEMENTS(sources); i++) {
        g_autofree char *text = read_text(sources[i], NULL);
        if (text && domain_uuid_parse(text, host->uuid) && memcmp(host->uuid, zeros, 16) != 0 &&
            memcmp(host->uuid, ones, 16) != 0) {
            host->has_uuid = true;
            return;
        }
    }
}

static bool probe_cpu_topology(struct host_info *host, GError **error)
{
    g_autofree char *online = read_text(SYS_CPU "/online", error);
    g_autoptr(GArray) ids = g_array_new(false, false, sizeof(unsigned));
    if (!online || !host_parse_cpu_list(online, ids, error))
        return false;
    for (guint i = 0; i < ids->len; i++) {
        unsigned id = g_array_index(ids, unsigned, i);
        g_autofree char *dir = g_strdup_printf(SYS_CPU "/cpu%u/topology", id);
        g_autofree char *p_socket = g_build_filename(dir, "physical_package_id", NULL);
        g_autofree char *p_die = g_build_filename(dir, "die_id", NULL);
        g_autofree char *p_cluster = g_build_filename(dir, "cluster_id", NULL);
        g_autofree char *p_core = g_build_filename(dir, "core_id", NULL);
        g_autofree char *p_siblings = g_build_filename(dir, "thread_siblings_list", NULL);
        struct host_cpu_topology cpu = {
            .id = id,
            .socket_id = read_unsigned(p_socket, 0),
            .die_id = read_unsigned(p_die, 0),
            .cluster_id = read_unsigned(p_cluster, 0),
            .core_id = read_unsigned(p_core, id),
            .siblings = read_text(p_siblings, NULL),
        };
        if (!cpu.siblings)
            cpu.siblings = g_strdup_printf("%u", id);
        g_array_append_val(host->cpus, cpu);
    }
    host->online_cpus = ids->len;
    return true;
}

/* sockets, dies per socket, cores per die, threads per core, from the
 * distinct ids of the online CPUs. */
static void count_topology(struct host_info *host)
{
    g_autoptr(GHashTable) sockets = g_hash_table_new(g_direct_hash, g_direct_equal);
    g_autoptr(GHashTable) dies = g_hash_table_new(g_str_hash, g_str_equal);
    g_autoptr(GHashTable) cores = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, NULL);
    g_autoptr(GPtrArray) die_keys = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < host->cpus->len; i++) {
        const struct host_cpu_topology *cpu = &g_array_index(host->cpus, struct host_cpu_topology, i);
        g_hash_table_add(sockets, GUINT_TO_POINTER(cpu->socket_id + 1));
        char *die = g_strdup_printf("%u/%u", cpu->socket_id, cpu->die_id);
        g_ptr_array_add(die_keys, die);
        g_hash_table_add(dies, die);
        g_hash_table_add(cores, g_strdup_printf("%u/%u/%u/%u", cpu->socket_id, cpu->die_id, cpu->cluster_id,
                                                cpu->core_id));
    }
    unsigned n_sockets = MAX(g_hash_table_size(sockets), 1);
    unsigned n_dies = MAX(g_hash_table_size(dies), 1);
    unsigned n_cores = MAX(g_hash_table_size(cores), 1);
    host->sockets = n_sockets;
    host->dies = MAX(n_dies / n_sockets, 1);
    host->cores = MAX(n_cores / n_dies, 1);
    host->threads = MAX(host->online_cpus / n_cores, 1);
}

static void numa_cell_free(gpointer data)
{
    struct host_numa_cell *cell = data;
    g_array_unref(cell->cpus);
    g_array_unref(cell->distances);
    g_array_unref(cell->distance_ids);
    g_free(cell);
}

static struct host_numa_cell *numa_cell_new(unsigned id)
{
    struct host_numa_cell *cell = g_new0(struct host_numa_cell, 1);
    cell->id = id;
    cell->cpus = g_array_new(false, false, sizeof(unsigned));
    cell->distances = g_array_new(false, false, sizeof(unsigned));
    cell->distance_ids = g_array_new(false, false, sizeof(unsigned));
    return cell;
}

/* "Node 0 MemTotal:  5335256 kB" in nodeN/meminfo, "MemTotal: ..." in /proc/meminfo. */
static uint64_t mem_total_kib(const char *meminfo)
{
    const char *line = strstr(meminfo, "MemTotal:");
    return line ? g_ascii_strtoull(line + strlen("MemTotal:"), NULL, 10) : 0;
}

static bool probe_distances(struct host_numa_cell *cell, const GArray *node_ids, const char *dir)
{
    g_autofree char *path = g_build_filename(dir, "distance", NULL);
    g_autofree char *text = read_text(path, NULL);
    if (!text)
        return true; /* optional */
    g_auto(GStrv) values = g_strsplit_set(text, " \t", -1);
    guint n = 0;
    for (char **v = values; *v && n < node_ids->len; v++) {
        if (!**v)
            continue;
        unsigned distance = (unsigned)g_ascii_strtoull(*v, NULL, 10);
        g_array_append_val(cell->distances, distance);
        g_array_append_val(cell->distance_ids, g_array_index(node_ids, unsigned, n));
        n++;
    }
    return true;
}

static bool probe_numa_node(struct host_info *host, const GArray *node_ids, unsigned id, GError **error)
{
    g_autofree char *dir = g_strdup_printf(SYS_NODE "/node%u", id);
    g_autofree char *meminfo_path = g_build_filename(dir, "meminfo", NULL);
    g_autofree char *cpulist_path = g_build_filename(dir, "cpulist", NULL);
    g_autofree char *meminfo = read_text(meminfo_path, error);
    g_autofree char *cpulist = meminfo ? read_text(cpulist_path, error) : NULL;
    if (!cpulist)
        return false;
    struct host_numa_cell *cell = numa_cell_new(id);
    g_ptr_array_add(host->cells, cell);
    cell->memory_kib = mem_total_kib(meminfo);
    return host_parse_cpu_list(cpulist, cell->cpus, error) && probe_distances(cell, node_ids, dir);
}

/* Without NUMA support in the kernel there is no node directory: one cell
 * holds every CPU (and all memory, see host_info_probe), as libvirt reports it. */
static bool probe_single_cell(struct host_info *host)
{
    struct host_numa_cell *cell = numa_cell_new(0);
    g_ptr_array_add(host->cells, cell);
    for (guint i = 0; i < host->cpus->len; i++)
        g_array_append_val(cell->cpus, g_array_index(host->cpus, struct host_cpu_topology, i).id);
    return true;
}

static bool probe_numa(struct host_info *host, GError **error)
{
    g_autofree char *online = read_text(SYS_NODE "/online", NULL);
    if (!online)
        return probe_single_cell(host);
    g_autoptr(GArray) node_ids = g_array_new(false, false, sizeof(unsigned));
    if (!host_parse_cpu_list(online, node_ids, error))
        return false;
    for (guint i = 0; i < node_ids->len; i++)
        if (!probe_numa_node(host, node_ids, g_array_index(node_ids, unsigned, i), error))
            return false;
    return true;
}

static void cpu_topology_clear(gpointer data)
{
    g_free(((struct host_cpu_topology *)data)->siblings);
}

struct host_info *host_info_probe(GError **error)
{
    g_autoptr(host_info) host = g_new0(struct host_info, 1);
    host->cpus = g_array_new(false, true, sizeof(struct host_cpu_topology));
    g_array_set_clear_func(host->cpus, cpu_topology_clear);
    host->cells = g_ptr_array_new_with_free_func(numa_cell_free);
    host->cpu.flags = g_ptr_array_new_with_free_func(g_free);

    probe_uuid(host);
    g_autofree char *cpuinfo = read_text("/proc/cpuinfo", error);
    if (!cpuinfo || !host_cpu_parse_cpuinfo(cpuinfo, &host->cpu, error) || !probe_cpu_topology(host, error))
        return NULL;
    count_topology(host);
    g_autofree char *meminfo = read_text("/proc/meminfo", error);
    if (!meminfo || !probe_numa(host, error))
        return NULL;
    /* The host's memory is MemTotal, as nodeinfo reports it. A node's own
     * meminfo can count far less (memory the kernel keeps outside the node's
     * accounting: half of it on some virtual machines), so a single cell,
     * which owns all memory, is given MemTotal too. Several cells keep what
     * each node reports. */
    host->memory_kib = mem_total_kib(meminfo);
    if (host->cells->len == 1)
        ((struct host_numa_cell *)host->cells->pdata[0])->memory_kib = host->memory_kib;
    return g_steal_pointer(&host);
}

void host_info_free(struct host_info *host)
{
    if (!host)
        return;
    g_free(host->cpu.vendor);
    g_free(host->cpu.model);
    if (host->cpu.flags)
        g_ptr_array_unref(host->cpu.flags);
    if (host->cpus)
        g_array_unref(host->cpus);
    if (host->cells)
        g_ptr_array_unref(host->cells);
    g_free(host);
}
