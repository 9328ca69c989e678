/* The cold start marks (include/vmm/timeline.h). */
#include "vmm/timeline.h"

#include <time.h>

#include "json/vjson.h"

static gint64 marks[TIMELINE_N_MARKS];

static const char *const names[TIMELINE_N_MARKS] = {
    [TIMELINE_PROCESS_START] = "process_start_ns",
    [TIMELINE_CONFINED] = "confined_ns",
    [TIMELINE_API_READY] = "api_ready_ns",
    [TIMELINE_BOOTING] = "booting_ns",
    [TIMELINE_BOOTED] = "booted_ns",
    [TIMELINE_RESUMED] = "resumed_ns",
};

void timeline_mark(enum timeline_mark mark)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    marks[mark] = (gint64)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void timeline_add_info(JsonBuilder *b)
{
    vjson_object_begin(b, "timeline");
    for (int i = 0; i < TIMELINE_N_MARKS; i++)
        if (marks[i])
            vjson_int(b, names[i], marks[i]);
    vjson_object_end(b);
}
