/* Block jobs on a running disk: see disk-job.h. */
#define G_LOG_DOMAIN "vsnap-shim"

#include "disk-job.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "block/blk-backend.h"
#include "sandbox/syscall-filter.h"

#define STEP_BLOCKS 256u   /* blocks looked at per step: 1 MiB */
#define BLOCK 4096u

struct disk_job {
    char *id;
    enum disk_job_kind kind;
    int image_fd;
    char *target;             /* a copy's target image */
    struct blk_backend *overlay;
    GMainContext *ctx;
    disk_job_done_func done;
    void *data;
    GThread *thread;

    GMutex lock;              /* everything below */
    GCond cond;               /* cancel, bandwidth */
    bool cancel;
    bool finished;            /* the thread's last step is done */
    guint done_source;        /* the done callback queued on ctx, 0: none */
    uint64_t next, end;       /* blocks */
    uint64_t copied;          /* blocks */
    uint64_t bandwidth;
    int64_t paced_from_us;    /* monotonic: when the current bandwidth began */
    uint64_t paced_blocks;    /* copied since then */
    enum disk_job_end result;
    bool ready;               /* a commit's copy is done */
    char *error;
    struct blk_backend *old_chain;
};

/* Hold the thread back until the copy is inside bandwidth (or cancelled). */
static void pace(struct disk_job *job)
{
    g_mutex_lock(&job->lock);
    while (!job->cancel && job->bandwidth) {
        int64_t due = job->paced_from_us + (int64_t)(job->paced_blocks * BLOCK * G_USEC_PER_SEC / job->bandwidth);
        if (g_get_monotonic_time() >= due)
            break;
        g_cond_wait_until(&job->cond, &job->lock, due);
    }
    g_mutex_unlock(&job->lock);
}

static gboolean run_done(gpointer data)
{
    struct disk_job *job = data;
    g_mutex_lock(&job->lock);
    job->done_source = 0;
    g_mutex_unlock(&job->lock);
    job->done(job, job->result, job->error, g_steal_pointer(&job->old_chain), job->data);
    return G_SOURCE_REMOVE;
}

static void finish(struct disk_job *job, int err)
{
    struct blk_backend *old = NULL;
    if (!err && job->kind != DISK_JOB_COPY)
        old = blk_overlay_detach_chain(job->overlay, &err);
    g_mutex_lock(&job->lock);
    job->finished = true;
    job->ready = !err && job->kind != DISK_JOB_PULL;
    job->result = err ? DISK_JOB_FAILED : job->ready ? DISK_JOB_READY : DISK_JOB_COMPLETED;
    if (err)
        job->error = g_strdup_printf("block %s of disk %s failed: %s", disk_job_kind(job), job->id,
                                     g_strerror(-err));
    job->old_chain = old;
    GSource *source = g_idle_source_new();
    g_source_set_callback(source, run_done, job, NULL);
    job->done_source = g_source_attach(source, job->ctx);
    g_source_unref(source);
    g_mutex_unlock(&job->lock);
}

/* A pull's or commit's step (blocks looked at: next; copied), or a copy's
 * (next: the blocks the target holds; every one counts as copied). */
static int step(struct disk_job *job, uint64_t *next, uint64_t *copied)
{
    if (job->kind != DISK_JOB_COPY)
        return blk_overlay_pull_step(job->overlay, next, STEP_BLOCKS, copied);
    uint64_t to = 0;
    int err = blk_mirror_step(job->overlay, (uint64_t)STEP_BLOCKS * BLOCK, &to);
    uint64_t blocks = (to + BLOCK - 1) / BLOCK;
    *copied = blocks - MIN(*next, blocks);
    *next = blocks;
    return err;
}

