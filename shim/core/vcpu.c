/* vCPUs: creation, per-vCPU KVM state, the thread that runs KVM_RUN, and exit
 * dispatch. The run loop knows buses, not devices.
 *
 * Stopping a vCPU (pause, guest stop, vm_free) is done with run->immediate_exit
 * plus a signal: the signal throws a vCPU out of KVM_RUN (also when it sits in
 * HLT or wait-for-SIPI inside the kernel), immediate_exit covers the window
 * between the vCPU checking the run state and entering KVM_RUN. Both are set
 * under vm->run_lock, and immediate_exit is cleared only under it.
 */
#include <errno.h>
#include <gio/gio.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/cpuid.h"
#include "vm-internal.h"
#include "sandbox/syscall-filter.h"

#define VCPU_KICK_SIGNAL SIGUSR1
#define MSR_IA32_MISC_ENABLE 0x1a0
#define MSR_IA32_MISC_ENABLE_FAST_STRING 1ull
#define MSR_MTRR_DEF_TYPE 0x2ff
#define MTRR_DEF_TYPE_ENABLE_WB ((1ull << 11) | 6)
#define APIC_LVT_LINT0 0x350
#define APIC_LVT_LINT1 0x360
#define APIC_DELIVERY_MODE_MASK 0x700u
#define APIC_MODE_NMI 0x400u
#define APIC_MODE_EXTINT 0x700u
#define RFLAGS_IF (1ull << 9)

const char *vcpu_exit_kind_name(enum vcpu_exit_kind kind)
{
    static const char *const names[VCPU_EXIT_KINDS] = {
        [VCPU_EXIT_IO] = "io", [VCPU_EXIT_MMIO] = "mmio", [VCPU_EXIT_HLT] = "hlt",
        [VCPU_EXIT_INTR] = "intr", [VCPU_EXIT_SHUTDOWN] = "shutdown",
        [VCPU_EXIT_SYSTEM_EVENT] = "system_event", [VCPU_EXIT_INTERNAL_ERROR] = "internal_error",
        [VCPU_EXIT_FAIL_ENTRY] = "fail_entry", [VCPU_EXIT_OTHER] = "other",
    };
    return kind < VCPU_EXIT_KINDS ? names[kind] : "unknown";
}

static void kick_signal_handler(int sig)
{
    (void)sig; /* its only job is to make KVM_RUN return EINTR */
}

/* Process-wide by nature (signal dispositions are); idempotent. No
 * SA_RESTART: an interrupted KVM_RUN must return to the loop. */
void vcpu_install_kick_handler(void)
{
    struct sigaction sa = { .sa_handler = kick_signal_handler };
    sigemptyset(&sa.sa_mask);
    sigaction(VCPU_KICK_SIGNAL, &sa, NULL);
}

static bool vcpu_fail(GError **error, unsigned index, const char *what)
{
    int e = errno;
    g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e), "vCPU %u: %s failed: %s", index, what,
                g_strerror(e));
    return false;
}

static bool set_boot_msrs(struct vcpu *v, GError **error)
{
    struct {
        struct kvm_msrs header;
        struct kvm_msr_entry entries[2];
    } msrs = {
        .header.nmsrs = 2,
        .entries = {
            { .index = MSR_IA32_MISC_ENABLE, .data = MSR_IA32_MISC_ENABLE_FAST_STRING },
            /* Same on every CPU, or Linux complains about inconsistent MTRRs. */
            { .index = MSR_MTRR_DEF_TYPE, .data = MTRR_DEF_TYPE_ENABLE_WB },
        },
    };
    int set = ioctl(v->fd, KVM_SET_MSRS, &msrs);
    if (set < 0)
        return vcpu_fail(error, v->index, "KVM_SET_MSRS");
    if (set != 2) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "vCPU %u: KVM refused MSR %#x", v->index,
                    msrs.entries[set].index);
        return false;
    }
    return true;
}

/* LINT0 = ExtINT (the PIC's output reaches the CPU through the LAPIC, as on a
 * PC) and LINT1 = NMI: what firmware leaves for Linux. */
