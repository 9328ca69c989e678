/* struct vm: building a KVM VM from a vm_config, and its lifecycle (start,
 * pause, resume, guest stop, free). The run loop is in vcpu.c, devices in
 * devices/, the Linux boot protocol in boot/.
 */
#include <errno.h>
#include <gio/gio.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "block/blk-backend.h"
#include "boot/boot.h"
#include "core/cpuid.h"
#include "devices/acpi-pm.h"
#include "devices/i8042.h"
#include "devices/serial.h"
#include "devices/virtio-blk.h"
#include "devices/virtio-console.h"
#include "devices/virtio-net.h"
#include "devices/virtio-rng.h"
#include "devices/virtio-vsock.h"
#include "devices/vmgenid.h"
#include "vm-internal.h"
#include "json/vjson.h"

#define KVM_TSS_ADDR 0xfffbd000ull          /* 3 pages below the identity map, under 4 GiB */
#define KVM_IDENTITY_MAP_ADDR 0xfffbc000ull
#define PORT_POST_CODE 0x80                  /* POST diagnostics: written a lot, by Linux's io delay too */

const char *vm_stop_reason_to_string(enum vm_stop_reason reason)
{
    switch (reason) {
    case VM_STOP_POWEROFF:
        return "poweroff";
    case VM_STOP_RESET:
        return "reset";
    case VM_STOP_CRASH:
        return "crash";
    }
    return "unknown";
}

static bool kvm_fail(GError **error, const char *what)
{
    int e = errno;
    g_set_error(error, G_IO_ERROR, g_io_error_from_errno(e), "%s failed: %s", what, g_strerror(e));
    return false;
}

static bool refuse(GError **error, const char *message)
{
    g_set_error_literal(error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, message);
    return false;
}

/* What the API layer may let through but this VM cannot do. */
static bool check_config(const struct vm_config *cfg, GError **error)
{
    if (cfg->payload.firmware)
        return refuse(error, "payload.firmware is not supported: vsnap boots Linux kernels directly "
                             "(give payload.kernel)");
    if (!cfg->payload.kernel)
        return refuse(error, "payload.kernel is missing: there is nothing to boot");
    if (cfg->cpus.boot_vcpus < 1 || cfg->cpus.boot_vcpus > VSNAP_MAX_VCPUS) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "cpus.boot_vcpus must be 1..%d, not %u",
                    VSNAP_MAX_VCPUS, cfg->cpus.boot_vcpus);
        return false;
    }
    if (cfg->memory.size < VSNAP_MIN_MEMORY || cfg->memory.size > VSNAP_MAX_MEMORY ||
        cfg->memory.size % GUEST_PAGE_SIZE) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "memory.size must be a multiple of 4 KiB between %llu MiB and %llu GiB, not %" G_GUINT64_FORMAT,
                    VSNAP_MIN_MEMORY >> 20, VSNAP_MAX_MEMORY >> 30, cfg->memory.size);
        return false;
    }
    return true;
}

static bool open_kvm(struct vm *vm, GError **error)
{
    vm->dev_kvm_fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
    if (vm->dev_kvm_fd < 0)
        return kvm_fail(error, "opening /dev/kvm");
    int version = ioctl(vm->dev_kvm_fd, KVM_GET_API_VERSION, 0);
    if (version != KVM_API_VERSION) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, "/dev/kvm speaks API version %d, vsnap needs %d",
                    version, KVM_API_VERSION);
        return false;
    }
    if (ioctl(vm->dev_kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_IMMEDIATE_EXIT) <= 0)
        return refuse(error, "KVM lacks KVM_CAP_IMMEDIATE_EXIT, needed to pause vCPUs reliably");
    int run_size = ioctl(vm->dev_kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);
    if (run_size <= 0)
        return kvm_fail(error, "KVM_GET_VCPU_MMAP_SIZE");
    vm->run_size = (size_t)run_size;
    vm->supported_cpuid = cpuid_get_supported(vm->dev_kvm_fd, error);
    return vm->supported_cpuid != NULL;
}

/* The VM with the platform pieces KVM emulates itself: PIC + IOAPIC + LAPICs
 * and the PIT (with the PC speaker port so 0x61 never exits). */
