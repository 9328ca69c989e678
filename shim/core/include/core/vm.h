/* struct vm: one KVM virtual machine (RAM, vCPU threads, irqchip, devices).
 *
 * Threading: the API runs on the main thread (GMainLoop). vCPUs run on their own
 * threads. Anything the guest causes that changes the VM's lifecycle (poweroff
 * via ACPI S5, reset via i8042 or the ACPI reset register, triple fault, KVM
 * internal error, an interrupt KVM refuses) is reported through
 * vm_callbacks.on_guest_stop from a vCPU or device thread; the receiver must
 * hop to the main thread (g_main_context_invoke) before tearing the VM down.
 * Restored RAM that cannot be served is not a stop but the end of the process
 * (vm_report_fatal, from a userfaultfd or the main thread). vm_* functions
 * below are called from the main thread only.
 *
 * Signals: vm_new installs a no-op SIGUSR1 handler (without SA_RESTART); the
 * VM sends SIGUSR1 to its vCPU threads to throw them out of KVM_RUN. Nothing
 * else in the shim may use SIGUSR1. vCPU threads block every other signal.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "config/vm-config.h"

struct blk_backend;

enum vm_stop_reason {
    VM_STOP_POWEROFF,   /* guest wrote S5 to PM1a_CNT */
    VM_STOP_RESET,      /* guest asked for a reboot: i8042 0xfe, ACPI reset register, triple fault */
    VM_STOP_CRASH,      /* KVM internal error / failed entry: the guest cannot go on */
};

const char *vm_stop_reason_to_string(enum vm_stop_reason reason);

struct vm_callbacks {
    void (*on_guest_stop)(void *opaque, enum vm_stop_reason reason, const char *detail);
    /* The VM is lost beyond teardown (see vm_report_fatal): report it, from
     * whatever thread this runs on, touching nothing another thread may hold.
     * The process ends when this returns. */
    void (*on_fatal)(void *opaque, const char *detail);
    void *opaque;
};

struct vm;
struct bus;
struct guest_memory;
struct serial;
struct i8042;
struct acpi_pm;
struct virtio_vsock;
struct virtio_blk;
struct virtio_net;
struct virtio_console;
struct virtio_rng;
struct vmgenid;
struct vsock_port_handler;

/* Build the VM from cfg: KVM VM, irqchip, PIT, RAM (untouched), vCPUs with
 * CPUID/MSRs, devices, payload loaded. vCPUs are not running yet. */
struct vm *vm_new(const struct vm_config *cfg, const struct vm_callbacks *cb, GError **error);

/* Build the VM of cfg for a restore: the same KVM VM, devices and vCPUs as
 * vm_new, but no payload is loaded and guest RAM is `ram`, prepared by the
 * caller (fresh, filled by copy, a merged image, or registered for on-demand
 * filling), which the VM takes over (*ram is left empty). The caller then
 * loads the vCPU, VM and device state before any vCPU runs (shim/persist/). */
struct vm *vm_new_for_restore(const struct vm_config *cfg, const struct vm_callbacks *cb,
                              struct guest_memory *ram, GError **error);

/* Start the vCPU threads (first boot). */
bool vm_start(struct vm *vm, GError **error);
/* Start the vCPU threads parked (a restore, once its state is loaded), the
 * disks paused: vm_resume runs them. */
bool vm_start_paused(struct vm *vm, GError **error);

/* Stop all vCPUs at an instruction boundary (KVM_RUN returned) and keep them
 * parked, then the disks (virtio_blk_pause: their requests complete); returns
 * once all of them hold still. A disk that does not go idle fails the pause
 * and the VM runs on. */
bool vm_pause(struct vm *vm, GError **error);
bool vm_resume(struct vm *vm, GError **error);

/* A non-maskable interrupt on vCPU 0 (KVM_NMI), as a front panel's NMI
 * button or a BMC gives one. A running vCPU takes it before its next guest
 * instruction; a paused VM's is pending in vCPU 0's state (snapshots keep
 * it) until the VM runs. Fails only when the VM cannot run any more. */
bool vm_inject_nmi(struct vm *vm, GError **error);

/* ACPI power button: set PM1a PWRBTN_STS, raise the SCI. */
void vm_power_button(struct vm *vm);

/* The guest cannot go on (a vCPU or device saw it stop): park the vCPUs for
 * good and report it through vm_callbacks.on_guest_stop. Any thread; the
 * first report wins. */
void vm_report_guest_stop(struct vm *vm, enum vm_stop_reason reason, const char *detail);

/* Guest RAM that a thread of the VM waits on can never be supplied (an
 * on-demand restore met a corrupt block; zeros in its place would be a lie).
 * Such a thread cannot be released, so the VM can neither go on nor be torn
 * down: on_fatal reports it and the process exits with VM_FATAL_EXIT_STATUS,
 * which releases every thread. Any thread; never returns. */