static bool set_lapic_lints(struct vcpu *v, GError **error)
{
    struct kvm_lapic_state lapic;
    if (ioctl(v->fd, KVM_GET_LAPIC, &lapic) < 0)
        return vcpu_fail(error, v->index, "KVM_GET_LAPIC");
    uint32_t lint0, lint1;
    memcpy(&lint0, lapic.regs + APIC_LVT_LINT0, 4);
    memcpy(&lint1, lapic.regs + APIC_LVT_LINT1, 4);
    lint0 = (lint0 & ~APIC_DELIVERY_MODE_MASK) | APIC_MODE_EXTINT;
    lint1 = (lint1 & ~APIC_DELIVERY_MODE_MASK) | APIC_MODE_NMI;
    memcpy(lapic.regs + APIC_LVT_LINT0, &lint0, 4);
    memcpy(lapic.regs + APIC_LVT_LINT1, &lint1, 4);
    if (ioctl(v->fd, KVM_SET_LAPIC, &lapic) < 0)
        return vcpu_fail(error, v->index, "KVM_SET_LAPIC");
    return true;
}

/* APs wait for the guest's INIT/SIPI, as on real hardware. */
static bool park_application_processor(struct vcpu *v, GError **error)
{
    struct kvm_mp_state mp = { .mp_state = KVM_MP_STATE_UNINITIALIZED };
    if (ioctl(v->fd, KVM_SET_MP_STATE, &mp) < 0)
        return vcpu_fail(error, v->index, "KVM_SET_MP_STATE(wait-for-SIPI)");
    return true;
}

bool vcpu_create(struct vm *vm, struct vcpu *v, unsigned index, GError **error)
{
    v->vm = vm;
    v->index = index;
    v->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, (unsigned long)index);
    if (v->fd < 0)
        return vcpu_fail(error, index, "KVM_CREATE_VCPU");
    void *run = mmap(NULL, vm->run_size, PROT_READ | PROT_WRITE, MAP_SHARED, v->fd, 0);
    if (run == MAP_FAILED)
        return vcpu_fail(error, index, "mapping kvm_run");
    v->run = run;
    if (!cpuid_configure_vcpu(v->fd, vm->supported_cpuid, index, vm->nvcpus, error))
        return false;
    if (!set_boot_msrs(v, error) || !set_lapic_lints(v, error))
        return false;
    return index == 0 || park_application_processor(v, error);
}

void vcpu_destroy(struct vcpu *v)
{
    if (v->run)
        munmap(v->run, v->vm->run_size);
    if (v->fd >= 0)
        close(v->fd);
    v->run = NULL;
    v->fd = -1;
}

void vcpu_kick(struct vcpu *v)
{
    if (v->run)
        v->run->immediate_exit = 1;
    if (v->thread_started)
        pthread_kill(v->thread, VCPU_KICK_SIGNAL);
}

/* ---- exits ---- */

static void log_unmapped_port(struct vm *vm, uint16_t port, bool write)
{
    uint64_t bit = 1ull << (port % 64);
    if (atomic_fetch_or(&vm->pio_logged[port / 64], bit) & bit)
        return;
    g_debug("unmapped port 0x%x %s (reads see all ones; logged once)", port, write ? "written" : "read");
}

static void log_unmapped_mmio(struct vm *vm, uint64_t gpa, bool write)
{
    gpointer page = GSIZE_TO_POINTER(gpa >> 12);
    g_mutex_lock(&vm->mmio_log_lock);
    bool first = g_hash_table_add(vm->mmio_logged, page);
    g_mutex_unlock(&vm->mmio_log_lock);
    if (first)
        g_debug("unmapped MMIO 0x%" G_GINT64_MODIFIER "x %s (reads see all ones; logged once per page)", gpa,
                write ? "written" : "read");
}

static void handle_io(struct vcpu *v)
{
    struct kvm_run *run = v->run;
    uint8_t *data = (uint8_t *)run + run->io.data_offset;
    bool write = run->io.direction == KVM_EXIT_IO_OUT;
    /* rep ins/outs: count elements of size bytes each, back to back. */
    for (uint32_t i = 0; i < run->io.count; i++, data += run->io.size) {
        bool mapped = write ? bus_write(&v->vm->pio, run->io.port, data, run->io.size)
                            : bus_read(&v->vm->pio, run->io.port, data, run->io.size);
        if (!mapped)
            log_unmapped_port(v->vm, run->io.port, write);
    }
}

static void handle_mmio(struct vcpu *v)
{
    struct kvm_run *run = v->run;
    unsigned len = MIN(run->mmio.len, 8u);
    bool mapped = run->mmio.is_write ? bus_write(&v->vm->mmio, run->mmio.phys_addr, run->mmio.data, len)
                                     : bus_read(&v->vm->mmio, run->mmio.phys_addr, run->mmio.data, len);
    if (!mapped)
        log_unmapped_mmio(v->vm, run->mmio.phys_addr, run->mmio.is_write);
}

