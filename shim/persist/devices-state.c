/* Device state in state.json (see devices-state.h). */
#include "persist/devices-state.h"

#include "devices/virtio-vsock.h"
#include "persist/state-json.h"
#include "vm-internal.h"

void devices_quiesce(struct vm *vm)
{
    if (vm->vsock)
        virtio_vsock_quiesce(vm->vsock);
}

void devices_unquiesce(struct vm *vm)
{
    if (vm->vsock)
        virtio_vsock_unquiesce(vm->vsock);
}

void devices_state_save(struct vm *vm, JsonBuilder *b)
{
    json_builder_set_member_name(b, "devices");
    json_builder_begin_object(b);
    if (vm->vsock) {
        json_builder_set_member_name(b, "vsock");
        virtio_vsock_save_state(vm->vsock, b);
    }
    json_builder_end_object(b);
}

bool devices_state_restore(struct vm *vm, JsonObject *root, GError **error)
{
    JsonObject *devices = state_get_object(root, "devices", "state", error);
    if (!devices)
        return false;
    JsonNode *vsock = json_object_get_member(devices, "vsock");
    if (!vsock != !vm->vsock) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                    "state.json %s a vsock device but config.json %s", vsock ? "has" : "has no",
                    vm->vsock ? "asks for one" : "does not");
        return false;
    }
    if (vsock && !JSON_NODE_HOLDS_OBJECT(vsock)) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "state.json: devices.vsock is not an object");
        return false;
    }
    if (vsock && !virtio_vsock_restore_state(vm->vsock, json_node_get_object(vsock), error)) {
        g_prefix_error(error, "restoring the vsock device: ");
        return false;
    }
    return true;
}

void devices_after_restore(struct vm *vm)
{
    if (vm->vsock)
        virtio_vsock_transport_reset(vm->vsock);
}
