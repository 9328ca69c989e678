#include "persist/snapshot.h"

#include <libvirt/libvirt.h>
#include <string.h>

#include "conf/snapshot-conf.h"
#include "import.h"
#include "persist/job.h"
#include "clone-origin.h"
#include "lineage.h"
#include "run/process.h"
#include "persist/push.h"
#include "restore.h"
#include "recovery-job.h"
#include "revert-intent.h"
#include "snapshot-dir.h"
#include "snapshot-disks.h"
#include "snapshot-remove.h"
#include "snapshot-revert.h"
#include "snapshot-tree.h"
#include "snapshot-vm.h"
#include "domain/events.h"
#include "monitor/monitor.h"
#include "util/test-hook.h"
#include "domain/block-jobs.h"
#include "util/virt-error.h"

static struct snapshot_tree *load(struct vsnap_driver *drv, struct vsnap_domain *dom,
                                  GError **error)
{
    char uuid[37];
    uuid_format(dom->uuid, uuid);
    return snapshot_tree_load(drv->paths.state_dir, dom->name, uuid, error);
}

static struct snapshot_entry *find(struct snapshot_tree *tree, const char *name, GError **error)
{
    struct snapshot_entry *e = snapshot_tree_find(tree, name);
    if (!e)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_DOMAIN_SNAPSHOT,
                    "no domain snapshot with matching name '%s'", name);
    return e;
}

static bool refuse(GError **error, int code, const char *text)
{
    g_set_error_literal(error, VSNAP_VIR_ERROR, code, text);
    return false;
}

/* ---- the XML of a snapshot (snapshot-dumpxml, and the push's manifest) ---- */

static void fill_cookie(struct snapshot_tree *tree, const struct snapshot_entry *e,
                        struct snapshot_def *def)
{
    if (!e->store_url || !e->memory_id)
        return;
    struct snapshot_entry *parent =
        e->layer_parent ? snapshot_tree_find_id(tree, e->layer_parent) : NULL;
    def->store.url = g_strdup(e->store_url);
    def->store.id = g_strdup(e->memory_id);
    def->store.parent = parent ? g_strdup(parent->memory_id) : NULL;
}

static char *entry_xml(struct vsnap_driver *drv, struct snapshot_tree *tree,
                       const struct snapshot_entry *e, GError **error)
{
    g_autofree char *domain_xml = snapshot_entry_domain_xml(e, error);
    if (!domain_xml)
        return NULL;
    g_autoptr(snapshot_def) def = g_new0(struct snapshot_def, 1);
    def->name = g_strdup(e->name);
    def->description = g_strdup(e->description);
    def->parent = g_strdup(e->parent);
    def->creation_time = e->creation_time;
    def->state_set = true;
    def->state = e->state;
    def->memory = SNAPSHOT_MEMORY_INTERNAL;
    def->domain = domain_def_parse_string(domain_xml, drv->paths.schema_dir, error);
    if (!def->domain)
        return NULL;
    /* A snapshot learnt from another host shows its disk layers once they
     * are here (the origin's paths name nothing on this host). */
    if (import_is_local(e))
        snapshot_disks_fill(e->dir, def->domain, def);
    fill_cookie(tree, e, def);
    return snapshot_def_format(def);
}

/* ---- pushes to the snapshot store (persist/push.h) ---- */

/* The domain's own store, else the daemon's; NULL: none. */
static char *store_url_of(struct vsnap_driver *drv, struct vsnap_domain *dom)
{
    g_mutex_lock(&dom->lock);
    char *url = g_strdup(dom->def->vsnap.store_url ? dom->def->vsnap.store_url : drv->store.url);
    g_mutex_unlock(&dom->lock);
    return url;
}

static void queue_push(struct vsnap_driver *drv, struct vsnap_domain *dom,
                       struct snapshot_tree *tree, struct snapshot_entry *e, char *url)
{
    g_autoptr(GError) error = NULL;
    struct push_request *r = g_new0(struct push_request, 1);
    char uuid[37];
    uuid_format(dom->uuid, uuid);
    r->domain_uuid = g_strdup(uuid);
    r->domain_name = g_strdup(dom->name);
    r->snapshot = g_strdup(e->name);
    r->dir = g_strdup(e->dir);
    r->url = url;
    r->domain_xml = snapshot_entry_domain_xml(e, &error);
    r->snapshot_xml = r->domain_xml ? entry_xml(drv, tree, e, &error) : NULL;
    if (!r->snapshot_xml) {
        g_warning("domain %s: snapshot '%s' is not pushed: %s", dom->name, e->name,
                  error->message);
        push_request_free(r);
        return;
    }
    push_enqueue(drv->pushes, r);
}

/* Every snapshot of the domain whose push is pending, oldest first: at the
 * daemon's start, and at each new snapshot (a push that failed is tried
 * again). Queued ones are not queued twice. */
static void queue_pending(struct vsnap_driver *drv, struct vsnap_domain *dom,
                          struct snapshot_tree *tree)
{
    for (guint i = 0; i < tree->entries->len; i++) {
        struct snapshot_entry *e = tree->entries->pdata[i];
        char *url = e->deleting ? NULL : push_pending_url(e->dir);
        if (url)
            queue_push(drv, dom, tree, e, url);
    }
}

/* ---- create ---- */

