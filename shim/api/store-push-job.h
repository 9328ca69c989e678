/* A push of a written snapshot to a store URL, as a job on its own thread
 * (vm.snapshot to a store prefix): the API answers meanwhile, vm.info shows
 * its progress, vm.cancel-snapshot ends it (store_options.cancel: within
 * about 100 ms, even with the server silent). One at a time per shim. */
#pragma once

#include <json-glib/json-glib.h>
#include <stdbool.h>

#include "api/store-refs.h"

struct api_push_job;

/* Called once, on the main context that started the job, with the push's
 * result or its error (SHIM_ERROR_CANCELLED after api_push_job_cancel); the
 * job is gone after it returns. */
typedef void (*api_push_done_func)(bool ok, const struct store_push_result *result, const GError *error,
                                   void *data);

/* Starts pushing dir to url (s stays alive until done). */
struct api_push_job *api_push_job_start(struct api_store *s, const char *dir, const char *url,
                                        api_push_done_func done, void *data);
void api_push_job_cancel(struct api_push_job *job);
/* Cancel, and wait here for the thread (done is not called): the shim's exit. */
void api_push_job_end_now(struct api_push_job *job);
/* vm.info's vsnap.snapshot_job while the push runs: {"phase": "push",
 * "bytes_done", "bytes_total", "elapsed_ms", "cancelling", "url"}. */
void api_push_job_add_info(struct api_push_job *job, JsonBuilder *b);
