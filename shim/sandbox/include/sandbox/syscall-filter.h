/* Per-thread seccomp allow-lists (libseccomp). The main thread installs its
 * list for the whole process (every thread that exists then gets it); every
 * other thread narrows it at its start with the list of its kind, before it
 * touches the guest. Filters stack, so a thread's effective list is the
 * intersection of the main list and its own: the main list is the widest.
 * docs/seccomp.md lists each list and says why each call is on it. */
#pragma once

#include <glib.h>
#include <stdbool.h>

enum sandbox_mode {
    SANDBOX_SECCOMP_OFF,    /* no filter (the library's default: unit tests) */
    SANDBOX_SECCOMP_KILL,   /* a forbidden call kills the process with SIGSYS */
    SANDBOX_SECCOMP_LOG,    /* a forbidden call is logged by the kernel, then made */
};

enum sandbox_thread {
    SANDBOX_THREAD_MAIN,    /* the main loop: API, VM build, snapshot, restore */
    SANDBOX_THREAD_VCPU,    /* KVM_RUN and the device handlers run on exits */
    SANDBOX_THREAD_DISK,    /* a virtio-blk I/O thread */
    SANDBOX_THREAD_DEVICE,  /* vsock, console, rng device threads, serial input */
    SANDBOX_THREAD_UFFD,    /* the userfaultfd handler and the prefetcher */
};

/* The test-only trigger: when the environment variable of this name names
 * a thread kind ("main", "vcpu", "disk", "device", "uffd"), a thread of
 * that kind makes a forbidden call once its filter is installed. */
#define SANDBOX_TEST_TRIGGER_ENV "VSNAP_SHIM_TEST_FORBIDDEN_SYSCALL"

/* "true", "false" or "log" (Cloud Hypervisor's --seccomp values). */
bool sandbox_parse_mode(const char *text, enum sandbox_mode *out, GError **error);

/* Once, on the main thread, before any VM exists: sets the mode for every
 * thread started later, installs the SIGSYS reporter and the main list
 * (synchronised to all threads). A no-op when mode is OFF. */
bool sandbox_seccomp_install_main(enum sandbox_mode mode, GError **error);

/* At the start of a thread of `kind`, before it does anything for the guest.
 * A no-op when the main list was not installed. A filter that cannot be
 * built or loaded aborts the process: the thread must not run unfiltered. */
void sandbox_seccomp_enter_thread(enum sandbox_thread kind);

/* The kind's name as docs/seccomp.md and the trigger spell it. */
const char *sandbox_thread_kind_name(enum sandbox_thread kind);
