/* kvmclock in snapshots (see clock.h). */
#include "persist/clock.h"

#include <errno.h>
#include <linux/kvm.h>
#include <sys/ioctl.h>
#include <time.h>

#include "persist/persist-error.h"
#include "state/state-json.h"
#include "core/vm.h"
#include "json/vjson.h"

static uint64_t realtime_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool clock_failed(GError **error, const char *what)
{
    int e = errno;
    g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_FAILED, "VM: %s failed: %s", what, g_strerror(e));
    return false;
}

uint64_t clock_advanced(uint64_t saved_clock_ns, uint64_t saved_realtime_ns, uint64_t now_realtime_ns)
{
    if (now_realtime_ns <= saved_realtime_ns)
        return saved_clock_ns;
    return saved_clock_ns + (now_realtime_ns - saved_realtime_ns);
}

bool clock_state_save(struct vm *vm, JsonBuilder *b, GError **error)
{
    struct kvm_clock_data clock = { 0 };
    if (ioctl(vm_kvm_vm_fd(vm), KVM_GET_CLOCK, &clock) < 0)
        return clock_failed(error, "KVM_GET_CLOCK");
    /* KVM pairs the clock with the host's wall clock when its master clock
     * runs; otherwise the nearest reading is right after the call. */
    uint64_t realtime = clock.flags & KVM_CLOCK_REALTIME ? clock.realtime : realtime_now_ns();
    vjson_hex64(b, "clock_ns", clock.clock);
    vjson_hex64(b, "clock_realtime_ns", realtime);
    return true;
}

/* Whether KVM_SET_CLOCK takes KVM_CLOCK_REALTIME here (Linux 5.16 and later). */
static bool kvm_has_clock_realtime(struct vm *vm)
{
    int caps = ioctl(vm_kvm_vm_fd(vm), KVM_CHECK_EXTENSION, KVM_CAP_ADJUST_CLOCK);
    return caps > 0 && (caps & KVM_CLOCK_REALTIME);
}

bool clock_state_restore(struct vm *vm, JsonObject *obj, struct clock_restore *out, GError **error)
{
    uint64_t clock_ns = 0, realtime_ns = 0;
    if (!state_get_u64(obj, "clock_ns", &clock_ns, "VM", error))
        return false;
    bool has_realtime = json_object_has_member(obj, "clock_realtime_ns");
    if (has_realtime && !state_get_u64(obj, "clock_realtime_ns", &realtime_ns, "VM", error))
        return false;
    struct kvm_clock_data clock = { .clock = clock_ns };
    *out = (struct clock_restore){ .method = CLOCK_RESTORE_NONE };
    uint64_t now = realtime_now_ns();
    if (has_realtime && kvm_has_clock_realtime(vm)) {
        clock.flags = KVM_CLOCK_REALTIME;
        clock.realtime = realtime_ns;
        out->method = CLOCK_RESTORE_REALTIME;
    } else if (has_realtime) {
        clock.clock = clock_advanced(clock_ns, realtime_ns, now);
        out->method = CLOCK_RESTORE_ADVANCE;
    }
    if (ioctl(vm_kvm_vm_fd(vm), KVM_SET_CLOCK, &clock) < 0)
        return clock_failed(error, "KVM_SET_CLOCK");
    if (has_realtime)
        out->stopped_ns = now > realtime_ns ? now - realtime_ns : 0;
    struct kvm_clock_data now_clock = { 0 };
    if (ioctl(vm_kvm_vm_fd(vm), KVM_GET_CLOCK, &now_clock) < 0)
        return clock_failed(error, "KVM_GET_CLOCK");
    out->clock_ns = now_clock.clock;
    return true;
}

const char *clock_restore_method_name(enum clock_restore_method method)
{
    switch (method) {
    case CLOCK_RESTORE_NONE:
        return "none";
    case CLOCK_RESTORE_REALTIME:
        return "realtime";
    case CLOCK_RESTORE_ADVANCE:
        return "advance";
    }
    return "unknown";
}

void clock_restore_add_info(const struct clock_restore *c, bool restored, JsonBuilder *b)
{
    if (!restored) {
        vjson_null(b, "clock");
        return;
    }
    vjson_object_begin(b, "clock");
    vjson_str(b, "restore", clock_restore_method_name(c->method));
    vjson_int(b, "stopped_ns", (gint64)c->stopped_ns);
    vjson_int(b, "clock_ns", (gint64)c->clock_ns);
    vjson_object_end(b);
}
