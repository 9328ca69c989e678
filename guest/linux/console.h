/* The init's report lines, "vsnap-linux: <text>", on both consoles: the
 * serial port (/dev/console, ttyS0) and virtio-console (/dev/hvc0), so the
 * host sees that each carries what Linux wrote. */
#ifndef VSNAP_LINUX_CONSOLE_H
#define VSNAP_LINUX_CONSOLE_H

void console_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The line on hvc0 only. */
void console_line_hvc0(const char *text);

#endif