static bool check_create_flags(unsigned flags, GError **error)
{
    if ((flags & VIR_DOMAIN_SNAPSHOT_CREATE_CURRENT) &&
        !(flags & VIR_DOMAIN_SNAPSHOT_CREATE_REDEFINE))
        return refuse(error, VIR_ERR_INVALID_ARG,
                      "'current' applies only to a redefinition (snapshot-edit)");
    if (flags & VIR_DOMAIN_SNAPSHOT_CREATE_NO_METADATA)
        return refuse(error, VIR_ERR_ARGUMENT_UNSUPPORTED,
                      "vsnap snapshots without metadata could never be reverted to");
    if (flags & (VIR_DOMAIN_SNAPSHOT_CREATE_DISK_ONLY | VIR_DOMAIN_SNAPSHOT_CREATE_REUSE_EXT))
        return refuse(error, VIR_ERR_ARGUMENT_UNSUPPORTED,
                      "vsnap snapshots hold memory and disks together: no disk-only snapshots, and "
                      "vsnap makes each disk layer itself (no reused external files)");
    if (flags & VIR_DOMAIN_SNAPSHOT_CREATE_QUIESCE)
        return refuse(error, VIR_ERR_ARGUMENT_UNSUPPORTED,
                      "vsnap cannot quiesce guest file systems: a snapshot holds the disks exactly as "
                      "the paused guest's memory left them");
    if ((flags & VIR_DOMAIN_SNAPSHOT_CREATE_LIVE) && (flags & VIR_DOMAIN_SNAPSHOT_CREATE_REDEFINE))
        return refuse(error, VIR_ERR_INVALID_ARG, "'live' applies to a new snapshot, not a redefinition");
    unsigned known = VIR_DOMAIN_SNAPSHOT_CREATE_HALT | VIR_DOMAIN_SNAPSHOT_CREATE_ATOMIC |
                     VIR_DOMAIN_SNAPSHOT_CREATE_LIVE |
                     VIR_DOMAIN_SNAPSHOT_CREATE_VALIDATE | VIR_DOMAIN_SNAPSHOT_CREATE_REDEFINE |
                     VIR_DOMAIN_SNAPSHOT_CREATE_CURRENT;
    if (flags & ~known) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)",
                    flags & ~known);
        return false;
    }
    return true;
}

static struct snapshot_def *parse_request(struct vsnap_driver *drv, struct vsnap_domain *dom,
                                          struct snapshot_tree *tree, const char *xml, GError **error)
{
    g_autoptr(snapshot_def) def = snapshot_def_parse_string(xml, drv->paths.schema_dir, error);
    if (!def)
        return NULL;
    if (def->memory == SNAPSHOT_MEMORY_NO) {
        refuse(error, VIR_ERR_CONFIG_UNSUPPORTED,
               "vsnap snapshots always hold the guest's memory: <memory snapshot='no'> "
               "is not supported");
        return NULL;
    }
    g_mutex_lock(&dom->lock);
    bool disks_ok = snapshot_disks_check_request(def, dom->def, error);
    g_mutex_unlock(&dom->lock);
    if (!disks_ok)
        return NULL;
    if (snapshot_tree_find(tree, def->name)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "domain snapshot '%s' already exists", def->name);
        return NULL;
    }
    return g_steal_pointer(&def);
}

static bool take_layers(struct vsnap_domain *dom, struct snapshot_entry *e,
                        struct snapshot_entry *base, bool live, struct monitor_live_result *result,
                        GError **error)
{
    bool is_diff = false;
    const char *base_dir = base ? base->dir : NULL;
    if (!(live ? vmsnap_take_live_diff_or_full(dom, e->dir, base_dir, &is_diff, result, error)
               : vmsnap_take_diff_or_full(dom, e->dir, base_dir, &is_diff, error)))
        return false;
    e->full = !is_diff;
    e->layer_parent = is_diff ? g_strdup(base->id) : NULL;
    /* Recorded, so a revert knows the directory still holds this snapshot. */
    e->memory_id = snapdir_layer_id(e->dir, error);
    return e->memory_id != NULL;
}

/* A live snapshot that is recorded: its figures for domjobinfo --completed
 * and the job-completed event (libvirt's QEMU driver sends one for its live
 * external snapshot). The downtime is the shim's stop, rounded up to ms. */
static void live_completed(struct vsnap_driver *drv, struct vsnap_domain *dom, guint64 ram_bytes,
                           gint64 began_us, const struct monitor_live_result *r)
{
    const guint64 page = 4096;
    struct domain_job_stats stats = {
        .operation = VIR_DOMAIN_JOB_OPERATION_SNAPSHOT,
        .elapsed_ms = (guint64)(g_get_monotonic_time() - began_us) / 1000,
        .downtime_ms = (r->pause_us + 999) / 1000,
        .total = ram_bytes, .processed = r->copied_pages * page, .remaining = 0,
        .iteration = r->passes, .page_size = page,
    };
    g_strlcpy(stats.forced_stop, r->forced_stop, sizeof stats.forced_stop);
    if (r->forced_stop[0])
        g_message("domain %s: its live snapshot did not converge: the stop came after the %s limit, "
                  "with %" G_GUINT64_FORMAT " pages left for it", dom->name, r->forced_stop, r->final_pages);
    domain_job_completed(drv->events, dom, &stats);
}

static bool record(struct vsnap_driver *drv, struct vsnap_domain *dom, struct snapshot_tree *tree,
                   struct snapshot_entry *e, const struct snapshot_def *def, int state,
                   GError **error)
{
    e->name = g_strdup(def->name);
    e->description = g_strdup(def->description);
    e->parent = g_strdup(tree->current);
    e->creation_time = def->creation_time;
    e->state = state;
    g_mutex_lock(&dom->lock);
    g_autofree char *domain_xml = domain_def_format(dom->def, false, -1);
    g_mutex_unlock(&dom->lock);
    return snapshot_entry_save_domain_xml(e, domain_xml, error) &&
           snapshot_entry_save(e, error) && snapshot_tree_set_current(tree, e->name, error);
}

