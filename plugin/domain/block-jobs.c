#include "domain/block-jobs.h"

#include <glib/gstdio.h>
#include <libvirt/libvirt.h>

#include "domain/domain.h"
#include "util/virt-error.h"

static void block_job_free(struct domain_block_job *job)
{
    g_free(job->disk);
    g_free(job->path);
    g_free(job->dest);
    g_free(job);
}

static GPtrArray *jobs_of(struct vsnap_domain *dom)
{
    if (!dom->block_jobs)
        dom->block_jobs = g_ptr_array_new_with_free_func((GDestroyNotify)block_job_free);
    return dom->block_jobs;
}

struct domain_block_job *domain_block_job_find(struct vsnap_domain *dom, const char *disk)
{
    GPtrArray *jobs = jobs_of(dom);
    for (guint i = 0; i < jobs->len; i++) {
        struct domain_block_job *job = jobs->pdata[i];
        if (g_str_equal(job->disk, disk))
            return job;
    }
    return NULL;
}

bool domain_block_job_add(struct vsnap_domain *dom, const char *disk, const char *path, int type, GError **error)
{
    if (domain_block_job_find(dom, disk)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_INVALID, "disk '%s' already in active block job",
                    disk);
        return false;
    }
    struct domain_block_job *job = g_new0(struct domain_block_job, 1);
    job->disk = g_strdup(disk);
    job->path = g_strdup(path);
    job->type = type;
    g_ptr_array_add(jobs_of(dom), job);
    return true;
}

void domain_block_job_remove(struct vsnap_domain *dom, const char *disk)
{
    struct domain_block_job *job = domain_block_job_find(dom, disk);
    if (job)
        g_ptr_array_remove(jobs_of(dom), job);
}

struct domain_block_job *domain_block_job_any(struct vsnap_domain *dom)
{
    GPtrArray *jobs = jobs_of(dom);
    return jobs->len ? jobs->pdata[0] : NULL;
}

void domain_block_jobs_clear(struct vsnap_domain *dom)
{
    /* A copy cut short leaves no partial destination. */
    for (guint i = 0; i < jobs_of(dom)->len; i++) {
        struct domain_block_job *job = jobs_of(dom)->pdata[i];
        if (job->dest && !job->ready)
            g_unlink(job->dest);
    }
    g_ptr_array_set_size(jobs_of(dom), 0);
}

const char *domain_block_job_type_name(int type)
{
    switch (type) {
    case VIR_DOMAIN_BLOCK_JOB_TYPE_PULL: return "pull";
    case VIR_DOMAIN_BLOCK_JOB_TYPE_COPY: return "copy";
    case VIR_DOMAIN_BLOCK_JOB_TYPE_COMMIT: return "commit";
    case VIR_DOMAIN_BLOCK_JOB_TYPE_ACTIVE_COMMIT: return "active commit";
    default: return "block";
    }
}
