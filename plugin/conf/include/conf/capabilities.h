/* Host and guest capabilities as libvirt clients read them: the
 * <capabilities> document (virsh capabilities, virt-manager on connect) and
 * <domainCapabilities> (virt-manager's New-VM wizard). The host facts come
 * from /proc and /sys; struct host_info also serves NODE_GET_INFO. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/virt-error.h"

struct host_cpu_info {
    char *vendor;       /* libvirt's spelling: "Intel", "AMD", else the CPUID vendor string */
    char *model;        /* /proc/cpuinfo "model name" */
    unsigned family, model_number, stepping;
    uint64_t microcode; /* 0 if unknown */
    unsigned phys_bits; /* 0 if unknown */
    unsigned mhz;       /* 0 if unknown */
    GPtrArray *flags;   /* char *: /proc/cpuinfo flags */
};

struct host_cpu_topology {
    unsigned id, socket_id, die_id, cluster_id, core_id;
    char *siblings;     /* thread siblings, cpuset syntax ("0-1") */
};

struct host_numa_cell {
    unsigned id;
    uint64_t memory_kib;
    GArray *cpus;       /* unsigned: CPU ids of the cell */
    GArray *distances;  /* unsigned: distance to node i, as /sys lists them (may be empty) */
    GArray *distance_ids; /* unsigned: node id of each distance */
};

struct host_info {
    bool has_uuid;
    unsigned char uuid[16];      /* SMBIOS product UUID, else /etc/machine-id */
    struct host_cpu_info cpu;
    unsigned sockets, dies, cores, threads; /* cores per die, threads per core */
    unsigned online_cpus;
    uint64_t memory_kib;         /* /proc/meminfo MemTotal */
    GArray *cpus;                /* struct host_cpu_topology, online CPUs */
    GPtrArray *cells;            /* struct host_numa_cell * */
};

struct host_info *host_info_probe(GError **error);
void host_info_free(struct host_info *host);
typedef struct host_info host_info;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(host_info, host_info_free)

/* Exposed for tests: /proc/cpuinfo text (first processor) into cpu, and a
 * kernel CPU list ("0-3,8") into unsigned ids. */
bool host_cpu_parse_cpuinfo(const char *text, struct host_cpu_info *cpu, GError **error);
bool host_parse_cpu_list(const char *text, GArray *ids, GError **error);

/* <capabilities> for host, with emulator (the shim's absolute path) as the
 * guest's emulator. VIR_ERR_INVALID_ARG if emulator is not absolute. */
char *capabilities_format(const struct host_info *host, const char *emulator, GError **error);

/* Probe the host and format: what GET_CAPABILITIES answers. */
char *capabilities_get_xml(const char *emulator, GError **error);

/* <domainCapabilities> for CONNECT_GET_DOMAIN_CAPABILITIES. The requested
 * emulatorbin, arch, machine and virttype may each be NULL (meaning vsnap's
 * own); anything vsnap cannot run is VIR_ERR_CONFIG_UNSUPPORTED naming it. */
char *domain_capabilities_format(const char *emulator, const char *emulatorbin, const char *arch,
                                 const char *machine, const char *virttype, GError **error);
