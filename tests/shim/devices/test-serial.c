/* 16550 UART: registers, FIFO, interrupt line, and the console backends
 * (File, Socket, Pty) with real files, sockets and ptys. */
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <poll.h>
#include <pty.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#include "devices/serial.h"

enum { THR = 0, RBR = 0, DLL = 0, IER = 1, DLM = 1, IIR = 2, FCR = 2, LCR = 3, MCR = 4, LSR = 5, MSR = 6, SCR = 7 };

struct line_watch {
    GMutex lock;
    bool level;
    unsigned rises;
};

static void watch_level(void *opaque, unsigned gsi, bool level)
{
    struct line_watch *w = opaque;
    g_assert_cmpuint(gsi, ==, SERIAL_COM1_IRQ);
    g_mutex_lock(&w->lock);
    if (level && !w->level)
        w->rises++;
    w->level = level;
    g_mutex_unlock(&w->lock);
}

static struct serial *new_serial(const struct console_config *cfg, struct line_watch *w)
{
    memset(w, 0, sizeof(*w));
    g_mutex_init(&w->lock);
    struct irq_line irq = { .set_level = watch_level, .opaque = w, .gsi = SERIAL_COM1_IRQ };
    g_autoptr(GError) error = NULL;
    struct serial *s = serial_new(cfg, &irq, &error);
    g_assert_no_error(error);
    g_assert_nonnull(s);
    return s;
}

static struct serial *new_null_serial(struct line_watch *w)
{
    struct console_config cfg = { .mode = CONSOLE_MODE_NULL };
    return new_serial(&cfg, w);
}

static void test_probe_registers(void)
{
    struct line_watch w;
    struct serial *s = new_null_serial(&w);
    /* Scratch register and divisor latch keep what is written. */
    serial_write_reg(s, SCR, 0x5a);
    g_assert_cmphex(serial_read_reg(s, SCR), ==, 0x5a);
    serial_write_reg(s, LCR, 0x83); /* DLAB, 8 bits */
    serial_write_reg(s, DLL, 0x01);
    serial_write_reg(s, DLM, 0x00);
    g_assert_cmphex(serial_read_reg(s, DLL), ==, 0x01);
    g_assert_cmphex(serial_read_reg(s, DLM), ==, 0x00);
    serial_write_reg(s, LCR, 0x03);
    g_assert_cmphex(serial_read_reg(s, LCR), ==, 0x03);
    g_assert_cmphex(serial_read_reg(s, IER), ==, 0x00); /* DLL/DLM did not leak into IER */
    /* 16550A FIFO detection: IIR bits 7:6 set once FIFOs are enabled. */
    g_assert_cmphex(serial_read_reg(s, IIR), ==, 0x01);
    serial_write_reg(s, FCR, 0x07);
    g_assert_cmphex(serial_read_reg(s, IIR) & 0xc0, ==, 0xc0);
    /* Loopback: MSR mirrors MCR (Linux expects 0x90 for MCR = LOOP|OUT2|RTS). */
    serial_write_reg(s, MCR, 0x1a);
    g_assert_cmphex(serial_read_reg(s, MSR) & 0xf0, ==, 0x90);
    serial_write_reg(s, MCR, 0x0b);
    g_assert_cmphex(serial_read_reg(s, MSR) & 0xf0, ==, 0xb0);
    g_assert_cmphex(serial_read_reg(s, LSR), ==, 0x60); /* THRE | TEMT, nothing received */
    serial_free(s);
}

