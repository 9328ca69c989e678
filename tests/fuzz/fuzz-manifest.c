/* A store's manifest as every reader of a store parses it (manifest_parse):
 * size, depth, plain JSON, then the fields. What parses must write out
 * again (manifest_to_json) and parse back to the same text.
 *
 * Input: the manifest's bytes, as a store would serve them. */
#include "fuzz-common.h"
#include "store/manifest.h"
#include "store/store.h"

#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_init_logging();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autoptr(GBytes) input = g_bytes_new(data, size);
    g_autoptr(GError) error = NULL;
    g_autoptr(manifest) m = manifest_parse(input, "manifests/fuzz.json", &error);
    if (!m) {
        g_assert_nonnull(error);
        return 0;
    }
    g_autoptr(GBytes) text = manifest_to_json(m);
    g_autoptr(manifest) back = manifest_parse(text, "manifests/again.json", &error);
    if (!back)
        g_error("a manifest that parsed does not parse once written out: %s", error->message);
    g_autoptr(GBytes) again = manifest_to_json(back);
    if (!g_bytes_equal(text, again))
        g_error("a manifest written out, parsed and written again changed");
    return 0;
}
