#include "job-params.h"

#include <libvirt/libvirt.h>
#include <stdlib.h>

unsigned job_params_fill(const struct domain_job_stats *s, struct wire_typed_param *p)
{
    unsigned n = 0;
    wire_param_int(&p[n++], VIR_DOMAIN_JOB_OPERATION, s->operation);
    wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_TIME_ELAPSED, s->elapsed_ms);
    wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_DOWNTIME, s->downtime_ms);
    wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_DATA_TOTAL, s->total);
    wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_DATA_PROCESSED, s->processed);
    wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_DATA_REMAINING, s->remaining);
    wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_MEMORY_TOTAL, s->total);
    wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_MEMORY_PROCESSED, s->processed);
    wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_MEMORY_REMAINING, s->remaining);
    if (s->iteration) {
        wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_MEMORY_DIRTY_RATE, s->dirty_rate);
        wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_MEMORY_ITERATION, s->iteration);
        wire_param_ullong(&p[n++], VIR_DOMAIN_JOB_MEMORY_PAGE_SIZE, s->page_size);
    }
    return n;
}

void job_params_free(struct wire_typed_param *p, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        if (p[i].type == VIR_TYPED_PARAM_STRING)
            free(p[i].value.s);
        free(p[i].field);
    }
}
