/* struct vm and struct vcpu: shared by the KVM core, vm.c (building,
 * lifecycle), vm-run.c (running, pausing) and vcpu.c (the run loop). Nothing
 * outside those files includes this (tests/shim/check-layers.py checks);
 * everything else goes through vm.h. */
#pragma once

#include <linux/kvm.h>
#include <pthread.h>
#include <stdatomic.h>

#include "platform/bus.h"
#include "platform/memory.h"
#include "core/vm.h"

enum vcpu_exit_kind {
    VCPU_EXIT_IO,
    VCPU_EXIT_MMIO,
    VCPU_EXIT_HLT,
    VCPU_EXIT_INTR, /* KVM_RUN interrupted by a kick or signal */
    VCPU_EXIT_SHUTDOWN,
    VCPU_EXIT_SYSTEM_EVENT,
    VCPU_EXIT_INTERNAL_ERROR,
    VCPU_EXIT_FAIL_ENTRY,
    VCPU_EXIT_OTHER,
    VCPU_EXIT_KINDS,
};

const char *vcpu_exit_kind_name(enum vcpu_exit_kind kind);

struct vcpu {
    struct vm *vm;
    unsigned index;
    int fd;
    struct kvm_run *run;
    pthread_t thread;
    bool thread_started;
    /* Guarded by vm->run_lock: */
    bool parked;
    bool halted;          /* HLT with interrupts off: this vCPU will never run again */
    bool needs_completion; /* the last exit was I/O that KVM_RUN must still complete */
    /* vm_inject_nmi on a running vCPU: the vCPU thread makes the KVM_NMI
     * ioctl itself before its next KVM_RUN (vcpu ioctls wait for KVM_RUN to
     * return, so the caller's thread would block until the next exit). */
    atomic_bool nmi_pending;
    atomic_uint_fast64_t exits[VCPU_EXIT_KINDS];
};

enum vm_run_state {
    VM_RUN_CREATED,       /* built, threads not started */
    VM_RUN_RUNNING,
    VM_RUN_PAUSED,
    VM_RUN_GUEST_STOPPED, /* on_guest_stop fired: vCPUs parked for good */
    VM_RUN_QUIT,          /* vm_free: threads exit */
};

struct vm {
    int dev_kvm_fd; /* /dev/kvm */
    int vm_fd;      /* KVM_CREATE_VM's */
    size_t run_size;
    struct guest_memory mem;
    struct bus pio, mmio;
    struct vm_callbacks cb;
    struct kvm_cpuid2 *supported_cpuid;

    unsigned nvcpus;
    struct vcpu *vcpus;

    GMutex run_lock;
    GCond run_cond;       /* state changes and vCPUs parking */
    enum vm_run_state state;
    unsigned nparked;
    atomic_bool stop_reported;

    struct serial *serial;
    struct i8042 *i8042;
    struct acpi_pm *acpi_pm;
    struct virtio_vsock *vsock; /* NULL without a vsock config */
    struct virtio_console *console; /* NULL when console.mode is Off */
    struct virtio_rng *rng;     /* NULL without an rng config */
    struct vmgenid *vmgenid;
    struct virtio_blk **disks;  /* ndisks, in config order */
    unsigned ndisks;
    struct virtio_net **nets;   /* nnets, in config order */
    unsigned nnets;
    bool disks_paused;          /* main thread: vm_pause_disks was the last word */

    /* vm_set_persist_state: snapshot state kept with the VM, released by vm_free */
    void *persist;
    void (*persist_release)(void *persist);

    _Atomic uint64_t *vmm_dirty; /* one bit per RAM page, by RAM offset */
    size_t vmm_dirty_words;

    _Atomic uint64_t pio_logged[65536 / 64]; /* unmapped ports already logged */
    GMutex mmio_log_lock;
    GHashTable *mmio_logged;                 /* unmapped MMIO pages already logged */
};

/* vcpu.c */
bool vcpu_create(struct vm *vm, struct vcpu *vcpu, unsigned index, GError **error);
void vcpu_destroy(struct vcpu *vcpu);
bool vcpu_start_thread(struct vcpu *vcpu, GError **error);
void vcpu_kick(struct vcpu *vcpu); /* with vm->run_lock held */
void vcpu_install_kick_handler(void);

/* vm.c: hold every disk still (requests in flight and published complete
 * first) while the vCPUs are paused, and let them go again. No-ops when
 * already so. */
bool vm_pause_disks(struct vm *vm, GError **error);
void vm_resume_disks(struct vm *vm);

/* vm-run.c: end every vCPU thread (for vm_free); and whether we are on one. */
void vm_stop_vcpu_threads(struct vm *vm);
bool vm_on_vcpu_thread(struct vm *vm);
