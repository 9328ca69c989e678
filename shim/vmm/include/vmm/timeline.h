/* Where a cold start's time goes: a few marks on CLOCK_REALTIME (ns), the
 * clock of vm.info's ready_ns and of the daemon's domain log, so a client
 * lines them up with its own and the daemon's (tests/bench: cold start to
 * READY). One VM per shim process: the marks are the process's. */
#pragma once

#include <json-glib/json-glib.h>

enum timeline_mark {
    TIMELINE_PROCESS_START, /* main() entered: the shim was spawned and linked */
    TIMELINE_CONFINED,      /* in its jail, the syscall filter on */
    TIMELINE_API_READY,     /* the API socket serves */
    TIMELINE_BOOTING,       /* vm.boot began: RAM, kernel, devices next */
    TIMELINE_BOOTED,        /* the vCPUs run the guest */
    TIMELINE_RESUMED,       /* the vCPUs run again: the last vm.resume (a restore's too) */
    TIMELINE_N_MARKS,
};

/* Records the mark now; a later call for the same mark overwrites it. */
void timeline_mark(enum timeline_mark mark);

/* "timeline": {"process_start_ns": ..., ...}, each mark reached so far. */
void timeline_add_info(JsonBuilder *b);