static bool create_kvm_vm(struct vm *vm, GError **error)
{
    do {
        vm->vm_fd = ioctl(vm->dev_kvm_fd, KVM_CREATE_VM, 0);
    } while (vm->vm_fd < 0 && errno == EINTR);
    if (vm->vm_fd < 0)
        return kvm_fail(error, "KVM_CREATE_VM");
    if (ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, (unsigned long)KVM_TSS_ADDR) < 0)
        return kvm_fail(error, "KVM_SET_TSS_ADDR");
    uint64_t identity_map = KVM_IDENTITY_MAP_ADDR;
    if (ioctl(vm->vm_fd, KVM_SET_IDENTITY_MAP_ADDR, &identity_map) < 0)
        return kvm_fail(error, "KVM_SET_IDENTITY_MAP_ADDR");
    if (ioctl(vm->vm_fd, KVM_CREATE_IRQCHIP, 0) < 0)
        return kvm_fail(error, "KVM_CREATE_IRQCHIP");
    /* KVM wires the PIT to IOAPIC pin 0; our MP table and MADT say pin 2, as
     * on a PC, so install routing that makes the tables true. */
    if (!boot_set_irq_routing(vm->vm_fd, error))
        return false;
    struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };
    if (ioctl(vm->vm_fd, KVM_CREATE_PIT2, &pit) < 0)
        return kvm_fail(error, "KVM_CREATE_PIT2");
    return true;
}

/* RAM: one memfd mapping, one KVM memory slot per region (slot n is
 * mem.regions[n], which is what dirty-log users need to know). */
static bool setup_memory(struct vm *vm, const struct memory_config *cfg, struct guest_memory *restored,
                         GError **error)
{
    /* A restore hands over RAM it prepared: fresh, copied or merged. */
    if (restored) {
        vm->mem = *restored;
        *restored = (struct guest_memory){ .fd = -1 };
    } else if (!guest_memory_init_paged(&vm->mem, cfg->size, memory_config_page_size(cfg), error)) {
        return false;
    }
    for (unsigned i = 0; i < vm->mem.nregions; i++) {
        const struct guest_region *r = &vm->mem.regions[i];
        struct kvm_userspace_memory_region slot = {
            .slot = i,
            .flags = KVM_MEM_LOG_DIRTY_PAGES, /* diff snapshots need the dirty log from boot on */
            .guest_phys_addr = r->gpa,
            .memory_size = r->size,
            .userspace_addr = (uint64_t)(uintptr_t)(vm->mem.host + r->ram_offset),
        };
        if (ioctl(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &slot) < 0)
            return kvm_fail(error, "KVM_SET_USER_MEMORY_REGION");
    }
    if (cfg->prefault && madvise(vm->mem.host, vm->mem.size, MADV_POPULATE_WRITE) < 0)
        return kvm_fail(error, "prefaulting guest RAM (madvise MADV_POPULATE_WRITE)");
    size_t pages = vm->mem.size / GUEST_PAGE_SIZE;
    vm->vmm_dirty_words = (pages + 63) / 64;
    vm->vmm_dirty = g_new0(_Atomic uint64_t, vm->vmm_dirty_words);
    return true;
}

/* ---- devices ---- */

/* Drive a GSI of the in-kernel IOAPIC/PIC. KVM_IRQ_LINE fails only when the VM's interrupt controller is gone or
 * broken. The guest would then wait for interrupts that never come, so the
 * VM stops as crashed, saying why. */
static void set_irq_level(void *opaque, unsigned gsi, bool level)
{
    struct vm *vm = opaque;
    struct kvm_irq_level irq = { .irq = gsi, .level = level };
    if (ioctl(vm->vm_fd, KVM_IRQ_LINE, &irq) == 0)
        return;
    int e = errno;
    g_autofree char *detail = g_strdup_printf("cannot %s GSI %u (KVM_IRQ_LINE): %s", level ? "raise" : "lower",
                                              gsi, g_strerror(e));
    if (!atomic_load(&vm->stop_reported))
        g_warning("%s", detail);
    vm_report_guest_stop(vm, VM_STOP_CRASH, detail);
}

static struct irq_line irq_line_for(struct vm *vm, unsigned gsi)
{
    return (struct irq_line){ .set_level = set_irq_level, .opaque = vm, .gsi = gsi };
}

