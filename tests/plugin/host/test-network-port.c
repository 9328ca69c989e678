/* The daemon's use of libvirt's client library (plugin/host/network-port.c) must
 * leave GLib's default main context to the daemon's main loop: every
 * callback the daemon puts there runs on the thread that runs that loop,
 * also after the library is started by a first connection. The connection
 * goes to libvirt's in-process test driver (test:///default), so no daemon
 * is needed. */
#include <glib.h>
#include <libvirt/libvirt.h>

#include "host/network-port.h"

#define CALLBACKS 2000

static GThread *main_thread;
static unsigned ran, elsewhere;

static gboolean note_thread(gpointer unused)
{
    (void)unused;
    ran++;
    if (g_thread_self() != main_thread)
        elsewhere++;
    return G_SOURCE_REMOVE;
}

static void test_callbacks_stay_on_the_loop_thread(void)
{
    g_autoptr(GError) error = NULL;
    virConnectPtr conn = network_driver_open("test:///default", &error);
    g_assert_no_error(error);
    g_assert_nonnull(conn);
    main_thread = g_thread_self();
    for (unsigned i = 0; i < CALLBACKS; i++) {
        g_idle_add(note_thread, NULL);
        /* Give any other thread iterating this context its chance. */
        if (i % 100 == 0)
            g_usleep(1000);
        while (g_main_context_iteration(NULL, FALSE))
            ;
    }
    gint64 deadline = g_get_monotonic_time() + 10 * G_TIME_SPAN_SECOND;
    while (ran < CALLBACKS && g_get_monotonic_time() < deadline)
        g_main_context_iteration(NULL, FALSE);
    g_assert_cmpuint(ran, ==, CALLBACKS);
    g_assert_cmpuint(elsewhere, ==, 0);
    virConnectClose(conn);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/network-port/callbacks-stay-on-the-loop-thread",
                    test_callbacks_stay_on_the_loop_thread);
    return g_test_run();
}
