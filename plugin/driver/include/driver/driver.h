/* The driver: thin entry points the RPC layer calls. Each looks the domain
 * up, takes its job lock, checks the state, calls process/monitor, updates
 * the state and emits the event. Errors are VSNAP_VIR_ERROR GErrors. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "domain/state.h"
#include "monitor/monitor.h"

/* What virsh/python need to know about a domain in one consistent read. */
struct domain_summary {
    char *name;
    unsigned char uuid[16];
    int id;
    int state, reason;
    bool persistent, autostart, ready;
    uint64_t max_mem_kib, cur_mem_kib;
    unsigned vcpus;
    uint64_t cpu_time_ns;
    uint64_t generation;
    char *os_type;
};
void domain_summary_clear(struct domain_summary *s);

struct vsnap_driver *driver_new(const struct driver_paths *paths, GError **error);
void driver_free(struct vsnap_driver *drv);
/* Load persistent definitions and reattach to shims still running. */
bool driver_load(struct vsnap_driver *drv, GError **error);
/* The snapshot store of the configuration ([store], [s3]); taken over
 * (*store is cleared). Call before driver_load. */
void driver_set_store(struct vsnap_driver *drv, struct driver_store *store);
/* Start the domains driver_load found marked autostart, each if it is still
 * defined, marked and shut off when its turn comes (errors are logged). May
 * run while clients are served. */
void driver_autostart(struct vsnap_driver *drv);
unsigned driver_active_count(struct vsnap_driver *drv);

/* Lookups return a new reference or fail with VIR_ERR_NO_DOMAIN. */
struct vsnap_domain *driver_lookup_uuid(struct vsnap_driver *drv, const unsigned char *uuid,
                                        const char *name_hint, GError **error);
struct vsnap_domain *driver_lookup_name(struct vsnap_driver *drv, const char *name,
                                        GError **error);
struct vsnap_domain *driver_lookup_id(struct vsnap_driver *drv, int id, GError **error);

/* Write def as dom's persistent definition (driver.c; for driver-net.c). */
bool driver_save_config(struct vsnap_driver *drv, const struct domain_def *def, GError **error);

void driver_summary(struct vsnap_driver *drv, struct vsnap_domain *dom,
                    struct domain_summary *out);
/* The on-demand server's statistics of a running domain restored on demand
 * (its shim's vm.info); false when it has none or they cannot be read. */
bool driver_ondemand_stats(struct vsnap_driver *drv, struct vsnap_domain *dom, struct monitor_ondemand *out);
/* Domains matching VIR_CONNECT_LIST_DOMAINS_* flags (0 = all). */
GPtrArray *driver_list(struct vsnap_driver *drv, unsigned flags);

struct vsnap_domain *driver_define_xml(struct vsnap_driver *drv, const char *xml,
                                       unsigned flags, GError **error);
bool driver_undefine(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                     GError **error);
char *driver_get_xml(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                     GError **error);
bool driver_start(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                  GError **error);
struct vsnap_domain *driver_create_xml(struct vsnap_driver *drv, const char *xml,
                                       unsigned flags, GError **error);
bool driver_destroy(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                    GError **error);
bool driver_shutdown(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                     GError **error);
/* virsh domjobabort: the job domjobinfo shows stops (a revert's import from
 * the store, a background push); VIR_ERR_OPERATION_INVALID when no job is
 * active or the job cannot be aborted (a snapshot or save inside the VMM). */
bool driver_abort_job(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                      GError **error);
bool driver_reboot(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                   GError **error);
bool driver_suspend(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error);
bool driver_resume(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error);
bool driver_set_autostart(struct vsnap_driver *drv, struct vsnap_domain *dom, bool autostart,
                          GError **error);
/* The guest's serial port for a console stream: its pty (the shim's Pty
 * serial, the path the live XML shows), opened raw and non-blocking.
 * dev_name: NULL, "serial0" or "console0". */
int driver_console_connect(struct vsnap_driver *drv, struct vsnap_domain *dom,
                           const char *dev_name, GError **error);
char *driver_capabilities(struct vsnap_driver *drv, GError **error);
char *driver_domain_capabilities(struct vsnap_driver *drv, const char *emulatorbin,
                                 const char *arch, const char *machine, const char *virttype,
                                 GError **error);
