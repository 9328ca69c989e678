#include "managed-image.h"

#include <errno.h>
#include <glib/gstdio.h>

#include "util/atomic-file.h"
#include "domain/save-area.h"
#include "util/virt-error.h"

#define INFO_FILE "managed-save.ini"
#define DOMAIN_FILE "domain.xml"

char *managed_image_dir(const char *state_dir, const char *domain)
{
    return save_area_managed_dir(state_dir, domain);
}

char *managed_image_tmp_dir(const char *state_dir, const char *domain)
{
    return save_area_managed_tmp_dir(state_dir, domain);
}

static bool holds_image(const char *dir)
{
    g_autofree char *info = g_build_filename(dir, INFO_FILE, NULL);
    return g_file_test(info, G_FILE_TEST_EXISTS);
}

bool managed_image_exists(const char *state_dir, const char *domain)
{
    g_autofree char *dir = managed_image_dir(state_dir, domain);
    return holds_image(dir);
}

bool managed_image_write_info(const char *dir, const char *domain_xml, bool paused,
                              GError **error)
{
    g_autofree char *xml_path = g_build_filename(dir, DOMAIN_FILE, NULL);
    g_autofree char *info_path = g_build_filename(dir, INFO_FILE, NULL);
    g_autofree char *info = g_strdup_printf("[image]\npaused=%s\n", paused ? "true" : "false");
    return atomic_file_write(xml_path, domain_xml, error) &&
           atomic_file_write(info_path, info, error);
}

bool managed_image_read_info(const char *dir, char **domain_xml, bool *paused, GError **error)
{
    g_autofree char *xml_path = g_build_filename(dir, DOMAIN_FILE, NULL);
    g_autofree char *info_path = g_build_filename(dir, INFO_FILE, NULL);
    g_autoptr(GKeyFile) kf = g_key_file_new();
    g_autoptr(GError) local = NULL;
    g_autofree char *xml = NULL;
    if (!g_key_file_load_from_file(kf, info_path, 0, &local) ||
        !g_file_get_contents(xml_path, &xml, NULL, &local)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED, "%s", local->message);
        return false;
    }
    *paused = g_key_file_get_boolean(kf, "image", "paused", &local);
    if (local) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED, "%s: %s", info_path,
                    local->message);
        return false;
    }
    *domain_xml = g_steal_pointer(&xml);
    return true;
}

