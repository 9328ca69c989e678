/* Eager restores: every page of a chain is read (and its block checked) before
 * the VM runs. A checksum failure is an error before anything uses the RAM. */
#pragma once

#include "snapshot/chain.h"

/* copy: read every page of the chain into dest (size == chain RAM size), which
 * must read as zero (a fresh anonymous or memfd mapping): zero pages are not
 * written, so untouched RAM stays unpopulated. */
bool snap_restore_copy(struct snap_chain *chain, uint8_t *dest, uint64_t size, GError **error);

/* merge (the published baseline, O(RAM) on purpose): a dense RAM-sized image
 * file in dir (NULL: /dev/shm) built from the base with every page written,
 * then each diff overlaid in order, then mapped MAP_SHARED. The file is
 * unlinked as soon as it exists, so nothing is left behind if the shim dies;
 * fd keeps it alive and can back guest RAM (struct guest_memory.fd). */
struct snap_merged_ram {
    uint8_t *host;
    uint64_t size;
    int fd;
};

bool snap_restore_merge(struct snap_chain *chain, const char *dir, struct snap_merged_ram *out,
                        GError **error);
/* merge into RAM the caller made (size == chain RAM size): the same dense
 * image, every page written, through the mapping. For RAM on huge pages,
 * whose hugetlbfs file takes no write(2) and cannot live in /dev/shm. */
bool snap_restore_merge_into(struct snap_chain *chain, uint8_t *dest, uint64_t size, GError **error);
void snap_merged_ram_release(struct snap_merged_ram *ram);

/* shared (vsnap's): RAM is a private, copy-on-write mapping (MAP_PRIVATE) of
 * one sparse image of the chain in dir (the snapshot's directory, as
 * .memory-image-<top layer id>-<boot id>), built by the first such restore on
 * this host and boot and reused by the next ones, so that VMs restored from
 * one snapshot share the host pages they only read. fd is the image, opened
 * read-only: the RAM's own pages are not in it (restore-shared.c). */
bool snap_restore_shared(struct snap_chain *chain, const char *dir, const snap_id *top,
                         struct snap_merged_ram *out, GError **error);