static int snapshot_state_of(struct vsnap_domain *dom)
{
    g_mutex_lock(&dom->lock);
    int state = dom->run ? dom->state : VIR_DOMAIN_SHUTOFF;
    g_mutex_unlock(&dom->lock);
    return state == VIR_DOMAIN_PAUSED ? SNAPSHOT_STATE_PAUSED
           : state == VIR_DOMAIN_SHUTOFF ? SNAPSHOT_STATE_SHUTOFF
                                        : SNAPSHOT_STATE_RUNNING;
}

/* snapshot-create --halt and a revert stop the domain the same way. */
static bool stop_for_snapshot(struct vsnap_driver *drv, struct vsnap_domain *dom,
                              GError **error)
{
    if (!process_stop(drv, dom, VIR_DOMAIN_SHUTOFF_FROM_SNAPSHOT, false, error))
        return false;
    g_mutex_lock(&dom->lock);
    event_queue_lifecycle(drv->events, dom, VIR_DOMAIN_EVENT_STOPPED,
                          VIR_DOMAIN_EVENT_STOPPED_FROM_SNAPSHOT);
    g_mutex_unlock(&dom->lock);
    return true;
}

/* A snapshot that failed half-way leaves nothing; the shim's dirty log is
 * in doubt now, so the next snapshot is full. The caller reports the error
 * that brought us here; these are logged beside it. */
static void discard_new_snapshot(struct vsnap_domain *dom, struct snapshot_entry *e)
{
    g_autoptr(GError) error = NULL;
    /* A shim that died half-way left its partial directory too. */
    if (!snapdir_remove_with_partials(e->dir, &error)) {
        g_warning("domain %s: after a failed snapshot: %s", dom->name, error->message);
        g_clear_error(&error);
    }
    if (!lineage_clear(dom, &error))
        g_warning("domain %s: after a failed snapshot: %s", dom->name, error->message);
}

static bool is_transient(struct vsnap_domain *dom)
{
    g_mutex_lock(&dom->lock);
    bool transient = !dom->persistent;
    g_mutex_unlock(&dom->lock);
    return transient;
}

static char *create_locked(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *xml,
                           unsigned flags, GError **error)
{
    int state = snapshot_state_of(dom);
    if (state == SNAPSHOT_STATE_SHUTOFF) {
        refuse(error, VIR_ERR_OPERATION_INVALID,
               "domain is not running: vsnap snapshots hold the memory of a running or paused "
               "domain");
        return NULL;
    }
    /* As libvirt: a halted transient domain would cease to exist, and its
     * snapshots with it. */
    if ((flags & VIR_DOMAIN_SNAPSHOT_CREATE_HALT) && is_transient(dom)) {
        refuse(error, VIR_ERR_OPERATION_INVALID,
               "cannot halt after transient domain snapshot");
        return NULL;
    }
    /* A delete of this domain that a crash or an error cut short is finished
     * first (persist/recovery.c): the new snapshot's parent and diff base are
     * the current snapshot, and the pushes it queues carry the survivors'
     * XML, which a half-done delete would leave naming a snapshot that is
     * going. */
    g_autoptr(snapshot_tree) tree = load(drv, dom, error);
    if (!tree || !recovery_finish_leftovers(drv, dom, tree, error))
        return NULL;
    g_autoptr(snapshot_def) def = parse_request(drv, dom, tree, xml, error);
    if (!def)
        return NULL;
    struct snapshot_entry *base = lineage_diff_base(dom, tree);
    /* A clone's first snapshot is a diff on the origin's snapshot it runs from. */
    g_auto(clone_origin) origin = {0};
    if (!base && clone_diff_base(drv, dom, tree, &origin))
        base = origin.entry;
    struct snapshot_entry *e = snapshot_tree_new_entry(tree, error);
    if (!e)
        return NULL;
    /* --live of a running domain: the shim keeps it running (domjobinfo
     * asks the shim for the passes; domjobabort cancels there). */
    bool live = (flags & VIR_DOMAIN_SNAPSHOT_CREATE_LIVE) && state == SNAPSHOT_STATE_RUNNING;
    g_mutex_lock(&dom->lock);
    struct domain_job job = {
        .operation = VIR_DOMAIN_JOB_OPERATION_SNAPSHOT, .total = dom->def->memory_kib * 1024,
        .watch_dir = e->dir, .resume = state == SNAPSHOT_STATE_RUNNING && !live, .live = live,
    };
    g_mutex_unlock(&dom->lock);
    /* Recorded before the VM is paused: a daemon that dies meanwhile leaves
     * the next one what it needs to resume it (persist/recovery.c). A live
     * snapshot never pauses it: a shim whose client died cancels it. */
    gint64 began_us = g_get_monotonic_time();
    struct monitor_live_result result = {0};
    bool taken = domain_job_begin(dom, &job, error) && take_layers(dom, e, base, live, &result, error);
    /* A job that failed or was aborted leaves nothing once it has ended
     * (domjobabort waits for its end). */
    if (!taken)
        discard_new_snapshot(dom, e);
    domain_job_end(dom);
    if (!taken)
        return NULL;
    test_hook("snapshot-taken");
    /* With a store, "push pending" is on disk before the snapshot is
     * recorded: a daemon that dies after this call returned pushes it at
     * its next start; one that dies before recording it drops both. */
    e->store_url = store_url_of(drv, dom);
    if ((e->store_url && !push_mark_pending(e->dir, e->store_url, error)) ||
        !record(drv, dom, tree, e, def, state, error)) {
        discard_new_snapshot(dom, e);
        return NULL;
    }
    if (live)
        live_completed(drv, dom, job.total, began_us, &result);
    if (e->store_url)
        queue_pending(drv, dom, tree);
    lineage_set(dom, e->id);
    /* The shim moved the disks onto a new overlay over the layer it sealed. */
    g_autoptr(GError) disk_error = NULL;
    if (!process_refresh_disks(dom, &disk_error))
        g_warning("domain %s: after snapshot '%s': %s", dom->name, e->name, disk_error->message);
    /* A kept layer the disks ran on has the new snapshot's above it now. */
    else if (!snapshot_disks_fold_kept(drv, dom, tree, &disk_error))
        g_warning("domain %s: after snapshot '%s': %s", dom->name, e->name, disk_error->message);
    g_autoptr(GError) halt_error = NULL;
    /* The snapshot exists: a failed halt is reported, not undone. */
    if ((flags & VIR_DOMAIN_SNAPSHOT_CREATE_HALT) && !stop_for_snapshot(drv, dom, &halt_error))
        g_warning("domain %s: cannot halt after the snapshot: %s", dom->name,
                  halt_error->message);
    return g_strdup(e->name);
}