static void on_i8042_reset(void *opaque)
{
    vm_report_guest_stop(opaque, VM_STOP_RESET, "the guest pulsed the reset line of the i8042 controller");
}

static void on_acpi_reset(void *opaque)
{
    vm_report_guest_stop(opaque, VM_STOP_RESET, "the guest wrote the ACPI reset register");
}

static void on_device_poweroff(void *opaque)
{
    vm_report_guest_stop(opaque, VM_STOP_POWEROFF, "the guest entered ACPI S5");
}

static const struct bus_ops sink_ops = { 0 }; /* writes vanish, reads see all ones */

static bool attach_failed(GError **error, const char *device)
{
    g_set_error(error, G_IO_ERROR, G_IO_ERROR_EXISTS, "cannot register %s: its addresses are taken", device);
    return false;
}

static bool setup_serial(struct vm *vm, const struct console_config *cfg, GError **error)
{
    if (cfg->mode == CONSOLE_MODE_OFF)
        return true; /* Cloud Hypervisor's Off: no UART at all, the port reads all ones */
    struct irq_line irq = irq_line_for(vm, SERIAL_COM1_IRQ);
    vm->serial = serial_new(cfg, &irq, error);
    if (!vm->serial)
        return false;
    return serial_attach(vm->serial, &vm->pio, SERIAL_COM1_PORT) || attach_failed(error, "the serial port");
}

static bool setup_i8042(struct vm *vm, GError **error)
{
    struct irq_line kbd = irq_line_for(vm, I8042_KBD_IRQ), aux = irq_line_for(vm, I8042_AUX_IRQ);
    struct i8042_callbacks cb = { .on_reset = on_i8042_reset, .opaque = vm };
    vm->i8042 = i8042_new(&kbd, &aux, &cb);
    return i8042_attach(vm->i8042, &vm->pio) || attach_failed(error, "the i8042 controller");
}

static bool setup_acpi_pm(struct vm *vm, GError **error)
{
    struct irq_line sci = irq_line_for(vm, ACPI_SCI_IRQ);
    struct acpi_pm_callbacks cb = { .on_poweroff = on_device_poweroff, .on_reset = on_acpi_reset, .opaque = vm };
    vm->acpi_pm = acpi_pm_new(&sci, &cb);
    return acpi_pm_attach(vm->acpi_pm, &vm->pio) || attach_failed(error, "the ACPI PM registers");
}

/* ---- what virtio devices get (devices/virtio-host.h) ---- */

static void host_mark_dirty(void *opaque, uint64_t gpa, uint64_t len)
{
    vm_mark_dirty(opaque, gpa, len);
}

static bool host_bind_ioeventfd(void *opaque, int fd, uint64_t addr, unsigned len, uint64_t datamatch,
                                bool assign)
{
    struct vm *vm = opaque;
    struct kvm_ioeventfd io = {
        .datamatch = datamatch,
        .addr = addr,
        .len = len,
        .fd = fd,
        .flags = KVM_IOEVENTFD_FLAG_DATAMATCH | (assign ? 0 : KVM_IOEVENTFD_FLAG_DEASSIGN),
    };
    return ioctl(vm->vm_fd, KVM_IOEVENTFD, &io) == 0;
}

static bool host_bind_irqfd(void *opaque, int fd, unsigned gsi, bool assign)
{
    struct vm *vm = opaque;
    struct kvm_irqfd irqfd = { .fd = (uint32_t)fd, .gsi = gsi, .flags = assign ? 0 : KVM_IRQFD_FLAG_DEASSIGN };
    return ioctl(vm->vm_fd, KVM_IRQFD, &irqfd) == 0;
}

static struct virtio_host virtio_host_for(struct vm *vm)
{
    return (struct virtio_host){
        .mmio = &vm->mmio,
        .mem = &vm->mem,
        .mark_dirty = host_mark_dirty,
        .set_irq_level = set_irq_level,
        .bind_ioeventfd = host_bind_ioeventfd,
        .bind_irqfd = host_bind_irqfd,
        .opaque = vm,
    };
}

/* What a disk's bytes live in (the one place that decides): its raw image,
 * written in place, until the disk's first snapshot; from then on an
 * overlay over its chain of sealed disk layers over the read-only image. */
