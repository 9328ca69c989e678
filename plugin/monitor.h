/* Client of the shim's Cloud Hypervisor API over its UNIX socket (libcurl).
 * One small function per endpoint. Errors are VSNAP_VIR_ERROR with
 * VIR_ERR_OPERATION_FAILED and the shim's own message when it sent one. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

struct vm_info {
    char *state;                 /* Created, Running, Paused, Shutdown */
    uint64_t memory_actual_size; /* bytes */
    char *last_stop_reason;      /* vsnap extension: poweroff, crash, reboot, shutdown */
    bool ready;                  /* vsnap extension: the guest announced readiness */
    char *serial_pty;            /* vsnap extension: the serial's pty slave (Pty mode) */
};

void vm_info_clear(struct vm_info *info);

bool monitor_ping(const char *api_socket, GError **error);
bool monitor_vm_create(const char *api_socket, const char *vm_config_json, GError **error);
bool monitor_vm_boot(const char *api_socket, GError **error);
bool monitor_vm_pause(const char *api_socket, GError **error);
bool monitor_vm_resume(const char *api_socket, GError **error);
bool monitor_vm_power_button(const char *api_socket, GError **error);
bool monitor_vm_reboot(const char *api_socket, GError **error);
bool monitor_vm_shutdown(const char *api_socket, GError **error);
bool monitor_vmm_shutdown(const char *api_socket, GError **error);
bool monitor_vm_info(const char *api_socket, struct vm_info *info, GError **error);
/* PUT a JSON body to any endpoint (vm.snapshot, vm.restore: their bodies are
 * built by the snapshot code). timeout_ms 0 means no limit: a snapshot or
 * restore of a large VM may take long. */
bool monitor_vm_put_json(const char *api_socket, const char *endpoint, const char *json,
                         long timeout_ms, GError **error);
