/* The working-set record of a run restored on demand from a snapshot: the
 * shim records it and holds it (vm.restore "ondemand_workset_write": false),
 * the daemon, which owns every snapshot directory (a clone's shim sees its
 * origin's read-only), checks it against the snapshot and writes it there.
 * One writer of the file for every domain the daemon runs. */
#include "run/process.h"

#include <string.h>

#include "monitor/monitor.h"
#include "run/jail.h"
#include "snapshot/directory.h"
#include "snapshot/workset.h"

/* The record's text, checked as the library checks the file, into dir. */
static void write_record(struct vsnap_driver *drv, const char *name, const char *dir, const char *text)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(snap_dir) d = snap_dir_read(dir, &error);
    g_autoptr(snap_workset) ws = NULL;
    g_autofree char *why = NULL;
    if (!d) {
        g_message("domain %s: its working-set record is not kept: %s", name, error->message);
        return;
    }
    if (snap_workset_parse(text, strlen(text), &d->memory.id, d->memory.ram_size / SNAP_PAGE_SIZE, &ws, &why) !=
        SNAP_WORKSET_OK) {
        g_message("domain %s: the working-set record its shim handed over is refused (%s)", name, why);
        return;
    }
    /* Written by the daemon's user: the shims that restore the snapshot
     * next read it as theirs. */
    g_autofree char *path = g_build_filename(dir, SNAP_DIR_WORKSET_FILE, NULL);
    if (!snap_workset_write(dir, ws, &error) || !jail_share_read(drv, path, &error))
        g_message("domain %s: its working-set record is not kept: %s", name, error->message);
}

void process_keep_workset(struct vsnap_driver *drv, struct vsnap_domain *dom, struct domain_run *run)
{
    g_mutex_lock(&dom->lock);
    g_autofree char *dir = g_strdup(run->workset_dir);
    g_mutex_unlock(&dom->lock);
    g_autofree char *text = NULL;
    g_autoptr(GError) error = NULL;
    if (!dir || !monitor_vm_workset(run->api_socket, &text, &error)) {
        if (error)
            g_message("domain %s: no working-set record from its shim: %s", dom->name, error->message);
        return;
    }
    if (!text)
        return;   /* still recording */
    /* A run hands one record over: whoever takes the directory writes it. */
    g_mutex_lock(&dom->lock);
    g_autofree char *mine = g_strcmp0(run->workset_dir, dir) == 0 ? g_steal_pointer(&run->workset_dir) : NULL;
    g_mutex_unlock(&dom->lock);
    if (mine)
        write_record(drv, dom->name, mine, text);
}
