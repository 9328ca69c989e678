/* Running a VM: starting its vCPU threads, pausing and resuming them, the
 * guest stopping itself, and ending the threads. The vCPU side of the same
 * protocol (parking, immediate_exit, the kick signal) is in vcpu.c.
 *
 * vm->state and every vCPU's parked flag change only under vm->run_lock;
 * vm->run_cond is broadcast on every change.
 */
#include <errno.h>
#include <gio/gio.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "vm-internal.h"
#include "sandbox/confine.h"

#define PAUSE_TIMEOUT_US (10 * G_USEC_PER_SEC)
#define PAUSE_REKICK_US (100 * 1000)

/* Threads that start while the state is VM_RUN_PAUSED park at once. */
static bool start_vcpu_threads(struct vm *vm, enum vm_run_state initial, GError **error)
{
    /* A confined shim leaves root before the guest runs (sandbox/confine.h). */
    if (!sandbox_drop_privileges(error))
        return false;
    g_mutex_lock(&vm->run_lock);
    if (vm->state != VM_RUN_CREATED) {
        g_mutex_unlock(&vm->run_lock);
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "the VM was already started");
        return false;
    }
    vm->state = initial;
    bool ok = true;
    for (unsigned i = 0; ok && i < vm->nvcpus; i++)
        ok = vcpu_start_thread(&vm->vcpus[i], error);
    if (!ok && vm->state == VM_RUN_RUNNING)
        vm->state = VM_RUN_PAUSED; /* threads that did start park; vm_free ends them */
    g_mutex_unlock(&vm->run_lock);
    return ok;
}

bool vm_start(struct vm *vm, GError **error)
{
    return start_vcpu_threads(vm, VM_RUN_RUNNING, error);
}

bool vm_start_paused(struct vm *vm, GError **error)
{
    return start_vcpu_threads(vm, VM_RUN_PAUSED, error) && vm_pause_disks(vm, error);
}

static unsigned started_threads(struct vm *vm)
{
    unsigned n = 0;
    for (unsigned i = 0; i < vm->nvcpus; i++)
        n += vm->vcpus[i].thread_started;
    return n;
}

static void kick_all_locked(struct vm *vm)
{
    for (unsigned i = 0; i < vm->nvcpus; i++)
        vcpu_kick(&vm->vcpus[i]);
}

/* Wait, re-kicking now and then, until every started vCPU is parked. */
static bool wait_all_parked_locked(struct vm *vm, GError **error)
{
    gint64 deadline = g_get_monotonic_time() + PAUSE_TIMEOUT_US;
    unsigned expected = started_threads(vm);
    while (vm->nparked < expected) {
        gint64 now = g_get_monotonic_time();
        if (now >= deadline) {
            g_set_error(error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
                        "only %u of %u vCPUs stopped within %d s (a device may be blocked)", vm->nparked,
                        expected, (int)(PAUSE_TIMEOUT_US / G_USEC_PER_SEC));
            return false;
        }
        if (!g_cond_wait_until(&vm->run_cond, &vm->run_lock, MIN(deadline, now + PAUSE_REKICK_US)))
            kick_all_locked(vm);
    }
    return true;
}

/* The vCPUs are parked: now the disks, outside run_lock (their requests may
 * take a while). A disk that does not go idle lets the vCPUs run again. */
static bool pause_disks_or_resume(struct vm *vm, GError **error)
{
    if (vm_pause_disks(vm, error))
        return true;
    g_mutex_lock(&vm->run_lock);
    if (vm->state == VM_RUN_PAUSED) {
        vm->state = VM_RUN_RUNNING;
        g_cond_broadcast(&vm->run_cond);
    }
    g_mutex_unlock(&vm->run_lock);
    return false;
}

bool vm_pause(struct vm *vm, GError **error)
{
    g_mutex_lock(&vm->run_lock);
    bool ok = true;
    switch (vm->state) {
    case VM_RUN_RUNNING:
        vm->state = VM_RUN_PAUSED;
        kick_all_locked(vm);
        /* fall through */
    case VM_RUN_PAUSED:
    case VM_RUN_GUEST_STOPPED:
        ok = wait_all_parked_locked(vm, error);
        break;
    case VM_RUN_CREATED:
    case VM_RUN_QUIT:
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "the VM is not running");
        ok = false;
        break;
    }
    g_mutex_unlock(&vm->run_lock);
    return ok && pause_disks_or_resume(vm, error);
}

