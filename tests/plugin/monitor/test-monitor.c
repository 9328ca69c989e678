/* plugin/monitor/monitor.c reads the shim's answers: Cloud Hypervisor's error body
 * (a JSON list of messages) becomes the libvirt error's text, from a real
 * shim too; bodies nested without end are not parsed. */
#include "monitor/monitor.h"

#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "util/virt-error.h"

static void expect_text(const char *body, const char *want)
{
    g_autofree char *got = monitor_error_text(body, strlen(body));
    g_test_message("%s -> %s", body, got);
    g_assert_cmpstr(got, ==, want);
}

static void test_error_bodies(void)
{
    expect_text("[\"no VM: create one with vm.create first\"]", "no VM: create one with vm.create first");
    /* Cloud Hypervisor lists its error chain, outermost first. */
    expect_text("[\"Error from API\",\"The VM could not boot\",\"Missing payload\"]",
                "Error from API: The VM could not boot: Missing payload");
    /* What shims before the list answered (still running after a daemon upgrade). */
    expect_text("{\"error\": \"cannot pause: the VM is Created\"}", "cannot pause: the VM is Created");
    expect_text("  plain text \n", "plain text");
    expect_text("[1, 2]", "[1, 2]");
    GString *deep = g_string_new(NULL);
    for (int i = 0; i < 100000; i++)
        g_string_append_c(deep, '[');
    g_autofree char *got = monitor_error_text(deep->str, deep->len);
    g_assert_cmpuint(strlen(got), ==, 500);
    g_string_free(deep, TRUE);
}

struct shim {
    GPid pid;
    char *dir;
    char *socket;
};

static void start_shim(struct shim *s)
{
    const char *shim = g_getenv("VSNAP_SHIM");
    g_assert_nonnull(shim);
    s->dir = g_dir_make_tmp("vsnap-monitor-XXXXXX", NULL);
    s->socket = g_build_filename(s->dir, "api.sock", NULL);
    g_autofree char *spec = g_strdup_printf("path=%s", s->socket);
    const char *argv[] = { shim, "--api-socket", spec, NULL };
    g_autoptr(GError) error = NULL;
    g_assert_true(g_spawn_async(NULL, (char **)argv, NULL, G_SPAWN_DO_NOT_REAP_CHILD, NULL, NULL,
                                &s->pid, &error));
    for (int i = 0; i < 500 && !monitor_ping(s->socket, NULL); i++)
        g_usleep(20000);
    g_assert_true(monitor_ping(s->socket, NULL));
}

static void stop_shim(struct shim *s)
{
    g_autoptr(GError) error = NULL;
    g_assert_true(monitor_vmm_shutdown(s->socket, &error));
    int status = 0;
    g_assert_cmpint(waitpid(s->pid, &status, 0), ==, s->pid);
    g_assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    g_rmdir(s->dir);
    g_free(s->socket);
    g_free(s->dir);
}

/* The shim's own answers, through the daemon's real client. */
static void test_real_shim(void)
{
    struct shim s = { 0 };
    start_shim(&s);
    g_autoptr(GError) boot = NULL;
    g_assert_false(monitor_vm_boot(s.socket, &boot));
    g_assert_error(boot, VSNAP_VIR_ERROR, VIR_ERR_OPERATION_FAILED);
    g_test_message("%s", boot->message);
    g_assert_nonnull(strstr(boot->message, "(HTTP 404): no VM: create one with vm.create first"));
    g_assert_null(strstr(boot->message, "[\""));

    g_autoptr(GError) create = NULL;
    g_assert_false(monitor_vm_create(s.socket, "{\"payload\": {\"kernel\": \"/nonexistent\"}}", NULL, 0, &create));
    g_test_message("%s", create->message);
    g_assert_nonnull(strstr(create->message, "/nonexistent"));
    g_assert_null(strstr(create->message, "[\""));
    stop_shim(&s);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/monitor/error-bodies", test_error_bodies);
    g_test_add_func("/monitor/real-shim", test_real_shim);
    return g_test_run();
}
