/* The disk commands of the command port (listed in commands.h), run by
 * commands.c: each answers with one line. */
#pragma once

#include <stddef.h>

struct blk_out;

struct blk_command {
    const char *name;
    unsigned nargs;
    void (*run)(char **args, struct blk_out *o);
};

/* The command called name, or NULL. */
const struct blk_command *blk_command_find(const char *name);
/* Run it with its nargs arguments; its answer (no newline) goes to reply. */
void blk_command_run(const struct blk_command *cmd, char **args, char *reply, size_t cap);
