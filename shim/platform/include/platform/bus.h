/* Port I/O and MMIO dispatch. Devices register address ranges once at VM build
 * time; vCPU threads look the range up on every exit and call the device. The
 * run loop never knows which devices exist (kvmtool's shape). Each device does
 * its own locking: handlers run on whichever vCPU thread took the exit.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

enum bus_kind { BUS_PIO, BUS_MMIO };

struct bus_ops {
    /* offset is relative to the registered base; len is 1, 2, 4 or 8. */
    void (*read)(void *opaque, uint64_t offset, uint8_t *data, unsigned len);
    void (*write)(void *opaque, uint64_t offset, const uint8_t *data, unsigned len);
};

struct bus_range {
    uint64_t base, len;
    const struct bus_ops *ops;
    void *opaque;
    const char *name;
};

struct bus {
    struct bus_range *ranges;
    unsigned nranges, cap;
};

void bus_init(struct bus *bus);
void bus_release(struct bus *bus);
/* Ranges may not overlap; returns false if they do. */
bool bus_register(struct bus *bus, uint64_t base, uint64_t len, const struct bus_ops *ops,
                  void *opaque, const char *name);
/* Returns false if nothing is mapped there (reads then see all ones). */
bool bus_read(const struct bus *bus, uint64_t addr, uint8_t *data, unsigned len);
bool bus_write(const struct bus *bus, uint64_t addr, const uint8_t *data, unsigned len);

/* An interrupt line a device drives. Devices report the line's level; an
 * edge-triggered GSI (the ISA IRQs of the serial port and i8042) sees the
 * rising edge, a level-triggered one (the ACPI SCI) stays asserted while high.
 * Keeping this a callback lets unit tests watch the line without a VM. */
struct irq_line {
    void (*set_level)(void *opaque, unsigned gsi, bool level);
    void *opaque;
    unsigned gsi;
};

static inline void irq_line_set(const struct irq_line *line, bool level)
{
    if (line->set_level)
        line->set_level(line->opaque, line->gsi, level);
}