static struct blk_backend *open_disk_backend(const struct disk_config *disk, GError **error)
{
    if (!disk->vsnap_chain) {
        struct blk_raw_options raw = {
            .path = disk->path, .readonly = disk->readonly, .direct = disk->direct, .sparse = disk->sparse,
        };
        return blk_raw_open(&raw, error);
    }
    if (!disk->vsnap_overlay) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "disk %s: vsnap_chain without vsnap_overlay",
                    disk->path);
        return NULL;
    }
    struct blk_chain_options chain = {
        .image = disk->path, .direct = disk->direct, .layers = (const char *const *)disk->vsnap_chain,
        .nlayers = g_strv_length(disk->vsnap_chain),
    };
    /* An empty chain: a block pull put the overlay directly on the image. */
    struct blk_raw_options image = { .path = disk->path, .readonly = true, .direct = disk->direct };
    struct blk_backend *lower = chain.nlayers ? blk_chain_open(&chain, error) : blk_raw_open(&image, error);
    struct blk_overlay_options overlay = {
        .path = disk->vsnap_overlay, .image = disk->path, .discard_unmap = disk->vsnap_discard_unmap,
    };
    struct blk_backend *b = lower ? blk_overlay_open(&overlay, lower, error) : NULL;
    /* The guest was offered DISCARD by the disk's config when it was a raw
     * image; the overlay takes it as the hint it is. */
    if (b)
        b->can_discard = disk->sparse;
    return b;
}

struct blk_backend *vm_open_disk_backend(const struct disk_config *disk, GError **error)
{
    return open_disk_backend(disk, error);
}

/* Disks are the virtio-mmio devices from number first on, in config order. */
static bool setup_disks(struct vm *vm, const struct vm_config *cfg, struct virtio_host *host, unsigned first,
                        GError **error)
{
    vm->disks = g_new0(struct virtio_blk *, cfg->ndisks);
    for (unsigned i = 0; i < cfg->ndisks; i++) {
        struct blk_backend *backend = open_disk_backend(&cfg->disks[i], error);
        if (!backend || !(vm->disks[i] = virtio_blk_new(host, first + i, &cfg->disks[i], backend, error))) {
            g_prefix_error(error, "disk %s: ", cfg->disks[i].id);
            return false;
        }
        vm->ndisks = i + 1;
    }
    return true;
}

/* Network interfaces follow the disks, in config order. */
static bool setup_nets(struct vm *vm, const struct vm_config *cfg, struct virtio_host *host, unsigned first,
                       GError **error)
{
    vm->nets = g_new0(struct virtio_net *, cfg->nnets);
    for (unsigned i = 0; i < cfg->nnets; i++) {
        if (!(vm->nets[i] = virtio_net_new(host, first + i, &cfg->nets[i], error)))
            return false;
        vm->nnets = i + 1;
    }
    return true;
}

static void vmgenid_notify(void *opaque)
{
    struct vm *vm = opaque;
    acpi_pm_raise_gpe(vm->acpi_pm, ACPI_GPE_VMGENID);
}

/* The id lives in RAM (boot.h's BOOT_VMGENID_ADDR) and changes through GPE 0. */
static void setup_vmgenid(struct vm *vm)
{
    struct vmgenid_host host = { .mem = &vm->mem, .mark_dirty = host_mark_dirty, .notify = vmgenid_notify,
                                 .opaque = vm };
    vm->vmgenid = vmgenid_new(&host);
}

static bool setup_devices(struct vm *vm, const struct vm_config *cfg, GError **error)
{
    if (!setup_serial(vm, &cfg->serial, error) || !setup_i8042(vm, error) || !setup_acpi_pm(vm, error))
        return false;
    setup_vmgenid(vm);
    if (!bus_register(&vm->pio, PORT_POST_CODE, 1, &sink_ops, NULL, "post-code"))
        return attach_failed(error, "the port 0x80 sink");
    /* virtio-mmio devices take numbers in this order; the transport keeps a copy of host. */
    struct virtio_host host = virtio_host_for(vm);
    unsigned mmio_index = 0;
    if (cfg->vsock.present && !(vm->vsock = virtio_vsock_new(&host, mmio_index++, &cfg->vsock, error)))
        return false;
    if (cfg->console.mode != CONSOLE_MODE_OFF &&
        !(vm->console = virtio_console_new(&host, mmio_index++, &cfg->console, error)))
        return false;
    if (cfg->rng.present && !(vm->rng = virtio_rng_new(&host, mmio_index++, &cfg->rng, error)))
        return false;
    return setup_disks(vm, cfg, &host, mmio_index, error) &&
           setup_nets(vm, cfg, &host, mmio_index + cfg->ndisks, error);
}

