/* Reads of mapped layer data that survive a truncated file (see mapped-read.h).
 *
 * Each read runs with a per-thread recovery point: the handler jumps back to
 * it when the faulting address is inside the range this thread is reading,
 * and otherwise puts the previous disposition back so the fault ends the
 * process as it would have without us. Thread-local variables are safe to
 * read in a handler (initial-exec TLS in an executable); SA_NODEFER leaves
 * SIGBUS unblocked, so jumping out needs no mask restored (sigsetjmp(.., 0)
 * costs no system call). */
#include "snapshot/mapped-read.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>

#include "snapshot/crc32c.h"

struct guard {
    sigjmp_buf *jump;
    const uint8_t *lo, *hi; /* the range being read */
};

static __thread struct guard guard;
static struct sigaction previous;
static pthread_once_t installed = PTHREAD_ONCE_INIT;

static void on_sigbus(int sig, siginfo_t *info, void *context)
{
    const uint8_t *addr = info->si_addr;
    sigjmp_buf *jump = guard.jump;
    if (jump && info->si_code > 0 && addr >= guard.lo && addr < guard.hi) {
        guard.jump = NULL;
        siglongjmp(*jump, 1);
    }
    /* Not a read of ours: the previous disposition, and the fault again (a
     * sent SIGBUS is raised again; a fault repeats when this returns). */
    sigaction(SIGBUS, &previous, NULL);
    if (info->si_code <= 0)
        raise(sig);
}

static void install_handler(void)
{
    struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_NODEFER };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &previous);
}

/* Between arm and disarm the compiler may not move the reads (signal fences). */
static void arm(sigjmp_buf *jump, const void *mapped, size_t len)
{
    guard.lo = mapped;
    guard.hi = (const uint8_t *)mapped + len;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    guard.jump = jump;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

static void disarm(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    guard.jump = NULL;
}

bool snap_mapped_copy(void *dst, const void *mapped, size_t len)
{
    pthread_once(&installed, install_handler);
    sigjmp_buf jump;
    if (sigsetjmp(jump, 0))
        return false;
    arm(&jump, mapped, len);
    memcpy(dst, mapped, len);
    disarm();
    return true;
}

bool snap_mapped_equal(const void *mapped, const void *mem, size_t len, bool *equal)
{
    pthread_once(&installed, install_handler);
    sigjmp_buf jump;
    if (sigsetjmp(jump, 0))
        return false;
    arm(&jump, mapped, len);
    bool same = memcmp(mapped, mem, len) == 0;
    disarm();
    *equal = same;
    return true;
}

bool snap_mapped_crc32c(const void *mapped, size_t len, uint32_t *crc)
{
    pthread_once(&installed, install_handler);
    sigjmp_buf jump;
    if (sigsetjmp(jump, 0))
        return false;
    arm(&jump, mapped, len);
    uint32_t value = crc32c(0, mapped, len);
    disarm();
    *crc = value;
    return true;
}
