/* The shim's JSON request bodies, parsed by the handlers' own functions:
 *   vm.create    VmConfig (vm_config_from_json_text), and the config it
 *                makes turned back into JSON must parse to the same JSON;
 *   vm.snapshot  snapshot_body_parse;
 *   vm.restore   restore_body_parse, then its config_overrides applied to a
 *                snapshot's config.json (persist_config_with_overrides).
 * Input: the endpoint's name on the first line, the body after it. */
#include <string.h>

#include "api/snapshot-body.h"
#include "config/vm-config-json.h"
#include "fuzz-common.h"
#include "persist/persist.h"

/* config.json as a snapshot of a VM with every overridable section has it. */
static const char snapshot_config[] =
    "{\"payload\": {\"kernel\": \"/boot/vmlinuz\", \"cmdline\": \"console=ttyS0\"},"
    " \"cpus\": {\"boot_vcpus\": 1, \"max_vcpus\": 1},"
    " \"memory\": {\"size\": 67108864},"
    " \"serial\": {\"mode\": \"File\", \"file\": \"/tmp/serial.log\"},"
    " \"console\": {\"mode\": \"Off\"},"
    " \"vsock\": {\"cid\": 3, \"socket\": \"/tmp/vsock.sock\"}}";

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_init_logging();
    return 0;
}

static void check_round_trip(const struct vm_config *cfg)
{
    g_autoptr(JsonNode) once = vm_config_to_json(cfg);
    g_autofree char *text = json_to_string(once, FALSE);
    g_autoptr(GError) error = NULL;
    g_autoptr(vm_config) again = vm_config_from_json(once, &error);
    if (!again)
        g_error("vm_config_to_json wrote a VmConfig it refuses: %s\n%s", error->message, text);
    g_autoptr(JsonNode) twice = vm_config_to_json(again);
    g_autofree char *text2 = json_to_string(twice, FALSE);
    if (strcmp(text, text2) != 0)
        g_error("VmConfig JSON is not stable:\n%s\n%s", text, text2);
}

static void fuzz_vm_create(GBytes *body)
{
    gsize len;
    const char *text = g_bytes_get_data(body, &len);
    if (len == 0)
        return;   /* the handler refuses an empty body before parsing */
    g_autoptr(GError) error = NULL;
    g_autoptr(vm_config) cfg = vm_config_from_json_text(text, (gssize)len, &error);
    if (cfg)
        check_round_trip(cfg);
    else
        g_assert(error && error->message);
}

static void fuzz_vm_snapshot(GBytes *body)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    struct persist_snapshot_request req = {0};
    if (snapshot_body_parse(body, parser, &req, &error))
        g_assert(req.destination_url && (!req.diff || req.parent_url));
    else
        g_assert(error && error->message);
}

static void fuzz_vm_restore(GBytes *body)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autoptr(GError) error = NULL;
    struct restore_body rb = {0};
    if (!restore_body_parse(body, parser, &rb, &error)) {
        g_assert(error && error->message);
        return;
    }
    g_assert(rb.req.source_url);
    if (!rb.req.config_overrides)
        return;
    /* As a local snapshot, and as one from a store (host paths only from
     * the overrides). */
    for (int from_store = 0; from_store < 2; from_store++) {
        g_autoptr(JsonParser) config = json_parser_new();
        if (!json_parser_load_from_data(config, snapshot_config, -1, NULL))
            g_error("fuzz: the fixture config.json does not parse");
        g_clear_error(&error);
        g_autoptr(vm_config) cfg = persist_config_with_overrides(json_parser_get_root(config),
                                                                  rb.req.config_overrides, from_store,
                                                                  "/snapshot", &error);
        if (cfg)
            check_round_trip(cfg);
        else
            g_assert(error && error->message);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    if (!nl)
        return -1;   /* not an input of this target: keep it out of the corpus */
    size_t name_len = (size_t)(nl - data);
    g_autoptr(GBytes) body = g_bytes_new(nl + 1, size - name_len - 1);
    static const struct {
        const char *name;
        void (*fuzz)(GBytes *body);
    } endpoints[] = {
        {"vm.create", fuzz_vm_create},
        {"vm.snapshot", fuzz_vm_snapshot},
        {"vm.restore", fuzz_vm_restore},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(endpoints); i++) {
        if (strlen(endpoints[i].name) == name_len && memcmp(data, endpoints[i].name, name_len) == 0) {
            endpoints[i].fuzz(body);
            return 0;
        }
    }
    return -1;
}
