/* KVM VM and vCPU state <-> state.json (see cpu-state.h), through the fds
 * the KVM core lends out while the vCPUs are parked (vm.h). */
#include "cpu-state.h"

#include <errno.h>
#include <linux/kvm.h>
#include <string.h>
#include <sys/ioctl.h>

#include "persist/clock.h"
#include "vm-persist.h"
#include "persist/persist-error.h"
#include "state/state-json.h"
#include "core/vm.h"
#include "json/vjson.h"

#define MAX_MSRS 1024u

struct msr_buffer {
    struct kvm_msrs header;
    struct kvm_msr_entry entries[MAX_MSRS];
};

static bool kvm_failed(GError **error, const char *who, const char *what)
{
    int e = errno;
    g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_FAILED, "%s: %s failed: %s", who, what, g_strerror(e));
    return false;
}

/* ---- MSRs ---- */

/* Every MSR KVM knows of (KVM_GET_MSR_INDEX_LIST: real and emulated ones). */
static struct kvm_msr_list *msr_index_list(int dev_kvm_fd, GError **error)
{
    struct kvm_msr_list probe = { .nmsrs = 0 };
    if (ioctl(dev_kvm_fd, KVM_GET_MSR_INDEX_LIST, &probe) < 0 && errno != E2BIG) {
        kvm_failed(error, "KVM", "KVM_GET_MSR_INDEX_LIST");
        return NULL;
    }
    unsigned n = MIN(probe.nmsrs, MAX_MSRS);
    struct kvm_msr_list *list = g_malloc0(sizeof *list + n * sizeof(uint32_t));
    list->nmsrs = n;
    if (ioctl(dev_kvm_fd, KVM_GET_MSR_INDEX_LIST, list) < 0) {
        g_free(list);
        kvm_failed(error, "KVM", "KVM_GET_MSR_INDEX_LIST");
        return NULL;
    }
    return list;
}

/* Read each listed MSR on its own: some exist only with CPUID features this
 * vCPU lacks, and a batch read stops at the first one KVM refuses. What cannot
 * be read is not part of the vCPU's state. */
static bool read_msrs(int vcpu_fd, const struct kvm_msr_list *list, struct msr_buffer *out)
{
    out->header.nmsrs = 0;
    for (unsigned i = 0; i < list->nmsrs; i++) {
        struct {
            struct kvm_msrs header;
            struct kvm_msr_entry entry;
        } one = { .header.nmsrs = 1, .entry.index = list->indices[i] };
        if (ioctl(vcpu_fd, KVM_GET_MSRS, &one) == 1)
            out->entries[out->header.nmsrs++] = one.entry;
    }
    return out->header.nmsrs > 0;
}

static void add_msrs(JsonBuilder *b, const struct msr_buffer *msrs)
{
    vjson_object_begin(b, "msrs");
    for (unsigned i = 0; i < msrs->header.nmsrs; i++) {
        char name[16];
        g_snprintf(name, sizeof name, "0x%x", msrs->entries[i].index);
        vjson_hex64(b, name, msrs->entries[i].data);
    }
    vjson_object_end(b);
}

static bool parse_msrs(JsonObject *vcpu, struct msr_buffer *out, const char *who, GError **error)
{
    JsonObject *obj = state_get_object(vcpu, "msrs", who, error);
    if (!obj)
        return false;
    g_autoptr(GList) names = json_object_get_members(obj);
    out->header.nmsrs = 0;
    for (GList *l = names; l; l = l->next) {
        uint64_t index = 0, value = 0;
        char *end = NULL;
        index = g_ascii_strtoull(l->data, &end, 0);
        if (!end || *end || index > G_MAXUINT32 || out->header.nmsrs >= MAX_MSRS) {
            g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "state.json: %s: bad MSR \"%s\"", who,
                        (const char *)l->data);
            return false;
        }
        if (!state_get_u64(obj, l->data, &value, who, error))
            return false;
        out->entries[out->header.nmsrs++] = (struct kvm_msr_entry){ .index = (uint32_t)index, .data = value };
    }
    return true;
}

