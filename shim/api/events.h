/* The event monitor (--event-monitor path=... or fd=...): one JSON object per
 * line, in Cloud Hypervisor's shape:
 *   {"timestamp":{"secs":S,"nanos":N},"source":"vm","event":"booting","properties":null}
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

/* Open the monitor named by a --event-monitor value ("path=P" or "fd=N"). */
struct events *events_open(const char *spec, GError **error);
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
