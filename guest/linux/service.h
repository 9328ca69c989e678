/* The test service: line commands on a vsock port (vsnap.test_port=, default
 * 5001) for what tests/linux checks from the host, one connection at a time:
 *
 *   PING                       -> PONG
 *   SHA <offset> <length>      -> OK <sha256 of that range of /dev/vda>
 *   WRITE <offset> <length> <seed>
 *                              -> OK <sha256 of what it wrote>, on disk (fsync):
 *                                 32-byte block k is sha256("<seed>:<k>")
 *   RNG <n>                    -> OK <bytes read> <hex> from /dev/hwrng (n <= 256)
 *   DMI                        -> OK <product_name>
 *   NET                        -> OK eth0 <address/prefix> <mac>
 *   DRIVERS                    -> OK <drivers of the virtio devices>
 *   VMGENID                    -> OK bound | OK not bound
 *   TIME                       -> OK <CLOCK_REALTIME ns>
 *   CONSOLE <text>             -> OK, after writing "vsnap-linux: <text>" to hvc0
 * Anything else gets ERR <why>. */
#ifndef VSNAP_LINUX_SERVICE_H
#define VSNAP_LINUX_SERVICE_H

#include <stddef.h>

#define SERVICE_DEFAULT_PORT 5001

/* Answers one command line (without its newline) into reply. */
void service_answer(const char *line, char *reply, size_t size);
/* Listens on the port and serves forever; returns only on a socket error. */
int service_run(unsigned port);

#endif
