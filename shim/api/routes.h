/* What the endpoint files (vmm-, vm-, info-, ready-routes.c) share
 * with the dispatcher in server.c. */
#pragma once

#include <json-glib/json-glib.h>
#include <libsoup/soup.h>

#include "api/store-refs.h"
#include "vmm/vmm.h"

/* A VmConfig is a few hundred bytes; bodies beyond this only exhaust memory
 * and are refused (413) as they arrive. */
#define API_MAX_BODY_BYTES (1u << 20)

struct api_request {
    struct vmm *vmm;
    struct api_store *store; /* NULL: store URLs are refused */
    SoupServer *server;
    SoupServerMessage *msg;
    GBytes *body;       /* never NULL, may be empty */
    GHashTable *query;  /* may be NULL */
    /* Descriptors that came with the request (SCM_RIGHTS), in order; closed
     * once the handler returns (what keeps one duplicates it). */
    int *fds;
    unsigned nfds;
};

typedef void (*route_handler)(struct api_request *req);

struct route {
    const char *path;   /* under /api/v1/ */
    const char *method;
    bool takes_body;
    route_handler handle;
};

extern const struct route vmm_routes[]; /* NULL-path terminated */
extern const struct route vm_routes[];
extern const struct route info_routes[];
extern const struct route ready_routes[];
extern const struct route disk_job_routes[]; /* vsnap's block jobs */
extern const struct route snapshot_routes[]; /* vm.snapshot, vm.restore */

/* Put the request's descriptors, in order, in place of the numbers every
 * NetConfig of nets gives in "fds" (Cloud Hypervisor's placeholders): a
 * config parsed from them owns duplicates, the request's own are closed once
 * it is answered. Refused (SHIM_ERROR_INVALID) when the counts differ. from:
 * the first descriptor to use; *next gets the one after. */
bool attach_request_fds(struct api_request *req, JsonArray *nets, unsigned from, unsigned *next, GError **error);

void reply_no_content(struct api_request *req);
/* Takes json. */
void reply_json(struct api_request *req, unsigned status, JsonNode *json);
/* Errors answer as Cloud Hypervisor's do: a JSON list of messages, here one. */
void reply_error(struct api_request *req, const GError *error);
void reply_error_message(SoupServerMessage *msg, unsigned status, const char *message);
/* Reply 204 on success, the error's status otherwise. */
void reply_result(struct api_request *req, bool ok, const GError *error);