static uint64_t current_rip(struct vcpu *v, uint64_t *rflags)
{
    struct kvm_regs regs;
    if (ioctl(v->fd, KVM_GET_REGS, &regs) < 0)
        return UINT64_MAX;
    if (rflags)
        *rflags = regs.rflags;
    return regs.rip;
}

/* HLT reaching userspace (only without an in-kernel LAPIC timer wake-up) with
 * interrupts off means this vCPU is done: park it, the VM goes on. */
static void handle_hlt(struct vcpu *v)
{
    uint64_t rflags = 0;
    current_rip(v, &rflags);
    if (rflags & RFLAGS_IF)
        return;
    g_mutex_lock(&v->vm->run_lock);
    v->halted = true;
    g_mutex_unlock(&v->vm->run_lock);
    g_debug("vCPU %u halted with interrupts disabled", v->index);
}

static void report_internal_error(struct vcpu *v)
{
    struct kvm_run *run = v->run;
    g_autoptr(GString) detail = g_string_new(NULL);
    g_string_printf(detail, "KVM internal error on vCPU %u: suberror %u at rip 0x%" G_GINT64_MODIFIER "x",
                    v->index, run->internal.suberror, current_rip(v, NULL));
    if (run->internal.suberror == KVM_INTERNAL_ERROR_EMULATION &&
        (run->emulation_failure.flags & KVM_INTERNAL_ERROR_EMULATION_FLAG_INSTRUCTION_BYTES)) {
        g_string_append(detail, " (instruction emulation failed; bytes");
        for (unsigned i = 0; i < MIN(run->emulation_failure.insn_size, 15u); i++)
            g_string_append_printf(detail, " %02x", run->emulation_failure.insn_bytes[i]);
        g_string_append(detail, ")");
    }
    vm_report_guest_stop(v->vm, VM_STOP_CRASH, detail->str);
}

static void handle_system_event(struct vcpu *v)
{
    switch (v->run->system_event.type) {
    case KVM_SYSTEM_EVENT_SHUTDOWN:
        vm_report_guest_stop(v->vm, VM_STOP_POWEROFF, "system event: shutdown");
        break;
    case KVM_SYSTEM_EVENT_RESET:
        vm_report_guest_stop(v->vm, VM_STOP_RESET, "system event: reset");
        break;
    default: {
        g_autofree char *detail = g_strdup_printf("system event %u on vCPU %u", v->run->system_event.type,
                                                  v->index);
        vm_report_guest_stop(v->vm, VM_STOP_CRASH, detail);
    }
    }
}

static enum vcpu_exit_kind exit_kind(uint32_t exit_reason)
{
    switch (exit_reason) {
    case KVM_EXIT_IO:
        return VCPU_EXIT_IO;
    case KVM_EXIT_MMIO:
        return VCPU_EXIT_MMIO;
    case KVM_EXIT_HLT:
        return VCPU_EXIT_HLT;
    case KVM_EXIT_INTR:
        return VCPU_EXIT_INTR;
    case KVM_EXIT_SHUTDOWN:
        return VCPU_EXIT_SHUTDOWN;
    case KVM_EXIT_SYSTEM_EVENT:
        return VCPU_EXIT_SYSTEM_EVENT;
    case KVM_EXIT_INTERNAL_ERROR:
        return VCPU_EXIT_INTERNAL_ERROR;
    case KVM_EXIT_FAIL_ENTRY:
        return VCPU_EXIT_FAIL_ENTRY;
    }
    return VCPU_EXIT_OTHER;
}

static void report_fail_entry(struct vcpu *v)
{
    g_autofree char *detail = g_strdup_printf("vCPU %u failed to enter the guest: hardware reason 0x%llx",
                                              v->index,
                                              (unsigned long long)v->run->fail_entry.hardware_entry_failure_reason);
    vm_report_guest_stop(v->vm, VM_STOP_CRASH, detail);
}

static void report_unexpected_exit(struct vcpu *v)
{
    g_autofree char *detail = g_strdup_printf("vCPU %u: unexpected KVM exit reason %u at rip 0x%" G_GINT64_MODIFIER "x",
                                              v->index, v->run->exit_reason, current_rip(v, NULL));
    vm_report_guest_stop(v->vm, VM_STOP_CRASH, detail);
}