/* KVM sets MSRs in order and stops at the first it refuses: name that one. */
static bool write_msrs(int vcpu_fd, struct msr_buffer *msrs, const char *who, GError **error)
{
    int set = ioctl(vcpu_fd, KVM_SET_MSRS, msrs);
    if (set < 0)
        return kvm_failed(error, who, "KVM_SET_MSRS");
    if ((unsigned)set < msrs->header.nmsrs) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_FAILED,
                    "%s: KVM refused MSR 0x%x = 0x%" G_GINT64_MODIFIER "x (%d of %u set)", who,
                    msrs->entries[set].index, (uint64_t)msrs->entries[set].data, set, msrs->header.nmsrs);
        return false;
    }
    return true;
}

/* ---- one vCPU ---- */

static size_t xsave_size(struct vm *vm)
{
    int size = ioctl(vm_kvm_vm_fd(vm), KVM_CHECK_EXTENSION, KVM_CAP_XSAVE2);
    return size > (int)sizeof(struct kvm_xsave) ? (size_t)size : sizeof(struct kvm_xsave);
}

/* A KVM "get" ioctl into a buffer, then into the builder as base64. */
static bool save_blob(JsonBuilder *b, int fd, unsigned long request, const char *ioctl_name,
                      const char *member, void *buf, size_t len, const char *who, GError **error)
{
    if (ioctl(fd, request, buf) < 0)
        return kvm_failed(error, who, ioctl_name);
    vjson_base64(b, member, buf, len);
    return true;
}

static bool save_vcpu(struct vm *vm, unsigned index, const struct kvm_msr_list *list, JsonBuilder *b,
                      GError **error)
{
    int fd = vm_vcpu_fd(vm, index);
    g_autofree char *who = g_strdup_printf("vCPU %u", index);
    struct kvm_regs regs;
    struct kvm_sregs sregs;
    struct kvm_xcrs xcrs;
    struct kvm_lapic_state lapic;
    struct kvm_vcpu_events events;
    struct kvm_debugregs debugregs;
    struct kvm_mp_state mp;
    size_t xsize = xsave_size(vm);
    g_autofree struct kvm_xsave *xsave = g_malloc0(xsize);
    g_autofree struct msr_buffer *msrs = g_new0(struct msr_buffer, 1);
    unsigned long xsave_request = xsize > sizeof(struct kvm_xsave) ? KVM_GET_XSAVE2 : KVM_GET_XSAVE;

    vjson_object_begin(b, NULL);
    bool ok = save_blob(b, fd, KVM_GET_REGS, "KVM_GET_REGS", "regs", &regs, sizeof regs, who, error) &&
              save_blob(b, fd, KVM_GET_SREGS, "KVM_GET_SREGS", "sregs", &sregs, sizeof sregs, who, error) &&
              save_blob(b, fd, xsave_request, "KVM_GET_XSAVE2", "xsave", xsave, xsize, who, error) &&
              save_blob(b, fd, KVM_GET_XCRS, "KVM_GET_XCRS", "xcrs", &xcrs, sizeof xcrs, who, error) &&
              save_blob(b, fd, KVM_GET_LAPIC, "KVM_GET_LAPIC", "lapic", &lapic, sizeof lapic, who, error) &&
              save_blob(b, fd, KVM_GET_VCPU_EVENTS, "KVM_GET_VCPU_EVENTS", "events", &events, sizeof events,
                        who, error) &&
              save_blob(b, fd, KVM_GET_DEBUGREGS, "KVM_GET_DEBUGREGS", "debugregs", &debugregs,
                        sizeof debugregs, who, error);
    if (ok && ioctl(fd, KVM_GET_MP_STATE, &mp) < 0)
        ok = kvm_failed(error, who, "KVM_GET_MP_STATE");
    if (ok) {
        vjson_int(b, "mp_state", mp.mp_state);
        if (!read_msrs(fd, list, msrs))
            ok = kvm_failed(error, who, "KVM_GET_MSRS (no MSR readable)");
        else
            add_msrs(b, msrs);
    }
    vjson_object_end(b);
    return ok;
}