bool vm_resume(struct vm *vm, GError **error)
{
    g_mutex_lock(&vm->run_lock);
    bool ok = vm->state == VM_RUN_PAUSED || vm->state == VM_RUN_RUNNING;
    if (ok) {
        vm_resume_disks(vm); /* before any vCPU can publish a request */
        vm->state = VM_RUN_RUNNING;
        g_cond_broadcast(&vm->run_cond);
    } else {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "the VM cannot resume: %s",
                    vm->state == VM_RUN_GUEST_STOPPED ? "the guest has stopped" : "it is not running");
    }
    g_mutex_unlock(&vm->run_lock);
    return ok;
}

bool vm_inject_nmi(struct vm *vm, GError **error)
{
    struct vcpu *v = &vm->vcpus[0];
    g_mutex_lock(&vm->run_lock);
    enum vm_run_state state = vm->state;
    bool ok = state != VM_RUN_GUEST_STOPPED && state != VM_RUN_QUIT;
    int err = 0;
    if (ok && state == VM_RUN_RUNNING && v->thread_started) {
        atomic_store(&v->nmi_pending, true);
        /* An NMI ends even a halt with interrupts off. */
        v->halted = false;
        vcpu_kick(v);
        g_cond_broadcast(&vm->run_cond);
    } else if (ok && ioctl(v->fd, KVM_NMI, 0) < 0) {
        /* Parked or not started: nothing is in KVM_RUN, the ioctl is ours. */
        err = errno;
        ok = false;
    }
    g_mutex_unlock(&vm->run_lock);
    if (!ok && err)
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(err), "KVM_NMI on vCPU 0: %s", g_strerror(err));
    else if (!ok)
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_FAILED, "the guest has stopped: no vCPU can take an NMI");
    return ok;
}

void vm_report_guest_stop(struct vm *vm, enum vm_stop_reason reason, const char *detail)
{
    if (atomic_exchange(&vm->stop_reported, true))
        return;
    g_mutex_lock(&vm->run_lock);
    if (vm->state == VM_RUN_RUNNING || vm->state == VM_RUN_PAUSED) {
        vm->state = VM_RUN_GUEST_STOPPED;
        kick_all_locked(vm);
        g_cond_broadcast(&vm->run_cond);
    }
    g_mutex_unlock(&vm->run_lock);
    g_debug("guest stopped (%s): %s", vm_stop_reason_to_string(reason), detail);
    if (vm->cb.on_guest_stop)
        vm->cb.on_guest_stop(vm->cb.opaque, reason, detail);
}

/* _exit, not exit: other threads still run (some blocked for good), so
 * atexit handlers and library destructors must not run under them. The log
 * writer flushes every line, and events are written by then. */
void vm_report_fatal(struct vm *vm, const char *detail)
{
    atomic_store(&vm->stop_reported, true);
    g_warning("the VM is lost, the shim exits: %s", detail);
    if (vm->cb.on_fatal)
        vm->cb.on_fatal(vm->cb.opaque, detail);
    _exit(VM_FATAL_EXIT_STATUS);
}

bool vm_on_vcpu_thread(struct vm *vm)
{
    for (unsigned i = 0; i < vm->nvcpus; i++) {
        if (vm->vcpus[i].thread_started && pthread_equal(vm->vcpus[i].thread, pthread_self()))
            return true;
    }
    return false;
}

void vm_stop_vcpu_threads(struct vm *vm)
{
    g_mutex_lock(&vm->run_lock);
    vm->state = VM_RUN_QUIT;
    kick_all_locked(vm);
    g_cond_broadcast(&vm->run_cond);
    g_mutex_unlock(&vm->run_lock);
    for (unsigned i = 0; i < vm->nvcpus; i++) {
        if (vm->vcpus[i].thread_started)
            pthread_join(vm->vcpus[i].thread, NULL);
        vm->vcpus[i].thread_started = false;
    }
}
