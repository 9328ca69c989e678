/* VmConfig: the shim's view of Cloud Hypervisor's VmConfig JSON.
 *
 * Parsed from JSON by vm-config.c (unknown or invalid fields are refused with a
 * GError naming the field) and turned back into JSON for vm.info and snapshots.
 * The KVM core only reads this struct; it never sees JSON.
 */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

#include "limits/vsnap-limits.h"

/* virtio-mmio devices a VM can have (vsock, console, rng and every disk): one
 * free ISA interrupt line each (devices/virtio/virtio-mmio.c). */
#define VSNAP_MAX_VIRTIO_DEVICES 8
/* Queues and queue entries a disk may ask for (num_queues, queue_size). */
#define VSNAP_DISK_MAX_QUEUES 4
#define VSNAP_DISK_MAX_QUEUE_SIZE 256
#define VSNAP_DISK_DEFAULT_QUEUE_SIZE 128
/* virtio-blk's GET_ID answers at most this many bytes of the serial. */
#define VSNAP_DISK_SERIAL_MAX 20
/* Network interfaces: one RX/TX queue pair (num_queues 2, Cloud Hypervisor's
 * default), queue_size up to 256 (default 256), an MTU the guest is told of
 * (VIRTIO_NET_F_MTU) between 68 and 65535, and at most this many tap
 * descriptors each (one per queue pair). */
#define VSNAP_NET_QUEUES 2
#define VSNAP_NET_MAX_QUEUE_SIZE 256
#define VSNAP_NET_DEFAULT_QUEUE_SIZE 256
#define VSNAP_NET_MIN_MTU 68
#define VSNAP_NET_MAX_MTU 65535
#define VSNAP_NET_MAX_FDS 1

/* Cloud Hypervisor's ConsoleOutputMode, in its spelling. */
enum console_mode {
    CONSOLE_MODE_OFF,
    CONSOLE_MODE_NULL,
    CONSOLE_MODE_FILE,
    CONSOLE_MODE_TTY,
    CONSOLE_MODE_PTY,
    CONSOLE_MODE_SOCKET,
};

struct console_config {
    enum console_mode mode;
    char *file;   /* CONSOLE_MODE_FILE */
    char *socket; /* CONSOLE_MODE_SOCKET: the shim listens on this UNIX socket */
};

struct payload_config {
    char *kernel;    /* bzImage or ELF vmlinux */
    char *cmdline;   /* may be NULL */
    char *initramfs; /* may be NULL */
    char *firmware;  /* accepted by the schema, refused at boot: not supported */
};

struct cpus_config {
    unsigned boot_vcpus;
    unsigned max_vcpus;
};

/* The only huge page size guest RAM is offered on (x86-64's PMD size). */
#define VSNAP_HUGEPAGE_SIZE (2ull << 20)

struct memory_config {
    uint64_t size; /* bytes */
    bool shared;
    bool hugepages;         /* RAM on hugetlbfs pages (a memfd with MFD_HUGETLB) */
    uint64_t hugepage_size; /* Cloud Hypervisor's, bytes; 0: unset (VSNAP_HUGEPAGE_SIZE) */
    bool prefault;
};

/* The host page size RAM of m is backed by: 4 KiB, or the huge page size. */
uint64_t memory_config_page_size(const struct memory_config *m);

struct vsock_config {
    bool present;
    uint32_t cid;
    char *socket;
    uint32_t readiness_port; /* vsnap extension, default 1024 */
    uint32_t notify_port;    /* vsnap extension, default 1025: systemd's sd_notify (vmm.notify_socket) */
};

/* A token bucket, Cloud Hypervisor's and Firecracker's TokenBucketConfig:
 * size bytes, refilled every refill_time ms, plus a one-time burst. size 0:
 * no limit. */
struct token_bucket_config {
    uint64_t size;
    uint64_t one_time_burst;
    uint64_t refill_time_ms;
};