#define VM_FATAL_EXIT_STATUS 3
G_NORETURN void vm_report_fatal(struct vm *vm, const char *detail);

/* Stop and join vCPU threads, close every fd, unmap RAM. Safe on a half-built VM. */
void vm_free(struct vm *vm);

/* Counters per device, in vm.counters' shape: {"serial": {"tx_bytes": N}, ...}. */
void vm_add_counters(struct vm *vm, JsonBuilder *builder);

/* Bytes of guest RAM actually resident (touched), for vm.info memory_actual_size
 * and the RSS benchmark. */
uint64_t vm_ram_resident_bytes(struct vm *vm);

/* The guest mappings KVM's MMU holds now, by size (its x86 VM statistics
 * pages_4k, pages_2m, pages_1g: EPT/NPT entries, or shadow page table entries
 * on a host without them). False when KVM has no binary statistics. */
struct vm_mapped_pages {
    uint64_t pages_4k, pages_2m, pages_1g;
};
bool vm_kvm_mapped_pages(struct vm *vm, struct vm_mapped_pages *out);
uint64_t vm_ram_size(struct vm *vm);

/* What snapshot and restore (shim/persist/) use, with the vCPUs parked. */
struct guest_memory *vm_memory(struct vm *vm);
int vm_kvm_vm_fd(struct vm *vm);  /* the VM's fd (KVM_CREATE_VM): irqchip, PIT, clock, dirty log */
int vm_dev_kvm_fd(struct vm *vm); /* /dev/kvm itself: system-wide queries (MSR index list) */
unsigned vm_vcpu_count(struct vm *vm);
int vm_vcpu_fd(struct vm *vm, unsigned index);
/* The devices; serial is NULL when serial.mode is Off, vsock without a vsock
 * config, console when console.mode is Off. */
struct serial *vm_serial(struct vm *vm);
struct i8042 *vm_i8042(struct vm *vm);
struct acpi_pm *vm_acpi_pm(struct vm *vm);
struct virtio_vsock *vm_vsock(struct vm *vm);
/* The disks, in config order (devices/virtio-blk.h). A paused VM's disks are
 * paused too: idle, nothing in flight, nothing published left undone. */
unsigned vm_disk_count(struct vm *vm);
/* A disk's store as vm_new opens it for disk (raw image, or overlay over its
 * chain): for a snapshot that moves a paused disk onto a new overlay
 * (virtio_blk_replace_backend). */
struct blk_backend *vm_open_disk_backend(const struct disk_config *disk, GError **error);
struct virtio_blk *vm_disk(struct vm *vm, unsigned index);
/* The layers of every disk's open chain that were in directory from are in
 * directory to now (the daemon renamed it; the open descriptors still serve
 * them): messages name them there. Each disk is paused for the change. */
bool vm_disk_layers_moved(struct vm *vm, const char *from, const char *to, GError **error);
/* The network interfaces, in config order (devices/virtio-net.h); by id. */
unsigned vm_net_count(struct vm *vm);
struct virtio_net *vm_net(struct vm *vm, unsigned index);
struct virtio_net *vm_find_net(struct vm *vm, const char *id);
struct virtio_console *vm_console(struct vm *vm);
struct virtio_rng *vm_rng(struct vm *vm); /* NULL without an rng config */
struct vmgenid *vm_vmgenid(struct vm *vm);
/* Snapshot state kept with the VM: release(data) runs in vm_free once the
 * vCPUs have stopped, before devices and RAM go. */
void vm_set_persist_state(struct vm *vm, void *data, void (*release)(void *data));
void *vm_get_persist_state(struct vm *vm);

/* Serve a vsock port inside the shim (devices/virtio-vsock.h), before the
 * vCPUs run. Fails without a vsock device or when the port is served already. */
bool vm_serve_vsock_port(struct vm *vm, const struct vsock_port_handler *handler, GError **error);

/* A write of the VMM's own into guest RAM (virtio used rings and RX buffers,
 * through struct virtio_host): KVM's dirty log does not see those, so they
 * are recorded here. */
void vm_mark_dirty(struct vm *vm, uint64_t gpa, uint64_t len);

/* The serial port's pty slave path when serial.mode is Pty, else NULL (vm.info). */
const char *vm_serial_pty_path(struct vm *vm);
/* The virtio-console's pty slave path when console.mode is Pty, else NULL. */
const char *vm_console_pty_path(struct vm *vm);

/* Pages the VMM itself wrote (vm_mark_dirty) since the last call, fetched and
 * cleared atomically: a bitmap of *nwords 64-bit words, bit n = RAM page n
 * (RAM offset n * GUEST_PAGE_SIZE, see memory.h). g_free the result. KVM
 * memory slot n is guest_memory.regions[n]. */
uint64_t *vm_fetch_and_clear_vmm_dirty(struct vm *vm, size_t *nwords);
