/* vsnap's domain definition: libvirt's <domain> subset plus the vsnap metadata
 * namespace (urn:vsnap:domain:1). Parsed with libxml2 and validated against
 * xml/domain.rng; anything outside the subset is refused with
 * VIR_ERR_CONFIG_UNSUPPORTED naming the element, never dropped.
 */
#pragma once

#include <glib.h>
#include <json-glib/json-glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "util/virt-error.h"

#define VSNAP_DOMAIN_NS "urn:vsnap:domain:1"
#define VSNAP_DEFAULT_READINESS_PORT 1024
#define VSNAP_DEFAULT_NOTIFY_PORT 1025
#define VSNAP_DEFAULT_RNG_BACKEND "/dev/urandom"

enum domain_lifecycle_action {
    DOMAIN_ACTION_DESTROY,
    DOMAIN_ACTION_RESTART,
    DOMAIN_ACTION_PRESERVE,
    DOMAIN_ACTION_RENAME_RESTART,
    DOMAIN_ACTION_COREDUMP_DESTROY,
    DOMAIN_ACTION_COREDUMP_RESTART,
};

enum domain_chr_type { DOMAIN_CHR_NONE, DOMAIN_CHR_PTY, DOMAIN_CHR_FILE };

struct domain_chr {
    enum domain_chr_type type;
    char *path;   /* FILE: the file; PTY: the pty path once running (runtime only) */
};

enum restore_mode { RESTORE_MODE_ONDEMAND, RESTORE_MODE_MERGE, RESTORE_MODE_COPY, RESTORE_MODE_SHARED };

/* <driver name>: vsnap's own name, or 'qemu' as definitions written for QEMU
 * (and virt-manager) say. Both mean the same thing here, the shim's
 * virtio-blk on a raw image, and the name is kept as it was written. */
enum domain_disk_driver { DOMAIN_DISK_DRIVER_VSNAP, DOMAIN_DISK_DRIVER_QEMU };

/* The <driver> attributes libvirt's QEMU driver takes, each an index into
 * its table of names (domain_disk_*_names, libvirt's spelling); 0 (ABSENT):
 * not given, and not shown back. What each means is in domain-vm-config.c. */
enum domain_disk_cache {
    DOMAIN_DISK_CACHE_ABSENT, DOMAIN_DISK_CACHE_DEFAULT, DOMAIN_DISK_CACHE_NONE, DOMAIN_DISK_CACHE_WRITETHROUGH,
    DOMAIN_DISK_CACHE_WRITEBACK, DOMAIN_DISK_CACHE_DIRECTSYNC, DOMAIN_DISK_CACHE_UNSAFE,
};
enum domain_disk_io { DOMAIN_DISK_IO_ABSENT, DOMAIN_DISK_IO_NATIVE, DOMAIN_DISK_IO_THREADS, DOMAIN_DISK_IO_URING };
enum domain_disk_discard { DOMAIN_DISK_DISCARD_ABSENT, DOMAIN_DISK_DISCARD_UNMAP, DOMAIN_DISK_DISCARD_IGNORE };
enum domain_disk_detect_zeroes {
    DOMAIN_DISK_DETECT_ZEROES_ABSENT, DOMAIN_DISK_DETECT_ZEROES_OFF, DOMAIN_DISK_DETECT_ZEROES_ON,
    DOMAIN_DISK_DETECT_ZEROES_UNMAP,
};
/* NULL-terminated, indexed by the enums above (entry 0 is "" for ABSENT). */
extern const char *const domain_disk_cache_names[];
extern const char *const domain_disk_io_names[];
extern const char *const domain_disk_discard_names[];
extern const char *const domain_disk_detect_zeroes_names[];

/* One <disk type='file|block' device='disk'>, a virtio-blk device. */
struct domain_disk {
    char *target;     /* <target dev='vdX'>: unique in the domain; the disk's "id" for the shim */
    char *path;       /* <source file> or <source dev>: the user's raw image or block device */
    bool is_block;    /* <disk type='block'> (path is a block device) */
    bool readonly;    /* <readonly/> */
    char *serial;     /* <serial>, NULL if absent; at most 20 bytes (virtio-blk's GET_ID) */
    enum domain_disk_driver driver;
    enum domain_disk_cache cache;       /* <driver cache=> */
    enum domain_disk_io io;             /* <driver io=>: io_uring is the shim's vsnap_io, native and threads its default */
    enum domain_disk_discard discard;   /* <driver discard=> */
    enum domain_disk_detect_zeroes detect_zeroes; /* <driver detect_zeroes=> */
    unsigned boot_order;  /* <boot order=>, 0 if absent: kept for the XML (one kernel boots) */
    bool address_mmio;    /* <address type='virtio-mmio'/>: kept (the only bus vsnap has) */
    /* Runtime, like a pty path: the layers the guest sees above path, top
     * first (chain[0] the active overlay, then sealed disk layers newest
     * first), NULL-terminated; NULL when the guest writes path itself. Live
     * XML shows chain[0] as <source> and one <backingStore> per further
     * layer down to path; inactive XML shows path, the user's definition.
     * Every layer is a raw-addressed file (never a block device). */
    char **chain;
};

