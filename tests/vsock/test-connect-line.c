/* The hybrid socket's "CONNECT <port>" parser (shim/devices/vsock/virtio-vsock-unix.c). */
#include <glib.h>
#include <string.h>

#include "devices/virtio-vsock-priv.h"

static void check_good(const char *line, uint32_t want)
{
    g_autoptr(GError) error = NULL;
    uint32_t port = 0;
    g_assert_true(vsock_parse_connect_line(line, strlen(line), &port, &error));
    g_assert_no_error(error);
    g_assert_cmpuint(port, ==, want);
}

static void check_bad(const char *line, size_t len)
{
    g_autoptr(GError) error = NULL;
    uint32_t port = 12345;
    g_assert_false(vsock_parse_connect_line(line, len, &port, &error));
    g_assert_nonnull(error);
    g_assert_cmpuint(port, ==, 12345); /* untouched */
    g_assert_cmpuint(strlen(error->message), >, 0);
}

static void test_good(void)
{
    check_good("CONNECT 5000", 5000);
    check_good("CONNECT 0", 0);
    check_good("CONNECT 4294967295", 4294967295u);
    check_good("CONNECT 0001024", 1024);
}

static void test_bad(void)
{
    const char *lines[] = {
        "", "CONNECT", "CONNECT ", "CONNECT  5000", "connect 5000", "CONNECT 5000 ",
        "CONNECT 0x10", "CONNECT -1", "CONNECT +1", "CONNECT 4294967296",
        "CONNECT 99999999999999999999999", "CONNECT 50a0", "HELLO 5000", "CONNECT\t5000",
    };
    for (unsigned i = 0; i < G_N_ELEMENTS(lines); i++)
        check_bad(lines[i], strlen(lines[i]));
    check_bad("CONNECT 50\0" "00", 12); /* an embedded NUL is not a digit */
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/vsock/connect-line/good", test_good);
    g_test_add_func("/vsock/connect-line/bad", test_bad);
    return g_test_run();
}