static void test_thr_empty_interrupt(void)
{
    struct line_watch w;
    struct serial *s = new_null_serial(&w);
    serial_write_reg(s, IER, 0x02);
    g_assert_true(w.level); /* THR is empty, so enabling THRI raises it at once */
    g_assert_cmphex(serial_read_reg(s, IIR) & 0x0f, ==, 0x02);
    g_assert_false(w.level); /* reading IIR acknowledged it */
    g_assert_cmphex(serial_read_reg(s, IIR) & 0x0f, ==, 0x01);
    unsigned rises = w.rises;
    serial_write_reg(s, THR, 'x');
    g_assert_true(w.level);
    g_assert_cmpuint(w.rises, ==, rises + 1); /* a fresh edge for the edge-triggered IRQ */
    serial_write_reg(s, THR, 'y');
    g_assert_cmpuint(w.rises, ==, rises + 2);
    serial_write_reg(s, IER, 0x00);
    g_assert_false(w.level);
    g_assert_cmpuint(serial_tx_bytes(s), ==, 2);
    serial_free(s);
}

static void test_receive_fifo(void)
{
    struct line_watch w;
    struct serial *s = new_null_serial(&w);
    uint8_t bytes[20];
    for (unsigned i = 0; i < sizeof(bytes); i++)
        bytes[i] = (uint8_t)('a' + i);
    /* Polled: no interrupt without IER.RDI, but LSR.DR shows data. */
    g_assert_cmpuint(serial_receive(s, bytes, sizeof(bytes)), ==, SERIAL_FIFO_SIZE);
    g_assert_false(w.level);
    g_assert_cmphex(serial_read_reg(s, LSR) & 0x01, ==, 0x01);
    serial_write_reg(s, IER, 0x01);
    g_assert_true(w.level);
    g_assert_cmphex(serial_read_reg(s, IIR) & 0x0f, ==, 0x04);
    for (unsigned i = 0; i < SERIAL_FIFO_SIZE; i++)
        g_assert_cmphex(serial_read_reg(s, RBR), ==, bytes[i]);
    g_assert_false(w.level);
    g_assert_cmphex(serial_read_reg(s, LSR) & 0x01, ==, 0x00);
    g_assert_cmphex(serial_read_reg(s, IIR) & 0x0f, ==, 0x01);
    g_assert_cmpuint(serial_rx_bytes(s), ==, SERIAL_FIFO_SIZE);
    /* FCR can clear the receive FIFO. */
    serial_receive(s, bytes, 3);
    serial_write_reg(s, FCR, 0x03);
    g_assert_cmphex(serial_read_reg(s, LSR) & 0x01, ==, 0x00);
    g_assert_false(w.level);
    serial_free(s);
}

static void test_loopback(void)
{
    struct line_watch w;
    struct serial *s = new_null_serial(&w);
    serial_write_reg(s, MCR, 0x10);
    serial_write_reg(s, THR, 0x42);
    g_assert_cmphex(serial_read_reg(s, LSR) & 0x01, ==, 0x01);
    g_assert_cmphex(serial_read_reg(s, RBR), ==, 0x42);
    g_assert_cmpuint(serial_tx_bytes(s), ==, 0); /* looped back, not sent */
    serial_free(s);
}

static void test_file_output(void)
{
    g_autofree char *path = NULL;
    int fd = g_file_open_tmp("vsnap-serial-XXXXXX", &path, NULL);
    g_assert_cmpint(write(fd, "old:", 4), ==, 4);
    close(fd);
    struct console_config cfg = { .mode = CONSOLE_MODE_FILE, .file = path };
    struct line_watch w;
    struct serial *s = new_serial(&cfg, &w);
    for (const char *p = "hi\n"; *p; p++)
        serial_write_reg(s, THR, (uint8_t)*p);
    serial_free(s);
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(path, &text, NULL, NULL));
    g_assert_cmpstr(text, ==, "old:hi\n"); /* appended */
    g_unlink(path);
}

