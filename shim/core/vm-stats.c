/* What KVM says about a VM's guest mappings: its binary statistics
 * (KVM_GET_STATS_FD on the VM), where x86 counts the pages its MMU maps at
 * each level. That is the one place that tells whether guest RAM on huge
 * pages reaches the guest as 2 MiB mappings or is split into 4 KiB ones. */
#include "core/vm.h"

#include <linux/kvm.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static bool read_all(int fd, void *buf, size_t len, off_t at)
{
    return pread(fd, buf, len, at) == (ssize_t)len;
}

/* The value of the statistic named `name` in the stats file fd. */
static bool find_stat(int fd, const struct kvm_stats_header *h, const char *name, uint64_t *value)
{
    size_t desc_size = sizeof(struct kvm_stats_desc) + h->name_size;
    g_autofree struct kvm_stats_desc *d = g_malloc0(desc_size + 1);
    for (uint32_t i = 0; i < h->num_desc; i++) {
        if (!read_all(fd, d, desc_size, (off_t)(h->desc_offset + i * desc_size)))
            return false;
        if (strncmp(d->name, name, h->name_size) == 0 && d->size >= 1)
            return read_all(fd, value, sizeof *value, (off_t)(h->data_offset + d->offset));
    }
    return false;
}

bool vm_kvm_mapped_pages(struct vm *vm, struct vm_mapped_pages *out)
{
    memset(out, 0, sizeof *out);
    int fd = ioctl(vm_kvm_vm_fd(vm), KVM_GET_STATS_FD, NULL);
    if (fd < 0)
        return false;
    struct kvm_stats_header h;
    bool ok = read_all(fd, &h, sizeof h, 0) && find_stat(fd, &h, "pages_4k", &out->pages_4k) &&
              find_stat(fd, &h, "pages_2m", &out->pages_2m) && find_stat(fd, &h, "pages_1g", &out->pages_1g);
    close(fd);
    return ok;
}