/* One <interface>, a virtio-net device on a tap (see domain-parse-interface.c). */
enum domain_net_type { DOMAIN_NET_ETHERNET, DOMAIN_NET_BRIDGE, DOMAIN_NET_NETWORK };
#define DOMAIN_NET_MAX 8          /* interfaces per domain */
#define DOMAIN_NET_MAC_LEN 18     /* "52:54:00:12:34:56" and NUL */

struct domain_net {
    enum domain_net_type type;
    unsigned char mac[6];  /* <mac address>: generated (52:54:00:xx:xx:xx) when absent */
    char *ifname;          /* <target dev>: the tap; NULL until started when the daemon names it */
    bool ifname_auto;      /* the daemon named it (vnetN): live XML shows it, inactive XML does not */
    bool unmanaged;        /* <target managed='no'>: the tap exists; the daemon only opens it */
    char *source;          /* <source bridge> (BRIDGE) or <source network> (NETWORK) */
    uint32_t mtu;          /* <mtu size>, 0 when absent (the tap's default) */
    bool link_down;        /* <link state='down'/> */
    /* Runtime of a NETWORK interface (live XML, <source portid bridge>):
     * the port the network driver allocated and the bridge it named. */
    char *port_id;
    char *port_bridge;
};

struct domain_def {
    char *name;
    unsigned char uuid[16];
    char *title;
    char *description;
    uint64_t memory_kib;          /* <memory> */
    uint64_t current_memory_kib;  /* <currentMemory>, = memory_kib if absent */
    unsigned vcpus;
    char *os_type;                /* "hvm" */
    char *kernel, *initrd, *cmdline;
    bool boot_hd;                 /* <os><boot dev='hd'/>: kept, the kernel boots */
    enum domain_lifecycle_action on_poweroff, on_reboot, on_crash;
    struct {
        bool present;
        bool auto_cid;
        uint32_t cid;             /* assigned at start when auto_cid */
    } vsock;
    struct domain_chr serial;     /* <serial> (first one) */
    struct domain_chr console;    /* <console> */
    struct {
        enum restore_mode restore_mode;
        uint32_t readiness_port;
        char *store_url;          /* <vsnap:store url>: where its snapshots go; NULL: the daemon's */
        /* <vsnap:from domain snapshot>: a clone, started from that snapshot
         * of that domain (persist/clone.h); both NULL for any other domain. */
        char *from_domain, *from_snapshot;
        bool restore_given;       /* parsing only: <vsnap:restore> was there */
    } vsnap;

    /* Extensions (appended; the fields above are unchanged). Everything below
     * is accepted only because it is true of vsnap, and kept so that dumpxml
     * gives back what was defined. */
    char *emulator;               /* <emulator>, NULL if absent; basename must be vsnap-shim */
    struct {
        bool acpi, apic, pae;     /* <features><acpi/><apic/><pae/> */
    } features;
    bool clock_utc;               /* <clock offset='utc'/> */
    struct {
        bool present;             /* <cpu mode='host-passthrough'/> */
        bool check_none;          /* check='none' */
        enum { CPU_MIGRATABLE_UNSET, CPU_MIGRATABLE_ON, CPU_MIGRATABLE_OFF } migratable;
    } cpu;
    bool memballoon_none;         /* <memballoon model='none'/> */
    char *foreign_metadata;       /* other namespaces' <metadata> children, serialized verbatim */
    struct domain_disk *disks;    /* <disk>s in definition order (disk N of the guest is disks[N]) */
    size_t n_disks;