/* ---- redefine (snapshot-edit): only what is metadata may change ---- */

static bool same_domain(struct vsnap_driver *drv, struct snapshot_entry *e,
                        const struct domain_def *given, GError **error)
{
    g_autofree char *stored_xml = snapshot_entry_domain_xml(e, error);
    g_autoptr(domain_def) stored =
        stored_xml ? domain_def_parse_string(stored_xml, drv->paths.schema_dir, error) : NULL;
    if (!stored)
        return false;
    g_autofree char *a = domain_def_format(stored, false, -1);
    g_autofree char *b = domain_def_format(given, false, -1);
    return g_str_equal(a, b) ||
           refuse(error, VIR_ERR_CONFIG_UNSUPPORTED,
                  "a vsnap snapshot's domain definition is part of its saved state and cannot "
                  "be edited");
}

static bool same_disks(struct vsnap_driver *drv, struct snapshot_entry *e, const struct snapshot_def *given,
                       GError **error)
{
    g_autofree char *stored_xml = snapshot_entry_domain_xml(e, error);
    g_autoptr(snapshot_def) stored = g_new0(struct snapshot_def, 1);
    stored->domain = stored_xml ? domain_def_parse_string(stored_xml, drv->paths.schema_dir, error) : NULL;
    if (!stored->domain)
        return false;
    snapshot_disks_fill(e->dir, stored->domain, stored);
    return snapshot_disks_check_same(given, stored, error);
}

static bool check_redefinition(struct vsnap_driver *drv, struct snapshot_entry *e,
                               const struct snapshot_def *def, GError **error)
{
    if (g_strcmp0(def->parent, e->parent) != 0)
        return refuse(error, VIR_ERR_CONFIG_UNSUPPORTED,
                      "the parent of a vsnap snapshot cannot be changed");
    if ((def->state_set && (int)def->state != e->state) ||
        def->creation_time != e->creation_time || def->memory == SNAPSHOT_MEMORY_NO)
        return refuse(error, VIR_ERR_CONFIG_UNSUPPORTED,
                      "only the description of a vsnap snapshot can be changed (state, "
                      "creation time and memory are facts of the snapshot)");
    return (!def->domain || same_domain(drv, e, def->domain, error)) &&
           (!def->disks_given || same_disks(drv, e, def, error));
}

/* ---- redefine of a snapshot another host took (its files in a store) ---- */

static struct snapshot_entry *find_memory_id(struct snapshot_tree *tree, const char *id)
{
    for (guint i = 0; i < tree->entries->len; i++) {
        struct snapshot_entry *e = tree->entries->pdata[i];
        if (g_strcmp0(e->memory_id, id) == 0)
            return e;
    }
    return NULL;
}

/* What a new redefinition must say and what it must find here, checked
 * before anything is written; *layer_parent is the snapshot its memory is a
 * diff on. */
static bool check_learnt(struct vsnap_domain *dom, struct snapshot_tree *tree,
                         const struct snapshot_def *def, struct snapshot_entry **layer_parent,
                         GError **error)
{
    struct snapshot_entry *twin = find_memory_id(tree, def->store.id);
    *layer_parent = def->store.parent ? find_memory_id(tree, def->store.parent) : NULL;
    if (!def->domain || memcmp(def->domain->uuid, dom->uuid, 16) != 0)
        return refuse(error, VIR_ERR_INVALID_ARG,
                      "the snapshot's <domain> must be this domain (same uuid): redefine it "
                      "with the XML snapshot-dumpxml shows on the host that took it");
    if (!def->state_set || def->memory == SNAPSHOT_MEMORY_NO)
        return refuse(error, VIR_ERR_INVALID_ARG,
                      "a redefined snapshot needs its <state> and its memory "
                      "(snapshot-dumpxml's XML, unedited)");
    if (twin) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "snapshot '%s' is snapshot '%s' of this domain already (the same layer %s)",
                    def->name, twin->name, def->store.id);
        return false;
    }
    if (def->parent && !snapshot_tree_find(tree, def->parent)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG,
                    "the parent of snapshot '%s', '%s', is not defined here: redefine the "
                    "parents first", def->name, def->parent);
        return false;
    }
    if (def->store.parent && !*layer_parent) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG,
                    "snapshot '%s' is a diff on layer %s, which no snapshot here holds: "
                    "redefine that snapshot first", def->name, def->store.parent);
        return false;
    }
    return true;
}

