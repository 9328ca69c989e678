#include "domain/save-area.h"

#include <errno.h>
#include <glib/gstdio.h>
#include <string.h>

#include "snapshot/directory.h"

#define AREAS "saves"
#define MANAGED "managed"
#define MANAGED_TMP "managed.tmp"
#define WORK_PREFIX "work-"


char *save_area_dir(const char *state_dir, const char *domain)
{
    return g_build_filename(state_dir, AREAS, domain, NULL);
}

char *save_area_managed_dir(const char *state_dir, const char *domain)
{
    return g_build_filename(state_dir, AREAS, domain, MANAGED, NULL);
}

char *save_area_managed_tmp_dir(const char *state_dir, const char *domain)
{
    return g_build_filename(state_dir, AREAS, domain, MANAGED_TMP, NULL);
}

char *save_area_new_work_dir(const char *state_dir, const char *domain)
{
    g_autofree char *id = g_uuid_string_random();
    g_autofree char *name = g_strconcat(WORK_PREFIX, id, NULL);
    return g_build_filename(state_dir, AREAS, domain, name, NULL);
}

static void remove_logged(const char *path, const char *why)
{
    g_autoptr(GError) error = NULL;
    g_message("removing %s, left by %s", path, why);
    if (!snap_dir_remove(path, &error))
        g_warning("%s", error->message);
}

void save_area_remove_leftovers(const char *state_dir, const char *domain)
{
    g_autofree char *area = save_area_dir(state_dir, domain);
    g_autoptr(GDir) d = g_dir_open(area, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d))) {
        if (g_str_equal(name, MANAGED))
            continue;
        g_autofree char *path = g_build_filename(area, name, NULL);
        remove_logged(path, "a save or managed save that did not finish");
    }
}

void save_area_remove_if_empty(const char *state_dir, const char *domain)
{
    g_autofree char *area = save_area_dir(state_dir, domain);
    if (g_rmdir(area) < 0 && errno != ENOENT && errno != ENOTEMPTY && errno != EEXIST)
        g_warning("cannot remove %s: %s", area, g_strerror(errno));
}

GPtrArray *save_area_list(const char *state_dir)
{
    g_autofree char *root = g_build_filename(state_dir, AREAS, NULL);
    GPtrArray *names = g_ptr_array_new_with_free_func(g_free);
    g_autoptr(GDir) d = g_dir_open(root, 0, NULL);
    const char *name;
    while (d && (name = g_dir_read_name(d)))
        g_ptr_array_add(names, g_strdup(name));
    return names;
}