bool vm_pause_disks(struct vm *vm, GError **error)
{
    if (vm->disks_paused)
        return true;
    for (unsigned i = 0; i < vm->ndisks; i++) {
        if (!virtio_blk_pause(vm->disks[i], error)) {
            while (i-- > 0)
                virtio_blk_resume(vm->disks[i]);
            return false;
        }
    }
    vm->disks_paused = true;
    return true;
}

void vm_resume_disks(struct vm *vm)
{
    if (!vm->disks_paused)
        return;
    for (unsigned i = 0; i < vm->ndisks; i++)
        virtio_blk_resume(vm->disks[i]);
    vm->disks_paused = false;
}

static void free_disks(struct vm *vm)
{
    for (unsigned i = 0; i < vm->ndisks; i++)
        virtio_blk_free(vm->disks[i]);
    g_clear_pointer(&vm->disks, g_free);
    vm->ndisks = 0;
}

static void free_nets(struct vm *vm)
{
    for (unsigned i = 0; i < vm->nnets; i++)
        virtio_net_free(vm->nets[i]);
    g_clear_pointer(&vm->nets, g_free);
    vm->nnets = 0;
}

static void free_devices(struct vm *vm)
{
    serial_free(vm->serial);
    i8042_free(vm->i8042);
    acpi_pm_free(vm->acpi_pm);
    virtio_vsock_free(vm->vsock); /* stops its thread, unlinks its socket */
    virtio_console_free(vm->console);
    free_disks(vm); /* each stops its I/O thread, requests in flight complete first */
    free_nets(vm);
    virtio_rng_free(vm->rng);
    vmgenid_free(vm->vmgenid);
    vm->vmgenid = NULL;
    vm->vsock = NULL;
    vm->console = NULL;
    vm->rng = NULL;
    vm->serial = NULL;
    vm->i8042 = NULL;
    vm->acpi_pm = NULL;
}

/* ---- vCPUs and payload ---- */

static bool create_vcpus(struct vm *vm, unsigned count, GError **error)
{
    vm->vcpus = g_new0(struct vcpu, count);
    for (unsigned i = 0; i < count; i++)
        vm->vcpus[i].fd = -1;
    vm->nvcpus = count;
    for (unsigned i = 0; i < count; i++) {
        if (!vcpu_create(vm, &vm->vcpus[i], i, error))
            return false;
    }
    return true;
}

/* virtio-mmio devices are declared on the command line, as Firecracker does:
 * vsock, console, then the disks in config order (their device numbers). */
static char *kernel_cmdline(struct vm *vm, const struct vm_config *cfg)
{
    GString *line = g_string_new(cfg->payload.cmdline);
    GPtrArray *entries = g_ptr_array_new_with_free_func(g_free);
    if (vm->vsock)
        g_ptr_array_add(entries, virtio_vsock_cmdline_entry(vm->vsock));
    if (vm->console)
        g_ptr_array_add(entries, virtio_console_cmdline_entry(vm->console));
    if (vm->rng)
        g_ptr_array_add(entries, virtio_rng_cmdline_entry(vm->rng));
    for (unsigned i = 0; i < vm->ndisks; i++)
        g_ptr_array_add(entries, virtio_blk_cmdline_entry(vm->disks[i]));
    for (unsigned i = 0; i < vm->nnets; i++)
        g_ptr_array_add(entries, virtio_net_cmdline_entry(vm->nets[i]));
    for (guint i = 0; i < entries->len; i++)
        g_string_append_printf(line, "%s%s", line->len ? " " : "", (const char *)entries->pdata[i]);
    g_ptr_array_unref(entries);
    return g_string_free(line, FALSE);
}

/* "xxxxxxxx-xxxx-..." (checked by the config) into 16 bytes in text order. */
static void parse_uuid(const char *text, uint8_t out[16])
{
    unsigned n = 0;
    for (const char *p = text; *p && n < 32; p++) {
        if (*p == '-')
            continue;
        uint8_t nibble = (uint8_t)g_ascii_xdigit_value(*p);
        out[n / 2] = (uint8_t)(n % 2 ? out[n / 2] | nibble : nibble << 4);
        n++;
    }
}