/* Cloud Hypervisor's RngConfig: a virtio-rng device fed from src. */
struct rng_config {
    bool present;
    char *src;                          /* default /dev/urandom */
    struct token_bucket_config bandwidth; /* vsnap extension: rate_limiter.bandwidth */
};

/* SMBIOS type 1 strings beyond Cloud Hypervisor's uuid and serial number
 * (vsnap extension platform.system, from libvirt's <sysinfo><system>); NULL:
 * the shim's own. */
struct smbios_system_config {
    char *manufacturer, *product_name, *version, *sku_number, *family;
};

/* Cloud Hypervisor's PlatformConfig, the parts that describe the machine to
 * the guest in SMBIOS. */
struct platform_config {
    char *uuid;          /* SMBIOS type 1 UUID, "xxxxxxxx-xxxx-..." (NULL: all zero) */
    char *serial_number; /* SMBIOS type 1 serial (cloud-init's NoCloud reads ds=nocloud;s=... here) */
    char **oem_strings;  /* SMBIOS type 11, NULL-terminated, NULL: none */
    struct smbios_system_config system;
};

/* One of Cloud Hypervisor's DiskConfig: a raw image file or a block device. */
struct disk_config {
    char *path;
    bool readonly;
    bool direct;         /* O_DIRECT: no host page cache */
    bool sparse;         /* default true: DISCARD punches holes, WRITE_ZEROES may unmap */
    char *id;            /* unique; "_disk<n>" when not given, as Cloud Hypervisor names them */
    char *serial;        /* NULL: GET_ID answers the id */
    uint32_t num_queues; /* 1 .. VSNAP_DISK_MAX_QUEUES */
    uint32_t queue_size; /* power of two, up to VSNAP_DISK_MAX_QUEUE_SIZE */
    char *image_type;    /* NULL or "Raw": the only format vsnap reads */
    /* vsnap extensions: a disk on snapshot layers (docs/cloud-hypervisor-api.md). */
    char **vsnap_chain;  /* sealed disk layers over path, base first; NULL: path is written directly */
    char *vsnap_overlay; /* with vsnap_chain: the active overlay (created when missing) */
    /* vsnap extensions: libvirt's <driver cache= discard= detect_zeroes=>. */
    bool vsnap_write_through; /* FLUSH after every write (cache writethrough, directsync) */
    bool vsnap_ignore_flush;  /* the guest's FLUSH does nothing (cache unsafe) */
    bool vsnap_discard_unmap; /* with sparse: on layers a DISCARD records whole blocks as zeroes in the overlay */
    char *vsnap_io;           /* NULL or "threads", "native" (one transfer at a time), "io_uring" (the queued ones in flight together) */
    char *vsnap_detect_zeroes; /* NULL or "off", "on" (an all-zero write is a WRITE_ZEROES), "unmap" (one that may unmap) */
};

/* One of Cloud Hypervisor's NetConfig: a virtio-net device on a tap. The tap
 * is fds[0] when descriptors came with the request (SCM_RIGHTS), else the tap
 * called `tap`, else one the shim creates ("vmtap%d"). */
struct net_config {
    char *tap;           /* interface name; NULL: fds, or a new tap */
    char *ip, *mask;     /* host-side IPv4 address and netmask set on the tap (NULL: none) */
    char *mac;           /* the guest's MAC, "52:54:00:12:34:56"; NULL: a random local one */
    char *host_mac;      /* the tap's own MAC (NULL: the kernel's) */
    uint32_t mtu;        /* 0: not given (the tap's MTU stays, the guest is not told) */
    uint32_t num_queues; /* VSNAP_NET_QUEUES */
    uint32_t queue_size; /* power of two, up to VSNAP_NET_MAX_QUEUE_SIZE */
    char *id;            /* unique; "_net<n>" when not given, as Cloud Hypervisor names them */
    bool offload_tso, offload_ufo, offload_csum; /* Cloud Hypervisor's defaults: true */
    char *vhost_mode;    /* NULL or "Client" (vhost-user is refused; the default is accepted) */
    int *fds;            /* owned descriptors (copies dup them, clearing closes them); -1: one still expected */
    unsigned nfds;
};

