/* struct vmm: the one VM a shim process manages and its lifecycle, as Cloud
 * Hypervisor's API sees it (Created -> Running <-> Paused -> Shutdown), plus what
 * the guest did last (poweroff, reboot, crash) and its readiness.
 *
 * Every function runs on the main thread. Guest-initiated stops and readiness
 * arrive on vCPU/device threads and are handed to the main thread here.
 * Errors use SHIM_ERROR (api/api-error.h), whose code is the HTTP status.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>

#include "config/shim-error.h"
#include "api/events.h"
#include "config/vm-config.h"

enum vmm_state {
    VMM_STATE_NOT_CREATED,
    VMM_STATE_CREATED,
    VMM_STATE_RUNNING,
    VMM_STATE_PAUSED,
    VMM_STATE_SHUTDOWN,
};

struct vmm;

/* exit_requested runs (on the main thread) when vmm.shutdown was asked for, or
 * when the guest powered off and nothing else can happen (no API socket). */
struct vmm *vmm_new(struct events *events, void (*exit_requested)(void *data), void *data);
/* Tear down the VM, if any. The events monitor stays the caller's. */
void vmm_free(struct vmm *vmm);

/* Without an API the process has nothing to do once the guest powered off. */
void vmm_set_exit_on_guest_poweroff(struct vmm *vmm, bool exit);

const char *vmm_state_to_string(enum vmm_state state);
enum vmm_state vmm_get_state(const struct vmm *vmm);
struct events *vmm_get_events(struct vmm *vmm);

/* Takes cfg. Checks that the files it names exist. */
bool vmm_create(struct vmm *vmm, struct vm_config *cfg, GError **error);
bool vmm_boot(struct vmm *vmm, GError **error);
bool vmm_pause(struct vmm *vmm, GError **error);
bool vmm_resume(struct vmm *vmm, GError **error);
bool vmm_shutdown_vm(struct vmm *vmm, GError **error);
bool vmm_reboot(struct vmm *vmm, GError **error);
bool vmm_delete(struct vmm *vmm, GError **error);
bool vmm_power_button(struct vmm *vmm, GError **error);
/* Tear the VM down and ask for the process to exit. */
void vmm_request_exit(struct vmm *vmm);

/* vm.info and vm.counters bodies, or NULL and a SHIM_ERROR. */
JsonNode *vmm_info(struct vmm *vmm, GError **error);
JsonNode *vmm_counters(struct vmm *vmm, GError **error);

/* persist: begin (vm.snapshot / vm.restore: api/snapshot.c and shim/persist/) */
struct vm;
struct vm_callbacks;
/* The VM (NULL when none is built) and its config (NULL when not created). */
struct vm *vmm_get_vm(struct vmm *vmm);
const struct vm_config *vmm_get_config(const struct vmm *vmm);
/* Builds a VM some other way than booting (a restore): returns it with its
 * vCPUs parked and *cfg set to the config it runs with. */
typedef struct vm *(*vmm_vm_builder)(void *data, const struct vm_callbacks *cb, struct vm_config **cfg,
                                     GError **error);
/* Only without a VM (405 otherwise). Emits restoring/restored; the VM is then
 * Paused, or resumed (resuming/resumed) when resume is true. */
bool vmm_restore(struct vmm *vmm, vmm_vm_builder build, void *data, bool resume, GError **error);
/* persist: end */

/* Readiness (for GET vm.wait-ready): the guest's announcement since the last
 * boot, as JSON text, or NULL. A watch is called once, on the main thread, with
 * the announcement, or with NULL when the VM stops before announcing; it is
 * removed after that call. */
const char *vmm_ready_info(const struct vmm *vmm);
typedef void (*vmm_ready_func)(const char *ready_info, void *data);
guint vmm_watch_ready(struct vmm *vmm, vmm_ready_func func, void *data);
void vmm_unwatch_ready(struct vmm *vmm, guint id);
