/* The JSON builder (common/json/vjson.h): each call writes exactly what the
 * json-glib pair it replaces wrote, byte for byte, and misuse is a critical. */
#include "json/vjson.h"

#include <string.h>

/* The same document through json-glib's own calls, the way vsnap wrote it. */
static char *by_hand(bool pretty)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "kernel");
    json_builder_add_string_value(b, "/boot/vmlinuz \"x\"\n");
    json_builder_set_member_name(b, "initramfs");
    json_builder_add_null_value(b);
    json_builder_set_member_name(b, "size");
    json_builder_add_int_value(b, -(G_GINT64_CONSTANT(1) << 40));
    json_builder_set_member_name(b, "max");
    json_builder_add_int_value(b, G_MAXINT64);
    json_builder_set_member_name(b, "hugepages");
    json_builder_add_boolean_value(b, TRUE);
    json_builder_set_member_name(b, "none");
    json_builder_add_null_value(b);
    json_builder_set_member_name(b, "efer");
    json_builder_add_string_value(b, "0xffffffffffffffff");
    json_builder_set_member_name(b, "regs");
    json_builder_add_string_value(b, "AAEC/w==");
    json_builder_set_member_name(b, "chain");
    json_builder_begin_array(b);
    json_builder_add_string_value(b, "a");
    json_builder_add_string_value(b, "b");
    json_builder_end_array(b);
    json_builder_set_member_name(b, "disks");
    json_builder_begin_array(b);
    json_builder_begin_object(b);
    json_builder_set_member_name(b, "id");
    json_builder_add_string_value(b, "vda");
    json_builder_end_object(b);
    json_builder_add_int_value(b, -1);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "empty");
    json_builder_begin_array(b);
    json_builder_end_array(b);
    json_builder_set_member_name(b, "absent");
    json_builder_add_null_value(b);
    json_builder_end_object(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    return json_to_string(root, pretty);
}

static char *with_vjson(bool pretty)
{
    static const uint8_t regs[] = {0, 1, 2, 255};
    char *chain[] = {"a", "b", NULL};
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_str(b, "kernel", "/boot/vmlinuz \"x\"\n");
    vjson_str(b, "initramfs", NULL);
    vjson_str_opt(b, "cmdline", NULL);
    vjson_int(b, "size", -(G_GINT64_CONSTANT(1) << 40));
    vjson_uint(b, "max", G_MAXINT64);
    vjson_bool(b, "hugepages", true);
    vjson_null(b, "none");
    vjson_hex64(b, "efer", G_MAXUINT64);
    vjson_base64(b, "regs", regs, sizeof regs);
    vjson_strv(b, "chain", chain);
    vjson_array_begin(b, "disks");
    vjson_object_begin(b, NULL);
    vjson_str(b, "id", "vda");
    vjson_str_opt(b, "serial", NULL);
    vjson_object_end(b);
    vjson_int(b, NULL, -1);
    vjson_array_end(b);
    char *none[] = {NULL};
    vjson_strv(b, "empty", none);
    vjson_strv(b, "absent", NULL);
    vjson_object_end(b);
    return vjson_finish(b, pretty);
}

static void test_same_bytes(void)
{
    for (int pretty = 0; pretty <= 1; pretty++) {
        g_autofree char *expected = by_hand(pretty);
        g_autofree char *got = with_vjson(pretty);
        g_assert_cmpstr(got, ==, expected);
    }
    g_autofree char *compact = with_vjson(false);
    g_assert_nonnull(strstr(compact, "\"efer\":\"0xffffffffffffffff\",\"regs\":\"AAEC/w==\""));
    g_assert_null(strstr(compact, "cmdline"));
    g_assert_null(strstr(compact, "serial"));
}

/* A node from elsewhere (a parsed body) goes in as it is. */
static void test_node(void)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_assert_true(json_parser_load_from_data(parser, "{\"a\":[1,2]}", -1, NULL));
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_node(b, "inner", json_node_copy(json_parser_get_root(parser)));
    vjson_object_end(b);
    g_autofree char *text = vjson_finish(b, false);
    g_assert_cmpstr(text, ==, "{\"inner\":{\"a\":[1,2]}}");
}

/* Mistakes the compiler cannot see are criticals (fatal in a test). */
static void test_uint_beyond_int64(void)
{
    if (g_test_subprocess()) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        vjson_object_begin(b, NULL);
        vjson_uint(b, "bytes", (uint64_t)G_MAXINT64 + 1);
        return;
    }
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_failed();
    g_test_trap_assert_stderr("*member \"bytes\"*does not fit a JSON integer*");
}

static void test_member_outside_object(void)
{
    if (g_test_subprocess()) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        vjson_array_begin(b, NULL);
        vjson_str(b, "id", "vda");
        return;
    }
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_failed();
    g_test_trap_assert_stderr("*CRITICAL*");
}

static void test_nameless_member(void)
{
    if (g_test_subprocess()) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        vjson_object_begin(b, NULL);
        vjson_int(b, NULL, 1);
        return;
    }
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_failed();
    g_test_trap_assert_stderr("*CRITICAL*");
}

static void test_unfinished_document(void)
{
    if (g_test_subprocess()) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        vjson_object_begin(b, NULL);
        g_free(vjson_finish(b, false));
        return;
    }
    g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
    g_test_trap_assert_failed();
    g_test_trap_assert_stderr("*CRITICAL*");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/vjson/same-bytes", test_same_bytes);
    g_test_add_func("/vjson/node", test_node);
    g_test_add_func("/vjson/uint-beyond-int64", test_uint_beyond_int64);
    g_test_add_func("/vjson/member-outside-object", test_member_outside_object);
    g_test_add_func("/vjson/nameless-member", test_nameless_member);
    g_test_add_func("/vjson/unfinished-document", test_unfinished_document);
    return g_test_run();
}