struct vm_config {
    struct payload_config payload;
    struct cpus_config cpus;
    struct memory_config memory;
    struct console_config serial;
    struct console_config console;
    struct vsock_config vsock;
    struct rng_config rng;
    struct platform_config platform;
    struct disk_config *disks; /* ndisks of them, in the guest's order */
    unsigned ndisks;
    char *vsnap_work_dir;      /* vsnap extension: where active overlays live; NULL: made when needed */
    struct net_config *nets; /* nnets of them, in the guest's order */
    unsigned nnets;
};

struct vm_config *vm_config_new_default(void);
struct vm_config *vm_config_copy(const struct vm_config *cfg);
void vm_config_free(struct vm_config *cfg);
typedef struct vm_config vm_config; /* for g_autoptr(vm_config) */
G_DEFINE_AUTOPTR_CLEANUP_FUNC(vm_config, vm_config_free)

const char *console_mode_to_string(enum console_mode mode);

/* A disk with Cloud Hypervisor's defaults (num_queues 1, queue_size 128,
 * sparse) and no path. */
void disk_config_init(struct disk_config *disk);
void disk_config_copy(struct disk_config *to, const struct disk_config *from);
void disk_config_clear(struct disk_config *disk);
/* Append a copy of disk to cfg's disks. */
void vm_config_add_disk(struct vm_config *cfg, const struct disk_config *disk);
/* Remove the disk with this id; false if there is none. */
bool vm_config_remove_disk(struct vm_config *cfg, const char *id);
/* Give every disk without an id the first free "_disk<n>" (Cloud Hypervisor's
 * names), in order. */
void vm_config_name_disks(struct vm_config *cfg);
/* The disk with this id, or NULL. */
const struct disk_config *vm_config_find_disk(const struct vm_config *cfg, const char *id);

/* The work directory for active overlays (work-dir.c): cfg->vsnap_work_dir,
 * created 0700 if missing, or when unset a new private one under $TMPDIR
 * (kept on exit: overlays must survive a crash), recorded in cfg. */
bool vm_config_ensure_work_dir(struct vm_config *cfg, GError **error);
/* A fresh overlay path in the work directory for disk (ensured first). */
char *vm_config_new_overlay_path(struct vm_config *cfg, const struct disk_config *disk, GError **error);
/* vm.move-disk-layers: every vsnap_chain layer in directory from is in
 * directory to now, or (to NULL) was folded into the layer above it and
 * leaves the chain. Refused (SHIM_ERROR_INVALID, nothing changed) when a
 * chain would lose every layer or its top one. *moved counts the layers. */
bool vm_config_move_disk_layers(struct vm_config *cfg, const char *from, const char *to, unsigned *moved,
                                GError **error);
/* Give every disk with a vsnap_chain but no vsnap_overlay a fresh one. */
bool vm_config_assign_overlays(struct vm_config *cfg, GError **error);
/* A NetConfig with Cloud Hypervisor's defaults (num_queues 2, queue_size 256,
 * offloads allowed), no tap and no descriptors. */
void net_config_init(struct net_config *net);
void net_config_copy(struct net_config *to, const struct net_config *from);
void net_config_clear(struct net_config *net);
void vm_config_add_net(struct vm_config *cfg, const struct net_config *net);
bool vm_config_remove_net(struct vm_config *cfg, const char *id);
/* Give every net without an id the first free "_net<n>", in order. */
void vm_config_name_nets(struct vm_config *cfg);
const struct net_config *vm_config_find_net(const struct vm_config *cfg, const char *id);
/* Parse "aa:bb:cc:dd:ee:ff" (either case); false if it is not a MAC. */
bool net_mac_parse(const char *text, uint8_t mac[6]);
