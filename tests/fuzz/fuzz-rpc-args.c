/* XDR decoding of every procedure's arguments, with the daemon's own
 * tables (rpc/dispatch.h): the input is a call as it travels after the
 * length word, the 24-byte header then the body. The header's procedure
 * picks the entry; its argument filter decodes the body as dispatch.c
 * does. What decodes must encode again, in no more bytes (a string stops
 * at its first NUL, as libvirt's do), and encoding is stable
 * (decode(encode(x)) encodes to the same bytes); xdr_free releases
 * whatever a decode left, complete or not.
 *
 * FUZZ_WRITE_SEEDS=<dir> writes one seed per procedure (its arguments
 * decoded from zeros, encoded again) and exits: run it when a procedure
 * joins the tables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/dispatch.h"
#include "fuzz-common.h"
#include "rpc/wire.h"

#define ENCODE_SLACK 64

/* Encode args with filter into a buffer of cap bytes; the length, or -1. */
static long encode(xdrproc_t filter, void *args, char *buf, size_t cap)
{
    XDR xdrs;
    xdrmem_create(&xdrs, buf, (u_int)cap, XDR_ENCODE);
    bool ok = filter(&xdrs, args, 0);
    long len = ok ? (long)xdr_getpos(&xdrs) : -1;
    xdr_destroy(&xdrs);
    return len;
}

/* Decode len bytes into a fresh args of the entry; NULL when it does not. */
static void *decode(const struct proc_entry *e, const char *body, size_t len)
{
    void *args = g_malloc0(e->args_size);
    XDR xdrs;
    xdrmem_create(&xdrs, (char *)body, (u_int)len, XDR_DECODE);
    bool ok = e->args_filter(&xdrs, args, 0) && xdr_getpos(&xdrs) == len;
    xdr_destroy(&xdrs);
    if (!ok) {
        xdr_free(e->args_filter, args);
        g_free(args);
        return NULL;
    }
    return args;
}

static void release(const struct proc_entry *e, void *args)
{
    xdr_free(e->args_filter, args);
    g_free(args);
}

static void write_seeds(const char *dir)
{
    static char zeros[4096];
    for (size_t t = 0; t < rpc_proc_tables_count; t++) {
        const struct proc_table *table = &rpc_proc_tables[t];
        for (size_t i = 0; i < *table->count; i++) {
            const struct proc_entry *e = &table->entries[i];
            struct wire_header hdr = {.prog = REMOTE_PROGRAM, .vers = REMOTE_PROTOCOL_VERSION,
                                      .proc = e->proc, .type = RPC_CALL, .serial = 1};
            char buf[RPC_HEADER_SIZE + 1024];
            XDR xdrs;
            xdrmem_create(&xdrs, buf, sizeof buf, XDR_ENCODE);
            if (!xdr_wire_header(&xdrs, &hdr))
                g_error("fuzz: cannot encode a header");
            xdr_destroy(&xdrs);
            /* The shortest body that decodes: zeros are empty strings and lists. */
            void *args = NULL;
            for (size_t len = 0; !args && len <= sizeof zeros; len += 4)
                args = decode(e, zeros, len);
            if (!args)
                g_error("fuzz: %s decodes from no zeros", e->name);
            long len = encode(e->args_filter, args, buf + RPC_HEADER_SIZE, sizeof buf - RPC_HEADER_SIZE);
            release(e, args);
            g_autofree char *path = g_strdup_printf("%s/%s", dir, e->name);
            fuzz_write_file(path, buf, RPC_HEADER_SIZE + (size_t)len);
        }
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init_logging();
    const char *seeds = g_getenv("FUZZ_WRITE_SEEDS");
    if (seeds) {
        write_seeds(seeds);
        exit(0);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < RPC_HEADER_SIZE || size > RPC_MESSAGE_MAX)
        return -1;
    struct wire_header hdr;
    XDR xdrs;
    xdrmem_create(&xdrs, (char *)data, RPC_HEADER_SIZE, XDR_DECODE);
    bool ok = xdr_wire_header(&xdrs, &hdr);
    xdr_destroy(&xdrs);
    const struct proc_entry *e = ok ? rpc_find_proc(hdr.proc) : NULL;
    if (!e)
        return -1;

    const char *body = (const char *)data + RPC_HEADER_SIZE;
    size_t len = size - RPC_HEADER_SIZE;
    void *args = decode(e, body, len);
    if (!args)
        return 0;
    size_t cap = len + ENCODE_SLACK;
    g_autofree char *once = g_malloc(cap);
    g_autofree char *twice = g_malloc(cap);
    long n1 = encode(e->args_filter, args, once, cap);
    release(e, args);
    if (n1 < 0 || n1 > (long)len)
        g_error("%s: %zu bytes decode, and encode to %ld", e->name, len, n1);
    void *again = decode(e, once, (size_t)n1);
    if (!again)
        g_error("%s: its own encoding does not decode", e->name);
    long n2 = encode(e->args_filter, again, twice, cap);
    release(e, again);
    if (n2 != n1 || memcmp(once, twice, (size_t)n1) != 0)
        g_error("%s: encoding is not stable", e->name);
    return 0;
}