static bool restore_blob(JsonObject *obj, int fd, unsigned long request, const char *ioctl_name,
                         const char *member, void *buf, size_t len, const char *who, GError **error)
{
    if (!state_get_blob(obj, member, buf, len, who, error))
        return false;
    if (ioctl(fd, request, buf) < 0)
        return kvm_failed(error, who, ioctl_name);
    return true;
}

static bool restore_mp_state(JsonObject *obj, int fd, const char *who, GError **error)
{
    JsonNode *node = json_object_get_member(obj, "mp_state");
    if (!node || !JSON_NODE_HOLDS_VALUE(node) || json_node_get_value_type(node) != G_TYPE_INT64) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "state.json: %s: mp_state is missing", who);
        return false;
    }
    struct kvm_mp_state mp = { .mp_state = (uint32_t)json_node_get_int(node) };
    if (ioctl(fd, KVM_SET_MP_STATE, &mp) < 0)
        return kvm_failed(error, who, "KVM_SET_MP_STATE");
    return true;
}

static bool restore_events(JsonObject *obj, int fd, const char *who, GError **error)
{
    struct kvm_vcpu_events events;
    if (!state_get_blob(obj, "events", &events, sizeof events, who, error))
        return false;
    /* KVM_GET_VCPU_EVENTS reports these two without flagging them valid;
     * restore them too (a pending NMI or SIPI must not be lost). */
    events.flags |= KVM_VCPUEVENT_VALID_NMI_PENDING | KVM_VCPUEVENT_VALID_SIPI_VECTOR;
    if (ioctl(fd, KVM_SET_VCPU_EVENTS, &events) < 0)
        return kvm_failed(error, who, "KVM_SET_VCPU_EVENTS");
    return true;
}

static bool restore_vcpu(struct vm *vm, unsigned index, JsonObject *obj, GError **error)
{
    int fd = vm_vcpu_fd(vm, index);
    g_autofree char *who = g_strdup_printf("vCPU %u", index);
    struct kvm_regs regs;
    struct kvm_sregs sregs;
    struct kvm_xcrs xcrs;
    struct kvm_lapic_state lapic;
    struct kvm_debugregs debugregs;
    size_t xsize = xsave_size(vm);
    g_autofree struct kvm_xsave *xsave = g_malloc0(xsize);
    g_autofree struct msr_buffer *msrs = g_new0(struct msr_buffer, 1);

    return restore_mp_state(obj, fd, who, error) &&
           restore_blob(obj, fd, KVM_SET_REGS, "KVM_SET_REGS", "regs", &regs, sizeof regs, who, error) &&
           restore_blob(obj, fd, KVM_SET_SREGS, "KVM_SET_SREGS", "sregs", &sregs, sizeof sregs, who, error) &&
           restore_blob(obj, fd, KVM_SET_XSAVE, "KVM_SET_XSAVE", "xsave", xsave, xsize, who, error) &&
           restore_blob(obj, fd, KVM_SET_XCRS, "KVM_SET_XCRS", "xcrs", &xcrs, sizeof xcrs, who, error) &&
           restore_blob(obj, fd, KVM_SET_DEBUGREGS, "KVM_SET_DEBUGREGS", "debugregs", &debugregs,
                        sizeof debugregs, who, error) &&
           restore_blob(obj, fd, KVM_SET_LAPIC, "KVM_SET_LAPIC", "lapic", &lapic, sizeof lapic, who, error) &&
           parse_msrs(obj, msrs, who, error) && write_msrs(fd, msrs, who, error) &&
           restore_events(obj, fd, who, error);
}

/* ---- the VM: irqchip, PIT, clock ---- */

static const char *const irqchip_names[] = { "pic_master", "pic_slave", "ioapic" };