static void test_bad_configs(void)
{
    struct line_watch w = { 0 };
    struct irq_line irq = { .set_level = watch_level, .opaque = &w, .gsi = SERIAL_COM1_IRQ };
    struct console_config no_file = { .mode = CONSOLE_MODE_FILE };
    struct console_config long_socket = { .mode = CONSOLE_MODE_SOCKET,
                                          .socket = g_strnfill(200, 'x') };
    struct console_config bad_dir = { .mode = CONSOLE_MODE_SOCKET, .socket = "/nonexistent-dir/console.sock" };
    const struct console_config *bad[] = { &no_file, &long_socket, &bad_dir };
    for (unsigned i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_autoptr(GError) error = NULL;
        g_assert_null(serial_new(bad[i], &irq, &error));
        g_assert_nonnull(error);
        g_test_message("refused: %s", error->message);
    }
    g_free(long_socket.socket);
}

static bool wait_for_data(struct serial *s, unsigned timeout_ms)
{
    for (unsigned i = 0; i < timeout_ms; i++) {
        if (serial_read_reg(s, LSR) & 0x01)
            return true;
        g_usleep(1000);
    }
    return false;
}

static GString *drain_receive(struct serial *s, size_t want, unsigned timeout_ms)
{
    GString *got = g_string_new(NULL);
    while (got->len < want && wait_for_data(s, timeout_ms))
        g_string_append_c(got, (char)serial_read_reg(s, RBR));
    return got;
}

static int connect_unix(const char *path)
{
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    g_strlcpy(addr.sun_path, path, sizeof(addr.sun_path));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), ==, 0);
    return fd;
}

static void read_exactly(int fd, char *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        g_assert_cmpint(poll(&p, 1, 5000), ==, 1);
        ssize_t n = read(fd, buf + got, len - got);
        g_assert_cmpint(n, >, 0);
        got += (size_t)n;
    }
}

/* Socket: a client sends input (more than the FIFO holds, so flow control
 * must hold the rest back) and receives the output. */
static void test_socket(void)
{
    g_autofree char *dir = g_dir_make_tmp("vsnap-serial-XXXXXX", NULL);
    g_autofree char *path = g_build_filename(dir, "console.sock", NULL);
    struct console_config cfg = { .mode = CONSOLE_MODE_SOCKET, .socket = path };
    struct line_watch w;
    struct serial *s = new_serial(&cfg, &w);
    serial_write_reg(s, THR, '!'); /* no client yet: dropped, still counted */
    int client = connect_unix(path);
    const char *input = "0123456789abcdefghijklmnopqrstuvwxyz";
    g_assert_cmpint(write(client, input, strlen(input)), ==, (ssize_t)strlen(input));
    g_autoptr(GString) got = drain_receive(s, strlen(input), 2000);
    g_assert_cmpstr(got->str, ==, input);
    g_assert_cmpuint(serial_rx_bytes(s), ==, strlen(input));
    for (const char *p = "out"; *p; p++)
        serial_write_reg(s, THR, (uint8_t)*p);
    char buf[3];
    read_exactly(client, buf, 3);
    g_assert_cmpmem(buf, 3, "out", 3);
    close(client);
    /* The next client takes over. */
    client = connect_unix(path);
    g_assert_cmpint(write(client, "Z", 1), ==, 1);
    g_autoptr(GString) again = drain_receive(s, 1, 2000);
    g_assert_cmpstr(again->str, ==, "Z");
    close(client);
    serial_free(s);
    g_assert_false(g_file_test(path, G_FILE_TEST_EXISTS)); /* the socket file is removed */
    g_rmdir(dir);
}

static void test_pty(void)
{
    struct console_config cfg = { .mode = CONSOLE_MODE_PTY };
    struct line_watch w;
    struct serial *s = new_serial(&cfg, &w);
    const char *path = serial_pty_path(s);
    g_assert_nonnull(path);
    g_test_message("pty at %s", path);
    int fd = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC);
    g_assert_cmpint(fd, >=, 0);
    struct termios t;
    tcgetattr(fd, &t);
    g_assert_cmpuint(t.c_lflag & ICANON, ==, 0); /* raw: no line buffering */
    serial_write_reg(s, IER, 0x01);
    g_assert_cmpint(write(fd, "k\n", 2), ==, 2);
    g_autoptr(GString) got = drain_receive(s, 2, 2000);
    g_assert_cmpstr(got->str, ==, "k\n");
    serial_write_reg(s, THR, 'p');
    char c;
    read_exactly(fd, &c, 1);
    g_assert_cmpint(c, ==, 'p');
    close(fd);
    serial_free(s);
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* Tty with stdin and stdout being pipes (how a supervisor runs the shim):
 * input arrives, output leaves, and end of input does not make the input
 * thread spin. */
