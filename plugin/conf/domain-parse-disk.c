/* <disk>: a virtio-blk disk on a raw image (type='file') or a block device
 * (type='block'). Everything else libvirt can say about a disk is refused by
 * name: other devices (cdrom, floppy, lun), other buses, network and volume
 * sources, image formats other than raw, shared disks.
 *
 * A disk may carry a <backingStore> chain (the live XML the daemon keeps as
 * status has one once the domain has snapshots): its innermost layer is the
 * user's image, the layers above it are the runtime chain (struct
 * domain_disk.chain), and the disk's <source> is the chain's top. */
#include "domain-parse.h"

#include <string.h>

#include "conf/xml-util.h"

/* Deeper than any chain vsnap makes, and below libxml2's default nesting
 * limit (256 levels), so a chain the daemon writes always parses back. */
#define DOMAIN_DISK_MAX_CHAIN 200
/* virtio-blk's GET_ID answers 20 bytes (VIRTIO_BLK_ID_BYTES). */
#define DOMAIN_DISK_MAX_SERIAL 20

static const char *const no_attributes[] = {NULL};

/* The children of <disk> vsnap understands, each at most once. */
enum disk_child {
    DISK_TARGET,
    DISK_DRIVER,
    DISK_SOURCE,
    DISK_BACKING_STORE,
    DISK_READONLY,
    DISK_SHAREABLE,
    DISK_SERIAL,
    DISK_BOOT,
    DISK_ADDRESS,
    DISK_N_CHILDREN,
};

static const char *const disk_child_names[DISK_N_CHILDREN] = {
    "target", "driver", "source", "backingStore", "readonly", "shareable", "serial", "boot", "address",
};

static bool parse_storage_type(const xmlNode *node, bool *is_block, GError **error)
{
    g_autofree char *type = conf_xml_prop(node, "type");
    if (!type || strcmp(type, "file") == 0) {
        *is_block = false;   /* libvirt's default */
        return true;
    }
    if (strcmp(type, "block") == 0) {
        *is_block = true;
        return true;
    }
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                "<%s type='%s'> is not supported by vsnap: only 'file' (a raw image) or 'block' (a block device)",
                (const char *)node->name, type);
    return false;
}

static bool parse_device(const xmlNode *disk, GError **error)
{
    g_autofree char *device = conf_xml_prop(disk, "device");
    if (device && strcmp(device, "disk") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<disk device='%s'> is not supported by vsnap: only device='disk' (virtio-blk)", device);
        return false;
    }
    return true;
}

/* "vd" and lowercase letters, as libvirt names virtio disks. */
static bool is_virtio_disk_name(const char *name)
{
    if (strncmp(name, "vd", 2) != 0 || name[2] == '\0')
        return false;
    for (const char *c = name + 2; *c; c++)
        if (*c < 'a' || *c > 'z')
            return false;
    return true;
}

static bool parse_target(struct domain_disk *disk, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"dev", "bus", NULL};
    if (!node) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "<disk> needs <target dev='vdX'/>");
        return false;
    }
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *bus = conf_xml_prop(node, "bus");
    if (bus && strcmp(bus, "virtio") != 0) {
        /* Clients that do not know vsnap (virt-manager's New VM wizard,
         * virt-install without bus=) write bus='ide' and dev='hda': name the
         * disk as they named it, and what to change it to. */
        g_autofree char *dev = conf_xml_prop(node, "dev");
        g_autofree char *named = dev ? g_strdup_printf("dev='%s' ", dev) : g_strdup("");
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "disk <target %sbus='%s'> is not supported by vsnap: its disks are virtio-blk only; "
                    "set the disk's bus to virtio (bus='virtio'; virtio disks are named vda, vdb, ...)",
                    named, bus);
        return false;
    }
    disk->target = conf_xml_prop(node, "dev");
    if (!disk->target) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "disk <target> has no dev attribute");
        return false;
    }
    if (!is_virtio_disk_name(disk->target)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<target dev='%s'> is not supported by vsnap: virtio disks are named vda, vdb, ... "
                    "('vd' and lowercase letters)", disk->target);
        return false;
    }
    return true;
}