static char *redefine_learnt(struct vsnap_driver *drv, struct vsnap_domain *dom,
                             struct snapshot_tree *tree, const struct snapshot_def *def,
                             unsigned flags, GError **error)
{
    struct snapshot_entry *layer_parent = NULL;
    if (!check_learnt(dom, tree, def, &layer_parent, error))
        return NULL;
    struct snapshot_entry *e = snapshot_tree_new_entry(tree, error);
    if (!e)
        return NULL;
    e->name = g_strdup(def->name);
    e->description = g_strdup(def->description);
    e->parent = g_strdup(def->parent);
    e->creation_time = def->creation_time;
    e->state = def->state;
    e->full = !layer_parent;
    e->layer_parent = layer_parent ? g_strdup(layer_parent->id) : NULL;
    e->memory_id = g_strdup(def->store.id);
    e->store_url = g_strdup(def->store.url);
    g_autofree char *domain_xml = domain_def_format(def->domain, false, -1);
    if (!snapshot_entry_save_domain_xml(e, domain_xml, error) ||
        !snapshot_entry_save(e, error)) {
        snapdir_remove(e->dir, NULL);
        return NULL;
    }
    g_message("domain %s: snapshot '%s' learnt (layer %s in %s; pulled at its first revert)",
              dom->name, e->name, e->memory_id, e->store_url);
    if ((flags & VIR_DOMAIN_SNAPSHOT_CREATE_CURRENT) &&
        !snapshot_tree_set_current(tree, e->name, error))
        return NULL;
    return g_strdup(e->name);
}

static char *redefine_locked(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *xml,
                             unsigned flags, GError **error)
{
    g_autoptr(snapshot_tree) tree = load(drv, dom, error);
    g_autoptr(snapshot_def) def =
        tree ? snapshot_def_parse_string(xml, drv->paths.schema_dir, error) : NULL;
    if (!def)
        return NULL;
    struct snapshot_entry *e = snapshot_tree_find(tree, def->name);
    if (!e && def->store.id)
        return redefine_learnt(drv, dom, tree, def, flags, error);
    if (!e) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_ARGUMENT_UNSUPPORTED,
                    "vsnap cannot define snapshot '%s' from XML: a snapshot's memory layers "
                    "exist only when vsnap takes it, or in a snapshot store its XML names "
                    "(<cookie><vsnap:store/></cookie>); a rename is not supported either",
                    def->name);
        return NULL;
    }
    if (!check_redefinition(drv, e, def, error))
        return NULL;
    g_free(e->description);
    e->description = g_strdup(def->description);
    if (!snapshot_entry_save(e, error) ||
        ((flags & VIR_DOMAIN_SNAPSHOT_CREATE_CURRENT) &&
         !snapshot_tree_set_current(tree, e->name, error)))
        return NULL;
    return g_strdup(e->name);
}

bool snapshot_mark_disk_commit(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *what,
                               GError **error)
{
    g_autoptr(snapshot_tree) tree = load(drv, dom, error);
    if (!tree)
        return false;
    for (guint i = 0; i < tree->entries->len; i++) {
        struct snapshot_entry *e = tree->entries->pdata[i];
        if (e->disk_commit)
            continue;   /* an earlier commit's: its name stays */
        e->disk_commit = g_strdup(what);
        if (!snapshot_entry_save(e, error))
            return false;
    }
    return true;
}

/* A snapshot whose disk layers sit on an image a block commit rewrote
 * would give the guest a disk no one ever had. */
static bool refuse_committed(const struct snapshot_entry *e, GError **error)
{
    if (!e->disk_commit)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                "cannot revert to snapshot '%s': %s rewrote the image its disk layers sit on "
                "(snapshot-delete still removes it)", e->name, e->disk_commit);
    return false;
}

/* A block job writes the overlay a snapshot would seal: refused, naming it
 * (it ends on its own, or blockjob --abort ends it). */
static bool refuse_during_block_job(struct vsnap_domain *dom, GError **error)
{
    g_mutex_lock(&dom->lock);
    struct domain_block_job *job = domain_block_job_any(dom);
    if (job)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                    "cannot take a snapshot: a block %s job of disk '%s' is under way (wait for it, or end it "
                    "with virsh blockjob %s %s --abort)", domain_block_job_type_name(job->type), job->disk,
                    dom->name, job->disk);
    g_mutex_unlock(&dom->lock);
    return job == NULL;
}

char *snapshot_create(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *xml,
                      unsigned flags, GError **error)
{
    if (!check_create_flags(flags, error) || !domain_job_acquire(dom, "snapshot-create", error))
        return NULL;
    if (!(flags & VIR_DOMAIN_SNAPSHOT_CREATE_REDEFINE) && !refuse_during_block_job(dom, error)) {
        domain_job_release(dom);
        return NULL;
    }
    char *name = (flags & VIR_DOMAIN_SNAPSHOT_CREATE_REDEFINE)
                     ? redefine_locked(drv, dom, xml, flags, error)
                     : create_locked(drv, dom, xml, flags, error);
    domain_job_release(dom);
    return name;
}

/* ---- queries ---- */

