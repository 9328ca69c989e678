/* vsnap.gen_mib=N: a workload whose every instant is checkable, for live
 * snapshots. The idle loop rewrites the N MiB right after the filled region
 * (vsnap.fill_mib), page after page; each pass stamps every page with the
 * pass's generation number (its first and last word), and the cursor
 * (generation, next page) lives in guest RAM beside the pages. So a snapshot
 * of one instant, restored, shows pages [0, page) at the cursor's generation
 * and [page, N) at the one before; one that mixed instants does not.
 *
 *   GENCHECK -> GEN <generation> <page> ok|bad   bad also once the writer
 *               found a page it was about to stamp not at the generation
 *               before (a restore mixed instants, and the scan came too late)
 *   STALL    -> STALL <us>   the largest gap between two iterations of the
 *                            idle loop since the last STALL (its first call:
 *                            since the loop started)
 *
 * vsnap.gen_mbps=R caps the rewrite at R MB/s (0, the default: as fast as
 * the loop goes). Without gen_mib the loop idles as before and STALL still
 * answers (its gaps then include the sleeps). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct clock;

/* base: the first byte after the filled region; false (with a line on the
 * serial port) if [base, base + mib MiB) is not all RAM. */
bool gen_init(const uint8_t *boot_params, uint64_t base, uint64_t mib, uint64_t mbps, const struct clock *clock);
bool gen_active(void);
/* One iteration of the idle loop: note the gap since the last one, and
 * rewrite the pages that are due. */
void gen_step(void);
/* The command port's answers (at most 64 bytes with the NUL). */
void gen_check(char *text);
void gen_stall(char *text);