/* raw, or the refusal that tells the user how to get there. */
static bool check_format(const struct domain_disk *disk, const char *format, GError **error)
{
    if (!format || strcmp(format, "raw") == 0)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                "disk '%s': image format '%s' is not supported by vsnap, which runs raw images only; "
                "convert it with 'qemu-img convert -O raw IMAGE IMAGE.raw' and use the raw file",
                disk->target, format);
    return false;
}

/* One of <driver>'s keyword attributes: *value is its index in names (0
 * when absent); anything else is refused listing what is accepted. */
static bool parse_keyword(const struct domain_disk *disk, const xmlNode *node, const char *attribute,
                          const char *const *names, int *value, GError **error)
{
    g_autofree char *text = conf_xml_prop(node, attribute);
    *value = 0;
    if (!text)
        return true;
    for (int i = 1; names[i]; i++)
        if (strcmp(text, names[i]) == 0) {
            *value = i;
            return true;
        }
    g_autofree char *accepted = g_strjoinv("', '", (char **)names + 1);
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                "disk '%s': <driver %s='%s'> is not supported by vsnap: use '%s'", disk->target, attribute,
                text, accepted);
    return false;
}

/* cache, io, discard and detect_zeroes, as libvirt's QEMU driver takes them
 * (their meanings: domain-vm-config.c). */
static bool parse_driver_modes(struct domain_disk *disk, const xmlNode *node, GError **error)
{
    int cache, io, discard, detect_zeroes;
    if (!parse_keyword(disk, node, "cache", domain_disk_cache_names, &cache, error) ||
        !parse_keyword(disk, node, "io", domain_disk_io_names, &io, error) ||
        !parse_keyword(disk, node, "discard", domain_disk_discard_names, &discard, error) ||
        !parse_keyword(disk, node, "detect_zeroes", domain_disk_detect_zeroes_names, &detect_zeroes, error))
        return false;
    disk->cache = (enum domain_disk_cache)cache;
    disk->io = (enum domain_disk_io)io;
    disk->discard = (enum domain_disk_discard)discard;
    disk->detect_zeroes = (enum domain_disk_detect_zeroes)detect_zeroes;
    return true;
}

static bool parse_driver(struct domain_disk *disk, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"name", "type", "cache", "io", "discard", "detect_zeroes", NULL};
    disk->driver = DOMAIN_DISK_DRIVER_VSNAP;
    if (!node)
        return true;
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *name = conf_xml_prop(node, "name");
    if (name && strcmp(name, "qemu") == 0) {
        disk->driver = DOMAIN_DISK_DRIVER_QEMU;
    } else if (name && strcmp(name, "vsnap") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "<driver name='%s'> is not supported by vsnap: use name='vsnap' (or 'qemu'), or no name",
                    name);
        return false;
    }
    g_autofree char *type = conf_xml_prop(node, "type");
    return check_format(disk, type, error) && parse_driver_modes(disk, node, error);
}

/* <boot order='N'/>: libvirt's per-device boot order. vsnap boots its one
 * kernel (<os><kernel>), so the order only travels with the XML. */
static bool parse_boot(struct domain_disk *disk, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"order", NULL};
    if (!node)
        return true;
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *order = conf_xml_prop(node, "order");
    g_autofree char *what = g_strdup_printf("disk '%s' <boot order>", disk->target);
    uint64_t value = 0;
    if (!order) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "%s: the order attribute is missing", what);
        return false;
    }
    if (!conf_parse_uint64(order, 1, G_MAXINT, what, &value, error))
        return false;
    disk->boot_order = (unsigned)value;
    return true;
}

/* <address>: libvirt writes one for every device once it placed it. vsnap's
 * devices sit on virtio-mmio, which libvirt's virtio-mmio address names
 * without further attributes; any other bus is not there to place a disk on. */
static bool parse_address(struct domain_disk *disk, const xmlNode *node, GError **error)
{
    if (!node)
        return true;
    g_autofree char *type = conf_xml_prop(node, "type");
    if (!type || strcmp(type, "virtio-mmio") != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "disk '%s': <address type='%s'> is not supported by vsnap: its machine has no %s bus, every "
                    "virtio device sits on virtio-mmio; use <address type='virtio-mmio'/> or leave the address out",
                    disk->target, type ? type : "", type ? type : "such");
        return false;
    }
    static const char *const attributes[] = {"type", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    disk->address_mmio = true;
    return true;
}

