/* Device state in state.json (see devices-state.h). */
#include "devices-state.h"

#include "devices/acpi-pm.h"
#include "devices/i8042.h"
#include "devices/serial.h"
#include "devices/virtio-blk.h"
#include "devices/virtio-console.h"
#include "devices/virtio-net.h"
#include "devices/virtio-rng.h"
#include "devices/virtio-vsock.h"
#include "devices/vmgenid.h"
#include "persist/persist-error.h"
#include "state/state-json.h"
#include "core/vm.h"
#include "json/vjson.h"

/* A paused VM's disks are paused already (vm_pause): pausing them again
 * nests and returns at once, and keeps them still should that change. */
bool devices_quiesce(struct vm *vm, GError **error)
{
    for (unsigned i = 0; i < vm_disk_count(vm); i++) {
        if (!virtio_blk_pause(vm_disk(vm, i), error)) {
            while (i-- > 0)
                virtio_blk_resume(vm_disk(vm, i));
            g_prefix_error(error, "cannot quiesce the disks: ");
            return false;
        }
    }
    if (vm_vsock(vm))
        virtio_vsock_quiesce(vm_vsock(vm));
    if (vm_console(vm))
        virtio_console_quiesce(vm_console(vm));
    if (vm_rng(vm))
        virtio_rng_quiesce(vm_rng(vm));
    for (unsigned i = 0; i < vm_net_count(vm); i++)
        virtio_net_quiesce(vm_net(vm, i));
    return true;
}

void devices_unquiesce(struct vm *vm)
{
    devices_unquiesce_all_but_disks(vm);
    devices_unquiesce_disks(vm);
}

void devices_unquiesce_all_but_disks(struct vm *vm)
{
    for (unsigned i = 0; i < vm_net_count(vm); i++)
        virtio_net_unquiesce(vm_net(vm, i));
    if (vm_console(vm))
        virtio_console_unquiesce(vm_console(vm));
    if (vm_vsock(vm))
        virtio_vsock_unquiesce(vm_vsock(vm));
    if (vm_rng(vm))
        virtio_rng_unquiesce(vm_rng(vm));
}

void devices_unquiesce_disks(struct vm *vm)
{
    for (unsigned i = 0; i < vm_disk_count(vm); i++)
        virtio_blk_resume(vm_disk(vm, i));
}

void devices_state_save(struct vm *vm, JsonBuilder *b)
{
    vjson_object_begin(b, "devices");
    if (vm_serial(vm)) {
        vjson_member(b, "serial");
        serial_save_state(vm_serial(vm), b);
    }
    vjson_member(b, "i8042");
    i8042_save_state(vm_i8042(vm), b);
    vjson_member(b, "acpi_pm");
    acpi_pm_save_state(vm_acpi_pm(vm), b);
    if (vm_vsock(vm)) {
        vjson_member(b, "vsock");
        virtio_vsock_save_state(vm_vsock(vm), b);
    }
    if (vm_console(vm)) {
        vjson_member(b, "console");
        virtio_console_save_state(vm_console(vm), b);
    }
    if (vm_rng(vm)) {
        vjson_member(b, "rng");
        virtio_rng_save_state(vm_rng(vm), b);
    }
    if (vm_disk_count(vm) > 0) {
        vjson_array_begin(b, "disks");
        for (unsigned i = 0; i < vm_disk_count(vm); i++)
            virtio_blk_save_state(vm_disk(vm, i), b);
        vjson_array_end(b);
    }
    if (vm_net_count(vm) > 0) {
        vjson_array_begin(b, "nets");
        for (unsigned i = 0; i < vm_net_count(vm); i++)
            virtio_net_save_state(vm_net(vm, i), b);
        vjson_array_end(b);
    }
    vjson_object_end(b);
}

/* The serial port exists unless its mode is Off, which config_overrides may
 * change: then its saved state is dropped, or a fresh port starts at reset. */
static bool restore_legacy(struct vm *vm, JsonObject *devices, GError **error)
{
    JsonObject *i8042 = state_get_object(devices, "i8042", "devices", error);
    JsonObject *pm = i8042 ? state_get_object(devices, "acpi_pm", "devices", error) : NULL;
    if (!pm || !i8042_restore_state(vm_i8042(vm), i8042, error) || !acpi_pm_restore_state(vm_acpi_pm(vm), pm, error))
        return false;
    JsonNode *serial = json_object_get_member(devices, "serial");
    if (!vm_serial(vm) || !serial)
        return true;
    if (!JSON_NODE_HOLDS_OBJECT(serial)) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "state.json: devices.serial is not an object");
        return false;
    }
    return serial_restore_state(vm_serial(vm), json_node_get_object(serial), error);
}

