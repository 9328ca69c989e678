/* Disk layers in vm.snapshot and vm.restore (see disk-layers.h). */
#define G_LOG_DOMAIN "vsnap-shim"

#include "disk-layers.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "block/blk-backend.h"
#include "devices/virtio-blk.h"
#include "persist/persist.h"
#include "snapshot/disk.h"
#include "snapshot/layer-write.h"
#include "snapshot/overlay.h"

struct sealed_disk {
    unsigned index;
    struct snap_disk_record record;
    char *overlay;  /* the new, empty overlay */
    struct blk_backend *next;  /* the disk on its new layer and overlay, opened at the seal */
    struct blk_backend *shared_raw; /* the raw disk whose image lock the seal made shared (the device's) */
};

struct disk_layers {
    GArray *disks;  /* struct sealed_disk */
    char *partial;  /* where the seal wrote the layers */
};

static void sealed_clear(struct sealed_disk *s)
{
    snap_disk_record_clear(&s->record);
    g_free(s->overlay);
    if (s->next)
        blk_backend_close(s->next);
}

static void disk_layers_free(struct disk_layers *dl)
{
    for (guint i = 0; i < dl->disks->len; i++)
        sealed_clear(&g_array_index(dl->disks, struct sealed_disk, i));
    g_array_unref(dl->disks);
    g_free(dl->partial);
    g_free(dl);
}

/* The disk's first snapshot: the image, synced, becomes the base; the layer is empty. */
static bool seal_image(struct blk_backend *b, const struct disk_config *d, const char *layer,
                       struct snap_disk_record *r, GError **error)
{
    int err = blk_backend_flush(b);
    if (err) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_FAILED, "disk %s: cannot sync image %s: %s", d->id, d->path,
                    g_strerror(-err));
        return false;
    }
    if (!snap_disk_identity_read(d->path, &r->base, error))
        return false;
    /* Cut short under the running VM (by another process: the guest cannot
     * shrink it), the image no longer holds the disk the guest has: as a
     * base it would make every layer over it unusable. */
    if (r->base.size < b->capacity) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_FAILED,
                    "disk %s: image %s holds %" G_GUINT64_FORMAT " bytes, less than the %" G_GUINT64_FORMAT
                    " the VM runs with (truncated under it): refusing to make it the base of a snapshot",
                    d->id, d->path, r->base.size, b->capacity);
        return false;
    }
    struct snap_layer_writer *w = snap_disk_layer_writer_new(layer, snap_disk_layer_size(b->capacity), &r->id,
                                                             NULL, error);
    return w && snap_layer_writer_commit(w, error);
}

/* Later snapshots: the overlay's blocks become the layer, on the chain's
 * top. The image must still be the base the chain was built on (nothing
 * writes it once it is one, but another process can truncate or replace
 * it under the VM): a snapshot over a changed base could never be
 * reverted to, so it is refused now, naming the image. */
static bool seal_overlay(struct snap_overlay *ov, const struct disk_config *d, const char *layer,
                         const struct snap_steps *steps, struct snap_disk_record *r, GError **error)
{
    snap_overlay_base(ov, &r->base);
    if (!snap_disk_identity_check(d->path, &r->base, error))
        return false;
    if (!snap_overlay_seal_steps(ov, layer, &r->id, steps, &r->blocks, error))
        return false;
    r->parent = ov->hdr.lower_id;
    guint n = g_strv_length(d->vsnap_chain);
    if (n == 0)
        return true;   /* an overlay on the image (a block pull): the first layer again */
    g_autofree char *top_dir = g_path_get_dirname(d->vsnap_chain[n - 1]);
    r->parent_url = snap_dir_url(top_dir);
    return true;
}

/* The disk's config once on its new layer: the chain one longer, the new overlay. */
static void next_config(const struct disk_config *d, const char *layer, const char *overlay, struct disk_config *out)
{
    disk_config_copy(out, d);
    guint n = d->vsnap_chain ? g_strv_length(d->vsnap_chain) : 0;
    g_strfreev(out->vsnap_chain);
    out->vsnap_chain = g_new0(char *, n + 2);
    for (guint k = 0; k < n; k++)
        out->vsnap_chain[k] = g_strdup(d->vsnap_chain[k]);
    out->vsnap_chain[n] = g_strdup(layer);
    g_free(out->vsnap_overlay);
    out->vsnap_overlay = g_strdup(overlay);
}

