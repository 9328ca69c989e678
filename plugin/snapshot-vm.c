#include "snapshot-vm.h"

#include <glib/gstdio.h>
#include <json-glib/json-glib.h>
#include <libvirt/libvirt.h>

#include "monitor.h"
#include "snapshot-dir.h"
#include "virt-error.h"

#define LINEAGE_FILE "snapshot-lineage"
#define JOB_FILE "job"

/* The run directory of an active domain, NULL otherwise. */
static char *run_file(struct vsnap_domain *dom, const char *name)
{
    g_mutex_lock(&dom->lock);
    char *path = dom->run ? g_build_filename(dom->run->dir, name, NULL) : NULL;
    g_mutex_unlock(&dom->lock);
    return path;
}

static char *api_socket(struct vsnap_domain *dom, int *state)
{
    g_mutex_lock(&dom->lock);
    char *path = dom->run ? g_strdup(dom->run->api_socket) : NULL;
    *state = dom->state;
    g_mutex_unlock(&dom->lock);
    return path;
}

static char *snapshot_body(const char *dir, const char *parent_dir)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "destination_url");
    g_autofree char *url = snapdir_url(dir);
    json_builder_add_string_value(b, url);
    if (parent_dir) {
        g_autofree char *parent_url = snapdir_url(parent_dir);
        json_builder_set_member_name(b, "mode");
        json_builder_add_string_value(b, "diff");
        json_builder_set_member_name(b, "parent_url");
        json_builder_add_string_value(b, parent_url);
    }
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return json_to_string(root, FALSE);
}

bool vmsnap_take(struct vsnap_domain *dom, const char *dir, const char *parent_dir,
                 GError **error)
{
    int state;
    g_autofree char *api = api_socket(dom, &state);
    if (!api) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "domain is not running");
        return false;
    }
    bool was_running = state == VIR_DOMAIN_RUNNING;
    if (was_running && !monitor_vm_pause(api, error))
        return false;
    g_autofree char *body = snapshot_body(dir, parent_dir);
    bool ok = monitor_vm_put_json(api, "vm.snapshot", body, 0, error);
    /* The shim just wrote the layer with the checksums of what it read from
     * RAM: seal it, so reverts check its data again only if the file changes. */
    if (ok && !snapdir_seal(dir, error))
        ok = false;
    g_autoptr(GError) resume_error = NULL;
    if (was_running && !monitor_vm_resume(api, &resume_error)) {
        g_warning("domain %s: cannot resume after the snapshot: %s", dom->name,
                  resume_error->message);
        if (ok) {
            g_propagate_error(error, g_steal_pointer(&resume_error));
            ok = false;
        }
    }
    return ok;
}

/* vsock, serial and console of the VmConfig the daemon would boot with: the
 * parts of the snapshot's configuration that name host paths. */
static JsonNode *config_overrides(struct domain_run *run, const struct domain_def *live,
                                  GError **error)
{
    g_autofree char *json =
        domain_def_to_vm_config_json(live, run->vsock_socket, error);
    if (!json)
        return NULL;
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!json_parser_load_from_data(parser, json, -1, NULL)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INTERNAL_ERROR,
                    "cannot read back the VM configuration of %s", live->name);
        return NULL;
    }
    JsonObject *config = json_node_get_object(json_parser_get_root(parser));
    JsonObject *out = json_object_new();
    const char *keep[] = {"serial", "console"};
    for (size_t i = 0; i < G_N_ELEMENTS(keep); i++)
        if (json_object_has_member(config, keep[i]))
            json_object_set_member(out, keep[i],
                                   json_node_copy(json_object_get_member(config, keep[i])));
    /* Of the vsock device only the socket is the host's business; the CID
     * and the rest are the guest's and come from the snapshot. */
    if (json_object_has_member(config, "vsock")) {
        JsonObject *vsock = json_object_new();
        json_object_set_string_member(vsock, "socket", run->vsock_socket);
        json_object_set_object_member(out, "vsock", vsock);
    }
    JsonNode *node = json_node_new(JSON_NODE_OBJECT);
    json_node_take_object(node, out);
    return node;
}

bool vmsnap_restore_setup(struct domain_run *run, const struct domain_def *live, void *data,
                          GError **error)
{
    const struct vmsnap_restore *r = data;
    JsonNode *overrides = config_overrides(run, live, error);
    if (!overrides)
        return false;
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "source_url");
    g_autofree char *url = snapdir_url(r->source_dir);
    json_builder_add_string_value(b, url);
    json_builder_set_member_name(b, "memory_restore_mode");
    json_builder_add_string_value(b, r->mode);
    json_builder_set_member_name(b, "resume");
    json_builder_add_boolean_value(b, r->resume);
    json_builder_set_member_name(b, "prefault");
    json_builder_add_boolean_value(b, false);
    json_builder_set_member_name(b, "config_overrides");
    json_builder_add_value(b, overrides);
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    g_autofree char *body = json_to_string(root, FALSE);
    return monitor_vm_put_json(run->api_socket, "vm.restore", body, 0, error);
}