/* <source file=.../> or <source dev=.../>: an absolute path. */
static char *parse_source(const struct domain_disk *disk, const xmlNode *node, bool is_block, GError **error)
{
    const char *attribute = is_block ? "dev" : "file";
    const char *const attributes[] = {attribute, NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return NULL;
    g_autofree char *path = conf_xml_prop(node, attribute);
    if (!path) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "disk '%s': <source> needs %s='...'",
                    disk->target, attribute);
        return NULL;
    }
    g_autofree char *what = g_strdup_printf("disk '%s' <source %s>", disk->target, attribute);
    if (!domain_check_absolute_path(path, what, error))
        return NULL;
    return g_steal_pointer(&path);
}

/* A <backingStore> with no type and nothing inside ends a chain. */
static bool is_chain_end(const xmlNode *node)
{
    if (node->properties)
        return false;
    for (const xmlNode *child = node->children; child; child = child->next)
        if (conf_xml_is_element(child))
            return false;
    return true;
}

static bool parse_layer_format(const struct domain_disk *disk, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"type", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *type = conf_xml_prop(node, "type");
    if (!type) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "disk '%s': <format> has no type attribute",
                    disk->target);
        return false;
    }
    return check_format(disk, type, error);
}

/* One non-final <backingStore>: its layer's path goes to layers, *next is
 * the <backingStore> inside it (NULL if none). */
static bool parse_layer(const struct domain_disk *disk, const xmlNode *node, GPtrArray *layers,
                        bool *is_block, const xmlNode **next, GError **error)
{
    static const char *const attributes[] = {"type", NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !parse_storage_type(node, is_block, error))
        return false;
    static const char *const children[] = {"format", "source", "backingStore"};
    const xmlNode *found[G_N_ELEMENTS(children)] = {NULL};
    if (!conf_xml_collect_children(node, children, G_N_ELEMENTS(children), found, error))
        return false;
    const xmlNode *format = found[0], *source = found[1];
    *next = found[2];
    if (!format || !source) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "disk '%s': a <backingStore> needs <%s>",
                    disk->target, format ? "source" : "format type='raw'");
        return false;
    }
    if (!parse_layer_format(disk, format, error))
        return false;
    char *path = parse_source(disk, source, *is_block, error);
    if (!path)
        return false;
    g_ptr_array_add(layers, path);
    return true;
}

/* The chain below the disk's <source>: afterwards disk->path is the
 * innermost layer (the user's image) and disk->chain the layers above it. */
static bool parse_backing_chain(struct domain_disk *disk, const xmlNode *backing, GError **error)
{
    g_autoptr(GPtrArray) layers = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(layers, g_steal_pointer(&disk->path));
    bool bottom_is_block = disk->is_block;
    bool upper_is_block = false;
    while (backing && !is_chain_end(backing)) {
        if (layers->len >= DOMAIN_DISK_MAX_CHAIN) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                        "disk '%s': a chain of more than %d layers is not supported",
                        disk->target, DOMAIN_DISK_MAX_CHAIN);
            return false;
        }
        upper_is_block |= bottom_is_block;
        if (!parse_layer(disk, backing, layers, &bottom_is_block, &backing, error))
            return false;
    }
    /* Overlays and sealed layers are files vsnap writes; only the user's
     * image at the bottom may be a block device. */
    if (upper_is_block) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "disk '%s': only the bottom of a backing chain (the image) can be a block device",
                    disk->target);
        return false;
    }
    disk->path = g_ptr_array_steal_index(layers, layers->len - 1);
    disk->is_block = bottom_is_block;
    if (layers->len > 0) {
        g_ptr_array_add(layers, NULL);
        disk->chain = (char **)g_ptr_array_free(g_steal_pointer(&layers), false);
    }
    return true;
}