/* The disk's backend on its new layer and overlay, opened while the
 * snapshot is still partial: whatever can fail there (the chain's files,
 * the new overlay, descriptors) fails the snapshot while the disk has not
 * moved, so that a snapshot reported taken always has its disks on their
 * new layers (once the image is a base, nothing may write it). The layer
 * is opened where it is now; the descriptors outlive the commit's rename. */
static bool open_next(const struct disk_config *d, struct blk_backend *b, struct sealed_disk *s,
                      const char *partial, GError **error)
{
    g_autofree char *layer = g_build_filename(partial, s->record.file, NULL);
    struct disk_config here;
    next_config(d, layer, s->overlay, &here);
    /* At the first snapshot the image becomes the base, which the chain
     * locks shared: the raw disk's own lock is made shared first, in place
     * (image-lock.h), and exclusive again if the snapshot does not happen. */
    if (blk_raw_share_lock(b, true, error)) {
        s->shared_raw = b;
        s->next = vm_open_disk_backend(&here, error);
    }
    disk_config_clear(&here);
    return s->next != NULL;
}

static bool seal_disk(struct vm *vm, struct vm_config *cfg, unsigned i, const char *partial,
                      const struct snap_steps *steps, struct sealed_disk *s, GError **error)
{
    struct disk_config *d = &cfg->disks[i];
    struct blk_backend *b = virtio_blk_backend(vm_disk(vm, i));
    struct snap_overlay *ov = blk_overlay_file(b);
    s->index = i;
    s->record.file = snap_disk_layer_name(d->id);
    s->record.base_path = g_strdup(d->path);
    snap_id_random(&s->record.id);
    g_autofree char *layer = g_build_filename(partial, s->record.file, NULL);
    bool ok = ov ? seal_overlay(ov, d, layer, steps, &s->record, error) : seal_image(b, d, layer, &s->record, error);
    if (!ok)
        return false;
    s->overlay = vm_config_new_overlay_path(cfg, d, error);
    struct snap_overlay *next =
        s->overlay ? snap_overlay_create(s->overlay, b->capacity, &s->record.id, &s->record.base, error) : NULL;
    if (!next) {
        g_clear_pointer(&s->overlay, g_free);
        return false;
    }
    snap_overlay_close(next);
    return open_next(d, b, s, partial, error);
}

struct disk_layers *disk_layers_seal(struct vm *vm, struct vm_config *cfg, const char *partial,
                                     const struct snap_steps *steps, GError **error)
{
    struct disk_layers *dl = g_new0(struct disk_layers, 1);
    dl->disks = g_array_new(FALSE, TRUE, sizeof(struct sealed_disk));
    dl->partial = g_strdup(partial);
    for (unsigned i = 0; i < cfg->ndisks && i < vm_disk_count(vm); i++) {
        if (cfg->disks[i].readonly)
            continue; /* never written: the image is its content */
        struct sealed_disk s = { 0 };
        bool ok = seal_disk(vm, cfg, i, partial, steps, &s, error);
        g_array_append_val(dl->disks, s);
        if (!ok) {
            g_prefix_error(error, "disk %s: ", cfg->disks[i].id);
            persist_error_adopt(error);
            disk_layers_abort(dl);
            return NULL;
        }
    }
    return dl;
}

void disk_layers_add_records(const struct disk_layers *dl, JsonNode *state)
{
    if (dl->disks->len == 0)
        return; /* a VM without disks has no devices.disks to look up */
    JsonObject *devices = json_object_get_object_member(json_node_get_object(state), "devices");
    JsonArray *disks = json_object_get_array_member(devices, "disks");
    for (guint i = 0; i < dl->disks->len; i++) {
        const struct sealed_disk *s = &g_array_index(dl->disks, struct sealed_disk, i);
        snap_disk_record_set(json_array_get_object_element(disks, s->index), &s->record);
    }
}

void disk_layers_abort(struct disk_layers *dl)
{
    if (!dl)
        return;
    for (guint i = 0; i < dl->disks->len; i++) {
        struct sealed_disk *s = &g_array_index(dl->disks, struct sealed_disk, i);
        if (s->next)
            blk_backend_close(g_steal_pointer(&s->next));
        g_autoptr(GError) relock = NULL;
        if (s->shared_raw && !blk_raw_share_lock(s->shared_raw, false, &relock))
            g_warning("%s", relock->message);
        if (s->overlay && unlink(s->overlay) != 0 && errno != ENOENT)
            g_warning("cannot remove the unused overlay %s: %s", s->overlay, g_strerror(errno));
    }
    disk_layers_free(dl);
}

