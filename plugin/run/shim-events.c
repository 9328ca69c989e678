#include "shim-events.h"

#include <errno.h>
#include <json-glib/json-glib.h>
#include <libvirt/libvirt.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "domain/block-jobs.h"
#include "json/bounded-json.h"
#include "run/process.h"

struct watcher {
    struct vsnap_driver *drv;
    struct vsnap_domain *dom;
    struct domain_run *run;
    GString *pending;    /* an incomplete line */
};

/* True while this run is the domain's current one and nobody stops it. */
static bool run_is_current_locked(struct watcher *w)
{
    return w->dom->run == w->run && !w->run->stopping;
}

static bool run_is_current(struct watcher *w)
{
    g_mutex_lock(&w->dom->lock);
    bool current = run_is_current_locked(w);
    g_mutex_unlock(&w->dom->lock);
    return current;
}

/* The job, for a handler of this run's events. Its holder may be a revert
 * pulling a snapshot from a store for minutes, which ends by replacing this
 * run: the watcher waits in rounds of the job wait timeout, saying so in
 * the log after each, and gives up (false) once the run is no longer the
 * domain's, when there is nothing left for the handler to do. */
static bool acquire_job_for_run(struct watcher *w, const char *what)
{
    for (;;) {
        g_autoptr(GError) error = NULL;
        if (domain_job_acquire(w->dom, what, &error))
            return true;
        if (!run_is_current(w) || g_error_matches(error, VSNAP_VIR_ERROR, VIR_ERR_NO_DOMAIN))
            return false;
        g_message("domain %s: %s; still waiting", w->dom->name, error->message);
    }
}

static void on_guest_ready(struct watcher *w)
{
    struct vsnap_domain *dom = w->dom;
    g_mutex_lock(&dom->lock);
    if (dom->run == w->run && !w->run->ready) {
        w->run->ready = true;
        process_write_status_locked(dom);
        event_queue_agent(w->drv->events, dom, VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_CONNECTED,
                          VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_REASON_CHANNEL);
    }
    g_mutex_unlock(&dom->lock);
}

/* on_poweroff / on_crash = restart: a fresh VM from the same definition
 * (the caller holds the job). Otherwise a transient domain ends here. */
static void restart_if_wanted(struct watcher *w, enum domain_lifecycle_action action)
{
    struct vsnap_domain *dom = w->dom;
    bool restart = action == DOMAIN_ACTION_RESTART || action == DOMAIN_ACTION_RENAME_RESTART ||
                   action == DOMAIN_ACTION_COREDUMP_RESTART;
    g_autoptr(GError) error = NULL;
    if (restart && !process_start(w->drv, dom, &error))
        g_warning("domain %s: restart after the guest stopped failed: %s", dom->name,
                  error->message);
    g_mutex_lock(&dom->lock);
    bool forget = !dom->persistent && !dom->run;
    g_mutex_unlock(&dom->lock);
    if (forget)
        w->drv->end_transient(w->drv, dom);
}

/* The guest stopped its VM: finish the job the way libvirt does for a
 * guest-initiated poweroff: shutdown event, then stopped. Why it stopped is
 * in the event ({"reason": "crash", "detail": ...}): a shim whose VM is lost
 * exits right after saying so, and cannot be asked. Returns true when the
 * watcher is done. */
static bool on_vm_shutdown(struct watcher *w, JsonObject *properties)
{
    struct vsnap_domain *dom = w->dom;
    bool crashed = properties &&
                   !g_strcmp0(json_object_get_string_member_with_default(properties, "reason", NULL), "crash");
    if (!acquire_job_for_run(w, "guest poweroff"))
        return false;
    if (!run_is_current(w)) {
        domain_job_release(dom);
        return false;
    }
    if (crashed)
        g_warning("domain %s: the guest crashed: %s", dom->name,
                  json_object_get_string_member_with_default(properties, "detail", "no details"));
    int reason = crashed ? VIR_DOMAIN_SHUTOFF_CRASHED : VIR_DOMAIN_SHUTOFF_SHUTDOWN;
    g_mutex_lock(&dom->lock);
    enum domain_lifecycle_action action = crashed ? dom->def->on_crash : dom->def->on_poweroff;
    g_mutex_unlock(&dom->lock);
    g_autoptr(GError) error = NULL;
    bool stopped = process_stop(w->drv, dom, reason, false, &error);
    if (stopped) {
        g_mutex_lock(&dom->lock);
        if (!crashed)
            event_queue_lifecycle(w->drv->events, dom, VIR_DOMAIN_EVENT_SHUTDOWN,
                                  VIR_DOMAIN_EVENT_SHUTDOWN_GUEST);
        event_queue_lifecycle(w->drv->events, dom, VIR_DOMAIN_EVENT_STOPPED,
                              crashed ? VIR_DOMAIN_EVENT_STOPPED_CRASHED
                                      : VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN);
        g_mutex_unlock(&dom->lock);
        restart_if_wanted(w, action);
    } else {
        g_warning("domain %s: the guest powered off but the shim does not stop: %s", dom->name,
                  error->message);
    }
    domain_job_release(dom);
    return stopped;
}

