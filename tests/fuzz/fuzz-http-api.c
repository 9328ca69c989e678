/* The shim's REST API as a client reaches it: each input is the raw bytes
 * of one connection to the real API server (libsoup, the early header
 * check, dispatch by path and method, every route and its body), sent
 * before the harness closes its side; the server must answer or wait for
 * more, never crash.
 *
 * A server per input: libsoup 3.2 keeps a connection whose client closed
 * it while idle (see README.md), so the harness frees the server, which
 * closes them, instead of waiting for the server to close.
 *
 * The VMM behind it has no VM and no way to get one: run-target.sh runs the
 * target in an empty directory, so no kernel a VmConfig names exists and
 * vm.create fails its file check (a VM would need KVM and seconds per
 * input). Whatever state an input leaves is undone before the next. */
#include <unistd.h>

#include "api/api.h"
#include "fuzz-common.h"
#include "vmm/vmm.h"

static struct vmm *vmm;
static char *socket_path, *spec;

static void on_exit_requested(void *data)
{
    /* vmm.shutdown: the shim would leave its main loop; the harness goes on. */
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init_logging();
    /* libsoup 3.2 builds the URI of an HTTP/1.0 request without Host from
     * the local address as if it were an IP socket: criticals in GIO, then
     * a 400, nothing worse. */
    fuzz_tolerate_critical("G_IS_INET_SOCKET_ADDRESS");
    fuzz_tolerate_critical("G_IS_INET_ADDRESS");
    socket_path = fuzz_path("api.sock");
    spec = g_strconcat("path=", socket_path, NULL);
    vmm = vmm_new(NULL, on_exit_requested, NULL);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(GError) error = NULL;
    struct api_server *server = api_server_new(vmm, spec, NULL, &error);
    if (!server)
        g_error("fuzz: no API server: %s", error->message);
    int fd = fuzz_connect_unix(socket_path);
    fuzz_converse_until_idle(fd, data, size, NULL);
    close(fd);
    while (g_main_context_iteration(NULL, FALSE))
        ;
    api_server_free(server);
    while (g_main_context_iteration(NULL, FALSE))
        ;
    if (vmm_get_state(vmm) != VMM_STATE_NOT_CREATED)
        vmm_delete(vmm, NULL);
    return 0;
}
