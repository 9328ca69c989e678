/* What every fuzz target shares: quiet logs (but a g_critical is a crash),
 * a private scratch directory, files from fuzz input, and a conversation
 * with a server on the default main context over a socket. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* libFuzzer's entry points. */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Drop messages below g_critical (FUZZ_VERBOSE=1 prints them); a critical
 * or an error aborts, so a failed g_return_if_fail check is a finding. */
void fuzz_init_logging(void);
/* Except criticals whose message contains text: a library's own known
 * misuse of another (named where it is called), not the code under test. */
void fuzz_tolerate_critical(const char *text);

/* A directory of this process's own, created once, removed at exit. */
const char *fuzz_scratch_dir(void);
/* dir/name (g_free it). */
char *fuzz_path(const char *name);

/* Write len bytes to path, replacing it; aborts on failure (the harness's
 * fault, never the input's). */
void fuzz_write_file(const char *path, const void *data, size_t len);
/* Remove dir and everything under it; a missing dir is fine. */
void fuzz_rmtree(const char *dir);

/* Input text with every "@DIR@" replaced by the scratch directory, so that
 * seeds can name files the harness made (NUL-terminated, g_free it). */
char *fuzz_expand_dir(const uint8_t *data, size_t size, size_t *out_len);

/* Send data on fd (a connected stream socket, made non-blocking), then shut
 * down our sending side and collect what the peer sends, all while
 * iterating the default main context, where the server under test lives.
 * fuzz_converse waits until the peer closes, and aborts when it has not
 * after timeout_ms: a server that hangs on some input is a finding too.
 * fuzz_converse_until_idle stops once everything is sent and nothing is
 * left to do on the main context (for a server that keeps connections
 * open). reply may be NULL. */
void fuzz_converse(int fd, const uint8_t *data, size_t size, GByteArray *reply, unsigned timeout_ms);
void fuzz_converse_until_idle(int fd, const uint8_t *data, size_t size, GByteArray *reply);

/* A connected UNIX stream socket to path; aborts on failure. */
int fuzz_connect_unix(const char *path);