static bool on_vm_rebooted(struct watcher *w)
{
    struct vsnap_domain *dom = w->dom;
    g_mutex_lock(&dom->lock);
    bool current = run_is_current_locked(w);
    bool destroy = current && dom->def->on_reboot == DOMAIN_ACTION_DESTROY;
    if (current) {
        dom->generation++;
        w->run->ready = false;
        process_write_status_locked(dom);
        event_queue_reboot(w->drv->events, dom);
    }
    g_mutex_unlock(&dom->lock);
    /* on_reboot=destroy: the reboot ends the domain like a poweroff. */
    return destroy && on_vm_shutdown(w, NULL);
}

/* Shim exited and no stop was under way: the VM is lost. */
static void on_shim_exit(struct watcher *w)
{
    struct vsnap_domain *dom = w->dom;
    if (!acquire_job_for_run(w, "shim exit"))
        return;
    if (run_is_current(w)) {
        g_autofree char *tail = process_log_tail(w->run);
        g_warning("domain %s: shim %d exited unexpectedly; its log ends with: %s", dom->name,
                  w->run->pid, tail);
        process_cleanup(w->drv, dom, w->run, VIR_DOMAIN_SHUTOFF_CRASHED);
        g_mutex_lock(&dom->lock);
        event_queue_lifecycle(w->drv->events, dom, VIR_DOMAIN_EVENT_STOPPED,
                              VIR_DOMAIN_EVENT_STOPPED_CRASHED);
        bool transient = !dom->persistent;
        g_mutex_unlock(&dom->lock);
        if (transient)
            w->drv->end_transient(w->drv, dom);
    }
    domain_job_release(dom);
}

/* The shim's block job on a disk ended by itself (source "disk":
 * job-completed, job-failed): a completed pull left the disk on its overlay
 * over the image, which the live definition and the disk record learn
 * from vm.info first; then the job's record goes and BLOCK_JOB(_2) tell
 * the clients. A job already aborted through the API has no record and
 * sends nothing. */
static void on_disk_job_end(struct watcher *w, JsonObject *properties, bool completed)
{
    const char *disk = properties ? json_object_get_string_member_with_default(properties, "id", NULL) : NULL;
    if (!disk)
        return;
    g_autoptr(GError) error = NULL;
    if (completed && !process_refresh_disks(w->dom, &error))
        g_warning("domain %s: disk '%s' was pulled, but its chain cannot be recorded: %s", w->dom->name, disk,
                  error->message);
    if (!completed)
        g_message("domain %s: %s", w->dom->name,
                  json_object_get_string_member_with_default(properties, "error", "a block job failed"));
    g_mutex_lock(&w->dom->lock);
    struct domain_block_job *job = run_is_current_locked(w) ? domain_block_job_find(w->dom, disk) : NULL;
    if (job) {
        event_queue_block_job(w->drv->events, w->dom, job->path, job->disk, job->type,
                              completed ? VIR_DOMAIN_BLOCK_JOB_COMPLETED : VIR_DOMAIN_BLOCK_JOB_FAILED);
        domain_block_job_remove(w->dom, disk);
    }
    g_mutex_unlock(&w->dom->lock);
}

/* An active commit's pull is done (the disk on its overlay over the image,
 * which the record learns): READY, which virsh --wait and --pivot wait for. */
static void on_disk_job_ready(struct watcher *w, JsonObject *properties)
{
    const char *disk = properties ? json_object_get_string_member_with_default(properties, "id", NULL) : NULL;
    g_autoptr(GError) error = NULL;
    if (disk && !process_refresh_disks(w->dom, &error))
        g_warning("domain %s: disk '%s' was pulled for its commit, but its chain cannot be recorded: %s",
                  w->dom->name, disk, error->message);
    g_mutex_lock(&w->dom->lock);
    struct domain_block_job *job = disk && run_is_current_locked(w) ? domain_block_job_find(w->dom, disk) : NULL;
    if (job) {
        job->ready = true;
        event_queue_block_job(w->drv->events, w->dom, job->path, job->disk, job->type, VIR_DOMAIN_BLOCK_JOB_READY);
    }
    g_mutex_unlock(&w->dom->lock);
}