/* Cannot fail: the backend was opened at the seal (open_next). */
static void switch_disk(struct vm *vm, struct vm_config *cfg, struct sealed_disk *s, const char *partial,
                        const char *dest)
{
    struct disk_config *d = &cfg->disks[s->index];
    g_autofree char *layer = g_build_filename(dest, s->record.file, NULL);
    struct disk_config next;
    next_config(d, layer, s->overlay, &next);
    blk_chain_layers_moved(s->next, partial, dest);
    blk_backend_close(virtio_blk_replace_backend(vm_disk(vm, s->index), g_steal_pointer(&s->next)));
    /* Its blocks are in the sealed layer now; an old overlay left behind
     * (its directory read-only now) is only a file no chain names. */
    if (d->vsnap_overlay && unlink(d->vsnap_overlay) != 0)
        g_warning("disk %s: cannot remove the old overlay %s: %s", d->id, d->vsnap_overlay, g_strerror(errno));
    disk_config_clear(d);
    *d = next;
}

void disk_layers_switch(struct disk_layers *dl, struct vm *vm, struct vm_config *cfg, const char *dest)
{
    for (guint i = 0; i < dl->disks->len; i++)
        switch_disk(vm, cfg, &g_array_index(dl->disks, struct sealed_disk, i), dl->partial, dest);
    disk_layers_free(dl);
}

/* ---- restore ---- */

static bool restore_failed(GError **error, const struct disk_config *d, GError *local)
{
    int code = snap_error_is_bad_input(local) || local->domain != SNAP_ERROR ? PERSIST_ERROR_INVALID
                                                                             : PERSIST_ERROR_FAILED;
    g_set_error(error, PERSIST_ERROR, code, "disk %s: %s", d->id, local->message);
    return false;
}

/* Every snapshot holds a layer of each writable disk and none of a
 * read-only one (disk_layers_seal), so a record that disagrees with the
 * disk's readonly (config.json's, or config_overrides.disks') is a snapshot
 * that cannot be restored as it stands: neither side may skip the chain's
 * check by it. */
static bool record_matches_readonly(const struct snap_dir *top, const struct disk_config *d, bool present,
                                    GError **error)
{
    if (present == !d->readonly)
        return true;
    g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                present ? "disk %s is read-only, but snapshot %s holds a layer of it (a read-only disk has none)"
                        : "disk %s is writable, but snapshot %s holds no layer of it (a snapshot holds one of every "
                          "writable disk): its image is not what the snapshot's VM last saw",
                d->id, top->path);
    return false;
}

static bool point_at_chain(const struct snap_dir *top, struct disk_config *d, GError **error)
{
    g_clear_pointer(&d->vsnap_chain, g_strfreev);
    g_clear_pointer(&d->vsnap_overlay, g_free);
    g_autoptr(GError) local = NULL;
    bool present = false;
    g_autoptr(snap_disk_chain) chain = snap_dir_disk_chain(top, d->id, &present, &local);
    if (!chain && (present || local))
        return restore_failed(error, d, local);
    if (!record_matches_readonly(top, d, present, error))
        return false;
    if (!chain)
        return true; /* read-only: its image is all there is of it */
    struct snap_disk_identity now;
    if (!snap_disk_identity_read(d->path, &now, &local) ||
        !snap_disk_chain_verify(chain, d->path, now.size - now.size % 512, &local))
        return restore_failed(error, d, local);
    d->vsnap_chain = g_strdupv(chain->paths);
    return true;
}

bool disk_layers_for_restore(const struct snap_dir *top, struct vm_config *cfg, const char *work_dir,
                             GError **error)
{
    g_free(cfg->vsnap_work_dir);
    cfg->vsnap_work_dir = g_strdup(work_dir); /* the snapshot's belongs to the VM it was taken of */
    for (unsigned i = 0; i < cfg->ndisks; i++)
        if (!point_at_chain(top, &cfg->disks[i], error))
            return false;
    bool ok = vm_config_assign_overlays(cfg, error);
    if (!ok)
        g_prefix_error(error, "vsnap_work_dir: ");
    return ok;
}

void disk_layers_discard_overlays(const struct vm_config *cfg)
{
    for (unsigned i = 0; i < cfg->ndisks; i++)
        if (cfg->disks[i].vsnap_overlay)
            g_unlink(cfg->disks[i].vsnap_overlay);
}