/* ---- lineage ---- */

void vmsnap_lineage_set(struct vsnap_domain *dom, const char *snapshot_id)
{
    g_autofree char *path = run_file(dom, LINEAGE_FILE);
    if (!path)
        return;
    g_mutex_lock(&dom->lock);
    g_autofree char *text = g_strdup_printf("%s %" G_GUINT64_FORMAT "\n", snapshot_id,
                                            dom->generation);
    g_mutex_unlock(&dom->lock);
    g_autoptr(GError) error = NULL;
    if (!g_file_set_contents(path, text, -1, &error))
        g_warning("domain %s: %s (the next snapshot will be full)", dom->name, error->message);
}

void vmsnap_lineage_clear(struct vsnap_domain *dom)
{
    g_autofree char *path = run_file(dom, LINEAGE_FILE);
    if (path)
        g_unlink(path);
}

char *vmsnap_lineage_get(struct vsnap_domain *dom)
{
    g_autofree char *path = run_file(dom, LINEAGE_FILE);
    g_autofree char *text = NULL;
    if (!path || !g_file_get_contents(path, &text, NULL, NULL))
        return NULL;
    g_auto(GStrv) words = g_strsplit(g_strstrip(text), " ", 2);
    if (g_strv_length(words) != 2)
        return NULL;
    g_mutex_lock(&dom->lock);
    /* A reboot inside the shim starts the guest afresh: no lineage then. */
    bool same = g_ascii_strtoull(words[1], NULL, 10) == dom->generation;
    g_mutex_unlock(&dom->lock);
    return same ? g_strdup(words[0]) : NULL;
}

/* ---- job progress ---- */

static void job_write(struct vsnap_domain *dom, const struct vmsnap_job *job)
{
    g_autofree char *path = run_file(dom, JOB_FILE);
    if (!path)
        return;
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_key_file_set_integer(kf, "job", "operation", job->operation);
    g_key_file_set_int64(kf, "job", "started_us", job->started_us);
    g_key_file_set_uint64(kf, "job", "total", job->total);
    g_key_file_set_uint64(kf, "job", "processed", job->processed);
    g_key_file_set_string(kf, "job", "watch_dir", job->watch_dir ? job->watch_dir : "");
    g_autofree char *text = g_key_file_to_data(kf, NULL, NULL);
    g_autofree char *tmp = g_strconcat(path, ".tmp", NULL);
    if (g_file_set_contents(tmp, text, -1, NULL))
        g_rename(tmp, path);
}

void vmsnap_job_begin(struct vsnap_domain *dom, int operation, guint64 total,
                      const char *watch_dir)
{
    struct vmsnap_job job = {.operation = operation, .started_us = g_get_monotonic_time(),
                             .total = total, .watch_dir = (char *)watch_dir};
    job_write(dom, &job);
}

void vmsnap_job_progress(struct vsnap_domain *dom, guint64 total, guint64 processed,
                         const char *watch_dir)
{
    struct vmsnap_job job = {0};
    if (!vmsnap_job_get(dom, &job))
        return;
    job.total = total;
    job.processed = processed;
    g_free(job.watch_dir);
    job.watch_dir = g_strdup(watch_dir);
    job_write(dom, &job);
    vmsnap_job_clear(&job);
}

void vmsnap_job_end(struct vsnap_domain *dom)
{
    g_autofree char *path = run_file(dom, JOB_FILE);
    if (path)
        g_unlink(path);
}

bool vmsnap_job_get(struct vsnap_domain *dom, struct vmsnap_job *job)
{
    g_autofree char *path = run_file(dom, JOB_FILE);
    g_autoptr(GKeyFile) kf = g_key_file_new();
    if (!path || !g_key_file_load_from_file(kf, path, 0, NULL))
        return false;
    job->operation = g_key_file_get_integer(kf, "job", "operation", NULL);
    job->started_us = g_key_file_get_int64(kf, "job", "started_us", NULL);
    job->total = g_key_file_get_uint64(kf, "job", "total", NULL);
    job->processed = g_key_file_get_uint64(kf, "job", "processed", NULL);
    job->watch_dir = g_key_file_get_string(kf, "job", "watch_dir", NULL);
    if (job->watch_dir && *job->watch_dir)
        job->processed = MIN(job->total, snapdir_bytes(job->watch_dir));
    return true;
}

void vmsnap_job_clear(struct vmsnap_job *job)
{
    g_clear_pointer(&job->watch_dir, g_free);
}
