/* The public API name of every procedure number of libvirt's remote
 * protocol (api-names.c, written by scripts/gen-api-names.py), so that a
 * call the daemon does not serve is refused by the name its caller knows. */
#pragma once

/* "virDomainAttachDeviceFlags" for 160; what sends it for the procedures no
 * single function is (events, the steps of a migration); NULL for a number
 * the protocol does not have. */
const char *rpc_api_name(int proc);
/* The last procedure number the table knows (libvirt's newest when it was
 * written). */
extern const int rpc_api_last_proc;
