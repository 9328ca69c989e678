/* vsnap-pattern SEED LENGTH: print the checksum the test guest reports
 * ("ready sum=...") for a region of LENGTH bytes filled with SEED.
 * Numbers are decimal or 0x-prefixed hex; LENGTH may end in K, M or G (binary).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pattern.h"

static void usage(FILE *to)
{
    fprintf(to, "usage: vsnap-pattern SEED LENGTH\n"
                "  print the 64-bit FNV-1a checksum (16 hex digits) of LENGTH bytes of the\n"
                "  test guest's fill pattern for SEED. LENGTH accepts a K, M or G suffix.\n");
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

int main(int argc, char **argv)
{
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
