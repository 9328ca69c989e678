/* What the storage pool and volume families (xdr-storage-pool.c,
 * xdr-storage-vol.c) share: the host storage driver a call is forwarded to,
 * and a wire pool handle as the host driver's. Private to rpc/. */
#pragma once

#include "host/host-storage.h"
#include "rpc/procedure.h"

/* The host's storage driver for this call (read-only when the client is),
 * or VIR_ERR_NO_SUPPORT naming the call's API when there is none. */
host_storage *rpc_storage_for(struct rpc_call *call, GError **error);
/* The host driver's handle of a wire pool (its strings are pool's). */
struct host_pool rpc_pool_ref(const struct wire_pool *pool);
