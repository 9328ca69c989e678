#include "domain/domain.h"

#include <libvirt/libvirt.h>
#include <string.h>

#include "util/virt-error.h"

struct domain_list {
    GMutex lock;
    GPtrArray *doms;   /* struct vsnap_domain *, one reference each */
    int last_id;
};

void uuid_format(const unsigned char u[16], char out[37])
{
    g_snprintf(out, 37,
               "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
               u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
               u[14], u[15]);
}

struct vsnap_domain *vsnap_domain_new(struct domain_def *def)
{
    struct vsnap_domain *dom = g_new0(struct vsnap_domain, 1);
    dom->refs = 1;
    g_mutex_init(&dom->lock);
    domain_job_lock_init(&dom->job);
    g_cond_init(&dom->changed);
    dom->name = g_strdup(def->name);
    memcpy(dom->uuid, def->uuid, 16);
    dom->def = def;
    dom->id = -1;
    dom->state = VIR_DOMAIN_SHUTOFF;
    dom->reason = VIR_DOMAIN_SHUTOFF_UNKNOWN;
    return dom;
}

struct vsnap_domain *vsnap_domain_ref(struct vsnap_domain *dom)
{
    g_atomic_int_inc(&dom->refs);
    return dom;
}

void vsnap_domain_unref(struct vsnap_domain *dom)
{
    if (!dom || !g_atomic_int_dec_and_test(&dom->refs))
        return;
    g_assert(!dom->run);
    domain_def_free(dom->def);
    domain_def_free(dom->next_def);
    g_free(dom->name);
    g_free(dom->completed);
    if (dom->block_jobs)
        g_ptr_array_unref(dom->block_jobs);
    g_mutex_clear(&dom->lock);
    domain_job_lock_clear(&dom->job);
    g_cond_clear(&dom->changed);
    g_free(dom);
}

bool domain_job_acquire(struct vsnap_domain *dom, const char *what, GError **error)
{
    if (!domain_job_lock_acquire(&dom->job, dom->name, what, error))
        return false;
    g_mutex_lock(&dom->lock);
    bool listed = dom->listed;
    g_mutex_unlock(&dom->lock);
    if (listed)
        return true;
    domain_job_lock_release(&dom->job);
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_NO_DOMAIN,
                "no domain with matching name '%s' (it ended while %s waited for it)", dom->name,
                what);
    return false;
}

bool domain_job_acquire_unlisted(struct vsnap_domain *dom, const char *what)
{
    return domain_job_lock_acquire(&dom->job, dom->name, what, NULL);
}

void domain_job_release(struct vsnap_domain *dom)
{
    domain_job_lock_release(&dom->job);
}

bool vsnap_domain_is_active(struct vsnap_domain *dom)
{
    g_mutex_lock(&dom->lock);
    bool active = dom->run != NULL;
    g_mutex_unlock(&dom->lock);
    return active;
}

void vsnap_domain_set_state_locked(struct vsnap_domain *dom, int state, int reason)
{
    dom->state = state;
    dom->reason = reason;
    g_cond_broadcast(&dom->changed);
}

struct domain_list *domain_list_new(void)
{
    struct domain_list *list = g_new0(struct domain_list, 1);
    g_mutex_init(&list->lock);
    list->doms = g_ptr_array_new_with_free_func((GDestroyNotify)vsnap_domain_unref);
    return list;
}

void domain_list_free(struct domain_list *list)
{
    if (!list)
        return;
    g_ptr_array_free(list->doms, TRUE);
    g_mutex_clear(&list->lock);
    g_free(list);
}

static struct vsnap_domain *find_locked(struct domain_list *list, const unsigned char *uuid,
                                        const char *name, int id)
{
    for (guint i = 0; i < list->doms->len; i++) {
        struct vsnap_domain *dom = list->doms->pdata[i];
        if ((uuid && memcmp(dom->uuid, uuid, 16) == 0) ||
            (name && g_str_equal(dom->name, name)))
            return dom;
        if (id >= 0) {
            g_mutex_lock(&dom->lock);
            bool match = dom->id == id;
            g_mutex_unlock(&dom->lock);
            if (match)
                return dom;
        }
    }
    return NULL;
}

static struct vsnap_domain *find(struct domain_list *list, const unsigned char *uuid,
                                 const char *name, int id)
{
    g_mutex_lock(&list->lock);
    struct vsnap_domain *dom = find_locked(list, uuid, name, id);
    if (dom)
        vsnap_domain_ref(dom);
    g_mutex_unlock(&list->lock);
    return dom;
}

struct vsnap_domain *domain_list_find_uuid(struct domain_list *list, const unsigned char *uuid)
{
    return find(list, uuid, NULL, -1);
}

struct vsnap_domain *domain_list_find_name(struct domain_list *list, const char *name)
{
    return find(list, NULL, name, -1);
}

struct vsnap_domain *domain_list_find_id(struct domain_list *list, int id)
{
    return id < 0 ? NULL : find(list, NULL, NULL, id);
}

/* Under the list lock; readers check `listed` under the domain lock. */
static void set_listed(struct vsnap_domain *dom, bool listed)
{
    g_mutex_lock(&dom->lock);
    dom->listed = listed;
    g_mutex_unlock(&dom->lock);
}

bool domain_list_add(struct domain_list *list, struct vsnap_domain *dom, GError **error)
{
    g_mutex_lock(&list->lock);
    struct vsnap_domain *by_name = find_locked(list, NULL, dom->name, -1);
    struct vsnap_domain *by_uuid = find_locked(list, dom->uuid, NULL, -1);
    char uuid[37];
    uuid_format(dom->uuid, uuid);
    if (by_name || by_uuid) {
        if (by_uuid)
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                        "domain '%s' already exists with uuid %s", by_uuid->name, uuid);
        else
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED,
                        "domain '%s' already exists with a different uuid", dom->name);
        g_mutex_unlock(&list->lock);
        return false;
    }
    set_listed(dom, true);
    g_ptr_array_add(list->doms, vsnap_domain_ref(dom));
    g_mutex_unlock(&list->lock);
    return true;
}

void domain_list_remove(struct domain_list *list, struct vsnap_domain *dom)
{
    g_mutex_lock(&list->lock);
    set_listed(dom, false);
    g_ptr_array_remove(list->doms, dom);
    g_mutex_unlock(&list->lock);
}

static gint by_name(gconstpointer a, gconstpointer b)
{
    const struct vsnap_domain *da = *(const struct vsnap_domain *const *)a;
    const struct vsnap_domain *db = *(const struct vsnap_domain *const *)b;
    return strcmp(da->name, db->name);
}

GPtrArray *domain_list_snapshot(struct domain_list *list)
{
    GPtrArray *out = g_ptr_array_new_with_free_func((GDestroyNotify)vsnap_domain_unref);
    g_mutex_lock(&list->lock);
    for (guint i = 0; i < list->doms->len; i++)
        g_ptr_array_add(out, vsnap_domain_ref(list->doms->pdata[i]));
    g_mutex_unlock(&list->lock);
    g_ptr_array_sort(out, by_name);
    return out;
}

int domain_list_next_id(struct domain_list *list)
{
    g_mutex_lock(&list->lock);
    int id = ++list->last_id;
    g_mutex_unlock(&list->lock);
    return id;
}

void domain_list_note_id(struct domain_list *list, int id)
{
    g_mutex_lock(&list->lock);
    if (id > list->last_id)
        list->last_id = id;
    g_mutex_unlock(&list->lock);
}