/* The machine's identity in SMBIOS: Cloud Hypervisor's platform config. */
static struct boot_smbios smbios_for(const struct vm_config *cfg, unsigned ncpus)
{
    const struct platform_config *p = &cfg->platform;
    struct boot_smbios smbios = {
        .manufacturer = p->system.manufacturer, .product_name = p->system.product_name,
        .version = p->system.version, .serial_number = p->serial_number, .sku_number = p->system.sku_number,
        .family = p->system.family, .oem_strings = p->oem_strings, .ncpus = ncpus,
    };
    if (p->uuid)
        parse_uuid(p->uuid, smbios.uuid);
    return smbios;
}

static bool load_payload(struct vm *vm, const struct vm_config *cfg, GError **error)
{
    g_autofree char *cmdline = kernel_cmdline(vm, cfg);
    struct boot_smbios smbios = smbios_for(cfg, vm->nvcpus);
    struct boot_input in = {
        .kernel_path = cfg->payload.kernel,
        .initramfs_path = cfg->payload.initramfs,
        .cmdline = cmdline,
        .ncpus = vm->nvcpus,
        .smbios = &smbios,
    };
    struct boot_entry entry;
    boot_write_gdt_and_page_tables(&vm->mem);
    if (!boot_load_linux(&vm->mem, &in, &entry, error) || !vmgenid_new_generation(vm->vmgenid, false, error))
        return false;
    return boot_setup_bsp(vm->vcpus[0].fd, &entry, error);
}

/* The empty VM vm_new and vm_new_for_restore both start from. */
static struct vm *vm_alloc(const struct vm_callbacks *cb)
{
    struct vm *vm = g_new0(struct vm, 1);
    vm->dev_kvm_fd = vm->vm_fd = -1;
    vm->mem.fd = -1;
    if (cb)
        vm->cb = *cb;
    g_mutex_init(&vm->run_lock);
    g_cond_init(&vm->run_cond);
    g_mutex_init(&vm->mmio_log_lock);
    vm->mmio_logged = g_hash_table_new(g_direct_hash, g_direct_equal);
    bus_init(&vm->pio);
    bus_init(&vm->mmio);
    vm->state = VM_RUN_CREATED;
    vcpu_install_kick_handler();
    return vm;
}

struct vm *vm_new(const struct vm_config *cfg, const struct vm_callbacks *cb, GError **error)
{
    if (!check_config(cfg, error))
        return NULL;
    struct vm *vm = vm_alloc(cb);
    if (!open_kvm(vm, error) || !create_kvm_vm(vm, error) || !setup_memory(vm, &cfg->memory, NULL, error) ||
        !setup_devices(vm, cfg, error) || !create_vcpus(vm, cfg->cpus.boot_vcpus, error) ||
        !load_payload(vm, cfg, error)) {
        vm_free(vm);
        return NULL;
    }
    return vm;
}

struct vm *vm_new_for_restore(const struct vm_config *cfg, const struct vm_callbacks *cb,
                              struct guest_memory *ram, GError **error)
{
    if (!check_config(cfg, error))
        return NULL;
    if (ram->size != cfg->memory.size || ram->page_size != memory_config_page_size(&cfg->memory)) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                    "restored RAM has %" G_GUINT64_FORMAT " bytes on %" G_GUINT64_FORMAT "-byte pages, the config "
                    "says %" G_GUINT64_FORMAT " on %" G_GUINT64_FORMAT, ram->size, ram->page_size, cfg->memory.size,
                    memory_config_page_size(&cfg->memory));
        return NULL;
    }
    struct vm *vm = vm_alloc(cb);
    if (!open_kvm(vm, error) || !create_kvm_vm(vm, error) || !setup_memory(vm, &cfg->memory, ram, error) ||
        !setup_devices(vm, cfg, error) || !create_vcpus(vm, cfg->cpus.boot_vcpus, error)) {
        vm_free(vm);
        return NULL;
    }
    return vm;
}