static bool save_vm(struct vm *vm, JsonBuilder *b, GError **error)
{
    vjson_object_begin(b, "kvm");
    bool ok = true;
    for (unsigned i = 0; ok && i < G_N_ELEMENTS(irqchip_names); i++) {
        struct kvm_irqchip chip = { .chip_id = i };
        ok = save_blob(b, vm_kvm_vm_fd(vm), KVM_GET_IRQCHIP, "KVM_GET_IRQCHIP", irqchip_names[i], &chip, sizeof chip,
                       "VM", error);
    }
    struct kvm_pit_state2 pit;
    ok = ok && save_blob(b, vm_kvm_vm_fd(vm), KVM_GET_PIT2, "KVM_GET_PIT2", "pit", &pit, sizeof pit, "VM", error);
    ok = ok && clock_state_save(vm, b, error);
    if (ok) {
        int khz = ioctl(vm_vcpu_fd(vm, 0), KVM_GET_TSC_KHZ, 0);
        vjson_int(b, "tsc_khz", khz > 0 ? khz : 0);
    }
    vjson_object_end(b);
    return ok;
}

static bool restore_vm(struct vm *vm, JsonObject *root, GError **error)
{
    JsonObject *obj = state_get_object(root, "kvm", "VM", error);
    if (!obj)
        return false;
    for (unsigned i = 0; i < G_N_ELEMENTS(irqchip_names); i++) {
        struct kvm_irqchip chip;
        if (!state_get_blob(obj, irqchip_names[i], &chip, sizeof chip, "VM", error))
            return false;
        chip.chip_id = i;
        if (ioctl(vm_kvm_vm_fd(vm), KVM_SET_IRQCHIP, &chip) < 0)
            return kvm_failed(error, "VM", "KVM_SET_IRQCHIP");
    }
    struct kvm_pit_state2 pit;
    if (!restore_blob(obj, vm_kvm_vm_fd(vm), KVM_SET_PIT2, "KVM_SET_PIT2", "pit", &pit, sizeof pit, "VM", error))
        return false;
    if (!clock_state_restore(vm, obj, &persist_vm_get(vm)->clock, error))
        return false;
    /* The TSC frequency cannot be set here (no KVM_CAP_TSC_CONTROL): a guest
     * moved to a host with another TSC rate would see time run differently. */
    int khz = ioctl(vm_vcpu_fd(vm, 0), KVM_GET_TSC_KHZ, 0);
    gint64 saved = json_object_get_int_member_with_default(obj, "tsc_khz", 0);
    if (saved > 0 && khz > 0 && saved != khz)
        g_warning("restore: the snapshot's TSC ran at %" G_GINT64_FORMAT " kHz, this host's at %d kHz", saved,
                  khz);
    return true;
}

/* ---- both ---- */

bool cpu_state_save(struct vm *vm, JsonBuilder *b, GError **error)
{
    g_autofree struct kvm_msr_list *list = msr_index_list(vm_dev_kvm_fd(vm), error);
    if (!list || !save_vm(vm, b, error))
        return false;
    vjson_array_begin(b, "vcpus");
    bool ok = true;
    for (unsigned i = 0; ok && i < vm_vcpu_count(vm); i++)
        ok = save_vcpu(vm, i, list, b, error);
    vjson_array_end(b);
    return ok;
}

bool cpu_state_restore(struct vm *vm, JsonObject *root, GError **error)
{
    JsonNode *node = json_object_get_member(root, "vcpus");
    if (!node || !JSON_NODE_HOLDS_ARRAY(node)) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "state.json: \"vcpus\" is missing");
        return false;
    }
    JsonArray *vcpus = json_node_get_array(node);
    if (json_array_get_length(vcpus) != vm_vcpu_count(vm)) {
        g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID,
                    "state.json holds %u vCPUs but config.json asks for %u", json_array_get_length(vcpus),
                    vm_vcpu_count(vm));
        return false;
    }
    if (!restore_vm(vm, root, error))
        return false;
    for (unsigned i = 0; i < vm_vcpu_count(vm); i++) {
        JsonNode *vcpu = json_array_get_element(vcpus, i);
        if (!JSON_NODE_HOLDS_OBJECT(vcpu)) {
            g_set_error(error, PERSIST_ERROR, PERSIST_ERROR_INVALID, "state.json: vCPU %u is not an object", i);
            return false;
        }
        if (!restore_vcpu(vm, i, json_node_get_object(vcpu), error))
            return false;
    }
    return true;
}
