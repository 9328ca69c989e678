/* Size, depth and plain-JSON checks before json-glib parses (see bounded-json.h). */
#include "json/bounded-json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool refuse(GError **error, size_t at, const char *why)
{
    g_set_error(error, JSON_PARSER_ERROR, JSON_PARSER_ERROR_INVALID_DATA, "at byte %zu: %s", at, why);
    return false;
}

static bool is_hex(char c)
{
    return g_ascii_isxdigit(c);
}

/* The string whose opening quote is at text[*at]: plain JSON escapes, no raw
 * control characters. *at ends on the closing quote. */
static bool skip_string(const char *text, size_t len, size_t *at, GError **error)
{
    size_t start = *at;
    for (size_t i = start + 1; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '"') {
            *at = i;
            return true;
        }
        if (c < 0x20)
            return refuse(error, i, "a control character inside a string");
        if (c != '\\')
            continue;
        if (++i >= len)
            break;
        if (text[i] == 'u') {
            if (len - i < 5 || !is_hex(text[i + 1]) || !is_hex(text[i + 2]) || !is_hex(text[i + 3]) ||
                !is_hex(text[i + 4]))
                return refuse(error, i - 1, "a \\u escape without four hex digits");
            i += 4;
        } else if (!strchr("\"\\/bfnrt", text[i]) || text[i] == '\0') {
            return refuse(error, i - 1, "an escape JSON does not have");
        }
    }
    return refuse(error, start, "a string that never ends");
}

/* Outside strings, plain JSON holds structure, white space, numbers and the
 * letters of true, false and null (the parser checks which words). */
static bool is_plain_token_char(char c)
{
    return g_ascii_isalnum(c) || strchr(" \t\r\n,:+-.", c);
}

bool bounded_json_check(const char *text, size_t len, size_t max_bytes, GError **error)
{
    if (len > max_bytes) {
        g_set_error(error, JSON_PARSER_ERROR, JSON_PARSER_ERROR_INVALID_DATA,
                    "%zu bytes, more than the %zu this document may have", len, max_bytes);
        return false;
    }
    unsigned depth = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c == '[' || c == '{') {
            if (++depth > BOUNDED_JSON_MAX_DEPTH) {
                g_set_error(error, JSON_PARSER_ERROR, JSON_PARSER_ERROR_INVALID_DATA,
                            "at byte %zu: nested more than %u levels deep", i, BOUNDED_JSON_MAX_DEPTH);
                return false;
            }
        } else if (c == ']' || c == '}') {
            if (depth)
                depth--;
        } else if (c == '"') {
            if (!skip_string(text, len, &i, error))
                return false;
        } else if (c == '\0' || !is_plain_token_char(c)) {
            return refuse(error, i, "not plain JSON (comments, single quotes and control characters are refused)");
        }
    }
    return true;
}

bool bounded_json_load_data(JsonParser *parser, const char *text, size_t len, size_t max_bytes,
                            GError **error)
{
    return bounded_json_check(text, len, max_bytes, error) &&
           json_parser_load_from_data(parser, len ? text : "", (gssize)len, error);
}

static bool io_failed(GError **error, const char *what)
{
    int e = errno;
    g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e), "%s: %s", what, g_strerror(e));
    return false;
}

/* All of a regular file of at most max_bytes, into *out (NUL-terminated). */
static bool read_bounded(int fd, size_t max_bytes, char **out, size_t *out_len, GError **error)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return io_failed(error, "cannot stat");
    if (!S_ISREG(st.st_mode)) {
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_NOT_REGULAR_FILE, "not a regular file");
        return false;
    }
    if ((uint64_t)st.st_size > max_bytes) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE,
                    "%lld bytes, more than the %zu this file may have", (long long)st.st_size, max_bytes);
        return false;
    }
    /* One byte more than fstat said, so a file that grows meanwhile is noticed. */
    size_t want = (size_t)st.st_size + 1, got = 0;
    g_autofree char *buf = g_malloc(want + 1);
    while (got < want) {
        ssize_t n = read(fd, buf + got, want - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return io_failed(error, "cannot read");
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got == want) {
        g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_FAILED, "the file grew while being read");
        return false;
    }
    buf[got] = '\0';
    *out = g_steal_pointer(&buf);
    *out_len = got;
    return true;
}

bool bounded_json_read_file(const char *path, size_t max_bytes, char **text, size_t *len, GError **error)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return io_failed(error, "cannot open");
    bool ok = read_bounded(fd, max_bytes, text, len, error);
    close(fd);
    return ok;
}

bool bounded_json_load_file(JsonParser *parser, const char *path, size_t max_bytes, GError **error)
{
    g_autofree char *text = NULL;
    size_t len = 0;
    return bounded_json_read_file(path, max_bytes, &text, &len, error) &&
           bounded_json_load_data(parser, text, len, max_bytes, error);
}
