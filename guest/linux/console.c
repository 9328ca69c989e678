#include "console.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void write_line(const char *path, const char *text)
{
    char line[1100];
    int n = snprintf(line, sizeof line, "vsnap-linux: %s\n", text);
    if (n < 0)
        return;
    if (n >= (int)sizeof line)
        n = (int)sizeof line - 1;
    /* Opened per line: a tty stays usable across a restore this way, and the
     * init writes a handful of lines only. */
    int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return;
    if (write(fd, line, (size_t)n) < 0) {
        /* nothing to tell: this is the console */
    }
    close(fd);
}

void console_line_hvc0(const char *text)
{
    write_line("/dev/hvc0", text);
}

void console_printf(const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    write_line("/dev/console", text);
    write_line("/dev/hvc0", text);
}
