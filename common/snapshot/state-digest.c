/* The checksums that bind a snapshot directory's files together (see
 * directory.h and README.md): state.json's own SHA-256, computed over the
 * file with the digest's digits as zeros, and the SHA-256 of config.json that
 * state.json records. */
#include "snapshot/directory.h"

#include <errno.h>
#include <string.h>

#include "json/bounded-json.h"
#include "layer-internal.h"

#define SNAP_DIGEST_LEN 64

static const char placeholder[] = "0000000000000000000000000000000000000000000000000000000000000000";
G_STATIC_ASSERT(sizeof(placeholder) == SNAP_DIGEST_LEN + 1);

void snap_sha256(const void *data, size_t len, char out[65])
{
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    g_checksum_update(sum, data, (gssize)len);
    g_strlcpy(out, g_checksum_get_string(sum), 65);
}

bool snap_is_digest(const char *text)
{
    if (!text || strlen(text) != SNAP_DIGEST_LEN)
        return false;
    for (const char *p = text; *p; p++)
        if (!g_ascii_isxdigit(*p) || g_ascii_isupper(*p))
            return false;
    return true;
}

/* The last occurrence of "<digest>" (with its quotes) in text: the digest
 * member is the last one the writer puts in the file. */
static char *find_digest(char *text, size_t len, const char *digest)
{
    char needle[SNAP_DIGEST_LEN + 3];
    g_snprintf(needle, sizeof needle, "\"%s\"", digest);
    char *found = NULL;
    for (char *p = text; (p = g_strstr_len(p, (gssize)(len - (size_t)(p - text)), needle)); p++)
        found = p;
    return found ? found + 1 : NULL;
}

char *snap_state_text(JsonNode *root)
{
    JsonObject *obj = json_node_get_object(root);
    json_object_remove_member(obj, SNAP_STATE_DIGEST_MEMBER);
    json_object_set_string_member(obj, SNAP_STATE_DIGEST_MEMBER, placeholder);
    char *text = json_to_string(root, TRUE);
    size_t len = strlen(text);
    char *digits = find_digest(text, len, placeholder);
    g_assert(digits);
    char digest[65];
    snap_sha256(text, len, digest);
    memcpy(digits, digest, SNAP_DIGEST_LEN);
    json_object_set_string_member(obj, SNAP_STATE_DIGEST_MEMBER, digest);
    return text;
}

bool snap_state_digest_matches(const char *text, size_t len, const char *digest)
{
    g_autofree char *copy = g_memdup2(text, len);
    char *digits = snap_is_digest(digest) ? find_digest(copy, len, digest) : NULL;
    if (!digits)
        return false;
    memset(digits, '0', SNAP_DIGEST_LEN);
    char computed[65];
    snap_sha256(copy, len, computed);
    return strcmp(computed, digest) == 0;
}

bool snap_file_sha256(const char *path, size_t max, char out[65], GError **error)
{
    g_autofree char *bytes = NULL;
    size_t len = 0;
    g_autoptr(GError) local = NULL;
    /* Bounded as it is read, from a regular file only (never a FIFO's wait). */
    if (!bounded_json_read_file(path, max, &bytes, &len, &local)) {
        g_set_error(error, SNAP_ERROR, SNAP_ERROR_FORMAT, "cannot read %s: %s", path, local->message);
        return false;
    }
    snap_sha256(bytes, len, out);
    return true;
}
