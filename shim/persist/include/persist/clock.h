/* The guest's kvmclock across a snapshot: saved with the host's wall clock
 * at the same instant, and on restore moved on by the time the VM spent
 * stopped, so a restored guest's clock reads the host's real time instead of
 * the instant of its snapshot.
 *
 * KVM does it itself where the host supports it (KVM_SET_CLOCK with
 * KVM_CLOCK_REALTIME: KVM adds now - realtime to the clock); otherwise the
 * shim adds the same difference before KVM_SET_CLOCK ("advance"). A snapshot
 * without a saved wall clock (taken before vsnap saved one) keeps its clock.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stdint.h>

struct vm;

enum clock_restore_method {
    CLOCK_RESTORE_NONE,     /* not restored (booted), or nothing to go by: the clock as saved */
    CLOCK_RESTORE_REALTIME, /* KVM_CLOCK_REALTIME: KVM advanced it */
    CLOCK_RESTORE_ADVANCE,  /* the shim advanced it by the stopped time */
};

struct clock_restore {
    enum clock_restore_method method;
    uint64_t stopped_ns; /* host wall time between the snapshot and the restore */
    uint64_t clock_ns;   /* the kvmclock right after it was set */
};

/* Members "clock_ns", "clock_realtime_ns" and "clock_flags" of state.json's "kvm". */
bool clock_state_save(struct vm *vm, JsonBuilder *b, GError **error);
/* Set the VM's kvmclock from those members (obj is state.json's "kvm"). */
bool clock_state_restore(struct vm *vm, JsonObject *obj, struct clock_restore *out, GError **error);

/* The clock a VM stopped at saved_clock_ns (with the host's wall clock at
 * saved_realtime_ns) must show at now_realtime_ns; the wall clock going
 * backwards (a host clock step) never moves it back. */
uint64_t clock_advanced(uint64_t saved_clock_ns, uint64_t saved_realtime_ns, uint64_t now_realtime_ns);

const char *clock_restore_method_name(enum clock_restore_method method);
/* vm.info's vsnap.clock: {"restore": "realtime"|"advance"|"none", "stopped_ns", "clock_ns"},
 * or null for a VM that was not restored. */
void clock_restore_add_info(const struct clock_restore *c, bool restored, JsonBuilder *b);