    /* Stock guests: systemd's readiness, SMBIOS identity, entropy. */
    struct {
        uint32_t port;            /* <vsnap:notify port>, default 1025 */
        bool no_credential;       /* credential='off': do not hand systemd vmm.notify_socket */
    } notify;
    struct domain_sysinfo {
        bool present;             /* <sysinfo type='smbios'> */
        /* <system><entry name='...'>: NULL when absent */
        char *manufacturer, *product, *version, *serial, *uuid, *sku, *family;
        char **oem_strings;       /* <oemStrings><entry>, NULL-terminated or NULL */
    } sysinfo;
    enum domain_smbios_mode { DOMAIN_SMBIOS_DEFAULT, DOMAIN_SMBIOS_EMULATE, DOMAIN_SMBIOS_SYSINFO } smbios_mode;
    struct {
        bool present;             /* <rng model='virtio'> */
        char *backend;            /* <backend model='random'> path */
        uint64_t rate_bytes;      /* <rate bytes= period=>: 0 without a limit */
        uint64_t rate_period_ms;
    } rng;
    struct domain_net *nets;      /* <interface>s in definition order; the shim's id is "net<N>" */
    size_t n_nets;
    /* The domain's cgroup (plugin/host/cgroup.c): 0 is "no limit". */
    struct {
        bool present;
        uint64_t hard_limit_kib, soft_limit_kib, swap_hard_limit_kib;
    } memtune;
    struct {
        bool present;
        uint64_t shares, period_us, quota_us;
    } cputune;
    /* <memoryBacking> (domain-parse-memory-backing.c): RAM on 2 MiB huge pages. */
    struct {
        bool present;
        bool hugepages;           /* <hugepages> */
        uint64_t page_kib;        /* its <page size>, 2048; 0 without a <page> */
        bool source_memfd;        /* <source type='memfd'/> */
    } memory_backing;
};

/* g_autoptr() needs a type name without 'struct'. */
typedef struct domain_def domain_def;
void domain_def_free(struct domain_def *def);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(domain_def, domain_def_free)
struct domain_def *domain_def_copy(const struct domain_def *def);

/* Parse and validate. schema_dir holds domain.rng. Errors: VIR_ERR_XML_ERROR
 * (malformed), VIR_ERR_XML_DETAIL / VIR_ERR_CONFIG_UNSUPPORTED (valid XML but
 * outside what vsnap supports, naming the element), VIR_ERR_INVALID_ARG. */
struct domain_def *domain_def_parse_string(const char *xml, const char *schema_dir, GError **error);
/* The same for live XML the daemon wrote itself (its status file): disks
 * may have a <backingStore> chain, read into domain_disk.chain. A
 * definition (domain_def_parse_string) with a non-empty chain is refused
 * with VIR_ERR_CONFIG_UNSUPPORTED; an empty <backingStore/> is accepted in
 * both, so live dumpxml output of a domain without snapshots defines. */
struct domain_def *domain_def_parse_live_string(const char *xml, const char *schema_dir, GError **error);

/* virsh desc and metadata (virDomainGetMetadata, virDomainSetMetadata;
 * type is VIR_DOMAIN_METADATA_DESCRIPTION, _TITLE or _ELEMENT): the
 * <description>, the <title> or the <metadata> element in namespace uri.
 * Get: VIR_ERR_NO_DOMAIN_METADATA when there is none (as libvirt). Set:
 * metadata NULL or "" removes it; an element (XML text) is put in namespace
 * uri with prefix key, replacing the one there was; vsnap's own namespace
 * is the domain's configuration, refused here (define changes it). */
char *domain_def_get_metadata(const struct domain_def *def, int type, const char *uri, GError **error);
bool domain_def_set_metadata(struct domain_def *def, int type, const char *metadata, const char *key,
                             const char *uri, GError **error);

/* Format back. Round-trip stable: parse(format(def)) == def. When live is true,
 * runtime details (id, pty paths, vsock cid) are included. */
char *domain_def_format(const struct domain_def *def, bool live, int id);

/* The disk whose target ("vda") or source path (the image, or the active
 * overlay the live XML shows) is name, as libvirt's domblk* calls name
 * disks; NULL if none. */
struct domain_disk *domain_def_find_disk(const struct domain_def *def, const char *name);
/* The interface whose tap name or MAC ("52:54:00:..", any case) is name,
 * as libvirt's domif* calls name interfaces; NULL if none. */
struct domain_net *domain_def_find_net(const struct domain_def *def, const char *name);
/* "52:54:00:12:34:56" into out; parsing accepts any case, colons only. */
void domain_mac_format(const unsigned char mac[6], char out[DOMAIN_NET_MAC_LEN]);
bool domain_mac_parse(const char *text, unsigned char mac[6]);
/* The shim's id of interface index: "net0", "net1", ... */
char *domain_net_id(size_t index);
/* Forget what a run gave the interfaces (daemon-chosen tap names, network
 * ports): a definition about to start again, or one that stopped. */
void domain_def_forget_net_runtime(struct domain_def *def);
/* One <interface> element on its own (virDomainUpdateDeviceFlags,
 * domif-setlink), parsed as it would be inside <devices>. */
struct domain_net *domain_net_parse_string(const char *xml, GError **error);
void domain_net_free(struct domain_net *net);

/* Replace disk->chain with a copy of chain (NULL or empty: no chain). */
void domain_disk_set_chain(struct domain_disk *disk, const char *const *chain);

