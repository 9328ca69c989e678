/* Snapshot XML as virsh snapshot-create and snapshot-create --redefine send
 * it: snapshot_def_parse_string with the real schemas; what it accepts
 * formats round-trip stable (snapshot-conf.h). */
#include <string.h>

#include "fuzz-common.h"
#include "conf/snapshot-conf.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init_logging();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autofree char *xml = g_strndup((const char *)data, size);
    if (strlen(xml) != size)
        return -1;   /* the RPC layer hands the parser a C string */
    g_autoptr(GError) error = NULL;
    g_autoptr(snapshot_def) def = snapshot_def_parse_string(xml, FUZZ_SCHEMA_DIR, &error);
    if (!def) {
        g_assert(error && error->message);
        return 0;
    }
    g_autofree char *once = snapshot_def_format(def);
    g_autoptr(snapshot_def) again = snapshot_def_parse_string(once, FUZZ_SCHEMA_DIR, &error);
    if (!again)
        g_error("the snapshot XML the daemon formats does not parse: %s\n%s", error->message, once);
    g_autofree char *twice = snapshot_def_format(again);
    if (strcmp(once, twice) != 0)
        g_error("snapshot XML is not round-trip stable:\n%s\n----\n%s", once, twice);
    return 0;
}
