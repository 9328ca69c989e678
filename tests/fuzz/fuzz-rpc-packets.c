/* The daemon's packet framing as any local user reaches it: each input is
 * the byte stream of one connection to the read-only socket of a real RPC
 * server (length words, headers, keepalive, stream packets, calls that
 * dispatch decodes, checks and runs), sent before the harness closes its
 * side; the server must answer or drop the connection, never crash or hang.
 *
 * The driver behind it is real, over a scratch directory, with one domain
 * defined so look-ups find something; read-only, nothing an input does can
 * change it. Calls run on the server's workers and may still run when the
 * next input starts (as calls of different clients do in the daemon). */
#include <unistd.h>

#include "domain/domain.h"
#include "driver/driver.h"
#include "fuzz-common.h"
#include "rpc/server.h"
#include "domain/state.h"

static const char domain_xml[] =
    "<domain type='kvm'><name>fuzz</name><uuid>6f0e6a4e-2f4b-4b4e-9a59-3b7f2d0c1a11</uuid>"
    "<memory unit='MiB'>64</memory><vcpu>1</vcpu>"
    "<os><type>hvm</type><kernel>/nonexistent/vmlinux</kernel></os></domain>";

static struct rpc_server *server;
static char *socket_path;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init_logging();
    g_autofree char *state = fuzz_path("state"), *run = fuzz_path("run"), *log = fuzz_path("log");
    g_autofree char *shim = fuzz_path("no-shim");
    struct driver_paths paths = {
        .privileged = false, .socket_dir = (char *)fuzz_scratch_dir(), .state_dir = state,
        .run_dir = run, .log_dir = log, .shim_path = shim, .schema_dir = FUZZ_SCHEMA_DIR,
    };
    g_autoptr(GError) error = NULL;
    struct vsnap_driver *driver = driver_new(&paths, &error);
    if (!driver || !driver_load(driver, &error))
        g_error("fuzz: no driver: %s", error->message);
    struct vsnap_domain *dom = driver_define_xml(driver, domain_xml, 0, &error);
    if (!dom)
        g_error("fuzz: cannot define the domain: %s", error->message);
    vsnap_domain_unref(dom);
    struct rpc_limits limits;
    rpc_limits_init(&limits);   /* the daemon's defaults, as an unconfigured virtvsnapd */
    server = rpc_server_new(driver, &limits);
    socket_path = fuzz_path("sock-ro");
    if (!rpc_server_listen_path(server, socket_path, true, &error))
        g_error("fuzz: cannot listen: %s", error->message);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = fuzz_connect_unix(socket_path);
    fuzz_converse(fd, data, size, NULL, 5000);
    close(fd);
    return 0;
}