/* What the daemon checks before it spawns a shim: every disk's image exists,
 * is what its <disk type> says (a regular file or a block device) and opens
 * as the shim will open it (read-only for <readonly/> or when it is the base
 * of a chain, read-write otherwise). VIR_ERR_SYSTEM_ERROR "Cannot access
 * storage file '<path>' ..." naming the disk and errno, as libvirt's QEMU
 * driver reports a missing source; VIR_ERR_OPERATION_FAILED for a path of
 * the wrong kind, and for a chain file (overlay or sealed layer) that is
 * missing or does not open, naming it: never replaced by an empty one. */
bool domain_def_check_disk_access(const struct domain_def *def, GError **error);

/* given has the disks of saved: the same targets in the same order, each on
 * the same image (or block device), read-only alike. Otherwise
 * VIR_ERR_CONFIG_UNSUPPORTED naming the first disk that differs. For a
 * definition that is to run saved state (restore --xml, save --xml,
 * save-image-define). */
bool domain_def_check_same_disks(const struct domain_def *saved, const struct domain_def *given,
                                 GError **error);

/* Cloud Hypervisor VmConfig JSON for vm.create, given the vsock socket's path
 * in the runtime directory and, for a domain with disks, the directory the
 * shim keeps its active overlays in (vsnap's "vsnap_work_dir"; NULL: the
 * shim's default). A pty serial is the shim's Pty. */
char *domain_def_to_vm_config_json(const struct domain_def *def, const char *vsock_socket_path,
                                   const char *disk_work_dir, GError **error);
/* The "serial" and "console" members of that VmConfig, for a request that
 * carries them on their own (vm.restore's config_overrides). */
void domain_def_add_vm_serial(JsonBuilder *b, const struct domain_def *def);
/* The "disks" member of that VmConfig (nothing when the domain has no disk):
 * Cloud Hypervisor's DiskConfig per disk, in definition order, with
 * "path" (the user's image), "readonly", "id" (the target name), "serial"
 * when set and "image_type": "Raw"; for a disk with a chain, vsnap's
 * "vsnap_chain" (the sealed layers, base first) and "vsnap_overlay" (the
 * active overlay, which the shim continues). */
void domain_def_add_vm_disks(JsonBuilder *b, const struct domain_def *def);

/* The "net" member of that VmConfig (nothing without interfaces): Cloud
 * Hypervisor's NetConfig per interface, "id" (net<N>), "mac", "mtu" when
 * set; with_fds, "fds": [-1]: the tap's descriptor travels beside the
 * request (SCM_RIGHTS), one per interface, in order; without, "tap" (its
 * name). */
void domain_def_add_vm_nets(JsonBuilder *b, const struct domain_def *def, bool with_fds);
/* vm.restore's config_overrides "payload" (kernel, initramfs), "rng" (src)
 * and "disks" (per disk "id", "path": the user's image, "readonly"): the
 * definition's files, so that no host path of a restored VM comes from the
 * snapshot (one from a store supplies none: shim/persist/host-paths.h). */
void domain_def_add_vm_file_overrides(JsonBuilder *b, const struct domain_def *def);
/* vm.restore's config_overrides "net": per interface "id", "mac" (the
 * definition's: a clone's own) and "fds": [-1], its new tap's descriptor,
 * sent with the request. */
void domain_def_add_vm_net_overrides(JsonBuilder *b, const struct domain_def *def);

const char *restore_mode_to_string(enum restore_mode mode);
/* The definition says <vsnap:from>: the domain is a clone. */
bool domain_def_is_clone(const struct domain_def *def);
const char *domain_smbios_mode_to_string(enum domain_smbios_mode mode);

/* What systemd (256 and later) reads as vmm.notify_socket, given on the
 * kernel command line and as an SMBIOS OEM string by default. */
char *domain_notify_socket_address(const struct domain_def *def); /* "vsock-stream:2:1025" */
const char *domain_lifecycle_action_to_string(enum domain_lifecycle_action action);

/* UUIDs in libvirt's textual form: 36 characters plus NUL, lowercase with
 * dashes. Parsing accepts 32 hex digits with or without dashes, as libvirt. */
#define DOMAIN_UUID_STRING_LEN 37
void domain_uuid_format(const unsigned char uuid[16], char out[DOMAIN_UUID_STRING_LEN]);
bool domain_uuid_parse(const char *text, unsigned char uuid[16]);
void domain_uuid_generate(unsigned char uuid[16]);

/* libvirt's memory units (b, bytes, k, KiB, KB, M, MiB, MB, ... E, EiB, EB;
 * NULL unit means KiB) converted to KiB, rounding bytes up as libvirt does.
 * VIR_ERR_XML_DETAIL on a bad number, unit or overflow. */
bool domain_memory_to_kib(const char *value, const char *unit, uint64_t *kib, GError **error);
