/* Options of the test guest, from the kernel command line ("vsnap.<name>=<value>",
 * separated by spaces; other words, such as console=ttyS0, are ignored). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct options {
    uint64_t fill_mib;       /* vsnap.fill_mib: MiB to fill from 16 MiB up */
    uint64_t seed;           /* vsnap.seed: pattern seed */
    uint64_t ws_mib;         /* vsnap.ws_mib: after a restore, read back only this much of the filled
                              * region, 64 KiB pieces in a fixed scattered order (0: all, in order) */
    uint64_t delay_ms;       /* vsnap.delay_ms: busy time before "ready" */
    uint64_t gen_mib;        /* vsnap.gen_mib: MiB after the filled region the idle loop keeps rewriting (gen.h) */
    uint64_t gen_mbps;       /* vsnap.gen_mbps: cap on that rewrite, MB/s (0: none) */
    uint64_t heartbeat_ms;   /* vsnap.heartbeat_ms: print "tick N" this often when idle (0: never) */
    bool idle_spin;          /* vsnap.idle_spin=1: busy idle loop instead of HLT with the LAPIC timer */
    bool fill_clean;         /* vsnap.fill_clean=1: once filled, the region's page-table entries are made
                              * clean (not accessed, not dirty: cpl0_clean_pages) */
    bool halt_after_ready;   /* vsnap.halt_after_ready=1: power off after "ready" */
    bool reboot_after_ready; /* vsnap.reboot_after_ready=1: reset after "ready" */
    bool fault_after_ready;  /* vsnap.fault_after_ready=1: read unmapped memory after "ready" (tests the IDT) */
    bool hvc;                /* vsnap.hvc=1: lines go to the virtio-console too (consoledrv.c acts on it) */
};

/* Fill opts from cmdline. On a bad value it prints an error line naming the
 * option and returns false; unknown vsnap.* options only get a warning line. */
bool cmdline_parse(const char *cmdline, struct options *opts);
