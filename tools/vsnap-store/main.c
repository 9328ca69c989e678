/* vsnap-store: snapshot directories to and from a snapshot store.
 *
 *   vsnap-store push SNAPSHOT-DIR STORE-URL   prints the manifest's id
 *   vsnap-store pull STORE-URL/ID DEST-DIR
 *   vsnap-store ls STORE-URL                  complete manifests only
 *   vsnap-store verify STORE-URL/ID
 *   vsnap-store cache ls|gc|size
 *
 * Everything is the library's (common/store/); this file is options and
 * output. */
#include "store/store.h"

#include <json-glib/json-glib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/vjson.h"

struct cli {
    struct store_options opts;
    char *config, *cache_dir, *cache_size_text, *range_size_text, *frame_size_text;
    char *domain_xml_file, *snapshot_xml_file, *ca_file;
    gint connections, threads, level, retries;
    gboolean json, quiet;
    guint64 cache_size;
};

/* SIGINT or SIGTERM: the transfer under way stops through the library's
 * cancel (store_options.cancel) and cleans up as a failure does (no partial
 * layer or directory, an S3 multipart upload aborted); a second one kills
 * at once (SA_RESETHAND). */
static gint stop_signal;

static void on_stop_signal(int signo)
{
    g_atomic_int_set(&stop_signal, signo);
}

static void catch_stop_signals(void)
{
    struct sigaction sa = { .sa_handler = on_stop_signal, .sa_flags = SA_RESETHAND };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void print_json(JsonBuilder *b)
{
    g_autofree char *text = vjson_finish(b, false);
    printf("%s\n", text);
}

static bool read_optional(const char *path, char **text, GError **error)
{
    if (!path)
        return true;
    return g_file_get_contents(path, text, NULL, error);
}

static int cmd_push(struct cli *c, char **args, GError **error)
{
    g_autofree char *domain = NULL, *snapshot = NULL;
    if (!read_optional(c->domain_xml_file, &domain, error) ||
        !read_optional(c->snapshot_xml_file, &snapshot, error))
        return 1;
    struct store_push_args a = { .dir = args[0], .url = args[1], .domain_xml = domain,
                                 .snapshot_xml = snapshot };
    struct store_push_result r;
    if (!store_push(&a, &c->opts, &r, error))
        return 1;
    if (c->json) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        vjson_object_begin(b, NULL);
        vjson_str(b, "id", r.id);
        vjson_int(b, "bytes", (gint64)r.bytes_in);
        vjson_int(b, "bytes_sent", (gint64)r.bytes_sent);
        vjson_int(b, "objects_sent", r.objects_sent);
        vjson_int(b, "objects_skipped", r.objects_skipped);
        vjson_object_end(b);
        print_json(b);
    } else {
        printf("%s\n", r.id);
    }
    store_push_result_clear(&r);
    return 0;
}

static struct store_cache *open_cache(struct cli *c, GError **error)
{
    g_autofree char *dir = c->cache_dir ? g_strdup(c->cache_dir) : store_cache_default_dir();
    return store_cache_open(dir, c->cache_size, error);
}

static int cmd_pull(struct cli *c, char **args, GError **error)
{
    g_autofree char *url = NULL, *id = NULL;
    if (!store_split_ref(args[0], &url, &id, error))
        return 1;
    struct store_cache *cache = open_cache(c, error);
    if (!cache)
        return 1;
    struct store_pull_result r;
    bool ok = store_pull(url, id, args[1], cache, &c->opts, &r, error);
    store_cache_close(cache);
    if (!ok)
        return 1;
    if (c->json) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        vjson_object_begin(b, NULL);
        vjson_str(b, "id", id);
        vjson_str(b, "dir", args[1]);
        vjson_int(b, "bytes_received", (gint64)r.bytes_received);
        vjson_int(b, "layers_fetched", r.layers_fetched);
        vjson_int(b, "layers_cached", r.layers_cached);
        vjson_object_end(b);
        print_json(b);
    }
    return 0;
}

static int cmd_ls(struct cli *c, char **args, GError **error)
{
    g_autoptr(GPtrArray) ids = store_list(args[0], &c->opts, error);
    if (!ids)
        return 1;
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_array_begin(b, NULL);
    for (guint i = 0; i < ids->len; i++) {
        if (!c->json) {
            printf("%s\n", (char *)ids->pdata[i]);
            continue;
        }
        vjson_object_begin(b, NULL);
        vjson_str(b, "id", ids->pdata[i]);
        vjson_object_end(b);
    }
    vjson_array_end(b);
    if (c->json)
        print_json(b);
    return 0;
}