/* "disks": one per disk of the config, in its order. */
static bool restore_disks(struct vm *vm, JsonObject *devices, GError **error)
{
    JsonNode *node = json_object_get_member(devices, "disks");
    JsonArray *disks = node && JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : NULL;
    unsigned saved = disks ? json_array_get_length(disks) : 0;
    if ((node && !disks) || saved != vm_disk_count(vm)) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                    "state.json has %u disks, config.json %u", saved, vm_disk_count(vm));
        return false;
    }
    for (unsigned i = 0; i < saved; i++) {
        JsonNode *disk = json_array_get_element(disks, i);
        g_autoptr(GError) local = NULL;
        if (!JSON_NODE_HOLDS_OBJECT(disk)) {
            g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "state.json: devices.disks[%u] is not an object",
                        i);
            return false;
        }
        if (!virtio_blk_restore_state(vm_disk(vm, i), json_node_get_object(disk), &local)) {
            g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "state.json: restoring disk %u: %s", i,
                        local->message);
            return false;
        }
    }
    return true;
}

/* "nets": one per interface of the config, in its order. */
static bool restore_nets(struct vm *vm, JsonObject *devices, GError **error)
{
    JsonNode *node = json_object_get_member(devices, "nets");
    JsonArray *nets = node && JSON_NODE_HOLDS_ARRAY(node) ? json_node_get_array(node) : NULL;
    unsigned saved = nets ? json_array_get_length(nets) : 0;
    if ((node && !nets) || saved != vm_net_count(vm)) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                    "state.json has %u network interfaces, config.json %u", saved, vm_net_count(vm));
        return false;
    }
    for (unsigned i = 0; i < saved; i++) {
        JsonNode *net = json_array_get_element(nets, i);
        g_autoptr(GError) local = NULL;
        if (!JSON_NODE_HOLDS_OBJECT(net) || !virtio_net_restore_state(vm_net(vm, i), json_node_get_object(net), &local)) {
            g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "state.json: restoring network interface %u: %s",
                        i, local ? local->message : "not an object");
            return false;
        }
    }
    return true;
}

/* A virtio device is in state.json exactly when config.json asks for it (a
 * device the guest found cannot vanish, nor others move to its address).
 * *state is its saved state, NULL when neither has it. */
static bool virtio_device_state(JsonObject *devices, const char *name, bool present, JsonObject **state,
                                GError **error)
{
    JsonNode *node = json_object_get_member(devices, name);
    *state = NULL;
    if (!node != !present) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                    "state.json %s a %s device but config.json (with any config_overrides) %s",
                    node ? "has" : "has no", name, present ? "asks for one" : "does not");
        return false;
    }
    if (node && !JSON_NODE_HOLDS_OBJECT(node)) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "state.json: devices.%s is not an object", name);
        return false;
    }
    *state = node ? json_node_get_object(node) : NULL;
    return true;
}

/* Whatever a device refused came from the snapshot. */
static bool device_refused(GError **error, const char *name, const GError *local)
{
    g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "state.json: restoring the %s device: %s", name,
                local->message);
    return false;
}

bool devices_state_restore(struct vm *vm, JsonObject *root, GError **error)
{
    JsonObject *devices = state_get_object(root, "devices", "state", error);
    JsonObject *vsock, *console, *rng;
    g_autoptr(GError) local = NULL;
    if (!devices || !restore_legacy(vm, devices, error) || !restore_disks(vm, devices, error) ||
        !restore_nets(vm, devices, error) ||
        !virtio_device_state(devices, "vsock", vm_vsock(vm) != NULL, &vsock, error) ||
        !virtio_device_state(devices, "console", vm_console(vm) != NULL, &console, error) ||
        !virtio_device_state(devices, "rng", vm_rng(vm) != NULL, &rng, error))
        return false;
    if (vsock && !virtio_vsock_restore_state(vm_vsock(vm), vsock, &local))
        return device_refused(error, "vsock", local);
    if (console && !virtio_console_restore_state(vm_console(vm), console, &local))
        return device_refused(error, "console", local);
    if (rng && !virtio_rng_restore_state(vm_rng(vm), rng, &local))
        return device_refused(error, "rng", local);
    return true;
}

bool devices_after_restore(struct vm *vm, GError **error)
{
    if (!vmgenid_new_generation(vm_vmgenid(vm), true, error))
        return false;
    if (vm_vsock(vm))
        virtio_vsock_transport_reset(vm_vsock(vm));
    /* The VM may sit on another tap, another bridge, another host: the guest
     * tells its neighbours where it is now (a gratuitous ARP). */
    for (unsigned i = 0; i < vm_net_count(vm); i++)
        virtio_net_request_announce(vm_net(vm, i));
    return true;
}