/* The event's "properties" object, NULL when it has none (null). */
static JsonObject *event_properties(JsonObject *event)
{
    JsonNode *node = json_object_get_member(event, "properties");
    return node && JSON_NODE_HOLDS_OBJECT(node) ? json_node_get_object(node) : NULL;
}

/* Returns true when the watcher is done. */
/* An event is a line of a few hundred bytes; the shim is not trusted to
 * nest or grow sanely. */
#define EVENT_MAX_BYTES (64u << 10)

static bool handle_line(struct watcher *w, const char *line)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    if (!*line)
        return false;
    if (!bounded_json_load_data(parser, line, strlen(line), EVENT_MAX_BYTES, NULL) ||
        !JSON_NODE_HOLDS_OBJECT(json_parser_get_root(parser))) {
        g_message("domain %s: ignoring a malformed event line: %.120s", w->dom->name, line);
        return false;
    }
    JsonObject *obj = json_node_get_object(json_parser_get_root(parser));
    const char *source = json_object_get_string_member_with_default(obj, "source", "");
    const char *event = json_object_get_string_member_with_default(obj, "event", "");
    if (g_str_equal(source, "guest") && g_str_equal(event, "ready"))
        on_guest_ready(w);
    else if (g_str_equal(source, "vm") && g_str_equal(event, "workset-recorded"))
        process_keep_workset(w->drv, w->dom, w->run);
    else if (g_str_equal(source, "vm") && g_str_equal(event, "shutdown"))
        return on_vm_shutdown(w, event_properties(obj));
    else if (g_str_equal(source, "vm") && g_str_equal(event, "rebooted"))
        return on_vm_rebooted(w);
    else if (g_str_equal(source, "disk") && g_str_equal(event, "job-ready"))
        on_disk_job_ready(w, event_properties(obj));
    else if (g_str_equal(source, "disk") && (g_str_equal(event, "job-completed") || g_str_equal(event, "job-failed")))
        on_disk_job_end(w, event_properties(obj), g_str_equal(event, "job-completed"));
    return false;
}

static bool read_events(struct watcher *w)
{
    char buf[4096];
    for (;;) {
        ssize_t n = read(w->run->fifo_fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        g_string_append_len(w->pending, buf, n);
    }
    char *nl;
    while ((nl = memchr(w->pending->str, '\n', w->pending->len))) {
        g_autofree char *line = g_strndup(w->pending->str, nl - w->pending->str);
        g_string_erase(w->pending, 0, nl - w->pending->str + 1);
        if (handle_line(w, g_strstrip(line)))
            return true;
    }
    if (w->pending->len > 1024 * 1024)
        g_string_truncate(w->pending, 0);   /* no newline in 1 MiB: not our format */
    return false;
}

static gpointer watch_thread(gpointer data)
{
    struct watcher *w = data;
    for (;;) {
        struct pollfd fds[3] = {
            {.fd = w->run->fifo_fd, .events = POLLIN},
            {.fd = w->run->pidfd, .events = POLLIN},
            {.fd = w->run->wake_fd, .events = POLLIN},
        };
        if (poll(fds, 3, -1) < 0) {
            if (errno == EINTR)
                continue;
            g_warning("domain %s: poll: %s", w->dom->name, g_strerror(errno));
            break;
        }
        if (fds[2].revents)
            break;
        /* Events first: a shutdown event explains an exit seen at once. */
        if ((fds[0].revents & POLLIN) && read_events(w))
            break;
        if (fds[1].revents) {
            read_events(w);
            on_shim_exit(w);
            break;
        }
    }
    g_string_free(w->pending, TRUE);
    domain_run_unref(w->run);
    vsnap_domain_unref(w->dom);
    g_free(w);
    return NULL;
}

void shim_events_watch(struct vsnap_driver *drv, struct vsnap_domain *dom,
                       struct domain_run *run)
{
    struct watcher *w = g_new0(struct watcher, 1);
    w->drv = drv;
    w->dom = vsnap_domain_ref(dom);
    w->run = domain_run_ref(run);
    w->pending = g_string_new(NULL);
    g_autofree char *name = g_strdup_printf("watch-%.8s", dom->name);
    g_thread_unref(g_thread_new(name, watch_thread, w));
}
