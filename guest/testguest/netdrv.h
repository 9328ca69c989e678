/* Polled virtio-net driver and a tiny IPv4 host for the test guest: one
 * address from the command line (vsnap.ip=A.B.C.D/N; vsnap.mac= checks the
 * device's MAC), answering ARP requests for it, ICMP echo requests, and UDP
 * on port 7 (echo). It sends a gratuitous ARP (three, 100 ms apart) when the
 * network comes up and whenever the device asks the guest to announce itself
 * (VIRTIO_NET_F_GUEST_ANNOUNCE, after a restore), re-reading the device's MAC
 * first (a clone may have a new one).
 *
 * Polled like the other drivers: receive buffers are always posted (128 of
 * 2 KiB, merged for larger frames: VIRTIO_NET_F_MRG_RXBUF), the used rings
 * are read in memory, the doorbell rings once per batch of replies, and the
 * configuration (link, announce) is read every few milliseconds, not per
 * poll: each register access is a VM exit.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* Find and start the first virtio-net device. false without one (or a bad
 * vsnap.ip: an error line was printed). */
bool net_init(const char *cmdline, uint64_t tsc_khz);
bool net_active(void);
/* Receive and answer what arrived, take back sent buffers, look at the
 * configuration when due. Returns whether anything arrived. */
bool net_poll(void);

struct net_info {
    uint8_t mac[6];
    bool link_up;
    uint64_t rx_packets, tx_packets;
};
/* Reads the link from the device (one exit). */
void net_get_info(struct net_info *info);
/* Send malformed transmit chains (buffers outside RAM, too many descriptors,
 * a writable descriptor, a chain shorter than the header, a loop, an
 * indirect descriptor, an avail entry naming no descriptor), and post the
 * next five receive buffers malformed (outside RAM, read-only, shorter than
 * the header, off the end of the address space, of no bytes); returns how many. The
 * device must drop or hand back each and go on. */
unsigned net_send_malformed(void);
