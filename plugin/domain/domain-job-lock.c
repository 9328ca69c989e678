/* The bounded domain job lock (domain-job-lock.h): a mutex, a condition and
 * the holder's operation for the timeout's message. */
#include "domain/domain-job-lock.h"

#include "util/virt-error.h"

static guint wait_timeout_s = DOMAIN_JOB_WAIT_DEFAULT;

void domain_job_set_wait_timeout(unsigned seconds)
{
    g_atomic_int_set(&wait_timeout_s, seconds ? seconds : 1);
}

unsigned domain_job_wait_timeout(void)
{
    return g_atomic_int_get(&wait_timeout_s);
}

void domain_job_lock_init(struct domain_job_lock *lock)
{
    g_mutex_init(&lock->mutex);
    g_cond_init(&lock->released);
    lock->held = false;
    lock->holder = NULL;
}

void domain_job_lock_clear(struct domain_job_lock *lock)
{
    g_assert(!lock->held);
    g_mutex_clear(&lock->mutex);
    g_cond_clear(&lock->released);
}

bool domain_job_lock_acquire(struct domain_job_lock *lock, const char *domain, const char *what,
                             GError **error)
{
    unsigned timeout_s = domain_job_wait_timeout();
    gint64 deadline = g_get_monotonic_time() + (gint64)timeout_s * G_TIME_SPAN_SECOND;
    g_mutex_lock(&lock->mutex);
    while (lock->held) {
        if (!g_cond_wait_until(&lock->released, &lock->mutex, deadline) &&
            lock->held) {
            gint64 held_s = (g_get_monotonic_time() - lock->since_us) / G_TIME_SPAN_SECOND;
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_TIMEOUT,
                        "cannot acquire state change lock (held by %s for %" G_GINT64_FORMAT
                        " s): %s of domain '%s' waited %u s", lock->holder, held_s, what,
                        domain, timeout_s);
            g_mutex_unlock(&lock->mutex);
            return false;
        }
    }
    lock->held = true;
    lock->holder = what;
    lock->since_us = g_get_monotonic_time();
    g_mutex_unlock(&lock->mutex);
    return true;
}

void domain_job_lock_release(struct domain_job_lock *lock)
{
    g_mutex_lock(&lock->mutex);
    g_assert(lock->held);
    lock->held = false;
    lock->holder = NULL;
    g_cond_broadcast(&lock->released);
    g_mutex_unlock(&lock->mutex);
}