static bool parse_serial(struct domain_disk *disk, const xmlNode *node, GError **error)
{
    if (!node)
        return true;
    if (!conf_xml_check_attributes(node, no_attributes, error) || !conf_xml_check_no_children(node, error))
        return false;
    g_autofree char *serial = conf_xml_text(node);
    /* libvirt's own rule for disk serials (its schema's diskSerial). */
    bool valid = serial[0] != '\0';
    for (const char *c = serial; *c && valid; c++)
        valid = g_ascii_isalnum(*c) || strchr("_.+- ", *c);
    if (!valid) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_DETAIL,
                    "disk '%s': <serial> must be letters, digits, spaces and _ . + - (not empty)", disk->target);
        return false;
    }
    if (strlen(serial) > DOMAIN_DISK_MAX_SERIAL) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "disk '%s': <serial> '%s' is longer than the %d bytes virtio-blk carries", disk->target,
                    serial, DOMAIN_DISK_MAX_SERIAL);
        return false;
    }
    disk->serial = g_steal_pointer(&serial);
    return true;
}

static bool parse_flag(const xmlNode *node, bool *flag, GError **error)
{
    *flag = node != NULL;
    return !node ||
           (conf_xml_check_attributes(node, no_attributes, error) && conf_xml_check_no_children(node, error));
}

static bool refuse_shareable(const xmlNode *node, GError **error)
{
    if (!node)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                "<shareable/> disks are not supported by vsnap: a disk belongs to one VM, and its "
                "snapshots are layered over its image");
    return false;
}

/* Two disks never name the same target or the same image, nor share a boot order. */
static bool check_unique(const struct domain_def *def, const struct domain_disk *disk, GError **error)
{
    for (size_t i = 0; i < def->n_disks; i++) {
        const struct domain_disk *other = &def->disks[i];
        if (other == disk)
            continue;
        if (strcmp(other->target, disk->target) == 0) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR,
                        "disk target '%s' is used twice (disks '%s' and '%s')", disk->target, other->path,
                        disk->path);
            return false;
        }
        if (disk->boot_order && other->boot_order == disk->boot_order) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR,
                        "boot order %u is used by two disks ('%s' and '%s')", disk->boot_order, other->target,
                        disk->target);
            return false;
        }
        if (strcmp(other->path, disk->path) == 0) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                        "'%s' is the image of two disks ('%s' and '%s'): each vsnap disk needs its own",
                        disk->path, other->target, disk->target);
            return false;
        }
    }
    return true;
}

static bool parse_disk_children(struct domain_disk *disk, const xmlNode *const found[DISK_N_CHILDREN],
                                GError **error)
{
    if (!parse_target(disk, found[DISK_TARGET], error) || !parse_driver(disk, found[DISK_DRIVER], error) ||
        !refuse_shareable(found[DISK_SHAREABLE], error))
        return false;
    if (!found[DISK_SOURCE]) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_XML_ERROR, "disk '%s' needs <source %s='...'/>",
                    disk->target, disk->is_block ? "dev" : "file");
        return false;
    }
    disk->path = parse_source(disk, found[DISK_SOURCE], disk->is_block, error);
    if (!disk->path)
        return false;
    if (found[DISK_BACKING_STORE] && !parse_backing_chain(disk, found[DISK_BACKING_STORE], error))
        return false;
    return parse_flag(found[DISK_READONLY], &disk->readonly, error) &&
           parse_serial(disk, found[DISK_SERIAL], error) && parse_boot(disk, found[DISK_BOOT], error) &&
           parse_address(disk, found[DISK_ADDRESS], error);
}

bool domain_parse_disk(struct domain_def *def, const xmlNode *node, GError **error)
{
    static const char *const attributes[] = {"type", "device", NULL};
    const xmlNode *found[DISK_N_CHILDREN] = {NULL};
    if (!conf_xml_check_attributes(node, attributes, error) || !parse_device(node, error) ||
        !conf_xml_collect_children(node, disk_child_names, DISK_N_CHILDREN, found, error))
        return false;
    /* Appended first, so that whatever part is parsed is freed with def
     * when a later part fails. */
    def->disks = g_renew(struct domain_disk, def->disks, def->n_disks + 1);
    struct domain_disk *disk = &def->disks[def->n_disks++];
    memset(disk, 0, sizeof(*disk));
    return parse_storage_type(node, &disk->is_block, error) && parse_disk_children(disk, found, error) &&
           check_unique(def, disk, error);
}