static int cmd_verify(struct cli *c, char **args, GError **error)
{
    g_autofree char *url = NULL, *id = NULL;
    if (!store_split_ref(args[0], &url, &id, error) || !store_verify(url, id, &c->opts, error))
        return 1;
    if (c->json) {
        g_autoptr(JsonBuilder) b = json_builder_new();
        vjson_object_begin(b, NULL);
        vjson_str(b, "id", id);
        vjson_bool(b, "ok", TRUE);
        vjson_object_end(b);
        print_json(b);
    } else {
        printf("%s: every object matches its digest\n", id);
    }
    return 0;
}

static void print_entries(struct cli *c, GArray *a)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_array_begin(b, NULL);
    for (guint i = 0; i < a->len; i++) {
        struct store_cache_entry *e = &g_array_index(a, struct store_cache_entry, i);
        g_autoptr(GDateTime) t = g_date_time_new_from_unix_utc(e->used_ns / 1000000000);
        g_autofree char *when = g_date_time_format_iso8601(t);
        if (!c->json) {
            printf("%s %12" G_GUINT64_FORMAT " %s%s\n", e->digest, e->size, when,
                   e->in_use ? " in-use" : "");
            continue;
        }
        vjson_object_begin(b, NULL);
        vjson_str(b, "digest", e->digest);
        vjson_int(b, "size", (gint64)e->size);
        vjson_int(b, "disk_bytes", (gint64)e->disk_bytes);
        vjson_str(b, "last_used", when);
        vjson_bool(b, "in_use", e->in_use);
        vjson_object_end(b);
    }
    vjson_array_end(b);
    if (c->json)
        print_json(b);
}

static int cmd_cache(struct cli *c, char **args, GError **error)
{
    struct store_cache *cache = open_cache(c, error);
    if (!cache)
        return 1;
    int rc = 0;
    if (strcmp(args[0], "ls") == 0) {
        GArray *a = store_cache_list(cache, error);
        if (a) {
            print_entries(c, a);
            g_array_unref(a);
        }
        rc = a ? 0 : 1;
    } else {
        bool ok = strcmp(args[0], "gc") != 0 || store_cache_gc(cache, error);
        GError *e = NULL;
        guint64 bytes = ok ? store_cache_bytes(cache, &e) : 0;
        if (e)
            g_propagate_error(error, e);
        rc = ok && !e ? 0 : 1;
        if (rc == 0 && c->json) {
            g_autoptr(JsonBuilder) b = json_builder_new();
            vjson_object_begin(b, NULL);
            vjson_int(b, "bytes", (gint64)bytes);
            vjson_int(b, "limit", (gint64)c->cache_size);
            vjson_str(b, "dir", store_cache_dir(cache));
            vjson_object_end(b);
            print_json(b);
        } else if (rc == 0) {
            printf("%" G_GUINT64_FORMAT " bytes of %" G_GUINT64_FORMAT " in %s\n", bytes,
                   c->cache_size, store_cache_dir(cache));
        }
    }
    store_cache_close(cache);
    return rc;
}

static void cli_clear(struct cli *c)
{
    store_options_clear(&c->opts);
    g_free(c->config);
    g_free(c->cache_dir);
    g_free(c->cache_size_text);
    g_free(c->range_size_text);
    g_free(c->frame_size_text);
    g_free(c->domain_xml_file);
    g_free(c->snapshot_xml_file);
    g_free(c->ca_file);
}

static bool apply_options(struct cli *c, GError **error)
{
    c->cache_size = STORE_DEFAULT_CACHE_SIZE;
    if (c->config && !store_options_load(&c->opts, c->config, NULL, c->cache_dir ? NULL : &c->cache_dir,
                                         &c->cache_size, error))
        return false;
    guint64 v;
    if (c->cache_size_text) {
        if (!store_parse_size(c->cache_size_text, &c->cache_size, error))
            return false;
    }
    if (c->range_size_text) {
        if (!store_parse_size(c->range_size_text, &v, error))
            return false;
        c->opts.range_size = MAX(v, 1u);
    }
    if (c->frame_size_text) {
        if (!store_parse_size(c->frame_size_text, &v, error))
            return false;
        if (v < 4096 || v > (64u << 20)) {
            g_set_error(error, STORE_ERROR, STORE_ERROR_INVALID, "--frame-size: 4K to 64M");
            return false;
        }
        c->opts.frame_size = (guint)v;
    }
    if (c->ca_file) {   /* the command line wins over [store] and [s3] ca_file */
        if (!store_ca_file_check(c->ca_file, "--ca-file", error))
            return false;
        g_free(c->opts.ca_file);
        c->opts.ca_file = g_canonicalize_filename(c->ca_file, NULL);
        g_clear_pointer(&c->opts.s3_ca_file, g_free);
    }
    if (c->connections > 0)
        c->opts.connections = c->connections;
    if (c->threads > 0)
        c->opts.threads = c->threads;
    if (c->level > 0)
        c->opts.level = c->level;
    if (c->retries >= 0)
        c->opts.retries = c->retries;
    c->opts.progress = !c->quiet && !c->json;
    store_options_start_deadline(&c->opts); /* one command, one operation: [store] timeout bounds it */
    return true;
}