static void dispatch_exit(struct vcpu *v, enum vcpu_exit_kind kind)
{
    switch (kind) {
    case VCPU_EXIT_IO:
        handle_io(v);
        break;
    case VCPU_EXIT_MMIO:
        handle_mmio(v);
        break;
    case VCPU_EXIT_HLT:
        handle_hlt(v);
        break;
    case VCPU_EXIT_INTR:
        break;
    case VCPU_EXIT_SHUTDOWN:
        vm_report_guest_stop(v->vm, VM_STOP_RESET, "triple fault (KVM_EXIT_SHUTDOWN)");
        break;
    case VCPU_EXIT_SYSTEM_EVENT:
        handle_system_event(v);
        break;
    case VCPU_EXIT_INTERNAL_ERROR:
        report_internal_error(v);
        break;
    case VCPU_EXIT_FAIL_ENTRY:
        report_fail_entry(v);
        break;
    default:
        report_unexpected_exit(v);
        break;
    }
}

/* ---- the thread ---- */

/* Wait until this vCPU may enter KVM_RUN. Returns false when the thread must
 * end. A vCPU whose last exit was I/O runs once more before parking, with
 * immediate_exit set, so KVM completes the instruction and the parked state
 * is a clean instruction boundary (what a snapshot must see). */
static bool wait_until_runnable(struct vcpu *v)
{
    struct vm *vm = v->vm;
    bool runnable = false;
    g_mutex_lock(&vm->run_lock);
    for (;;) {
        if (vm->state == VM_RUN_QUIT)
            break;
        if (vm->state == VM_RUN_RUNNING && !v->halted) {
            v->run->immediate_exit = 0;
            runnable = true;
            break;
        }
        if (v->needs_completion) {
            runnable = true; /* immediate_exit is set: KVM_RUN only completes the I/O */
            break;
        }
        if (!v->parked) {
            v->parked = true;
            vm->nparked++;
            g_cond_broadcast(&vm->run_cond);
        }
        g_cond_wait(&vm->run_cond, &vm->run_lock);
    }
    if (v->parked) {
        v->parked = false;
        vm->nparked--;
    }
    g_mutex_unlock(&vm->run_lock);
    return runnable;
}

/* An NMI asked for while this vCPU ran (vm_inject_nmi), injected before it
 * enters the guest again. A kick that came after the check makes KVM_RUN
 * return at once (immediate_exit), so the next round sees it. */
static void inject_pending_nmi(struct vcpu *v)
{
    if (!atomic_exchange(&v->nmi_pending, false))
        return;
    if (ioctl(v->fd, KVM_NMI, 0) < 0)
        g_warning("vCPU %u: KVM_NMI failed: %s", v->index, g_strerror(errno));
}

static void run_once(struct vcpu *v)
{
    inject_pending_nmi(v);
    int rc = ioctl(v->fd, KVM_RUN, 0);
    if (rc < 0) {
        int e = errno;
        v->needs_completion = false;
        if (e == EINTR || e == EAGAIN) {
            atomic_fetch_add(&v->exits[VCPU_EXIT_INTR], 1);
            return;
        }
        g_autofree char *detail = g_strdup_printf("vCPU %u: KVM_RUN failed: %s", v->index, g_strerror(e));
        vm_report_guest_stop(v->vm, VM_STOP_CRASH, detail);
        return;
    }
    enum vcpu_exit_kind kind = exit_kind(v->run->exit_reason);
    /* Counted first: handling may report a guest stop, after which the
     * counters are read. */
    atomic_fetch_add(&v->exits[kind], 1);
    v->needs_completion = kind == VCPU_EXIT_IO || kind == VCPU_EXIT_MMIO;
    dispatch_exit(v, kind);
}

static void *vcpu_thread(void *opaque)
{
    struct vcpu *v = opaque;
    char name[16];
    g_snprintf(name, sizeof(name), "vcpu%u", v->index);
    pthread_setname_np(pthread_self(), name);
    /* Created with every signal blocked; take only the kick. */
    sigset_t kick;
    sigemptyset(&kick);
    sigaddset(&kick, VCPU_KICK_SIGNAL);
    pthread_sigmask(SIG_UNBLOCK, &kick, NULL);
    sandbox_seccomp_enter_thread(SANDBOX_THREAD_VCPU);
    while (wait_until_runnable(v))
        run_once(v);
    return NULL;
}

bool vcpu_start_thread(struct vcpu *v, GError **error)
{
    sigset_t all, old;
    sigfillset(&all);
    /* Block everything in the new thread so process signals (SIGINT, SIGTERM,
     * SIGCHLD) go to the main thread; the thread unblocks its kick itself. */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&v->thread, NULL, vcpu_thread, v);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(rc), "vCPU %u: cannot start its thread: %s",
                    v->index, g_strerror(rc));
        return false;
    }
    v->thread_started = true;
    return true;
}
