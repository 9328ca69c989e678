/* vsnap-compact: offline compaction of snapshot memory layers.
 *
 *   vsnap-compact -o NEW BASE DIFF1 ... DIFFn   fold a chain into one new base layer
 *   vsnap-compact --fold INNER CHILD            fold an inner layer into its child
 *   vsnap-compact --fold-snapshot INNER CHILD   the same for snapshot directories: CHILD's
 *                                               state.json then names INNER's parent, and
 *                                               INNER may be deleted
 *   vsnap-compact --fold-disk SNAPSHOT DISK [--overlay FILE] [--image FILE]
 *                                               fold disk DISK's chain of disk layers in
 *                                               snapshot directory SNAPSHOT (and the overlay
 *                                               on top of it) into its base image (the one
 *                                               state.json records, or --image: required
 *                                               for a snapshot from a store), crash-safely;
 *                                               run again after a crash to finish
 *   vsnap-compact --info LAYER...               check layers and print their headers
 */
#include "snapshot/compact.h"
#include "snapshot/directory.h"
#include "snapshot/disk.h"

#include <stdio.h>
#include <stdlib.h>

static void print_info(const struct snap_layer *l)
{
    char id[37], parent[37];
    snap_id_to_string(&l->hdr.id, id);
    snap_id_to_string(&l->hdr.parent_id, parent);
    printf("%s: %s layer, id %s, parent %s, RAM %" G_GUINT64_FORMAT " MiB, %" G_GUINT64_FORMAT
           " data pages in %" G_GUINT64_FORMAT " runs\n",
           l->path, snap_layer_is_full(l) ? "full" : "diff", id,
           snap_layer_is_full(l) ? "none" : parent, l->hdr.ram_size >> 20, l->hdr.page_count,
           l->hdr.run_count);
}

static int run_info(char **paths, GError **error)
{
    for (char **p = paths; *p; p++) {
        g_autoptr(snap_layer) l = snap_layer_open(*p, error);
        if (!l || !snap_layer_verify_data(l, 0, l->hdr.page_count, error))
            return 1;
        print_info(l);
    }
    return 0;
}

static int run_compact(const char *out, char **paths, gboolean new_id, GError **error)
{
    g_autoptr(snap_chain) c =
        snap_chain_open((const char *const *)paths, g_strv_length(paths), SNAP_CHAIN_DEFAULT, error);
    if (!c)
        return 1;
    snap_id id;
    snap_id_random(&id);
    if (!snap_compact_chain(c, out, new_id ? &id : NULL, error))
        return 1;
    printf("wrote %s from %u layers\n", out, c->nlayers);
    return 0;
}

/* The image folded into: the one given, else the one state.json records,
 * which a store chose for a snapshot pulled from it (any file of this host
 * whose identity it knows). */
static const char *fold_target(const char *dir, const struct snap_disk_chain *c, const char *image,
                               GError **error)
{
    if (image)
        return image;
    if (!snap_dir_is_from_store(dir))
        return c->base_path;
    g_set_error(error, SNAP_ERROR, SNAP_ERROR_INVALID,
                "snapshot %s came from a store, so the base image its state.json names (%s) is the store's "
                "choice: give the image to fold into with --image", dir, c->base_path);
    return NULL;
}

/* The chain is checked (layers, ids, parents, the image's identity) before
 * the image is touched; an interrupted fold of the image is finished first. */
static int run_fold_disk(const char *dir, const char *disk_id, const char *overlay, const char *image,
                         GError **error)
{
    g_autoptr(snap_dir) d = snap_dir_read(dir, error);
    bool present = false;
    g_autoptr(snap_disk_chain) c = d ? snap_dir_disk_chain(d, disk_id, &present, error) : NULL;
    if (d && !c && !present) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_INVALID, "snapshot %s holds no disk layer for disk %s", dir, disk_id);
        return 1;
    }
    const char *target = c ? fold_target(dir, c, image, error) : NULL;
    if (!target)
        return 1;
    bool resumed = false;
    if (!snap_disk_fold_resume(target, &resumed, error))
        return 1;
    if (resumed) {
        printf("finished the interrupted fold into %s\n", target);
        return 0;
    }
    if (!snap_disk_chain_verify(c, target, 0, error) ||
        !snap_disk_fold_into_image(target, (const char *const *)c->paths, c->nlayers, overlay, &c->base, error))
        return 1;
    printf("folded %u disk layers%s into %s\n", c->nlayers, overlay ? " and the overlay" : "", target);
    return 0;
}

int main(int argc, char **argv)
{
    g_autofree char *out = NULL;
    gboolean fold = FALSE, fold_snapshot = FALSE, fold_disk = FALSE, info = FALSE, new_id = FALSE;
    g_autofree char *overlay = NULL, *image = NULL;
    g_auto(GStrv) paths = NULL;
    GOptionEntry entries[] = {
        { "output", 'o', 0, G_OPTION_ARG_FILENAME, &out, "Write the compacted base layer here", "NEW" },
        { "new-id", 0, 0, G_OPTION_ARG_NONE, &new_id,
          "Give the new base a new id (default: keep the top layer's id)", NULL },
        { "fold", 0, 0, G_OPTION_ARG_NONE, &fold, "Fold INNER into CHILD (CHILD keeps its id)", NULL },
        { "fold-snapshot", 0, 0, G_OPTION_ARG_NONE, &fold_snapshot,
          "Fold snapshot directory INNER into CHILD, its diff (CHILD then names INNER's parent)", NULL },
        { "fold-disk", 0, 0, G_OPTION_ARG_NONE, &fold_disk,
          "Fold disk DISK's layers in snapshot directory SNAPSHOT into its base image", NULL },
        { "overlay", 0, 0, G_OPTION_ARG_FILENAME, &overlay, "With --fold-disk: the overlay on the chain too", "FILE" },
        { "image", 0, 0, G_OPTION_ARG_FILENAME, &image,
          "With --fold-disk: the base image to fold into (default: the one the snapshot records)", "FILE" },
        { "info", 0, 0, G_OPTION_ARG_NONE, &info, "Check layers (all data) and print headers", NULL },
        { G_OPTION_REMAINING, 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &paths, NULL, "LAYER..." },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new("LAYER... - compact vsnap memory layers");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "vsnap-compact: %s\n", error->message);
        return 2;
    }
    guint n = paths ? g_strv_length(paths) : 0;
    int rc;
    if (info && n >= 1)
        rc = run_info(paths, &error);
    else if (fold && n == 2 && !out)
        rc = snap_compact_fold(paths[0], paths[1], &error) ? 0 : 1;
    else if (fold_snapshot && n == 2 && !out)
        rc = snap_dir_fold_into_child(paths[0], paths[1], &error) ? 0 : 1;
    else if (fold_disk && n == 2 && !out)
        rc = run_fold_disk(paths[0], paths[1], overlay, image, &error);
    else if (!fold && !fold_snapshot && !fold_disk && !info && out && n >= 1)
        rc = run_compact(out, paths, new_id, &error);
    else {
        fprintf(stderr, "usage: vsnap-compact -o NEW LAYER... | --fold INNER CHILD | --fold-snapshot INNER CHILD | "
                        "--fold-disk SNAPSHOT DISK [--overlay FILE] [--image FILE] | --info LAYER...\n");
        return 2;
    }
    if (rc)
        fprintf(stderr, "vsnap-compact: %s\n", error ? error->message : "failed");
    return rc;
}
