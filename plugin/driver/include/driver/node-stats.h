/* The host's statistics and identity for virsh nodememstats, nodecpustats,
 * sysinfo and freecell, read as libvirt's QEMU driver reads them (its
 * virhostmem.c, virhostcpu.c and virsysinfo.c): /proc/meminfo and the NUMA
 * nodes' meminfo, /proc/stat, /sys/class/dmi/id. Each reader takes the
 * directory it reads from, so the unit tests give it files of their own. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#define NODE_STATS_MAX 4

struct node_stat {
    const char *field; /* VIR_NODE_MEMORY_STATS_* or VIR_NODE_CPU_STATS_* (static strings) */
    uint64_t value;    /* KiB for memory, ns for CPU time */
};

/* total, free, buffers and cached (KiB) of the host (cell -1:
 * VIR_NODE_MEMORY_STATS_ALL_CELLS, from <proc>/meminfo) or of NUMA node
 * cell (<sys>/devices/system/node/node<cell>/meminfo: the fields it has);
 * a node that does not exist is VIR_ERR_INVALID_ARG. *n gets the count. */
bool node_memory_stats(const char *proc, const char *sys, int cell, struct node_stat *out, unsigned *n,
                       GError **error);
/* kernel (system + irq + softirq), user (user + nice), idle and iowait, in
 * ns, of every CPU (cpu -1: VIR_NODE_CPU_STATS_ALL_CPUS, the "cpu" line of
 * <proc>/stat) or of one ("cpu<N>"; one the host does not have is
 * VIR_ERR_INVALID_ARG). */
bool node_cpu_stats(const char *proc, int cpu, struct node_stat *out, unsigned *n, GError **error);
/* The host's SMBIOS as libvirt prints it (<sysinfo type='smbios'> with its
 * bios, system, baseBoard and chassis entries) from the DMI attributes the
 * kernel exports in dmi_dir (/sys/class/dmi/id). A host without them (no
 * SMBIOS tables, as in many VMs) gets libvirt's answer then,
 * VIR_ERR_INTERNAL_ERROR "Host SMBIOS information is not available". */
char *node_sysinfo_xml(const char *dmi_dir, GError **error);
/* Free memory in bytes of NUMA nodes start .. start + max - 1 (MemFree of
 * each node's meminfo; on a host without NUMA nodes in sys, node 0 is the
 * host's MemFree), into out[0 .. max - 1]; *n gets how many there were. A
 * start past the last node is VIR_ERR_INTERNAL_ERROR as libvirt says it. */
bool node_cells_free_memory(const char *proc, const char *sys, int start, unsigned max, uint64_t *out,
                            unsigned *n, GError **error);
