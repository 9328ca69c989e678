#include "fuzz-common.h"

#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static GPtrArray *tolerated;

void fuzz_tolerate_critical(const char *text)
{
    if (!tolerated)
        tolerated = g_ptr_array_new();
    g_ptr_array_add(tolerated, (gpointer)text);
}

static bool is_tolerated(GLogLevelFlags level, const GLogField *fields, gsize n_fields)
{
    if (!(level & G_LOG_LEVEL_CRITICAL) || !tolerated)
        return false;
    for (gsize i = 0; i < n_fields; i++) {
        if (strcmp(fields[i].key, "MESSAGE") != 0 || fields[i].length >= 0)
            continue;
        for (guint t = 0; t < tolerated->len; t++)
            if (strstr(fields[i].value, tolerated->pdata[t]))
                return true;
    }
    return false;
}

static GLogWriterOutput fuzz_log_writer(GLogLevelFlags level, const GLogField *fields,
                                        gsize n_fields, gpointer data)
{
    bool verbose = GPOINTER_TO_INT(data);
    bool fatal = (level & (G_LOG_LEVEL_CRITICAL | G_LOG_LEVEL_ERROR)) &&
                 !is_tolerated(level, fields, n_fields);
    if (verbose || fatal)
        g_log_writer_standard_streams(level, fields, n_fields, NULL);
    if (fatal)
        abort();
    return G_LOG_WRITER_HANDLED;
}

void fuzz_init_logging(void)
{
    const char *v = g_getenv("FUZZ_VERBOSE");
    g_log_set_writer_func(fuzz_log_writer, GINT_TO_POINTER(v && *v == '1'), NULL);
}

static char *scratch;

static void remove_scratch(void)
{
    if (scratch)
        fuzz_rmtree(scratch);
}

const char *fuzz_scratch_dir(void)
{
    if (!scratch) {
        g_autoptr(GError) error = NULL;
        scratch = g_dir_make_tmp("vsnap-fuzz-XXXXXX", &error);
        if (!scratch)
            g_error("fuzz: no scratch directory: %s", error->message);
        atexit(remove_scratch);
    }
    return scratch;
}

char *fuzz_path(const char *name)
{
    return g_build_filename(fuzz_scratch_dir(), name, NULL);
}

void fuzz_write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        g_error("fuzz: cannot create %s: %s", path, g_strerror(errno));
    const uint8_t *p = data;
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            g_error("fuzz: cannot write %s: %s", path, g_strerror(errno));
        p += n;
        len -= (size_t)n;
    }
    close(fd);
}

void fuzz_rmtree(const char *dir)
{
    GDir *d = g_dir_open(dir, 0, NULL);
    if (!d) {
        g_unlink(dir);
        return;
    }
    const char *name;
    while ((name = g_dir_read_name(d))) {
        g_autofree char *p = g_build_filename(dir, name, NULL);
        if (g_file_test(p, G_FILE_TEST_IS_DIR) && !g_file_test(p, G_FILE_TEST_IS_SYMLINK))
            fuzz_rmtree(p);
        else
            g_unlink(p);
    }
    g_dir_close(d);
    g_rmdir(dir);
}

char *fuzz_expand_dir(const uint8_t *data, size_t size, size_t *out_len)
{
    static const char token[] = "@DIR@";
    const size_t tlen = sizeof token - 1;
    const char *dir = fuzz_scratch_dir();
    GString *s = g_string_sized_new(size + 1);
    for (size_t i = 0; i < size;) {
        if (size - i >= tlen && memcmp(data + i, token, tlen) == 0) {
            g_string_append(s, dir);
            i += tlen;
        } else {
            g_string_append_c(s, (char)data[i++]);
        }
    }
    if (out_len)
        *out_len = s->len;
    return g_string_free(s, FALSE);
}

/* ---- a conversation over a socket ---- */

struct conversation {
    int fd;
    const uint8_t *data;
    size_t size, sent;
    GByteArray *reply;
    bool done;
    unsigned timeout_ms;
};

static gboolean on_writable(gint fd, GIOCondition cond, gpointer p)
{
    struct conversation *c = p;
    while (c->sent < c->size) {
        ssize_t n = send(fd, c->data + c->sent, c->size - c->sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return G_SOURCE_CONTINUE;
        if (n <= 0)
            break;   /* the peer closed early: it may, on bad input */
        c->sent += (size_t)n;
    }
    shutdown(fd, SHUT_WR);
    return G_SOURCE_REMOVE;
}

static gboolean on_readable(gint fd, GIOCondition cond, gpointer p)
{
    struct conversation *c = p;
    uint8_t buf[16384];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return G_SOURCE_CONTINUE;
        if (n <= 0) {
            c->done = true;
            return G_SOURCE_REMOVE;
        }
        if (c->reply)
            g_byte_array_append(c->reply, buf, (guint)n);
    }
}

static gboolean on_deadline(gpointer p)
{
    struct conversation *c = p;
    g_error("fuzz: the server did not close the connection within %u ms (%zu of %zu bytes "
            "taken): a hang", c->timeout_ms, c->sent, c->size);
    return G_SOURCE_REMOVE;
}

static void start_conversation(struct conversation *c, guint *w, guint *r)
{
    g_autoptr(GError) error = NULL;
    if (!g_unix_set_fd_nonblocking(c->fd, TRUE, &error))
        g_error("fuzz: %s", error->message);
    *w = g_unix_fd_add(c->fd, G_IO_OUT, on_writable, c);
    *r = g_unix_fd_add(c->fd, G_IO_IN | G_IO_HUP | G_IO_ERR, on_readable, c);
}

static void end_conversation(guint w, guint r)
{
    GSource *s;
    if ((s = g_main_context_find_source_by_id(NULL, w)))
        g_source_destroy(s);
    if ((s = g_main_context_find_source_by_id(NULL, r)))
        g_source_destroy(s);
}

void fuzz_converse(int fd, const uint8_t *data, size_t size, GByteArray *reply, unsigned timeout_ms)
{
    struct conversation c = {.fd = fd, .data = data, .size = size, .reply = reply,
                             .timeout_ms = timeout_ms};
    guint w, r;
    start_conversation(&c, &w, &r);
    guint t = g_timeout_add(timeout_ms, on_deadline, &c);
    while (!c.done)
        g_main_context_iteration(NULL, TRUE);
    g_source_remove(t);
    end_conversation(w, r);
    /* What the server still has to do for this connection (closing it,
     * freeing its state) happens before the next input. */
    while (g_main_context_iteration(NULL, FALSE))
        ;
}

void fuzz_converse_until_idle(int fd, const uint8_t *data, size_t size, GByteArray *reply)
{
    struct conversation c = {.fd = fd, .data = data, .size = size, .reply = reply};
    guint w, r;
    start_conversation(&c, &w, &r);
    /* Both ends are in this process, so "nothing ready" is final: the
     * server waits for bytes that will never come (or for a timer). */
    while (!c.done && g_main_context_iteration(NULL, FALSE))
        ;
    end_conversation(w, r);
}

int fuzz_connect_unix(const char *path)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path)
        g_error("fuzz: socket path %s too long", path);
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0)
        g_error("fuzz: cannot connect to %s: %s", path, g_strerror(errno));
    return fd;
}
