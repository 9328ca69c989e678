/* vsnap-shim's command line, compatible with Cloud Hypervisor's for what vsnap
 * supports. */
#pragma once

#include <glib.h>
#include <stdbool.h>

#include "config/vm-config.h"
#include "sandbox/confine.h"
#include "sandbox/syscall-filter.h"
#include "vmm/events.h"

struct shim_options {
    char *api_socket;     /* --api-socket value, or NULL */
    char *event_monitor;  /* --event-monitor value, or NULL */
    char *log_file;
    int verbosity;        /* number of -v */
    bool version;
    struct vm_config *direct_config; /* --kernel given: create and boot at once */
    enum sandbox_mode seccomp;       /* --seccomp true (default), false or log */
    struct sandbox_confine *confine; /* --confine given, else NULL */
    char *store_config;    /* --store-config: a key file with [store] and [s3] */
    char *store_cache_dir; /* --store-cache-dir: the layer cache for store URLs */
};

/* Parse argv. --help prints the help and exits 0 (GOption does that). */
bool shim_options_parse(int argc, char **argv, struct shim_options *out, GError **error);
void shim_options_clear(struct shim_options *options);

/* The event monitor an --event-monitor value names ("path=P" or "fd=N"), open. */
struct events *cli_open_event_monitor(const char *spec, GError **error);

/* The parts of the direct mode, exposed for tests. */
bool cli_parse_console(const char *option, const char *spec, struct console_config *out,
                       GError **error);
bool cli_parse_memory(const char *spec, struct memory_config *out, GError **error);
bool cli_parse_cpus(const char *spec, struct cpus_config *out, GError **error);
bool cli_parse_vsock(const char *spec, struct vsock_config *out, GError **error);
bool cli_parse_rng(const char *spec, struct rng_config *out, GError **error);
bool cli_parse_platform(const char *spec, struct platform_config *out, GError **error);
/* --disk path=...,readonly=on,...: fills out (start from disk_config_init). */
bool cli_parse_disk(const char *spec, struct disk_config *out, GError **error);
/* --net tap=...,mac=...,...: fills out (start from net_config_init). */
bool cli_parse_net(const char *spec, struct net_config *out, GError **error);
