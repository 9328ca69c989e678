/* vsnap-pattern SEED LENGTH: print the checksum the test guest reports
 * ("ready sum=...") for a region of LENGTH bytes filled with SEED.
 * vsnap-pattern --sum-file FILE OFFSET LENGTH: the checksum of those bytes of
 * a file (a disk image), bytes past its end counting as zeros, as the guest's
 * BLKSUM would read them.
 * vsnap-pattern --fill-file FILE OFFSET LENGTH SEED: write that region of the
 * file as the guest's BLKFILL would (word k of the region is mix(SEED ^ k)).
 * Numbers are decimal or 0x-prefixed hex; sizes may end in K, M or G (binary).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pattern.h"

#define FILE_CHUNK (1u << 20)

static void usage(FILE *to)
{
    fprintf(to, "usage: vsnap-pattern SEED LENGTH\n"
                "       vsnap-pattern --sum-file FILE OFFSET LENGTH\n"
                "       vsnap-pattern --fill-file FILE OFFSET LENGTH SEED\n"
                "  print the 64-bit FNV-1a checksum (16 hex digits) of LENGTH bytes of the\n"
                "  test guest's fill pattern for SEED, or of a file's bytes (zeros past its\n"
                "  end), or write the pattern into a file. Sizes accept a K, M or G suffix.\n");
}

static bool parse_number(const char *text, uint64_t *out, bool allow_suffix)
{
    char *end;
    errno = 0;
    if (!*text || *text == '-' || *text == '+' || *text == ' ')
        return false;
    unsigned long long v = strtoull(text, &end, 0);
    if (errno || end == text)
        return false;
    unsigned shift = 0;
    if (allow_suffix && *end) {
        const char *units = "KMG";
        const char *u = strchr(units, *end);
        if (!u)
            return false;
        shift = 10 * (unsigned)(u - units + 1);
        end++;
    }
    if (*end)
        return false;
    if (shift && v > (UINT64_MAX >> shift))
        return false;
    *out = (uint64_t)v << shift;
    return true;
}

static int sum_file(const char *path, uint64_t offset, uint64_t length)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "vsnap-pattern: %s: %s\n", path, strerror(errno));
        return 1;
    }
    static uint8_t buf[FILE_CHUNK];
    uint64_t hash = PATTERN_FNV_OFFSET_BASIS;
    for (uint64_t done = 0; done < length;) {
        size_t want = length - done < FILE_CHUNK ? (size_t)(length - done) : FILE_CHUNK;
        ssize_t got = pread(fd, buf, want, (off_t)(offset + done));
        if (got < 0) {
            fprintf(stderr, "vsnap-pattern: reading %s: %s\n", path, strerror(errno));
            close(fd);
            return 1;
        }
        if (got == 0) { /* past the end: zeros, as a disk of that capacity reads */
            memset(buf, 0, want);
            got = (ssize_t)want;
        }
        hash = pattern_fnv1a(hash, buf, (size_t)got);
        done += (uint64_t)got;
    }
    close(fd);
    printf("%016" PRIx64 "\n", hash);
    return 0;
}

static int fill_file(const char *path, uint64_t offset, uint64_t length, uint64_t seed)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "vsnap-pattern: %s: %s\n", path, strerror(errno));
        return 1;
    }
    static uint8_t buf[FILE_CHUNK];
    for (uint64_t done = 0; done < length; done += FILE_CHUNK) {
        size_t piece = length - done < FILE_CHUNK ? (size_t)(length - done) : FILE_CHUNK;
        for (size_t off = 0; off < piece; off += 8) {
            uint64_t w = pattern_word(seed, (done + off) / 8);
            for (size_t i = 0; i < 8 && off + i < piece; i++)
                buf[off + i] = (uint8_t)(w >> (8 * i));
        }
        if (pwrite(fd, buf, piece, (off_t)(offset + done)) != (ssize_t)piece) {
            fprintf(stderr, "vsnap-pattern: writing %s: %s\n", path, strerror(errno));
            close(fd);
            return 1;
        }
    }
    if (fsync(fd) != 0 || close(fd) != 0) {
        fprintf(stderr, "vsnap-pattern: writing %s: %s\n", path, strerror(errno));
        return 1;
    }
    return 0;
}

static int file_mode(int argc, char **argv)
{
    bool fill = !strcmp(argv[1], "--fill-file");
    uint64_t offset, length, seed = 0;
    if (argc != (fill ? 6 : 5)) {
        usage(stderr);
        return 2;
    }
    if (!parse_number(argv[3], &offset, true) || !parse_number(argv[4], &length, true) ||
        (fill && !parse_number(argv[5], &seed, false)) || offset + length < offset) {
        fprintf(stderr, "vsnap-pattern: OFFSET, LENGTH%s must be numbers (decimal or 0x hex)\n",
                fill ? " and SEED" : "");
        return 2;
    }
    return fill ? fill_file(argv[2], offset, length, seed) : sum_file(argv[2], offset, length);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && (!strcmp(argv[1], "--sum-file") || !strcmp(argv[1], "--fill-file")))
        return file_mode(argc, argv);
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc != 3) {
        usage(stderr);
        return 2;
    }
    uint64_t seed, length;
    if (!parse_number(argv[1], &seed, false)) {
        fprintf(stderr, "vsnap-pattern: SEED '%s' is not a number (decimal or 0x hex)\n", argv[1]);
        return 2;
    }
    if (!parse_number(argv[2], &length, true)) {
        fprintf(stderr, "vsnap-pattern: LENGTH '%s' is not a byte count (number with optional K, M or G)\n",
                argv[2]);
        return 2;
    }
    printf("%016" PRIx64 "\n", pattern_checksum(seed, length));
    return 0;
}