char *snapshot_get_xml(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *name,
                       unsigned flags, GError **error)
{
    if (flags & ~VIR_DOMAIN_SNAPSHOT_XML_SECURE) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)",
                    flags);
        return NULL;
    }
    g_autoptr(snapshot_tree) tree = load(drv, dom, error);
    struct snapshot_entry *e = tree ? find(tree, name, error) : NULL;
    return e ? entry_xml(drv, tree, e, error) : NULL;
}

/* virDomainSnapshotListFlags filter groups: no flag of a group set means no
 * filtering by it. Every vsnap snapshot has metadata, is internal and was
 * taken of an active domain. */
static bool list_match(struct snapshot_tree *tree, struct snapshot_entry *e, unsigned flags)
{
    g_autoptr(GPtrArray) kids = snapshot_tree_children(tree, e->name);
    bool leaf = kids->len == 0;
    unsigned leaves = VIR_DOMAIN_SNAPSHOT_LIST_LEAVES | VIR_DOMAIN_SNAPSHOT_LIST_NO_LEAVES;
    unsigned meta = VIR_DOMAIN_SNAPSHOT_LIST_METADATA | VIR_DOMAIN_SNAPSHOT_LIST_NO_METADATA;
    unsigned kind = VIR_DOMAIN_SNAPSHOT_LIST_INACTIVE | VIR_DOMAIN_SNAPSHOT_LIST_ACTIVE |
                    VIR_DOMAIN_SNAPSHOT_LIST_DISK_ONLY;
    unsigned loc = VIR_DOMAIN_SNAPSHOT_LIST_INTERNAL | VIR_DOMAIN_SNAPSHOT_LIST_EXTERNAL;
    if ((flags & leaves) && !(((flags & VIR_DOMAIN_SNAPSHOT_LIST_LEAVES) && leaf) ||
                              ((flags & VIR_DOMAIN_SNAPSHOT_LIST_NO_LEAVES) && !leaf)))
        return false;
    if ((flags & meta) && !(flags & VIR_DOMAIN_SNAPSHOT_LIST_METADATA))
        return false;
    if ((flags & kind) && !(flags & VIR_DOMAIN_SNAPSHOT_LIST_ACTIVE))
        return false;
    if ((flags & loc) && !(flags & VIR_DOMAIN_SNAPSHOT_LIST_INTERNAL))
        return false;
    return true;
}

/* Parents before children (VIR_DOMAIN_SNAPSHOT_LIST_TOPOLOGICAL always holds). */
static void walk(struct snapshot_tree *tree, const char *from, bool deep, GPtrArray *out)
{
    g_autoptr(GPtrArray) kids = snapshot_tree_children(tree, from);
    for (guint i = 0; i < kids->len; i++) {
        struct snapshot_entry *kid = kids->pdata[i];
        g_ptr_array_add(out, kid);
        if (deep)
            walk(tree, kid->name, deep, out);
    }
}

GPtrArray *snapshot_list(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *from,
                         unsigned flags, GError **error)
{
    g_autoptr(snapshot_tree) tree = load(drv, dom, error);
    if (!tree || (from && !find(tree, from, error)))
        return NULL;
    /* Bit 0 is ROOTS for a domain's list and DESCENDANTS for a snapshot's. */
    bool bit0 = flags & VIR_DOMAIN_SNAPSHOT_LIST_ROOTS;
    g_autoptr(GPtrArray) all = g_ptr_array_new();
    walk(tree, from, from ? bit0 : !bit0, all);
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    for (guint i = 0; i < all->len; i++)
        if (list_match(tree, all->pdata[i], flags))
            g_ptr_array_add(names, g_strdup(((struct snapshot_entry *)all->pdata[i])->name));
    return names;
}

bool snapshot_exists(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *name,
                     GError **error)
{
    g_autoptr(snapshot_tree) tree = load(drv, dom, error);
    return tree && find(tree, name, error);
}

char *snapshot_current(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error)
{
    g_autoptr(snapshot_tree) tree = load(drv, dom, error);
    if (!tree)
        return NULL;
    if (!tree->current)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_DOMAIN_SNAPSHOT,
                    "the domain does not have a current snapshot");
    return g_strdup(tree->current);
}

int snapshot_has_current(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error)
{
    g_autoptr(snapshot_tree) tree = load(drv, dom, error);
    return tree ? tree->current != NULL : -1;
}

int snapshot_is_current(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *name,
                        GError **error)
{
    g_autoptr(snapshot_tree) tree = load(drv, dom, error);
    if (!tree || !find(tree, name, error))
        return -1;
    return g_strcmp0(tree->current, name) == 0;
}

char *snapshot_parent(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *name,
                      GError **error)
{
    g_autoptr(snapshot_tree) tree = load(drv, dom, error);
    struct snapshot_entry *e = tree ? find(tree, name, error) : NULL;
    if (!e)
        return NULL;
    if (!e->parent)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_DOMAIN_SNAPSHOT,
                    "snapshot '%s' does not have a parent", name);
    return g_strdup(e->parent);
}

/* ---- revert ---- */

/* The snapshot of a delete cut short that e's layer sits on, directly or
 * further down its chain; NULL when none. At most one step per entry: a
 * hand-edited layer_parent loop ends. */
static struct snapshot_entry *unfinished_delete_below(struct snapshot_tree *tree,
                                                      const struct snapshot_entry *e)
{
    const char *id = e->layer_parent;
    for (guint steps = 0; id && steps < tree->entries->len; steps++) {
        struct snapshot_entry *p = snapshot_tree_find_id(tree, id);
        if (!p)
            return NULL;
        if (p->deleting)
            return p;
        id = p->layer_parent;
    }
    return NULL;
}

