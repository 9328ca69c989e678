/* Unit tests of virtvsnapd's RPC layer without a daemon: the procedure
 * tables (every number served by exactly one entry of one table, nothing
 * both served and named as unserved) and dispatch's refusals, read back from
 * the other end of a socket pair as a client would see them. */
#include <glib.h>
#include <libvirt/virterror.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rpc/api-names.h"
#include "rpc/client.h"
#include "rpc/dispatch.h"

static void test_each_number_served_once(void)
{
    g_autofree unsigned *seen = g_new0(unsigned, PROC_NUMBER_MAX);
    size_t total = 0;
    for (size_t t = 0; t < rpc_proc_tables_count; t++) {
        const struct proc_table *table = &rpc_proc_tables[t];
        g_assert_cmpuint(*table->count, >, 0);
        for (size_t i = 0; i < *table->count; i++) {
            const struct proc_entry *e = &table->entries[i];
            g_assert_cmpint(e->proc, >, 0);
            g_assert_cmpint(e->proc, <, PROC_NUMBER_MAX);
            g_assert_true(g_str_has_prefix(e->name, "PROC_"));
            g_assert_nonnull(e->handler);
            if (seen[e->proc]++)
                g_error("procedure %d (%s) is served twice; the second time by table '%s'",
                        e->proc, e->name, table->family);
            g_assert_true(rpc_find_proc(e->proc) == e);
            total++;
        }
    }
    g_assert_cmpuint(total, >, 80);
}

static void test_unserved_names_are_not_served(void)
{
    unsigned named = 0;
    for (int proc = 0; proc < (int)PROC_NUMBER_MAX; proc++) {
        const char *name = rpc_unserved_name(proc);
        if (!name)
            continue;
        named++;
        if (rpc_find_proc(proc))
            g_error("procedure %d is served, yet named as unserved (%s)", proc, name);
    }
    g_assert_cmpuint(named, >, 0);
}

/* Every number of libvirt's protocol that no table serves is refused by its
 * API name (160, 161, 256, 257 and 392 once were refused by number only). */
static void test_every_unserved_number_is_named(void)
{
    g_assert_cmpint(rpc_api_last_proc, >=, 443);
    for (int proc = 1; proc <= rpc_api_last_proc; proc++) {
        if (rpc_find_proc(proc))
            continue;
        const char *name = rpc_unserved_name(proc);
        if (!name || !*name)
            g_error("procedure %d is served by no table and has no API name", proc);
    }
    g_assert_cmpstr(rpc_unserved_name(160), ==, "virDomainAttachDeviceFlags");
    g_assert_null(rpc_unserved_name(rpc_api_last_proc + 1));
    g_assert_null(rpc_unserved_name(0));
    g_assert_null(rpc_unserved_name(-5));
}

/* virsh dominfo and undefine ask these two; the snapshot and save family
 * answers them (the domain family once answered 0 for both). */
static void test_managed_save_and_snapshot_counts_are_real(void)
{
    const int procs[] = {PROC_DOMAIN_HAS_MANAGED_SAVE_IMAGE, PROC_DOMAIN_SNAPSHOT_NUM};
    for (size_t i = 0; i < G_N_ELEMENTS(procs); i++) {
        const struct proc_entry *e = rpc_find_proc(procs[i]);
        g_assert_nonnull(e);
        bool in_snapshot_table = false;
        for (size_t j = 0; j < rpc_snapshot_procs_count; j++)
            in_snapshot_table |= &rpc_snapshot_procs[j] == e;
        g_assert_true(in_snapshot_table);
    }
}

/* ---- dispatch's refusals on the wire ---- */

struct pair {
    int peer;
    struct rpc_client *client;
};

static void pair_open(struct pair *p)
{
    int fds[2];
    g_assert_cmpint(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), ==, 0);
    p->peer = fds[0];
    p->client = rpc_client_new(NULL, fds[1], false, getuid(), getpid());
}

static void pair_close(struct pair *p)
{
    rpc_client_unref(p->client);
    close(p->peer);
}

static void read_exact(int fd, uint8_t *buf, size_t len)
{
    size_t have = 0;
    while (have < len) {
        ssize_t n = read(fd, buf + have, len - have);
        g_assert_cmpint(n, >, 0);
        have += (size_t)n;
    }
}

