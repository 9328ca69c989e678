#define G_LOG_DOMAIN "vsnap-shim"

#include "vmm/events.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "json/vjson.h"


struct events {
    int fd;          /* -1: a null monitor */
    bool owns_fd;
    GMutex lock;     /* events come from the main thread and from device threads */
    gint64 start_us; /* timestamps count from here, as Cloud Hypervisor's do */
};

static struct events *events_new_fd(int fd, bool owns_fd)
{
    struct events *events = g_new0(struct events, 1);
    events->fd = fd;
    events->owns_fd = owns_fd;
    events->start_us = g_get_monotonic_time();
    g_mutex_init(&events->lock);
    return events;
}

struct events *events_new_null(void)
{
    return events_new_fd(-1, false);
}

/* A FIFO opened write-only blocks until a reader appears; O_RDWR never blocks
 * and keeps the FIFO open even while the reader goes away and comes back. */
struct events *events_open_path(const char *path, GError **error)
{
    struct stat st;
    int flags = O_WRONLY | O_CREAT | O_APPEND;

    if (stat(path, &st) == 0 && S_ISFIFO(st.st_mode))
        flags = O_RDWR;
    int fd = open(path, flags | O_CLOEXEC | O_NONBLOCK, 0640);
    if (fd < 0) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "cannot open %s: %s", path,
                    g_strerror(errno));
        return NULL;
    }
    return events_new_fd(fd, true);
}

struct events *events_adopt_fd(int fd, GError **error)
{
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || (flags & O_ACCMODE) == O_RDONLY) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "fd=%d is not a file descriptor open for writing", fd);
        return NULL;
    }
    if (fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 || fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) {
        g_set_error(error, G_IO_ERROR, g_io_error_from_errno(errno), "cannot make fd %d non-blocking: %s", fd,
                    g_strerror(errno));
        return NULL;
    }
    return events_new_fd(fd, true);
}

void events_free(struct events *events)
{
    if (!events)
        return;
    if (events->owns_fd && events->fd >= 0)
        close(events->fd);
    g_mutex_clear(&events->lock);
    g_free(events);
}

static char *format_event(const struct events *events, const char *source, const char *event,
                          JsonNode *properties)
{
    gint64 since_start_us = g_get_monotonic_time() - events->start_us;

    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vjson_object_begin(b, "timestamp");
    vjson_int(b, "secs", since_start_us / G_USEC_PER_SEC);
    vjson_int(b, "nanos", (since_start_us % G_USEC_PER_SEC) * 1000);
    vjson_object_end(b);
    vjson_str(b, "source", source);
    vjson_str(b, "event", event);
    if (properties)
        vjson_node(b, "properties", properties);
    else
        vjson_null(b, "properties");
    vjson_object_end(b);

    g_autofree char *text = vjson_finish(b, false);
    return g_strconcat(text, "\n", NULL);
}

/* One write() per event so that concurrent events never interleave; a short
 * write on a full pipe is finished or abandoned, never retried forever. */
static void write_event_line(struct events *events, const char *line)
{
    size_t len = strlen(line), done = 0;

    while (done < len) {
        ssize_t n = write(events->fd, line + done, len - done);
        if (n > 0) {
            done += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            g_warning("event monitor: event dropped (%s)",
                      n < 0 ? g_strerror(errno) : "short write");
            return;
        }
    }
}

void events_emit(struct events *events, const char *source, const char *event,
                 JsonNode *properties)
{
    g_info("event: %s %s", source, event);
    if (!events || events->fd < 0) {
        if (properties)
            json_node_unref(properties);
        return;
    }
    g_autofree char *line = format_event(events, source, event, properties);
    g_mutex_lock(&events->lock);
    write_event_line(events, line);
    g_mutex_unlock(&events->lock);
}

void events_emit_strings(struct events *events, const char *source, const char *event, ...)
{
    g_autoptr(JsonBuilder) b = json_builder_new();
    va_list ap;

    vjson_object_begin(b, NULL);
    va_start(ap, event);
    for (const char *key = va_arg(ap, const char *); key; key = va_arg(ap, const char *)) {
        const char *value = va_arg(ap, const char *);
        vjson_str(b, key, value);
    }
    va_end(ap);
    vjson_object_end(b);
    events_emit(events, source, event, json_builder_get_root(b));
}
