/* The event monitor (the command line's --event-monitor path=... or fd=...,
 * parsed in api/cli.c): one JSON object per line, in Cloud Hypervisor's shape:
 *   {"timestamp":{"secs":S,"nanos":N},"source":"vm","event":"booting","properties":null}
 *
 * The format, for readers (virtvsnapd's plugin/run/shim-events.c is one):
 *   - "\n" ends every event; a line is one write(), so lines never interleave.
 *   - timestamp: time since the shim started (monotonic), not wall time.
 *   - source "vmm": starting (the process is up), shutdown (vmm.shutdown).
 *   - source "vm": booting, booted, pausing, paused, resuming, resumed,
 *     rebooting, rebooted (a fresh VM from the same config), deleted,
 *     snapshotting, snapshotted ({"id": layer id}), restoring, restored,
 *     shutdown: properties null when the API or a signal stopped the VM,
 *     {"reason": R, "detail": D} when the guest side did (R as vm.info's
 *     vsnap.last_stop_reason: "poweroff", "crash", ...).
 *   - source "guest", event "ready": the guest announced readiness on the
 *     readiness port; properties {"ready": true, "generation": G,
 *     "boot_id": ..., "ready_ns": host wall clock in ns, "port": P,
 *     "guest": the announcement's own JSON}. A new generation comes after
 *     each restore (the guest announces again).
 *   - Members and events may be added; readers ignore what they do not know.
 * With path=P and P a FIFO the shim opens it O_RDWR, so neither side blocks
 * on open and the FIFO survives a reader that goes away and comes back (the
 * daemon restarting).
 *
 * events_emit() may be called from any thread (the guest's readiness arrives on a
 * device thread). A slow or absent reader never blocks the VMM: the fd is
 * non-blocking and an event that does not fit in the pipe is dropped with a
 * warning.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>

struct events;

/* A monitor writing to path: a FIFO (opened so that it never blocks) or a
 * file (created if missing, appended to). */
struct events *events_open_path(const char *path, GError **error);
/* A monitor writing to fd, an inherited descriptor open for writing; the
 * monitor owns it from then on. */
struct events *events_adopt_fd(int fd, GError **error);
/* A monitor that writes nowhere, when --event-monitor is not given. */
struct events *events_new_null(void);
void events_free(struct events *events);
typedef struct events events;
G_DEFINE_AUTOPTR_CLEANUP_FUNC(events, events_free)

/* Emit one event. properties may be NULL (written as null); it is consumed
 * (the caller's reference is taken). events may be NULL (nothing is written). */
void events_emit(struct events *events, const char *source, const char *event,
                 JsonNode *properties);

/* Same, for callers that have properties as string pairs: NULL-terminated
 * key, value, key, value, ... */
void events_emit_strings(struct events *events, const char *source, const char *event, ...)
    G_GNUC_NULL_TERMINATED;