void vm_free(struct vm *vm)
{
    if (!vm)
        return;
    if (vm_on_vcpu_thread(vm)) {
        g_critical("vm_free called on a vCPU thread: hop to the main thread first (see vm.h); VM leaked");
        return;
    }
    vm_stop_vcpu_threads(vm);
    for (unsigned i = 0; i < vm->nvcpus; i++)
        vcpu_destroy(&vm->vcpus[i]);
    g_free(vm->vcpus);
    free_devices(vm); /* after the vCPUs: no handler can run any more */
    /* persist: snapshot state goes once no thread can touch RAM: a device
     * thread may wait on a fault that an on-demand RAM server must answer
     * (stopped earlier, it would hand that thread zero pages). */
    if (vm->persist_release)
        vm->persist_release(vm->persist);
    bus_release(&vm->pio);
    bus_release(&vm->mmio);
    if (vm->vm_fd >= 0)
        close(vm->vm_fd);
    guest_memory_release(&vm->mem); /* after the VM fd: KVM holds the slots until then */
    if (vm->dev_kvm_fd >= 0)
        close(vm->dev_kvm_fd);
    g_free(vm->supported_cpuid);
    g_free(vm->vmm_dirty);
    g_hash_table_destroy(vm->mmio_logged);
    g_mutex_clear(&vm->mmio_log_lock);
    g_cond_clear(&vm->run_cond);
    g_mutex_clear(&vm->run_lock);
    g_free(vm);
}

void vm_power_button(struct vm *vm)
{
    acpi_pm_press_power_button(vm->acpi_pm);
}

/* ---- what others read ---- */

static void add_exit_counters(JsonBuilder *b, const char *name, const uint64_t counts[VCPU_EXIT_KINDS])
{
    vjson_object_begin(b, name);
    for (int k = 0; k < VCPU_EXIT_KINDS; k++) {
        g_autofree char *member = g_strdup_printf("exits_%s", vcpu_exit_kind_name(k));
        vjson_int(b, member, (gint64)counts[k]);
    }
    vjson_object_end(b);
}

/* Members of the counters object: "serial" (if present), "vcpus" (exits of
 * every kind summed over vCPUs), "vcpuN" per vCPU, "vsock" (if present) and
 * one per disk, named by its id. */
void vm_add_counters(struct vm *vm, JsonBuilder *b)
{
    if (vm->serial) {
        vjson_object_begin(b, "serial");
        vjson_int(b, "tx_bytes", (gint64)serial_tx_bytes(vm->serial));
        vjson_int(b, "rx_bytes", (gint64)serial_rx_bytes(vm->serial));
        vjson_object_end(b);
    }
    uint64_t total[VCPU_EXIT_KINDS] = { 0 };
    for (unsigned i = 0; i < vm->nvcpus; i++) {
        uint64_t mine[VCPU_EXIT_KINDS];
        for (int k = 0; k < VCPU_EXIT_KINDS; k++) {
            mine[k] = atomic_load(&vm->vcpus[i].exits[k]);
            total[k] += mine[k];
        }
        g_autofree char *name = g_strdup_printf("vcpu%u", i);
        add_exit_counters(b, name, mine);
    }
    add_exit_counters(b, "vcpus", total);
    if (vm->vsock)
        virtio_vsock_add_counters(vm->vsock, b);
    if (vm->console)
        virtio_console_add_counters(vm->console, b);
    if (vm->rng)
        virtio_rng_add_counters(vm->rng, b);
    for (unsigned i = 0; i < vm->ndisks; i++)
        virtio_blk_add_counters(vm->disks[i], b);
    for (unsigned i = 0; i < vm->nnets; i++)
        virtio_net_add_counters(vm->nets[i], b);
}

uint64_t vm_ram_resident_bytes(struct vm *vm)
{
    const uint64_t chunk_pages = 16384; /* 64 MiB of RAM per mincore call */
    g_autofree unsigned char *vec = g_malloc(chunk_pages);
    uint64_t resident = 0, pages = vm->mem.size / GUEST_PAGE_SIZE;
    for (uint64_t first = 0; first < pages; first += chunk_pages) {
        uint64_t n = MIN(chunk_pages, pages - first);
        if (mincore(vm->mem.host + first * GUEST_PAGE_SIZE, n * GUEST_PAGE_SIZE, vec) < 0)
            continue;
        for (uint64_t i = 0; i < n; i++)
            resident += vec[i] & 1;
    }
    return resident * GUEST_PAGE_SIZE;
}

