/* What the storage procedure families share (storage-call.h). */
#include "storage-call.h"

#include <string.h>

#include "domain/state.h"
#include "rpc/api-names.h"

host_storage *rpc_storage_for(struct rpc_call *call, GError **error)
{
    return host_storage_open(call->driver->paths.storage_uri, rpc_client_is_readonly(call->client),
                             rpc_api_name(call->hdr->proc), error);
}

struct host_pool rpc_pool_ref(const struct wire_pool *pool)
{
    struct host_pool ref = {.name = pool->name};
    memcpy(ref.uuid, pool->uuid, 16);
    return ref;
}