static gpointer job_thread(gpointer data)
{
    struct disk_job *job = data;
    sandbox_seccomp_enter_thread(SANDBOX_THREAD_DISK);
    int err = 0;
    for (;;) {
        pace(job);
        g_mutex_lock(&job->lock);
        bool stop = job->cancel || job->next >= job->end;
        uint64_t next = job->next;
        g_mutex_unlock(&job->lock);
        if (stop)
            break;
        uint64_t copied = 0;
        err = step(job, &next, &copied);
        g_mutex_lock(&job->lock);
        job->next = next;
        job->copied += copied;
        job->paced_blocks += copied;
        g_mutex_unlock(&job->lock);
        if (err)
            break;
    }
    g_mutex_lock(&job->lock);
    bool cancelled = job->cancel;
    g_mutex_unlock(&job->lock);
    if (!cancelled)
        finish(job, err);
    return NULL;
}

struct disk_job *disk_job_start(GMainContext *ctx, const char *id, enum disk_job_kind kind,
                                struct blk_backend *overlay, int image_fd, uint64_t bandwidth,
                                disk_job_done_func done, void *data)
{
    struct disk_job *job = g_new0(struct disk_job, 1);
    job->id = g_strdup(id);
    job->kind = kind;
    job->image_fd = image_fd;
    job->overlay = overlay;
    job->ctx = g_main_context_ref(ctx);
    job->done = done;
    job->data = data;
    g_mutex_init(&job->lock);
    g_cond_init(&job->cond);
    job->end = (overlay->capacity + BLOCK - 1) / BLOCK;
    job->bandwidth = bandwidth;
    job->paced_from_us = g_get_monotonic_time();
    job->thread = g_thread_new("disk-job", job_thread, job);
    return job;
}

const char *disk_job_disk(const struct disk_job *job)
{
    return job->id;
}

enum disk_job_kind disk_job_kind_of(const struct disk_job *job)
{
    return job->kind;
}

const char *disk_job_kind(const struct disk_job *job)
{
    return job->kind == DISK_JOB_PULL ? "pull" : job->kind == DISK_JOB_COMMIT ? "commit" : "copy";
}

void disk_job_set_target(struct disk_job *job, const char *path)
{
    g_free(job->target);
    job->target = g_strdup(path);
}

const char *disk_job_target(const struct disk_job *job)
{
    return job->target;
}

int disk_job_image_fd(const struct disk_job *job)
{
    return job->image_fd;
}

bool disk_job_ready(struct disk_job *job)
{
    g_mutex_lock(&job->lock);
    bool ready = job->ready;
    g_mutex_unlock(&job->lock);
    return ready;
}

void disk_job_get_info(struct disk_job *job, struct disk_job_info *out)
{
    g_mutex_lock(&job->lock);
    *out = (struct disk_job_info){
        .kind = disk_job_kind(job),
        .ready = job->ready,
        .cur = MIN(job->next * BLOCK, job->overlay->capacity),
        .end = job->overlay->capacity,
        .copied = job->copied * BLOCK,
        .bandwidth = job->bandwidth,
    };
    g_mutex_unlock(&job->lock);
}

bool disk_job_finished(struct disk_job *job)
{
    g_mutex_lock(&job->lock);
    bool finished = job->finished;
    g_mutex_unlock(&job->lock);
    return finished;
}

void disk_job_set_bandwidth(struct disk_job *job, uint64_t bandwidth)
{
    g_mutex_lock(&job->lock);
    job->bandwidth = bandwidth;
    job->paced_from_us = g_get_monotonic_time();
    job->paced_blocks = 0;
    g_cond_broadcast(&job->cond);
    g_mutex_unlock(&job->lock);
}

void disk_job_free(struct disk_job *job)
{
    if (!job)
        return;
    g_mutex_lock(&job->lock);
    job->cancel = true;
    g_cond_broadcast(&job->cond);
    g_mutex_unlock(&job->lock);
    g_thread_join(job->thread);
    if (job->done_source) {
        GSource *source = g_main_context_find_source_by_id(job->ctx, job->done_source);
        if (source)
            g_source_destroy(source);
    }
    blk_backend_close(job->old_chain);
    if (job->image_fd >= 0)
        close(job->image_fd);
    g_main_context_unref(job->ctx);
    g_cond_clear(&job->cond);
    g_mutex_clear(&job->lock);
    g_free(job->error);
    g_free(job->target);
    g_free(job->id);
    g_free(job);
}
