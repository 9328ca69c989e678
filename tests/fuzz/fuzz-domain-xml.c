/* Domain XML as virsh define sends it: domain_def_parse_string with the
 * real schema, and for what it accepts, the promises of domain-conf.h and
 * of the shim:
 *   - formatting is round-trip stable (inactive and live forms; the live
 *     form parses with domain_def_parse_live_string);
 *   - the VmConfig JSON the daemon makes for vm.create is one the shim's
 *     own parser accepts (vm_config_from_json_text): a definition the
 *     daemon took never fails at start for a reason it could have seen. */
#include <string.h>

#include "config/vm-config-json.h"
#include "conf/domain-conf.h"
#include "fuzz-common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init_logging();
    return 0;
}

static void check_stable(const struct domain_def *def, bool live)
{
    g_autofree char *once = domain_def_format(def, live, live ? 7 : -1);
    g_autoptr(GError) error = NULL;
    g_autoptr(domain_def) again = live ? domain_def_parse_live_string(once, FUZZ_SCHEMA_DIR, &error)
                                       : domain_def_parse_string(once, FUZZ_SCHEMA_DIR, &error);
    if (!again)
        g_error("the %s XML the daemon formats does not parse: %s\n%s", live ? "live" : "inactive",
                error->message, once);
    g_autofree char *twice = domain_def_format(again, live, live ? 7 : -1);
    if (strcmp(once, twice) != 0)
        g_error("%s domain XML is not round-trip stable:\n%s\n----\n%s", live ? "live" : "inactive",
                once, twice);
}

static void check_vm_config(const struct domain_def *def)
{
    g_autoptr(GError) error = NULL;
    g_autofree char *json = domain_def_to_vm_config_json(def, "/run/vsnap/fuzz/vsock.sock", NULL, &error);
    if (!json) {
        g_assert(error && error->message);
        return;
    }
    g_autoptr(vm_config) cfg = vm_config_from_json_text(json, -1, &error);
    if (!cfg)
        g_error("the shim refuses the VmConfig the daemon made: %s\n%s", error->message, json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    g_autofree char *xml = g_strndup((const char *)data, size);
    if (strlen(xml) != size)
        return -1;   /* the RPC layer hands the parser a C string */
    g_autoptr(GError) error = NULL;
    g_autoptr(domain_def) def = domain_def_parse_string(xml, FUZZ_SCHEMA_DIR, &error);
    if (!def) {
        g_assert(error && error->message);
        return 0;
    }
    check_stable(def, false);
    check_stable(def, true);
    check_vm_config(def);
    return 0;
}
