#include "snapshot-disks.h"

#include <string.h>

#include "snapshot-dir.h"
#include "virt-error.h"

void snapshot_disks_fill(const char *dir, const struct domain_def *domain, struct snapshot_def *out)
{
    out->disks_given = domain->n_disks > 0;
    out->n_disks = domain->n_disks;
    out->disks = g_new0(struct snapshot_disk, MAX(domain->n_disks, 1));
    for (size_t i = 0; i < domain->n_disks; i++) {
        const struct domain_disk *disk = &domain->disks[i];
        struct snapshot_disk *d = &out->disks[i];
        d->name = g_strdup(disk->target);
        g_autoptr(GError) error = NULL;
        d->file = snapdir_disk_layer(dir, disk->target, &error);
        d->external = d->file || !disk->readonly;
        if (error)
            g_warning("snapshot %s, disk %s: %s", dir, disk->target, error->message);
        else if (!d->file && !disk->readonly)
            d->external = false;   /* taken before its disks had layers */
    }
}

static bool refuse_disk(GError **error, int code, const char *disk, const char *why)
{
    g_set_error(error, VSNAP_VIR_ERROR, code, "snapshot disk '%s': %s", disk, why);
    return false;
}

bool snapshot_disks_check_request(const struct snapshot_def *request, const struct domain_def *domain,
                                  GError **error)
{
    for (size_t i = 0; i < request->n_disks; i++) {
        const struct snapshot_disk *d = &request->disks[i];
        const struct domain_disk *disk = NULL;
        for (size_t j = 0; j < domain->n_disks && !disk; j++)
            if (strcmp(domain->disks[j].target, d->name) == 0)
                disk = &domain->disks[j];
        if (!disk)
            return refuse_disk(error, VIR_ERR_INVALID_ARG, d->name, "the domain has no such disk");
        if (d->file)
            return refuse_disk(error, VIR_ERR_CONFIG_UNSUPPORTED, d->name,
                               "vsnap writes each snapshot's disk layer into the snapshot itself; a file "
                               "cannot be given");
        if (d->external && disk->readonly)
            return refuse_disk(error, VIR_ERR_CONFIG_UNSUPPORTED, d->name,
                               "a read-only disk is in no snapshot (snapshot='no')");
        if (!d->external && !disk->readonly)
            return refuse_disk(error, VIR_ERR_CONFIG_UNSUPPORTED, d->name,
                               "a vsnap snapshot holds every writable disk with the memory that uses "
                               "it (snapshot='external')");
    }
    return true;
}

bool snapshot_disks_check_same(const struct snapshot_def *given, const struct snapshot_def *stored,
                               GError **error)
{
    if (!given->disks_given)
        return true;
    bool same = given->n_disks == stored->n_disks;
    for (size_t i = 0; same && i < given->n_disks; i++) {
        const struct snapshot_disk *a = &given->disks[i], *b = &stored->disks[i];
        same = strcmp(a->name, b->name) == 0 && a->external == b->external &&
               (!a->file || g_strcmp0(a->file, b->file) == 0);
    }
    if (same)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                "the disks of a vsnap snapshot are part of its saved state and cannot be changed");
    return false;
}
