/* Console backends of the serial port and the virtio-console. See
 * serial-backend.h. */
#include "devices/serial-backend.h"
#include "sandbox/confine.h"
#include "sandbox/syscall-filter.h"

#include <errno.h>
#include <gio/gio.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#define INPUT_CHUNK 64

struct serial_backend {
    enum console_mode mode;
    serial_deliver_fn deliver;
    void *opaque;

    GMutex lock;   /* guards out_fd/client_fd changes against writes */
    int out_fd;    /* File, Tty, Pty: where output goes; -1 otherwise */
    int in_fd;     /* Tty (stdin) or Pty (master); -1 when there is none */
    int listen_fd; /* Socket */
    int client_fd; /* Socket: the one connected client, or -1 */
    int pty_slave_fd;
    char *pty_path;
    char *socket_path;
    bool restore_tty;
    struct termios saved_tty;

    int wake[2]; /* pipe: quit or "FIFO has room" */
    bool quit;
    bool input_ended; /* in_fd reached end of file: stop polling it */
    GThread *thread;
    uint8_t pending[INPUT_CHUNK]; /* input read but not yet accepted by the UART */
    size_t npending;
};

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static bool set_errno_error(GError **error, const char *what, const char *path)
{
    int e = errno;
    g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e), "serial console: cannot %s%s%s: %s", what,
                path ? " " : "", path ? path : "", g_strerror(e));
    return false;
}

static bool open_file_output(struct serial_backend *b, const char *path, GError **error)
{
    if (!path || !*path) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "serial console: File mode needs a file path");
        return false;
    }
    b->out_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    return b->out_fd >= 0 || set_errno_error(error, "open", path);
}

/* Raw input: keys reach the guest unprocessed (Ctrl-C included). keep_output
 * leaves output processing on, so a guest's bare "\n" still starts a new
 * line on the shim's own terminal. */
static void make_raw(int fd, struct termios *saved, bool keep_output)
{
    struct termios t;
    if (tcgetattr(fd, &t) < 0)
        return;
    if (saved)
        *saved = t;
    tcflag_t oflag = t.c_oflag;
    cfmakeraw(&t);
    if (keep_output)
        t.c_oflag = oflag;
    tcsetattr(fd, TCSANOW, &t);
}

/* Tty: output to the shim's stdout; stdin becomes input when it is a terminal
 * (put in raw mode so keys reach the guest unprocessed) or a pipe. */
