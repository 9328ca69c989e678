/* Bounded JSON (common/json/bounded-json.h): the depth, size and plain-JSON
 * checks before json-glib parses, and files read without blocking or mapping. */
#include "json/bounded-json.h"

#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *nested(unsigned depth, const char *open, const char *inner, const char *close)
{
    GString *s = g_string_new(NULL);
    for (unsigned i = 0; i < depth; i++)
        g_string_append(s, open);
    g_string_append(s, inner);
    for (unsigned i = 0; i < depth; i++)
        g_string_append(s, close);
    return g_string_free(s, FALSE);
}

static bool check(const char *text, GError **error)
{
    return bounded_json_check(text, strlen(text), 1u << 20, error);
}

static void test_depth(void)
{
    g_autofree char *ok = nested(BOUNDED_JSON_MAX_DEPTH, "[", "1", "]");
    g_autofree char *deep = nested(BOUNDED_JSON_MAX_DEPTH + 1, "[", "1", "]");
    g_autofree char *objects = nested(BOUNDED_JSON_MAX_DEPTH + 1, "{\"a\":", "1", "}");
    g_autofree char *huge = nested(100000, "[", "", "]");
    g_autoptr(GError) error = NULL;

    g_assert_true(check(ok, NULL));
    g_assert_false(check(deep, &error));
    g_assert_error(error, JSON_PARSER_ERROR, JSON_PARSER_ERROR_INVALID_DATA);
    g_assert_nonnull(strstr(error->message, "nested more than 128 levels"));
    g_assert_false(check(objects, NULL));
    /* What crashed the shim: it is refused, and json-glib never sees it. */
    g_autoptr(JsonParser) parser = json_parser_new();
    g_assert_false(bounded_json_load_data(parser, huge, strlen(huge), 1u << 20, NULL));
    /* Siblings do not add up: depth is nesting, not count. */
    GString *wide = g_string_new("[");
    for (unsigned i = 0; i < 1000; i++)
        g_string_append(wide, i ? ",[[]]" : "[[]]");
    g_string_append(wide, "]");
    g_assert_true(check(wide->str, NULL));
    g_string_free(wide, TRUE);
}

/* Brackets inside strings are text, and escaped quotes do not end a string. */
static void test_strings(void)
{
    g_autofree char *brackets = nested(1000, "[", "", "]");
    g_autofree char *in_string = g_strdup_printf("{\"a\": \"%s\", \"b\": \"\\\"[[[\\\\\"}", brackets);
    g_assert_true(check(in_string, NULL));
    g_autoptr(JsonParser) parser = json_parser_new();
    g_assert_true(bounded_json_load_data(parser, in_string, strlen(in_string), 1u << 20, NULL));
    g_assert_true(check("[\"\\u00e9\\n\\t\\/\", \"\xc3\xa9\", -1.5e+3, true, false, null]", NULL));
}

static void test_not_plain(void)
{
    static const char *const refused[] = {
        "{\"a\": 1} # [[[",       /* json-glib's comments: brackets in them do not count */
        "{\"a\": /* [ */ 1}",
        "{'a': 1}",               /* single quotes */
        "[\"a\x01\"]",            /* a raw control character in a string */
        "[\"\\q\"]",              /* an escape JSON does not have */
        "[\"\\u12\"]",            /* \u without four hex digits */
        "[\"never ends]",
        "[1]\xc3\xa9",            /* UTF-8 outside a string */
    };
    for (size_t i = 0; i < G_N_ELEMENTS(refused); i++) {
        g_autoptr(GError) error = NULL;
        g_test_message("%s", refused[i]);
        g_assert_false(check(refused[i], &error));
        g_assert_error(error, JSON_PARSER_ERROR, JSON_PARSER_ERROR_INVALID_DATA);
    }
    /* A NUL inside the given length is not JSON either. */
    g_assert_false(bounded_json_check("[1]\0[", 5, 100, NULL));
}

static void test_size(void)
{
    g_autoptr(GError) error = NULL;
    g_assert_true(bounded_json_check("[1, 2]", 6, 6, NULL));
    g_assert_false(bounded_json_check("[1, 2]", 6, 5, &error));
    g_assert_nonnull(strstr(error->message, "more than the 5"));
    g_autoptr(JsonParser) parser = json_parser_new();
    g_assert_true(bounded_json_load_data(parser, NULL, 0, 10, NULL));
    g_assert_null(json_parser_get_root(parser));
}

static char *write_temp(const char *dir, const char *name, const char *text)
{
    char *path = g_build_filename(dir, name, NULL);
    g_assert_true(g_file_set_contents(path, text, -1, NULL));
    return path;
}

static void test_files(void)
{
    g_autofree char *dir = g_dir_make_tmp("vsnap-bounded-json-XXXXXX", NULL);
    g_autofree char *good = write_temp(dir, "good.json", "{\"a\": [1, 2, 3]}");
    g_autofree char *deep_text = nested(200, "[", "", "]");
    g_autofree char *deep = write_temp(dir, "deep.json", deep_text);
    g_autofree char *fifo = g_build_filename(dir, "fifo", NULL);
    g_autofree char *missing = g_build_filename(dir, "missing", NULL);
    g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);

    g_autoptr(JsonParser) parser = json_parser_new();
    g_assert_true(bounded_json_load_file(parser, good, 100, NULL));
    g_assert_cmpint(json_array_get_length(json_object_get_array_member(
                        json_node_get_object(json_parser_get_root(parser)), "a")), ==, 3);

    g_autoptr(GError) e1 = NULL, e2 = NULL, e3 = NULL, e4 = NULL, e5 = NULL;
    g_assert_false(bounded_json_load_file(parser, good, 10, &e1));
    g_assert_error(e1, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE);
    g_assert_false(bounded_json_load_file(parser, deep, 1000, &e2));
    g_assert_error(e2, JSON_PARSER_ERROR, JSON_PARSER_ERROR_INVALID_DATA);
    /* A FIFO nobody writes to would block a reader forever: refused at once. */
    g_assert_false(bounded_json_load_file(parser, fifo, 1000, &e3));
    g_assert_error(e3, G_IO_ERROR, G_IO_ERROR_NOT_REGULAR_FILE);
    g_assert_false(bounded_json_load_file(parser, missing, 1000, &e4));
    g_assert_error(e4, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
    g_assert_false(bounded_json_load_file(parser, dir, 1000, &e5));
    g_assert_error(e5, G_IO_ERROR, G_IO_ERROR_NOT_REGULAR_FILE);

    g_unlink(good);
    g_unlink(deep);
    g_unlink(fifo);
    g_rmdir(dir);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/bounded-json/depth", test_depth);
    g_test_add_func("/bounded-json/strings", test_strings);
    g_test_add_func("/bounded-json/not-plain", test_not_plain);
    g_test_add_func("/bounded-json/size", test_size);
    g_test_add_func("/bounded-json/files", test_files);
    return g_test_run();
}
