/* The command port (vsnap.cmd_port): host programs connect with
 * "CONNECT <port>\n" on the VM's vsock socket and send one command per line.
 *
 *   PING                      -> PONG
 *   FILL <gpa> <len> <seed>   -> OK       fill with the test pattern
 *   ZERO <gpa> <len>          -> OK
 *   SUM <gpa> <len>           -> SUM <16 hex>  (FNV-1a)
 *   TOUCH <gpa> <len>         -> OK       read every page
 *   HALT                      -> OK, then ACPI S5 power-off
 *   ECHO                      -> OK, then every byte received is sent back
 *   DIAL <port> <len> <seed>  -> connect to host port, send len pattern bytes,
 *                                read until EOF, then
 *                                DIALED <sent> <received> <16 hex FNV of received>
 *                                or ERR <why>
 *   SEND <port> <len> <seed>  -> connect, send len pattern bytes, close at once
 *                                (SHUTDOWN both right after the last byte),
 *                                SENT <len>
 *   BADPKT                    -> OK <n>   n malformed packets sent to the device
 *                                          (its robustness test)
 *   RNG <n>                   -> RNG <n> <16 hex>  n bytes (at most 65536) read
 *                                          from virtio-rng, their FNV-1a
 *   VMGENID                   -> VMGENID <32 hex> gpe=<0|1>  the VM generation
 *                                          ID (found through ACPI) and whether its
 *                                          change event (GPE 0) was pending; clears it
 *   NOTIFYSTOP                -> OK       in notify mode: send systemd's shutdown
 *                                          notifications (notify.h)
 *   NETINFO                   -> NET <mac, lowercase with colons> <link 0|1>
 *                                    <rx packets> <tx packets>   (netdrv.h)
 *   NETBADPKT                 -> OK <n>   n malformed transmit chains and
 *                                          receive buffers given to the
 *                                          virtio-net device
 *   GENCHECK                  -> GEN <generation> <page> ok|bad   the
 *                                          vsnap.gen_mib region against its
 *                                          cursor (gen.h)
 *   STALL                     -> STALL <us>   the idle loop's largest gap
 *                                          since the last STALL (gen.h)
 *   NMI                       -> NMI <count>  NMIs taken since boot (vector 2)
 *   CID                       -> CID <cid>    the guest CID the vsock driver uses (read again at each
 *                                             transport reset)
 *   KEYS                      -> KEYS[ xx ...]  the i8042 scan code bytes read
 *                                          since the last KEYS, in hex (keyboard.h)
 *
 * Disks (virtio-blk, blk-commands.c; disk n counts from 0 in the shim's config
 * order; offsets and lengths are bytes, multiples of 512):
 *   BLKINFO <n>                    -> BLK <n> <capacity in sectors> <ro: 0|1>
 *   BLKFILL <n> <off> <len> <seed> -> OK   write the pattern: word k of the region
 *                                          is mix(seed ^ k), as FILL
 *   BLKFILLZ <n> <off> <len>       -> OK   write zeros with plain writes (OUT)
 *   BLKSUM <n> <off> <len>         -> SUM <16 hex>  FNV-1a of the bytes read back
 *   BLKCOPY <from> <to> <off> <len> -> OK <bytes written>  copy a region disk to
 *                                          disk, skipping blocks that read as
 *                                          zeros (dd conv=sparse)
 *   BLKFLUSH <n>                   -> OK
 *   BLKID <n>                      -> ID <serial>   (GET_ID)
 *   BLKDISCARD <n> <off> <len>     -> OK
 *   BLKZERO <n> <off> <len> <unmap 0|1> -> OK     (WRITE_ZEROES)
 *   BLKBADPKT <n>                  -> OK <count>   malformed requests sent to the
 *                                          device, each answered as the spec says
 *   BLKBENCH <n> read|write|randread|randwrite <off> <span> <bs> <depth> <count>
 *                                  -> BENCH <count> <bytes> <microseconds>
 *   Disk errors: ERR ioerr (the device answered IOERR), ERR readonly (a write
 *   to a read-only disk), ERR unsupported, ERR timeout, ERR no such disk.
 *
 * Numbers are decimal or 0x hex. Regions must lie in RAM at or above 16 MiB
 * and be 8-byte aligned. Errors answer "ERR <why>" and the connection stays.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

void commands_start(uint32_t port, const uint8_t *boot_params);
void commands_poll(void);