static bool open_tty(struct serial_backend *b, GError **error)
{
    b->out_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (b->out_fd < 0)
        return set_errno_error(error, "duplicate stdout", NULL);
    struct stat st;
    bool is_tty = isatty(STDIN_FILENO);
    bool is_pipe = fstat(STDIN_FILENO, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
    if (!is_tty && !is_pipe)
        return true;
    b->in_fd = fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
    if (b->in_fd < 0)
        return set_errno_error(error, "duplicate stdin", NULL);
    if (is_tty) {
        make_raw(b->in_fd, &b->saved_tty, true);
        b->restore_tty = true;
    }
    return true;
}

/* Pty: the master is ours, the slave path is reported for vm.info. We keep the
 * slave open too, so the master never reports hang-up while nobody is
 * attached, and output written meanwhile is simply buffered or dropped. */
static bool open_pty(struct serial_backend *b, const char *key, GError **error)
{
    int master, slave;
    char *name = NULL;
    /* A guest reset's new backend gets the same pty (sandbox/confine.h). */
    if (sandbox_openpty_kept(key, &master, &slave, &name) < 0)
        return set_errno_error(error, "open a pty", NULL);
    fcntl(master, F_SETFD, FD_CLOEXEC);
    fcntl(slave, F_SETFD, FD_CLOEXEC);
    fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
    make_raw(slave, NULL, false);
    b->out_fd = master;
    b->in_fd = master;
    b->pty_slave_fd = slave;
    b->pty_path = name;
    return true;
}

static bool open_socket(struct serial_backend *b, const char *path, GError **error)
{
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    if (!path || !*path || strlen(path) >= sizeof(addr.sun_path)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "serial console: Socket mode needs a UNIX socket path shorter than %zu bytes",
                    sizeof(addr.sun_path));
        return false;
    }
    strcpy(addr.sun_path, path);
    /* A socket file left by an earlier shim is replaced; anything else is not ours to delete. */
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(path);
    b->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (b->listen_fd < 0)
        return set_errno_error(error, "create a socket for", path);
    if (bind(b->listen_fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
        return set_errno_error(error, "bind", path);
    b->socket_path = g_strdup(path);
    if (listen(b->listen_fd, 4) < 0)
        return set_errno_error(error, "listen on", path);
    return true;
}

/* Hand pending input to the UART; true once everything was taken. */
static bool flush_pending(struct serial_backend *b)
{
    if (b->npending == 0)
        return true;
    size_t taken = b->deliver(b->opaque, b->pending, b->npending);
    memmove(b->pending, b->pending + taken, b->npending - taken);
    b->npending -= taken;
    return b->npending == 0;
}

/* Read what is there from fd into pending; false on end of file or error. */
static bool read_input(struct serial_backend *b, int fd)
{
    ssize_t n = read(fd, b->pending, sizeof(b->pending));
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return true;
    if (n <= 0) {
        if (b->mode != CONSOLE_MODE_SOCKET)
            b->input_ended = true; /* end of stdin, even without POLLHUP */
        return false;
    }
    b->npending = (size_t)n;
    flush_pending(b);
    return true;
}

static void accept_client(struct serial_backend *b)
{
    int fd = accept4(b->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return;
    g_mutex_lock(&b->lock);
    b->client_fd = fd;
    g_mutex_unlock(&b->lock);
}

static void drop_client(struct serial_backend *b)
{
    g_mutex_lock(&b->lock);
    close_fd(&b->client_fd);
    g_mutex_unlock(&b->lock);
}

static void drain_wake_pipe(struct serial_backend *b)
{
    char buf[64];
    while (read(b->wake[0], buf, sizeof(buf)) > 0) {
    }
}

static gpointer input_thread(gpointer data)
{
    struct serial_backend *b = data;
    sandbox_seccomp_enter_thread(SANDBOX_THREAD_DEVICE);
    while (!b->quit) {
        struct pollfd p[2] = { { .fd = b->wake[0], .events = POLLIN }, { .fd = -1 } };
        bool room = flush_pending(b);
        if (room && b->mode == CONSOLE_MODE_SOCKET)
            p[1].fd = b->client_fd >= 0 ? b->client_fd : b->listen_fd;
        else if (room && !b->input_ended)
            p[1].fd = b->in_fd;
        p[1].events = POLLIN;
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[0].revents)
            drain_wake_pipe(b);
        if (!p[1].revents)
            continue;
        if (p[1].fd == b->listen_fd)
            accept_client(b);
        else if (!read_input(b, p[1].fd) && b->mode == CONSOLE_MODE_SOCKET)
            drop_client(b);
        else if (p[1].revents & (POLLHUP | POLLERR | POLLNVAL) && b->mode != CONSOLE_MODE_SOCKET)
            b->input_ended = true; /* stdin went away: the guest goes on without input */
    }
    return NULL;
}

static bool has_input_source(const struct serial_backend *b)
{
    return b->in_fd >= 0 || b->listen_fd >= 0;
}

static bool open_mode(struct serial_backend *b, const char *key, const struct console_config *cfg,
                      GError **error)
{
    switch (cfg->mode) {
    case CONSOLE_MODE_NULL:
        return true;
    case CONSOLE_MODE_FILE:
        return open_file_output(b, cfg->file, error);
    case CONSOLE_MODE_TTY:
        return open_tty(b, error);
    case CONSOLE_MODE_PTY:
        return open_pty(b, key, error);
    case CONSOLE_MODE_SOCKET:
        return open_socket(b, cfg->socket, error);
    case CONSOLE_MODE_OFF:
        break;
    }
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "serial console: mode %d has no backend",
                (int)cfg->mode);
    return false;
}

struct serial_backend *serial_backend_new(const char *key, const struct console_config *cfg,
                                          serial_deliver_fn deliver, void *opaque, GError **error)
{
    struct serial_backend *b = g_new0(struct serial_backend, 1);
    b->mode = cfg->mode;
    b->deliver = deliver;
    b->opaque = opaque;
    b->out_fd = b->in_fd = b->listen_fd = b->client_fd = b->pty_slave_fd = -1;
    b->wake[0] = b->wake[1] = -1;
    g_mutex_init(&b->lock);
    if (!open_mode(b, key, cfg, error))
        goto fail;
    if (!has_input_source(b))
        return b;
    if (pipe2(b->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        set_errno_error(error, "create a pipe", NULL);
        goto fail;
    }
    b->thread = g_thread_try_new("vsnap-serial-in", input_thread, b, error);
    if (!b->thread)
        goto fail;
    return b;
fail:
    serial_backend_free(b);
    return NULL;
}

static void wake_input_thread(struct serial_backend *b)
{
    if (b->wake[1] >= 0) {
        ssize_t r = write(b->wake[1], "", 1);
        (void)r; /* a full pipe already guarantees a wake-up */
    }
}

void serial_backend_free(struct serial_backend *b)
{
    if (!b)
        return;
    if (b->thread) {
        b->quit = true;
        wake_input_thread(b);
        g_thread_join(b->thread);
    }
    if (b->restore_tty)
        tcsetattr(b->in_fd >= 0 ? b->in_fd : STDIN_FILENO, TCSANOW, &b->saved_tty);
    if (b->in_fd != b->out_fd)
        close_fd(&b->in_fd);
    close_fd(&b->out_fd);
    close_fd(&b->client_fd);
    close_fd(&b->listen_fd);
    close_fd(&b->pty_slave_fd);
    close_fd(&b->wake[0]);
    close_fd(&b->wake[1]);
    if (b->socket_path)
        unlink(b->socket_path);
    g_free(b->socket_path);
    g_free(b->pty_path);
    g_mutex_clear(&b->lock);
    g_free(b);
}

/* Lock held. A reader that does not keep up (a full pty, a socket client that
 * does not read) loses output rather than stalling the writer. */
static void write_locked(struct serial_backend *b, const uint8_t *bytes, size_t len)
{
    if (b->mode == CONSOLE_MODE_SOCKET && b->client_fd >= 0) {
        while (len > 0) {
            ssize_t n = send(b->client_fd, bytes, len, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR)
                continue;
            /* On a broken connection, shut it down: the input thread sees the
             * hang-up and closes the fd it polls; closing it here would race. */
            if (n < 0 && errno != EAGAIN)
                shutdown(b->client_fd, SHUT_RDWR);
            if (n <= 0)
                return;
            bytes += n;
            len -= (size_t)n;
        }
    } else if (b->out_fd >= 0) {
        while (len > 0) {
            ssize_t n = write(b->out_fd, bytes, len);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                return;
            bytes += n;
            len -= (size_t)n;
        }
    }
}

void serial_backend_write(struct serial_backend *b, uint8_t byte)
{
    g_mutex_lock(&b->lock);
    write_locked(b, &byte, 1);
    g_mutex_unlock(&b->lock);
}

void serial_backend_write_bytes(struct serial_backend *b, const uint8_t *bytes, size_t len)
{
    g_mutex_lock(&b->lock);
    write_locked(b, bytes, len);
    g_mutex_unlock(&b->lock);
}

void serial_backend_input_room(struct serial_backend *b)
{
    wake_input_thread(b);
}

const char *serial_backend_pty_path(struct serial_backend *b)
{
    return b->pty_path;
}