static void test_tty_pipes(void)
{
    int in[2], out[2];
    g_assert_cmpint(pipe(in), ==, 0);
    g_assert_cmpint(pipe(out), ==, 0);
    int saved_in = dup(STDIN_FILENO), saved_out = dup(STDOUT_FILENO);
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    close(in[0]);
    close(out[1]);
    struct console_config cfg = { .mode = CONSOLE_MODE_TTY };
    struct line_watch w;
    struct serial *s = new_serial(&cfg, &w);
    dup2(saved_in, STDIN_FILENO); /* the serial port holds its own copies */
    dup2(saved_out, STDOUT_FILENO);
    close(saved_in);
    close(saved_out);

    g_assert_cmpint(write(in[1], "typed", 5), ==, 5);
    close(in[1]); /* end of input */
    g_autoptr(GString) got = drain_receive(s, 5, 2000);
    g_assert_cmpstr(got->str, ==, "typed");
    double before = cpu_seconds();
    g_usleep(200 * 1000);
    g_assert_cmpfloat(cpu_seconds() - before, <, 0.1);
    serial_write_reg(s, THR, 'o');
    char c;
    read_exactly(out[0], &c, 1);
    g_assert_cmpint(c, ==, 'o');
    serial_free(s);
    close(out[0]);
}

/* Tty with a terminal on stdin: raw input while the VM lives (output
 * processing kept), the terminal's settings restored afterwards. */
static void test_tty_terminal(void)
{
    int master, slave;
    g_assert_cmpint(openpty(&master, &slave, NULL, NULL, NULL), ==, 0);
    struct termios before;
    tcgetattr(slave, &before);
    g_assert_cmpuint(before.c_lflag & ICANON, !=, 0);
    int saved_in = dup(STDIN_FILENO);
    dup2(slave, STDIN_FILENO);
    struct console_config cfg = { .mode = CONSOLE_MODE_TTY };
    struct line_watch w;
    struct serial *s = new_serial(&cfg, &w);
    struct termios during;
    tcgetattr(slave, &during);
    g_assert_cmpuint(during.c_lflag & (ICANON | ECHO | ISIG), ==, 0);
    g_assert_cmpuint(during.c_oflag & OPOST, ==, before.c_oflag & OPOST);
    g_assert_cmpint(write(master, "x", 1), ==, 1);
    g_autoptr(GString) got = drain_receive(s, 1, 2000);
    g_assert_cmpstr(got->str, ==, "x");
    serial_free(s);
    struct termios after;
    tcgetattr(slave, &after);
    g_assert_cmpuint(after.c_lflag, ==, before.c_lflag);
    dup2(saved_in, STDIN_FILENO);
    close(saved_in);
    close(slave);
    close(master);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/serial/probe-registers", test_probe_registers);
    g_test_add_func("/serial/thr-empty-interrupt", test_thr_empty_interrupt);
    g_test_add_func("/serial/receive-fifo", test_receive_fifo);
    g_test_add_func("/serial/loopback", test_loopback);
    g_test_add_func("/serial/file-output", test_file_output);
    g_test_add_func("/serial/bad-configs", test_bad_configs);
    g_test_add_func("/serial/socket", test_socket);
    g_test_add_func("/serial/pty", test_pty);
    g_test_add_func("/serial/tty-pipes", test_tty_pipes);
    g_test_add_func("/serial/tty-terminal", test_tty_terminal);
    return g_test_run();
}
