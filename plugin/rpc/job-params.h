/* A completed job's figures as typed parameters (domain/events.h's struct
 * domain_job_stats): the ones libvirt's QEMU driver sends in its
 * job-completed event and answers domjobinfo --completed with, for the
 * figures vsnap has. */
#pragma once

#include "domain/events.h"
#include "rpc/wire.h"

/* At most this many parameters. */
#define JOB_PARAMS_MAX 14
/* Fills p (room for JOB_PARAMS_MAX); returns how many. The fields are
 * malloc'd (xdr_free, or job_params_free, releases them). */
unsigned job_params_fill(const struct domain_job_stats *s, struct wire_typed_param *p);
void job_params_free(struct wire_typed_param *p, unsigned n);
