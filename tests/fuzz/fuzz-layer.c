/* One memory layer file as snap_layer_open reads it (header, index, the
 * checks between them, the data mapping), then used as its readers use it.
 * The input is one record of fuzz-layer-file.h: a header, flags saying
 * which checksums the harness makes right, and the rest of the file. */
#include "fuzz-common.h"
#include "fuzz-layer-file.h"
#include "snapshot/layer.h"

static char *path;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init_logging();
    path = fuzz_path("memory-ranges");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_layer_write(path, data, size);
    g_autoptr(GError) error = NULL;
    g_autoptr(snap_layer) layer = snap_layer_open(path, &error);
    if (layer)
        fuzz_layer_exercise(layer);
    else
        g_debug("%s", error->message);
    return 0;
}
