/* The devices' one rate-limited error log (devices/device-log.h): the first
 * DEVICE_LOG_LIMIT of a kind are logged at the level asked for, the last of
 * them says the rest are only counted, and nothing after that is logged. */
#include <glib.h>

#include "devices/device-log.h"

struct logged {
    GLogLevelFlags level;
    char *message;
};

static GArray *seen;

static GLogWriterOutput capture(GLogLevelFlags level, const GLogField *fields, gsize n, gpointer data)
{
    for (gsize i = 0; i < n; i++)
        if (g_strcmp0(fields[i].key, "MESSAGE") == 0) {
            struct logged l = {level & G_LOG_LEVEL_MASK, g_strdup(fields[i].value)};
            g_array_append_val(seen, l);
        }
    return G_LOG_WRITER_HANDLED;
}

static void clear_logged(void *p)
{
    g_free(((struct logged *)p)->message);
}

static void test_first_ones_only(void)
{
    g_array_set_size(seen, 0);
    for (uint64_t n = 1; n <= 3 * DEVICE_LOG_LIMIT; n++)
        device_log_limited(G_LOG_LEVEL_MESSAGE, n, "guest errors", "net %s: bad chain %u", "net0", (unsigned)n);
    g_assert_cmpuint(seen->len, ==, DEVICE_LOG_LIMIT);
    struct logged *first = &g_array_index(seen, struct logged, 0);
    struct logged *last = &g_array_index(seen, struct logged, DEVICE_LOG_LIMIT - 1);
    g_assert_cmpint(first->level, ==, G_LOG_LEVEL_MESSAGE);
    g_assert_cmpstr(first->message, ==, "net net0: bad chain 1");
    g_assert_cmpstr(last->message, ==, "net net0: bad chain 20 (further guest errors are only counted)");
}

/* A host's failures are warnings; a count of 0 (nothing counted) logs nothing. */
static void test_level_and_zero(void)
{
    g_array_set_size(seen, 0);
    GLogLevelFlags fatal = g_log_set_always_fatal(G_LOG_FATAL_MASK);
    device_log_limited(G_LOG_LEVEL_WARNING, 1, "I/O errors", "disk %s: write failed", "vda");
    device_log_limited(G_LOG_LEVEL_WARNING, 0, "I/O errors", "disk %s: write failed", "vda");
    g_log_set_always_fatal(fatal);
    g_assert_cmpuint(seen->len, ==, 1);
    g_assert_cmpint(g_array_index(seen, struct logged, 0).level, ==, G_LOG_LEVEL_WARNING);
    g_assert_cmpstr(g_array_index(seen, struct logged, 0).message, ==, "disk vda: write failed");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    seen = g_array_new(FALSE, TRUE, sizeof(struct logged));
    g_array_set_clear_func(seen, clear_logged);
    g_log_set_writer_func(capture, NULL, NULL);
    g_test_add_func("/device-log/first-ones-only", test_first_ones_only);
    g_test_add_func("/device-log/level-and-zero", test_level_and_zero);
    int rc = g_test_run();
    g_array_unref(seen);
    return rc;
}
