/* A manifest comes from a store: another host's, or anybody's on the way.
 * manifest_parse refuses what would crash or mislead the reader. */
#include "store/manifest.h"
#include "store/store.h"

#include <string.h>

static struct manifest *parse_text(const char *text, GError **error)
{
    g_autoptr(GBytes) bytes = g_bytes_new(text, strlen(text));
    return manifest_parse(bytes, "manifests/x.json", error);
}

/* 1 MiB of '[' used to overflow json-glib's recursion (SIGSEGV) in whatever
 * read the manifest: vsnap-store, the daemon, a shim restoring lazily. */
static void test_deep_nesting_is_refused(void)
{
    size_t depth = 1u << 20;
    g_autofree char *deep = g_malloc(2 * depth + 16);
    char *p = stpcpy(deep, "{\"id\": ");
    memset(p, '[', depth);
    memset(p + depth, ']', depth);
    strcpy(p + 2 * depth, "}");
    g_autoptr(GError) error = NULL;
    g_assert_null(parse_text(deep, &error));
    g_assert_error(error, STORE_ERROR, STORE_ERROR_CORRUPT);
    g_assert_nonnull(strstr(error->message, "manifests/x.json"));
    g_assert_nonnull(strstr(error->message, "nested"));
}

/* What a store writes reads back. */
static void test_round_trip(void)
{
    g_autoptr(manifest) m = manifest_new();
    m->id = g_strdup("6c1d9e0b-8d0a-4b8e-9a51-0d5f2b1f3c77");
    m->created = g_strdup("2026-12-01T00:00:00Z");
    g_autoptr(GBytes) json = manifest_to_json(m);
    g_autoptr(GError) error = NULL;
    g_autoptr(manifest) back = manifest_parse(json, "manifests/x.json", &error);
    g_assert_no_error(error);
    g_assert_cmpstr(back->id, ==, m->id);
}

/* disk_parents: ids, read back in order; anything else is refused by name. */
static void test_disk_parents(void)
{
    g_autoptr(manifest) m = manifest_new();
    m->id = g_strdup("6c1d9e0b-8d0a-4b8e-9a51-0d5f2b1f3c77");
    g_ptr_array_add(m->disk_parents, g_strdup("0d5f2b1f-3c77-4b8e-9a51-6c1d9e0b8d0a"));
    g_ptr_array_add(m->disk_parents, g_strdup("9a510d5f-2b1f-4b8e-8d0a-3c776c1d9e0b"));
    g_autoptr(GBytes) json = manifest_to_json(m);
    g_autoptr(GError) error = NULL;
    g_autoptr(manifest) back = manifest_parse(json, "manifests/x.json", &error);
    g_assert_no_error(error);
    g_assert_cmpuint(back->disk_parents->len, ==, 2);
    g_assert_cmpstr(back->disk_parents->pdata[1], ==, "9a510d5f-2b1f-4b8e-8d0a-3c776c1d9e0b");
    static const char *const bad[] = { "[\"../x\"]", "[1]", "\"x\"", "[[\"a\"]]" };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autofree char *text = g_strdup_printf("{\"vsnap_manifest_version\": 1, \"id\": \"a\", "
                                                "\"disk_parents\": %s, \"files\": []}", bad[i]);
        g_autoptr(GError) e = NULL;
        g_assert_null(parse_text(text, &e));
        g_assert_nonnull(strstr(e->message, "disk_parents"));
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/manifest/deep-nesting-is-refused", test_deep_nesting_is_refused);
    g_test_add_func("/manifest/round-trip", test_round_trip);
    g_test_add_func("/manifest/disk-parents", test_disk_parents);
    return g_test_run();
}
