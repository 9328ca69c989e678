/* Call dispatch: the procedure tables (procedure.h) searched for the
 * number a call names, access checked, arguments decoded, the handler run,
 * the reply or the error sent. */
#pragma once

#include <stddef.h>

#include "rpc/client.h"
#include "rpc/procedure.h"
#include "rpc/wire.h"

/* What procedures reach besides their client; the server owns them. */
struct rpc_context {
    struct vsnap_driver *driver;
    struct event_registry *events;
    struct stream_registry *streams;
};

/* Every table; a procedure number is served by one entry of one table. */
struct proc_table {
    const char *family;
    const struct proc_entry *entries;
    const size_t *count;
};
extern const struct proc_table rpc_proc_tables[];
extern const size_t rpc_proc_tables_count;

/* The entry that serves proc; NULL when none does. */
const struct proc_entry *rpc_find_proc(int proc);
/* The API name of a procedure known but not served, for a clearer refusal;
 * NULL otherwise. */
const char *rpc_unserved_name(int proc);

/* Decode, check access, run the handler, send the reply. Runs on a worker. */
void rpc_dispatch_call(const struct rpc_context *ctx, struct rpc_client *client,
                       const struct wire_header *hdr, const uint8_t *body, size_t len);
