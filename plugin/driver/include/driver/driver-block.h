/* Disk entry points: domblkinfo, domblkstat and domstats --block. The
 * numbers come from the shim's vm.counters (per disk, keyed by target) and
 * from the files the guest's disk is made of. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "domain/state.h"

/* libvirt's virDomainBlockInfo, for the disk as the guest sees it now:
 * capacity is the guest's disk size (the image's); allocation and physical
 * are those of the file the guest writes (the image, or the active overlay
 * once the disk has snapshots: what grows). */
struct block_info {
    uint64_t capacity, allocation, physical;
};

struct block_stats {
    char *name;     /* target, vdX */
    char *path;     /* the file the guest writes (image or active overlay) */
    uint64_t rd_reqs, rd_bytes, wr_reqs, wr_bytes, fl_reqs, errors;
    struct block_info info;
};
void block_stats_clear(struct block_stats *s);

/* disk: a target name (vda) or the path the live XML shows as its source,
 * as libvirt accepts both. Works on inactive domains too (the files only). */
bool driver_block_info(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk,
                       struct block_info *out, GError **error);
/* Counters of one disk of a running domain. */
bool driver_block_stats(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk,
                        struct block_stats *out, GError **error);
/* Every disk, in definition order (empty for an inactive domain's counters:
 * only file facts then, as libvirt's QEMU driver). Returns the count; *out
 * is g_new'd, each entry cleared with block_stats_clear. */
/* blockresize (virDomainBlockResize): size in KiB, or bytes with
 * VIR_DOMAIN_BLOCK_RESIZE_BYTES, rounded up to whole sectors. A writable
 * disk of a running domain that writes its image directly grows (the
 * image is extended, the shim's disk follows and the guest gets the
 * configuration-change interrupt); a smaller size, a read-only disk and a
 * disk on snapshot layers (their layers keep their size) are refused by name. */
bool driver_block_resize(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *disk, uint64_t size,
                         unsigned flags, GError **error);
/* domblkerror (virDomainGetDiskErrors): each disk of the running domain
 * whose device answered the guest an I/O error since it started, with
 * VIR_DOMAIN_DISK_ERROR_NO_SPACE when the last one was a full file system
 * (ENOSPC, EDQUOT) and VIR_DOMAIN_DISK_ERROR_UNSPEC otherwise (EIO, a bad
 * layer block, ...). Returns the count; *targets and *codes are g_new'd. */
size_t driver_disk_errors(struct vsnap_driver *drv, struct vsnap_domain *dom, char ***targets, int **codes,
                          GError **error);
size_t driver_all_block_stats(struct vsnap_driver *drv, struct vsnap_domain *dom,
                              struct block_stats **out);
