/* struct bus: registration rules and dispatch by address. */
#include <glib.h>
#include <string.h>

#include "platform/bus.h"

struct recorder {
    uint64_t last_offset;
    unsigned last_len;
    uint8_t last_write[8];
    unsigned reads, writes;
    uint8_t fill;
};

static void rec_read(void *opaque, uint64_t offset, uint8_t *data, unsigned len)
{
    struct recorder *r = opaque;
    r->reads++;
    r->last_offset = offset;
    r->last_len = len;
    memset(data, r->fill, len);
}

static void rec_write(void *opaque, uint64_t offset, const uint8_t *data, unsigned len)
{
    struct recorder *r = opaque;
    r->writes++;
    r->last_offset = offset;
    r->last_len = len;
    memcpy(r->last_write, data, len);
}

static const struct bus_ops rec_ops = { .read = rec_read, .write = rec_write };

static void test_register_and_dispatch(void)
{
    struct bus bus;
    bus_init(&bus);
    struct recorder a = { .fill = 0xaa }, b = { .fill = 0xbb };
    g_assert_true(bus_register(&bus, 0x3f8, 8, &rec_ops, &a, "a"));
    g_assert_true(bus_register(&bus, 0x60, 1, &rec_ops, &b, "b"));

    uint8_t data[4];
    g_assert_true(bus_read(&bus, 0x3fd, data, 1));
    g_assert_cmpuint(a.last_offset, ==, 5);
    g_assert_cmphex(data[0], ==, 0xaa);
    g_assert_true(bus_read(&bus, 0x60, data, 1));
    g_assert_cmphex(data[0], ==, 0xbb);

    uint8_t value[2] = { 0x12, 0x34 };
    g_assert_true(bus_write(&bus, 0x3f8, value, 2));
    g_assert_cmpuint(a.writes, ==, 1);
    g_assert_cmpuint(a.last_offset, ==, 0);
    g_assert_cmpuint(a.last_len, ==, 2);
    g_assert_cmpmem(a.last_write, 2, value, 2);
    bus_release(&bus);
}

static void test_unmapped(void)
{
    struct bus bus;
    bus_init(&bus);
    struct recorder a = { .fill = 0 };
    g_assert_true(bus_register(&bus, 0x100, 0x10, &rec_ops, &a, "a"));
    uint8_t data[4] = { 0 };
    g_assert_false(bus_read(&bus, 0x80, data, 4));
    g_assert_cmpmem(data, 4, "\xff\xff\xff\xff", 4);
    g_assert_false(bus_write(&bus, 0x80, data, 1));
    /* Just past the end, and straddling the end: not this device's. */
    g_assert_false(bus_read(&bus, 0x110, data, 1));
    g_assert_false(bus_read(&bus, 0x10e, data, 4));
    g_assert_cmpuint(a.reads, ==, 0);
    g_assert_true(bus_read(&bus, 0x10c, data, 4));
    g_assert_cmpuint(a.reads, ==, 1);
    bus_release(&bus);
}

static void test_overlap_refused(void)
{
    struct bus bus;
    bus_init(&bus);
    struct recorder a = { 0 };
    g_assert_true(bus_register(&bus, 0x1000, 0x1000, &rec_ops, &a, "a"));
    g_assert_false(bus_register(&bus, 0x1fff, 1, &rec_ops, &a, "overlaps end"));
    g_assert_false(bus_register(&bus, 0x800, 0x801, &rec_ops, &a, "overlaps start"));
    g_assert_false(bus_register(&bus, 0x0, 0x10000, &rec_ops, &a, "covers"));
    g_assert_false(bus_register(&bus, 0x5000, 0, &rec_ops, &a, "empty"));
    g_assert_false(bus_register(&bus, UINT64_MAX, 2, &rec_ops, &a, "wraps"));
    g_assert_true(bus_register(&bus, 0x2000, 1, &rec_ops, &a, "adjacent"));
    g_assert_true(bus_register(&bus, 0xfff, 1, &rec_ops, &a, "adjacent below"));
    g_assert_cmpuint(bus.nranges, ==, 3);
    bus_release(&bus);
}

/* Many ranges registered out of order: every one is found by its own address. */
static void test_many_ranges(void)
{
    struct bus bus;
    bus_init(&bus);
    enum { N = 200 };
    static struct recorder recs[N];
    for (unsigned i = 0; i < N; i++) {
        unsigned slot = (i * 7919) % N; /* a permutation of 0..N-1 */
        recs[slot].fill = (uint8_t)slot;
        g_assert_true(bus_register(&bus, 0xd0000000ull + slot * 0x1000, 0x200, &rec_ops, &recs[slot], "dev"));
    }
    for (unsigned slot = 0; slot < N; slot++) {
        uint8_t data[4];
        g_assert_true(bus_read(&bus, 0xd0000000ull + slot * 0x1000 + 0x1fc, data, 4));
        g_assert_cmpuint(data[0], ==, (uint8_t)slot);
        g_assert_cmpuint(recs[slot].last_offset, ==, 0x1fc);
        g_assert_false(bus_read(&bus, 0xd0000000ull + slot * 0x1000 + 0x200, data, 4));
    }
    bus_release(&bus);
}

static void test_null_ops(void)
{
    static const struct bus_ops sink = { 0 };
    struct bus bus;
    bus_init(&bus);
    g_assert_true(bus_register(&bus, 0x80, 1, &sink, NULL, "sink"));
    uint8_t data = 0;
    g_assert_true(bus_read(&bus, 0x80, &data, 1)); /* mapped, but reads see all ones */
    g_assert_cmphex(data, ==, 0xff);
    g_assert_true(bus_write(&bus, 0x80, &data, 1));
    bus_release(&bus);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/bus/register-and-dispatch", test_register_and_dispatch);
    g_test_add_func("/bus/unmapped", test_unmapped);
    g_test_add_func("/bus/overlap-refused", test_overlap_refused);
    g_test_add_func("/bus/many-ranges", test_many_ranges);
    g_test_add_func("/bus/null-ops", test_null_ops);
    return g_test_run();
}