uint64_t vm_ram_size(struct vm *vm)
{
    return vm->mem.size;
}

struct guest_memory *vm_memory(struct vm *vm)
{
    return &vm->mem;
}

int vm_kvm_vm_fd(struct vm *vm)
{
    return vm->vm_fd;
}

int vm_dev_kvm_fd(struct vm *vm)
{
    return vm->dev_kvm_fd;
}

unsigned vm_vcpu_count(struct vm *vm)
{
    return vm->nvcpus;
}

int vm_vcpu_fd(struct vm *vm, unsigned index)
{
    return index < vm->nvcpus ? vm->vcpus[index].fd : -1;
}

struct serial *vm_serial(struct vm *vm)
{
    return vm->serial;
}

struct i8042 *vm_i8042(struct vm *vm)
{
    return vm->i8042;
}

struct acpi_pm *vm_acpi_pm(struct vm *vm)
{
    return vm->acpi_pm;
}

struct virtio_vsock *vm_vsock(struct vm *vm)
{
    return vm->vsock;
}

struct virtio_console *vm_console(struct vm *vm)
{
    return vm->console;
}

unsigned vm_disk_count(struct vm *vm)
{
    return vm->ndisks;
}

struct virtio_blk *vm_disk(struct vm *vm, unsigned index)
{
    return index < vm->ndisks ? vm->disks[index] : NULL;
}

bool vm_disk_layers_moved(struct vm *vm, const char *from, const char *to, GError **error)
{
    for (unsigned i = 0; i < vm->ndisks; i++) {
        if (!virtio_blk_pause(vm->disks[i], error))
            return false;
        blk_chain_layers_moved(virtio_blk_backend(vm->disks[i]), from, to);
        virtio_blk_resume(vm->disks[i]);
    }
    return true;
}

unsigned vm_net_count(struct vm *vm)
{
    return vm->nnets;
}

struct virtio_net *vm_net(struct vm *vm, unsigned index)
{
    return index < vm->nnets ? vm->nets[index] : NULL;
}

struct virtio_net *vm_find_net(struct vm *vm, const char *id)
{
    for (unsigned i = 0; i < vm->nnets; i++)
        if (g_strcmp0(virtio_net_id(vm->nets[i]), id) == 0)
            return vm->nets[i];
    return NULL;
}

struct virtio_rng *vm_rng(struct vm *vm)
{
    return vm->rng;
}

struct vmgenid *vm_vmgenid(struct vm *vm)
{
    return vm->vmgenid;
}

void vm_set_persist_state(struct vm *vm, void *data, void (*release)(void *data))
{
    vm->persist = data;
    vm->persist_release = release;
}

void *vm_get_persist_state(struct vm *vm)
{
    return vm->persist;
}

bool vm_serve_vsock_port(struct vm *vm, const struct vsock_port_handler *handler, GError **error)
{
    if (!vm->vsock) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "the VM has no vsock device to serve port %u on",
                    handler->port);
        return false;
    }
    return virtio_vsock_serve_port(vm->vsock, handler, error);
}

const char *vm_serial_pty_path(struct vm *vm)
{
    return vm->serial ? serial_pty_path(vm->serial) : NULL;
}

const char *vm_console_pty_path(struct vm *vm)
{
    return vm->console ? virtio_console_pty_path(vm->console) : NULL;
}

void vm_mark_dirty(struct vm *vm, uint64_t gpa, uint64_t len)
{
    if (len == 0)
        return;
    for (uint64_t page = gpa & ~(GUEST_PAGE_SIZE - 1); page < gpa + len; page += GUEST_PAGE_SIZE) {
        uint64_t offset = guest_memory_offset(&vm->mem, page);
        if (offset == UINT64_MAX)
            continue;
        uint64_t index = offset / GUEST_PAGE_SIZE;
        atomic_fetch_or(&vm->vmm_dirty[index / 64], 1ull << (index % 64));
    }
}

uint64_t *vm_fetch_and_clear_vmm_dirty(struct vm *vm, size_t *nwords)
{
    uint64_t *copy = g_new(uint64_t, vm->vmm_dirty_words);
    for (size_t i = 0; i < vm->vmm_dirty_words; i++)
        copy[i] = atomic_exchange(&vm->vmm_dirty[i], 0);
    *nwords = vm->vmm_dirty_words;
    return copy;
}