/* A revert's check failed: when e's chain goes through a delete cut short,
 * the message says so and what finishes it. */
static void explain_unfinished_delete(struct snapshot_tree *tree, const struct snapshot_entry *e,
                                      GError **error)
{
    struct snapshot_entry *gone = unfinished_delete_below(tree, e);
    if (!gone || !error || !*error)
        return;
    GError *cause = *error;
    *error = g_error_new(cause->domain, cause->code,
                         "%s (snapshot '%s' is being deleted, a delete cut short that "
                         "the domain's next snapshot-delete or snapshot-create, or the "
                         "daemon's next start, finishes)", cause->message, gone->name);
    g_error_free(cause);
}

/* Reads, checks, stops, starts. It changes nothing of the tree but the
 * current snapshot, so a delete that a crash or an error cut short is left
 * to its owners (the next snapshot-create or snapshot-delete, or the next
 * start: persist/recovery.c): the snapshot being deleted is not found, and a
 * chain it left half folded fails the check below, before anything stops. */
static bool revert_locked(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *name,
                          unsigned flags, GError **error)
{
    g_autoptr(snapshot_tree) tree = load(drv, dom, error);
    struct snapshot_entry *e = tree ? find(tree, name, error) : NULL;
    g_autoptr(domain_def) def = NULL;
    struct restore_request req;
    /* A snapshot learnt from another host is imported first: the domain
     * runs on untouched while its files arrive. */
    if (!e || !refuse_committed(e, error) || !import_snapshot(drv, tree, e, error))
        return false;
    if (!snapshot_revert_request(drv, dom, e, flags, &def, &req, error)) {
        explain_unfinished_delete(tree, e, error);
        return false;
    }
    struct revert_intent intent = {
        .snapshot = e->name, .flags = flags, .old_pid = snapshot_revert_shim_pid(dom),
    };
    if (!revert_intent_write(tree->dir, &intent, error))
        return false;
    if ((vsnap_domain_is_active(dom) && !stop_for_snapshot(drv, dom, error)) ||
        !restore_start(drv, dom, &req, error)) {
        revert_intent_remove(tree->dir);
        return false;
    }
    if (!snapshot_revert_recorded(tree, dom, e, error))
        return false;
    /* The disks left the chain a kept layer was part of. */
    g_autoptr(GError) kept_error = NULL;
    if (!snapshot_disks_fold_kept(drv, dom, tree, &kept_error))
        g_warning("domain %s: after the revert to '%s': %s", dom->name, e->name, kept_error->message);
    return true;
}

bool snapshot_start_from_current(struct vsnap_driver *drv, struct vsnap_domain *dom, bool paused, bool *started,
                                 GError **error)
{
    g_autoptr(snapshot_tree) tree = load(drv, dom, error);
    *started = tree && tree->current;
    if (!*started)
        return tree != NULL;
    unsigned flags = paused ? VIR_DOMAIN_SNAPSHOT_REVERT_PAUSED : VIR_DOMAIN_SNAPSHOT_REVERT_RUNNING;
    return revert_locked(drv, dom, tree->current, flags, error);
}

bool snapshot_revert(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *name,
                     unsigned flags, GError **error)
{
    unsigned known = VIR_DOMAIN_SNAPSHOT_REVERT_RUNNING | VIR_DOMAIN_SNAPSHOT_REVERT_PAUSED |
                     VIR_DOMAIN_SNAPSHOT_REVERT_FORCE;
    if (flags & VIR_DOMAIN_SNAPSHOT_REVERT_RESET_NVRAM)
        return refuse(error, VIR_ERR_ARGUMENT_UNSUPPORTED, "vsnap domains have no NVRAM");
    if (flags & ~known) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)",
                    flags & ~known);
        return false;
    }
    if ((flags & VIR_DOMAIN_SNAPSHOT_REVERT_RUNNING) && (flags & VIR_DOMAIN_SNAPSHOT_REVERT_PAUSED))
        return refuse(error, VIR_ERR_INVALID_ARG,
                      "flags 'running' and 'paused' in one call are mutually exclusive");
    /* --force: every vsnap revert starts a fresh shim from a complete
     * snapshot, so none of the risky cases it allows can arise. */
    if (!domain_job_acquire(dom, "snapshot-revert", error))
        return false;
    bool ok = revert_locked(drv, dom, name, flags, error);
    /* A transient domain whose VM the revert stopped and could not replace
     * has stopped for good. */
    if (!ok && is_transient(dom) && !vsnap_domain_is_active(dom))
        drv->end_transient(drv, dom);
    domain_job_release(dom);
    return ok;
}

/* ---- delete ---- */

