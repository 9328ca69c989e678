/* Guest RAM layout and cost: regions around the 32-bit hole, address
 * translation, and that a large allocation touches nothing. */
#include <glib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "platform/memory.h"

static uint64_t resident_pages(const struct guest_memory *mem)
{
    uint64_t pages = mem->size / GUEST_PAGE_SIZE, resident = 0;
    g_autofree unsigned char *vec = g_malloc(pages);
    g_assert_cmpint(mincore(mem->host, mem->size, vec), ==, 0);
    for (uint64_t i = 0; i < pages; i++)
        resident += vec[i] & 1;
    return resident;
}

static void test_small(void)
{
    struct guest_memory mem;
    g_autoptr(GError) error = NULL;
    g_assert_true(guest_memory_init(&mem, 16ull << 20, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(mem.nregions, ==, 1);
    g_assert_cmpuint(mem.regions[0].gpa, ==, 0);
    g_assert_cmpuint(mem.regions[0].size, ==, 16ull << 20);
    g_assert_cmpint(mem.fd, >=, 0);
    g_assert_cmpuint(guest_memory_end(&mem), ==, 16ull << 20);
    g_assert_true(guest_memory_ptr(&mem, 0x1000, 8) == mem.host + 0x1000);
    g_assert_null(guest_memory_ptr(&mem, (16ull << 20) - 4, 8)); /* runs off the end */
    g_assert_null(guest_memory_ptr(&mem, 16ull << 20, 1));
    g_assert_cmpuint(guest_memory_offset(&mem, 0x2345), ==, 0x2345);
    g_assert_cmpuint(guest_memory_offset(&mem, 16ull << 20), ==, UINT64_MAX);
    /* The memfd and the mapping are the same pages. */
    memcpy(guest_memory_ptr(&mem, 0x3000, 5), "hello", 5);
    char buf[5];
    g_assert_cmpint(pread(mem.fd, buf, 5, 0x3000), ==, 5);
    g_assert_cmpmem(buf, 5, "hello", 5);
    guest_memory_release(&mem);
    g_assert_null(mem.host);
    g_assert_cmpint(mem.fd, ==, -1);
}

static void test_split_around_hole(void)
{
    struct guest_memory mem;
    g_autoptr(GError) error = NULL;
    uint64_t size = 8ull << 30;
    g_assert_true(guest_memory_init(&mem, size, &error));
    g_assert_cmpuint(mem.nregions, ==, 2);
    g_assert_cmpuint(mem.regions[0].gpa, ==, 0);
    g_assert_cmpuint(mem.regions[0].size, ==, MEM_32BIT_GAP_START);
    g_assert_cmpuint(mem.regions[1].gpa, ==, MEM_32BIT_GAP_END);
    g_assert_cmpuint(mem.regions[1].ram_offset, ==, MEM_32BIT_GAP_START);
    g_assert_cmpuint(mem.regions[1].size, ==, size - MEM_32BIT_GAP_START);
    g_assert_cmpuint(guest_memory_end(&mem), ==, MEM_32BIT_GAP_END + size - MEM_32BIT_GAP_START);
    /* The hole is not RAM; the first byte above 4 GiB is RAM offset 3 GiB. */
    g_assert_null(guest_memory_ptr(&mem, MEM_32BIT_GAP_START, 1));
    g_assert_null(guest_memory_ptr(&mem, IOAPIC_BASE, 4));
    g_assert_cmpuint(guest_memory_offset(&mem, LAPIC_BASE), ==, UINT64_MAX);
    g_assert_cmpuint(guest_memory_offset(&mem, MEM_32BIT_GAP_END), ==, MEM_32BIT_GAP_START);
    g_assert_true(guest_memory_ptr(&mem, MEM_32BIT_GAP_END + 8, 8) == mem.host + MEM_32BIT_GAP_START + 8);
    /* A range crossing the end of the low region does not continue above 4 GiB. */
    g_assert_null(guest_memory_ptr(&mem, MEM_32BIT_GAP_START - 4, 8));
    g_assert_cmpuint(resident_pages(&mem), ==, 0);
    guest_memory_release(&mem);
}

static void test_exactly_low(void)
{
    struct guest_memory mem;
    g_assert_true(guest_memory_init(&mem, MEM_32BIT_GAP_START, NULL));
    g_assert_cmpuint(mem.nregions, ==, 1);
    g_assert_cmpuint(guest_memory_end(&mem), ==, MEM_32BIT_GAP_START);
    guest_memory_release(&mem);
}

static void test_bad_size(void)
{
    struct guest_memory mem;
    g_autoptr(GError) error = NULL;
    g_assert_false(guest_memory_init(&mem, (16ull << 20) + 1, &error));
    g_assert_nonnull(error);
    g_assert_nonnull(strstr(error->message, "4 KiB"));
    g_clear_error(&error);
    g_assert_false(guest_memory_init(&mem, 0, &error));
    g_assert_nonnull(error);
    guest_memory_release(&mem); /* safe after a failed init */
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/memory/small", test_small);
    g_test_add_func("/memory/split-around-hole", test_split_around_hole);
    g_test_add_func("/memory/exactly-low", test_exactly_low);
    g_test_add_func("/memory/bad-size", test_bad_size);
    return g_test_run();
}