/* One reply: its header and, for an error, the remote_error. */
static void read_reply(int fd, struct wire_header *hdr, struct wire_error *err)
{
    uint8_t len_buf[4];
    read_exact(fd, len_buf, 4);
    uint32_t total = (uint32_t)len_buf[0] << 24 | len_buf[1] << 16 | len_buf[2] << 8 | len_buf[3];
    g_assert_cmpuint(total, >=, RPC_LEN_WORD_SIZE + RPC_HEADER_SIZE);
    g_autofree uint8_t *msg = g_malloc(total - 4);
    read_exact(fd, msg, total - 4);
    XDR xdrs;
    xdrmem_create(&xdrs, (char *)msg, total - 4, XDR_DECODE);
    g_assert_true(xdr_wire_header(&xdrs, hdr));
    memset(err, 0, sizeof(*err));
    if (hdr->status == RPC_STATUS_ERROR)
        g_assert_true(xdr_wire_error(&xdrs, err));
    xdr_destroy(&xdrs);
}

static struct wire_header call_header(int proc)
{
    struct wire_header hdr = {.prog = REMOTE_PROGRAM, .vers = REMOTE_PROTOCOL_VERSION,
                              .proc = proc, .type = RPC_CALL, .serial = 7,
                              .status = RPC_STATUS_OK};
    return hdr;
}

static void expect_refusal_of(struct pair *p, int proc, const uint8_t *body, size_t len, int code,
                              const char *text)
{
    struct rpc_context ctx = {0};
    struct wire_header call = call_header(proc);
    rpc_dispatch_call(&ctx, p->client, &call, body, len);
    struct wire_header hdr;
    struct wire_error err;
    read_reply(p->peer, &hdr, &err);
    g_assert_cmpuint(hdr.type, ==, RPC_REPLY);
    g_assert_cmpuint(hdr.status, ==, RPC_STATUS_ERROR);
    g_assert_cmpint(hdr.proc, ==, proc);
    g_assert_cmpuint(hdr.serial, ==, 7);
    g_assert_cmpint(err.code, ==, code);
    g_assert_nonnull(err.message);
    if (!strstr(err.message, text))
        g_error("procedure %d: '%s' does not say '%s'", proc, err.message, text);
    xdr_free(XDR_PROC(xdr_wire_error), (char *)&err);
}

static void expect_refusal(struct pair *p, int proc, int code, const char *text)
{
    expect_refusal_of(p, proc, NULL, 0, code, text);
}

static void test_refusals(void)
{
    struct pair p;
    pair_open(&p);
    expect_refusal(&p, 777, VIR_ERR_NO_SUPPORT, "procedure 777 is not supported");
    expect_refusal(&p, PROC_DOMAIN_ATTACH_DEVICE, VIR_ERR_NO_SUPPORT, "virDomainAttachDevice");
    const struct {
        int proc;
        const char *text;
    } named[] = {
        {8, "virDomainAttachDevice is not supported by vsnap (procedure 8)"},
        {160, "virDomainAttachDeviceFlags is not supported by vsnap"},
        {161, "virDomainDetachDeviceFlags is not supported by vsnap"},
        {256, "virDomainSetInterfaceParameters is not supported by vsnap"},
        {257, "virDomainGetInterfaceParameters is not supported by vsnap"},
        {392, "virDomainDetachDeviceAlias is not supported by vsnap"},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(named); i++)
        expect_refusal(&p, named[i].proc, VIR_ERR_NO_SUPPORT, named[i].text);
    expect_refusal(&p, PROC_CONNECT_GET_TYPE, VIR_ERR_RPC, "connection not open");
    rpc_client_set_opened(p.client, true);
    /* Served calls are named by their API too. */
    expect_refusal(&p, PROC_DOMAIN_DEFINE_XML, VIR_ERR_OPERATION_DENIED,
                   "virDomainDefineXML is not allowed on a read-only connection");
    const uint8_t short_body[3] = {0};
    expect_refusal_of(&p, PROC_DOMAIN_LOOKUP_BY_NAME, short_body, sizeof(short_body), VIR_ERR_RPC,
                      "cannot decode the arguments of virDomainLookupByName");
    pair_close(&p);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/rpc/tables/each-number-served-once", test_each_number_served_once);
    g_test_add_func("/rpc/tables/unserved-names-are-not-served",
                    test_unserved_names_are_not_served);
    g_test_add_func("/rpc/tables/every-unserved-number-is-named", test_every_unserved_number_is_named);
    g_test_add_func("/rpc/tables/managed-save-and-snapshot-counts",
                    test_managed_save_and_snapshot_counts_are_real);
    g_test_add_func("/rpc/dispatch/refusals", test_refusals);
    return g_test_run();
}