static bool delete_locked(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *name,
                          unsigned flags, GError **error)
{
    /* A delete cut short is this job's own kind: finished first
     * (persist/recovery.c), since the folds, parents and last-snapshot count
     * below are computed over the tree as it is after it. */
    g_autoptr(snapshot_tree) tree = load(drv, dom, error);
    if (!tree || !recovery_finish_leftovers(drv, dom, tree, error))
        return false;
    struct snapshot_entry *e = find(tree, name, error);
    if (!e)
        return false;
    bool with_children = flags & (VIR_DOMAIN_SNAPSHOT_DELETE_CHILDREN |
                                  VIR_DOMAIN_SNAPSHOT_DELETE_CHILDREN_ONLY);
    g_autoptr(GPtrArray) doomed = with_children ? snapshot_tree_descendants(tree, e->name)
                                                : g_ptr_array_new();
    /* Nothing goes while a clone's memory or disks sit on any of it. */
    g_autoptr(GPtrArray) checked = g_ptr_array_copy(doomed, NULL, NULL);
    if (!(flags & VIR_DOMAIN_SNAPSHOT_DELETE_CHILDREN_ONLY))
        g_ptr_array_insert(checked, 0, e);
    if (checked->len && !clone_check_snapshots_unused(drv, dom, tree, checked, error))
        return false;
    /* Deepest first, so each one removed has no children left among the doomed. */
    bool ok = true;
    for (guint i = doomed->len; ok && i-- > 0;)
        ok = snapshot_remove_one(drv, dom, tree, doomed->pdata[i], error);
    if (ok && !(flags & VIR_DOMAIN_SNAPSHOT_DELETE_CHILDREN_ONLY))
        ok = snapshot_remove_one(drv, dom, tree, e, error);
    /* A queued push carries its snapshot's XML as it was when queued, and
     * the delete changed the survivors' parents: the manifest would name a
     * parent that is gone. Queued again, as they are now (the pushes are
     * held: none runs). */
    push_drop(drv->pushes, tree->domain_uuid, NULL);
    queue_pending(drv, dom, tree);
    return ok;
}

bool snapshot_delete(struct vsnap_driver *drv, struct vsnap_domain *dom, const char *name,
                     unsigned flags, GError **error)
{
    if (flags & VIR_DOMAIN_SNAPSHOT_DELETE_METADATA_ONLY)
        return refuse(error, VIR_ERR_ARGUMENT_UNSUPPORTED,
                      "vsnap keeps no snapshot data apart from its metadata: delete the "
                      "snapshot without --metadata");
    unsigned known = VIR_DOMAIN_SNAPSHOT_DELETE_CHILDREN | VIR_DOMAIN_SNAPSHOT_DELETE_CHILDREN_ONLY;
    if (flags & ~known) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unsupported flags (0x%x)",
                    flags & ~known);
        return false;
    }
    /* A push reads the directories a delete folds: the delete waits for the
     * domain's push under way (bounded: every request of a push has its
     * timeouts) and drops the queued pushes of what it removes. Waiting
     * rather than refusing: the user asked for the delete, and the store
     * keeps its own complete copy of what was pushed (a manifest that stays
     * after the local delete, like an export). Dropping rather than
     * finishing a queued push: the snapshot is gone, there is nothing left
     * to send, and the store never shows a half-pushed snapshot. */
    char uuid[37];
    uuid_format(dom->uuid, uuid);
    if (!domain_job_acquire(dom, "snapshot-delete", error))
        return false;
    push_hold(drv->pushes, uuid);
    bool ok = delete_locked(drv, dom, name, flags, error);
    push_release(drv->pushes, uuid);
    domain_job_release(dom);
    return ok;
}

/* ---- start-up ---- */

void snapshot_queue_pushes(struct vsnap_driver *drv, struct vsnap_domain *dom)
{
    g_autoptr(GError) error = NULL;
    if (!domain_job_acquire(dom, "snapshot-push-queue", &error)) {
        g_warning("%s", error->message);
        return;
    }
    g_autoptr(snapshot_tree) tree = load(drv, dom, &error);
    /* While a delete is unfinished (recovery logged why), the survivors' XML
     * would name a parent that is going: the create or delete that finishes
     * it queues them. */
    if (!tree)
        g_warning("domain %s: no pending push is queued: %s", dom->name, error->message);
    else if (snapshot_tree_count_live(tree) == tree->entries->len)
        queue_pending(drv, dom, tree);
    domain_job_release(dom);
}

/* ---- hooks ---- */

int snapshot_count(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error)
{
    g_autoptr(snapshot_tree) tree = load(drv, dom, error);
    return tree ? (int)snapshot_tree_count_live(tree) : -1;
}

bool snapshot_has_clones(struct vsnap_driver *drv, struct vsnap_domain *dom, GError **error)
{
    g_autoptr(snapshot_tree) tree = load(drv, dom, error);
    if (!tree)
        return true;   /* unreadable: they may */
    if (!tree->entries->len || clone_check_snapshots_unused(drv, dom, tree, tree->entries, error))
        return false;
    g_prefix_error(error, "domain %s keeps its snapshots: ", dom->name);
    return true;
}

bool snapshot_check_undefine(struct vsnap_driver *drv, struct vsnap_domain *dom, unsigned flags,
                             GError **error)
{
    if (flags & VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA)
        return !snapshot_has_clones(drv, dom, error);
    /* Metadata that cannot be read may hold snapshots: undefining now would
     * leave them behind with no domain to list or delete them. */
    int n = snapshot_count(drv, dom, error);
    if (n < 0) {
        g_prefix_error(error, "cannot undefine %s: its snapshots cannot be listed: ", dom->name);
        return false;
    }
    if (n == 0)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID,
                "cannot delete inactive domain with %d snapshots (use --snapshots-metadata)", n);
    return false;
}

void snapshot_remove_all(struct vsnap_driver *drv, struct vsnap_domain *dom)
{
    g_autoptr(GError) error = NULL;
    char uuid[37];
    uuid_format(dom->uuid, uuid);
    push_hold(drv->pushes, uuid);
    push_drop(drv->pushes, uuid, NULL);
    if (!snapshot_tree_remove_all(drv->paths.state_dir, dom->name, &error))
        g_warning("domain %s: %s", dom->name, error->message);
    push_release(drv->pushes, uuid);
}
