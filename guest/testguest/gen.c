/* The generation writer and the loop's stall meter (gen.h). CPL3 only. */
#include "gen.h"

#include "boot_params.h"
#include "clock.h"
#include "io.h"
#include "libc.h"
#include "serial.h"

#define PAGE 4096u
#define WORDS_PER_PAGE (PAGE / 8)
#define MIB (1ull << 20)
/* Pages per iteration when the rate is not capped: a poll of the rings
 * between every few pages keeps the command port answering. */
#define BATCH_PAGES 16u

struct gen {
    volatile uint64_t *pages; /* npages * WORDS_PER_PAGE words */
    uint64_t npages;
    /* The cursor: pages before `page` carry `generation`, the rest
     * generation - 1. Volatile so the stores happen in program order: the
     * page is stamped before the cursor moves past it. */
    volatile uint64_t generation;
    volatile uint64_t page;
    /* Each stamp checks first that the page held the generation before:
     * a page a restore got from another instant shows up when the writer
     * reaches it, even after the scan would find the region whole again. */
    bool broken;
    uint64_t ticks_per_page; /* 0: uncapped */
    uint64_t next_due_tsc;
    uint64_t tsc_khz;
    uint64_t last_step_tsc;
    uint64_t max_gap_ticks;
};

static struct gen gen = { .generation = 1 };

bool gen_init(const uint8_t *boot_params, uint64_t base, uint64_t mib, uint64_t mbps, const struct clock *clock)
{
    gen.tsc_khz = clock->tsc_khz;
    gen.last_step_tsc = rdtsc();
    if (mib == 0)
        return true;
    if (mib > UINT64_MAX / MIB || !boot_params_is_ram(boot_params, base, mib * MIB)) {
        serial_puts("vsnap-testguest: error: vsnap.gen_mib=");
        serial_put_dec(mib);
        serial_puts(": the region after the filled one is not all RAM\n");
        return false;
    }
    gen.pages = (volatile uint64_t *)(uintptr_t)base;
    gen.npages = mib * MIB / PAGE;
    /* R MB/s is R * 10^6 / 4096 pages a second. */
    gen.ticks_per_page = mbps ? clock->tsc_khz * 1000 * PAGE / (mbps * 1000000) : 0;
    gen.next_due_tsc = rdtsc();
    return true;
}

bool gen_active(void)
{
    return gen.npages != 0;
}

static void stamp_next_page(void)
{
    uint64_t g = gen.generation, p = gen.page;
    volatile uint64_t *page = gen.pages + p * WORDS_PER_PAGE;
    if (page[0] != g - 1 || page[WORDS_PER_PAGE - 1] != g - 1)
        gen.broken = true;
    page[0] = g;
    page[WORDS_PER_PAGE - 1] = g;
    if (p + 1 == gen.npages) {
        gen.page = 0;
        gen.generation = g + 1;
    } else {
        gen.page = p + 1;
    }
}

static unsigned pages_due(uint64_t now)
{
    if (!gen.ticks_per_page)
        return BATCH_PAGES;
    unsigned n = 0;
    while (now >= gen.next_due_tsc && n < BATCH_PAGES) {
        gen.next_due_tsc += gen.ticks_per_page;
        n++;
    }
    /* Far behind (the VM was paused): start from now, not with a burst. */
    if (now >= gen.next_due_tsc)
        gen.next_due_tsc = now;
    return n;
}

void gen_step(void)
{
    uint64_t now = rdtsc();
    uint64_t gap = now - gen.last_step_tsc;
    if (gap > gen.max_gap_ticks)
        gen.max_gap_ticks = gap;
    gen.last_step_tsc = now;
    if (!gen.npages)
        return;
    for (unsigned n = pages_due(now); n > 0; n--)
        stamp_next_page();
}

static bool page_holds(uint64_t p, uint64_t g)
{
    volatile uint64_t *page = gen.pages + p * WORDS_PER_PAGE;
    return page[0] == g && page[WORDS_PER_PAGE - 1] == g;
}

static char *put(char *at, const char *s)
{
    while (*s)
        *at++ = *s++;
    return at;
}

static char *put_dec(char *at, uint64_t v)
{
    char digits[21];
    format_dec(v, digits);
    return put(at, digits);
}

void gen_check(char *text)
{
    if (!gen.npages) {
        put(text, "ERR no vsnap.gen_mib region")[0] = '\0';
        return;
    }
    uint64_t g = gen.generation, cursor = gen.page;
    bool ok = !gen.broken;
    for (uint64_t p = 0; p < gen.npages && ok; p++)
        ok = page_holds(p, p < cursor ? g : g - 1);
    char *at = put(text, "GEN ");
    at = put_dec(at, g);
    at = put(at, " ");
    at = put_dec(at, cursor);
    put(at, ok ? " ok" : " bad")[0] = '\0';
}

void gen_stall(char *text)
{
    uint64_t us = gen.max_gap_ticks * 1000 / gen.tsc_khz;
    gen.max_gap_ticks = 0;
    put_dec(put(text, "STALL "), us)[0] = '\0';
}
