#include "conf-test.h"

#include <stdarg.h>

#include "conf/xml-util.h"

void conf_test_init(int *argc, char ***argv, const char **schema_dir, const char **examples_dir)
{
    g_test_init(argc, argv, NULL);
    *schema_dir = g_getenv("VSNAP_SCHEMA_DIR");
    *examples_dir = g_getenv("VSNAP_EXAMPLES_DIR");
    if (!*schema_dir || !*examples_dir)
        g_error("VSNAP_SCHEMA_DIR and VSNAP_EXAMPLES_DIR must be set (meson test sets them)");
}

char *conf_test_read(const char *first_part, ...)
{
    va_list parts;
    va_start(parts, first_part);
    g_autofree char *path = g_build_filename_valist(first_part, &parts);
    va_end(parts);
    char *text = NULL;
    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    return text;
}

void conf_test_check_libvirt_schema(const char *xml, const char *what, const char *rng)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(xmlDoc) doc = conf_xml_read(xml, what, &error);
    g_assert_no_error(error);
    if (!conf_xml_validate(doc, LIBVIRT_SCHEMAS, rng, &error))
        g_error("not valid for libvirt's %s: %s\n%s", rng, error->message, xml);
}