int main(int argc, char **argv)
{
    struct cli c = { .retries = -1 };
    store_options_init(&c.opts);
    c.opts.cancel = &stop_signal;
    catch_stop_signals();
    GOptionEntry entries[] = {
        { "config", 'c', 0, G_OPTION_ARG_FILENAME, &c.config,
          "Read [store] and [s3] from this key file", "FILE" },
        { "cache-dir", 0, 0, G_OPTION_ARG_FILENAME, &c.cache_dir,
          "The layer cache (default /var/cache/vsnap for root)", "DIR" },
        { "cache-size", 0, 0, G_OPTION_ARG_STRING, &c.cache_size_text,
          "Bound of the cache in bytes (K/M/G/T suffixes; default 20G)", "SIZE" },
        { "connections", 'j', 0, G_OPTION_ARG_INT, &c.connections,
          "Parallel transfers (default 8)", "N" },
        { "range-size", 0, 0, G_OPTION_ARG_STRING, &c.range_size_text,
          "Compressed bytes per ranged GET (default 8M)", "SIZE" },
        { "threads", 't', 0, G_OPTION_ARG_INT, &c.threads,
          "Compression and decompression threads (default: the CPUs)", "N" },
        { "frame-size", 0, 0, G_OPTION_ARG_STRING, &c.frame_size_text,
          "Uncompressed bytes per zstd frame when pushing (default 1M)", "SIZE" },
        { "level", 'l', 0, G_OPTION_ARG_INT, &c.level, "zstd level when pushing (default 3)", "N" },
        { "ca-file", 0, 0, G_OPTION_ARG_FILENAME, &c.ca_file,
          "PEM CA bundle to trust for https:// and S3 over TLS (default: AWS_CA_BUNDLE for s3://, "
          "else libcurl's)", "FILE" },
        { "retries", 0, 0, G_OPTION_ARG_INT, &c.retries,
          "Attempts per request after the first (default 4)", "N" },
        { "domain-xml", 0, 0, G_OPTION_ARG_FILENAME, &c.domain_xml_file,
          "push: the domain definition to keep in the manifest", "FILE" },
        { "snapshot-xml", 0, 0, G_OPTION_ARG_FILENAME, &c.snapshot_xml_file,
          "push: the snapshot XML to keep in the manifest", "FILE" },
        { "json", 0, 0, G_OPTION_ARG_NONE, &c.json, "Answer in JSON", NULL },
        { "quiet", 'q', 0, G_OPTION_ARG_NONE, &c.quiet, "No progress on the terminal", NULL },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(
        "COMMAND - snapshot directories to and from a snapshot store");
    g_option_context_set_description(ctx,
        "Commands:\n"
        "  push SNAPSHOT-DIR STORE-URL   push a snapshot and its parents; prints its id\n"
        "  pull STORE-URL/ID DEST-DIR    pull a snapshot through the cache\n"
        "  ls STORE-URL                  the snapshots in a store\n"
        "  verify STORE-URL/ID           check every object of a snapshot\n"
        "  cache ls|gc|size              the layer cache\n"
        "Stores: file:///dir, http(s)://host/prefix, s3://bucket/prefix\n");
    g_option_context_add_main_entries(ctx, entries, NULL);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(ctx, &argc, &argv, &error)) {
        fprintf(stderr, "vsnap-store: %s\n", error->message);
        return 2;
    }
    static const struct {
        const char *name;
        int nargs;
        int (*run)(struct cli *, char **, GError **);
    } commands[] = {
        { "push", 2, cmd_push }, { "pull", 2, cmd_pull }, { "ls", 1, cmd_ls },
        { "verify", 1, cmd_verify }, { "cache", 1, cmd_cache },
    };
    for (guint i = 0; argc >= 2 && i < G_N_ELEMENTS(commands); i++) {
        if (strcmp(argv[1], commands[i].name) != 0)
            continue;
        if (argc - 2 != commands[i].nargs ||
            (commands[i].run == cmd_cache && strcmp(argv[2], "ls") && strcmp(argv[2], "gc") &&
             strcmp(argv[2], "size")))
            break;
        int rc = 2;
        if (!apply_options(&c, &error))
            fprintf(stderr, "vsnap-store: %s\n", error->message);
        else if ((rc = commands[i].run(&c, argv + 2, &error)) != 0)
            fprintf(stderr, "vsnap-store: %s: %s\n", argv[1], error ? error->message : "failed");
        if (rc != 0 && g_atomic_int_get(&stop_signal))
            rc = 128 + g_atomic_int_get(&stop_signal);   /* as the shell reports a signal */
        cli_clear(&c);
        return rc;
    }
    g_autofree char *help = g_option_context_get_help(ctx, TRUE, NULL);
    fprintf(stderr, "%s", help);
    cli_clear(&c);
    return 2;
}
