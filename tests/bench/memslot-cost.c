/* The host's own cost of giving a VM its RAM, the reference bench-snapshot's
 * 8 GiB / 512 MiB restore-to-running ratio is read against: KVM_CREATE_VM
 * and KVM_SET_USER_MEMORY_REGION with dirty logging, laid out as the shim
 * lays out guest RAM (up to 3 GiB at 0, the rest from 4 GiB). On a
 * shadow-paging host KVM sets up per-page metadata for each slot, so this
 * grows with RAM size whatever the VMM does.
 *
 *     memslot-cost MIB RUNS   ->   {"ram_mib": MIB, "runs": RUNS, "median_ms": T}
 */
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define LOW_RAM_MAX (3ull << 30)
#define HIGH_RAM_START (4ull << 30)

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int set_slot(int vm, uint32_t slot, uint64_t gpa, uint64_t size, void *host)
{
    struct kvm_userspace_memory_region r = {
        .slot = slot, .flags = KVM_MEM_LOG_DIRTY_PAGES, .guest_phys_addr = gpa,
        .memory_size = size, .userspace_addr = (uintptr_t)host,
    };
    return ioctl(vm, KVM_SET_USER_MEMORY_REGION, &r);
}

/* One VM given size bytes of RAM: the milliseconds its slots took, or < 0. */
static double one_run(int kvm, uint64_t size)
{
    uint8_t *ram = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    int vm = ioctl(kvm, KVM_CREATE_VM, 0);
    if (ram == MAP_FAILED || vm < 0)
        return -1;
    uint64_t low = size < LOW_RAM_MAX ? size : LOW_RAM_MAX;
    double t0 = now_ms();
    int rc = set_slot(vm, 0, 0, low, ram);
    if (rc == 0 && size > low)
        rc = set_slot(vm, 1, HIGH_RAM_START, size - low, ram + low);
    double ms = now_ms() - t0;
    close(vm);
    munmap(ram, size);
    return rc == 0 ? ms : -1;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: memslot-cost MIB RUNS\n");
        return 2;
    }
    uint64_t mib = strtoull(argv[1], NULL, 10);
    int runs = atoi(argv[2]);
    int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (kvm < 0 || mib == 0 || runs < 1 || runs > 100) {
        perror("memslot-cost: /dev/kvm or arguments");
        return 1;
    }
    double t[100];
    for (int i = 0; i < runs; i++)
        if ((t[i] = one_run(kvm, mib << 20)) < 0) {
            perror("memslot-cost: KVM_SET_USER_MEMORY_REGION");
            return 1;
        }
    qsort(t, (size_t)runs, sizeof t[0], by_value);
    printf("{\"ram_mib\": %llu, \"runs\": %d, \"median_ms\": %.3f}\n", (unsigned long long)mib, runs,
           t[runs / 2]);
    return 0;
}
