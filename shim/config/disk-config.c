/* The disks of a VmConfig: their lifetime, value checks, image checks at
 * vm.create and their JSON form (parsing is vm-config.c's schema). */
#define G_LOG_DOMAIN "vsnap-shim"

#include "disk-config-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/shim-error.h"
#include "config/vm-config-json.h"
#include "snapshot/disk.h"
#include "snapshot/image-lock.h"
#include "snapshot/overlay.h"
#include "sandbox/confine.h"
#include "json/vjson.h"

#define SECTOR 512u

void disk_config_init(struct disk_config *disk)
{
    memset(disk, 0, sizeof *disk);
    disk->sparse = true;
    disk->num_queues = 1;
    disk->queue_size = VSNAP_DISK_DEFAULT_QUEUE_SIZE;
}

void disk_config_copy(struct disk_config *to, const struct disk_config *from)
{
    *to = *from;
    to->path = g_strdup(from->path);
    to->id = g_strdup(from->id);
    to->serial = g_strdup(from->serial);
    to->image_type = g_strdup(from->image_type);
    to->vsnap_chain = g_strdupv(from->vsnap_chain);
    to->vsnap_overlay = g_strdup(from->vsnap_overlay);
    to->vsnap_detect_zeroes = g_strdup(from->vsnap_detect_zeroes);
    to->vsnap_io = g_strdup(from->vsnap_io);
}

void disk_config_clear(struct disk_config *disk)
{
    g_clear_pointer(&disk->path, g_free);
    g_clear_pointer(&disk->id, g_free);
    g_clear_pointer(&disk->serial, g_free);
    g_clear_pointer(&disk->image_type, g_free);
    g_clear_pointer(&disk->vsnap_chain, g_strfreev);
    g_clear_pointer(&disk->vsnap_overlay, g_free);
    g_clear_pointer(&disk->vsnap_detect_zeroes, g_free);
    g_clear_pointer(&disk->vsnap_io, g_free);
}

void vm_config_add_disk(struct vm_config *cfg, const struct disk_config *disk)
{
    cfg->disks = g_renew(struct disk_config, cfg->disks, cfg->ndisks + 1);
    disk_config_copy(&cfg->disks[cfg->ndisks++], disk);
}

const struct disk_config *vm_config_find_disk(const struct vm_config *cfg, const char *id)
{
    for (unsigned i = 0; i < cfg->ndisks; i++)
        if (g_strcmp0(cfg->disks[i].id, id) == 0)
            return &cfg->disks[i];
    return NULL;
}

bool vm_config_remove_disk(struct vm_config *cfg, const char *id)
{
    const struct disk_config *disk = vm_config_find_disk(cfg, id);
    if (!disk)
        return false;
    unsigned i = (unsigned)(disk - cfg->disks);
    disk_config_clear(&cfg->disks[i]);
    memmove(&cfg->disks[i], &cfg->disks[i + 1], (cfg->ndisks - i - 1) * sizeof cfg->disks[0]);
    cfg->ndisks--;
    return true;
}

void vm_config_name_disks(struct vm_config *cfg)
{
    unsigned next = 0;
    for (unsigned i = 0; i < cfg->ndisks; i++) {
        if (cfg->disks[i].id)
            continue;
        char *name = NULL;
        do {
            g_free(name);
            name = g_strdup_printf("_disk%u", next++);
        } while (vm_config_find_disk(cfg, name));
        cfg->disks[i].id = name;
    }
}

/* ---- layers that moved ---- */

static bool in_dir(const char *path, const char *dir)
{
    size_t len = strlen(dir);
    return strncmp(path, dir, len) == 0 && path[len] == '/';
}

/* The chain with its layers in from moved to to (NULL: left out). */
static char **moved_chain(char **chain, const char *from, const char *to, unsigned *moved)
{
    GPtrArray *out = g_ptr_array_new();
    for (char **p = chain; *p; p++) {
        if (!in_dir(*p, from)) {
            g_ptr_array_add(out, g_strdup(*p));
            continue;
        }
        (*moved)++;
        if (to)
            g_ptr_array_add(out, g_strconcat(to, *p + strlen(from), NULL));
    }
    g_ptr_array_add(out, NULL);
    return (char **)g_ptr_array_free(out, false);
}

bool vm_config_move_disk_layers(struct vm_config *cfg, const char *from, const char *to, unsigned *moved,
                                GError **error)
{
    g_autoptr(GPtrArray) chains = g_ptr_array_new_with_free_func((GDestroyNotify)g_strfreev);
    *moved = 0;
    for (unsigned i = 0; i < cfg->ndisks; i++) {
        char **chain = cfg->disks[i].vsnap_chain;
        g_ptr_array_add(chains, chain ? moved_chain(chain, from, to, moved) : NULL);
        guint n = chain ? g_strv_length(chain) : 0;
        /* The overlay names the top layer: it can move, never go. */
        if (!to && n && in_dir(chain[n - 1], from)) {
            g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                        "disk %s runs on its layer %s: the top layer of a chain cannot leave it", cfg->disks[i].id,
                        chain[n - 1]);
            return false;
        }
    }
    for (unsigned i = 0; i < cfg->ndisks; i++) {
        if (!cfg->disks[i].vsnap_chain)
            continue;
        g_strfreev(cfg->disks[i].vsnap_chain);
        cfg->disks[i].vsnap_chain = g_steal_pointer(&chains->pdata[i]);
    }
    return true;
}

/* ---- value checks ---- */

static bool disk_invalid(GError **error, int code, unsigned index, const char *field, const char *why)
{
    g_set_error(error, SHIM_ERROR, code, "invalid field 'disks[%u].%s': %s", index, field, why);
    return false;
}

static bool is_power_of_two(uint32_t v)
{
    return v && !(v & (v - 1));
}

/* vm.counters names every device at its top level: a disk may not take the
 * name of another one's member. */
bool disk_config_id_is_reserved(const char *id)
{
    static const char *const taken[] = { "serial", "vsock", "console", "rng", "vcpus", NULL };
    if (g_strv_contains(taken, id))
        return true;
    if (strncmp(id, "vcpu", 4) != 0 || !id[4])
        return false;
    for (const char *p = id + 4; *p; p++)
        if (!g_ascii_isdigit(*p))
            return false;
    return true;
}

static bool is_absolute(const char *path)
{
    return path && path[0] == '/';
}

/* vsnap_chain and vsnap_overlay: absolute paths, an overlay only over a
 * chain; an empty chain is an overlay directly on the image (after a block
 * pull), so it needs its overlay. */
static bool check_layers(const struct disk_config *d, unsigned i, GError **error)
{
    if (d->vsnap_chain && !d->vsnap_chain[0] && !d->vsnap_overlay)
        return disk_invalid(error, SHIM_ERROR_INVALID, i, "vsnap_chain", "must hold at least one disk layer "
                            "(or be absent, or be empty under a vsnap_overlay)");
    for (char **p = d->vsnap_chain; p && *p; p++)
        if (!is_absolute(*p))
            return disk_invalid(error, SHIM_ERROR_INVALID, i, "vsnap_chain", "every layer must be an absolute path");
    if (d->vsnap_overlay && !d->vsnap_chain)
        return disk_invalid(error, SHIM_ERROR_INVALID, i, "vsnap_overlay", "an overlay needs a vsnap_chain below it");
    if (d->vsnap_overlay && !is_absolute(d->vsnap_overlay))
        return disk_invalid(error, SHIM_ERROR_INVALID, i, "vsnap_overlay", "must be an absolute path");
    if (d->vsnap_chain && d->readonly)
        return disk_invalid(error, SHIM_ERROR_INVALID, i, "vsnap_chain", "a read-only disk has no disk layers");
    return true;
}

/* libvirt's cache, discard and detect_zeroes as the vsnap_ fields carry them. */
static bool check_write_policy(const struct disk_config *d, unsigned i, GError **error)
{
    static const char *const detect_zeroes[] = { "off", "on", "unmap", NULL };
    static const char *const io_modes[] = { "threads", "native", "io_uring", NULL };
    if (d->vsnap_write_through && d->vsnap_ignore_flush)
        return disk_invalid(error, SHIM_ERROR_INVALID, i, "vsnap_ignore_flush",
                            "a disk that flushes after every write (vsnap_write_through) cannot ignore flushes");
    if (d->vsnap_discard_unmap && !d->sparse)
        return disk_invalid(error, SHIM_ERROR_INVALID, i, "vsnap_discard_unmap",
                            "needs sparse: a disk that is not sparse offers no DISCARD");
    if (d->vsnap_detect_zeroes && !g_strv_contains(detect_zeroes, d->vsnap_detect_zeroes))
        return disk_invalid(error, SHIM_ERROR_INVALID, i, "vsnap_detect_zeroes", "must be 'off', 'on' or 'unmap'");
    if (d->vsnap_io && !g_strv_contains(io_modes, d->vsnap_io))
        return disk_invalid(error, SHIM_ERROR_INVALID, i, "vsnap_io", "must be 'threads', 'native' or 'io_uring'");
    return true;
}

static bool check_disk(const struct vm_config *cfg, unsigned i, GError **error)
{
    const struct disk_config *d = &cfg->disks[i];
    if (!d->path || !*d->path)
        return disk_invalid(error, SHIM_ERROR_INVALID, i, "path", "required");
    if (!d->id || !*d->id)
        return disk_invalid(error, SHIM_ERROR_INVALID, i, "id", "must not be empty");
    if (disk_config_id_is_reserved(d->id)) {
        g_autofree char *why = g_strdup_printf("'%s' names another device in vm.counters", d->id);
        return disk_invalid(error, SHIM_ERROR_INVALID, i, "id", why);
    }
    if (vm_config_find_disk(cfg, d->id) != d || vm_config_find_net(cfg, d->id)) {
        g_autofree char *why = g_strdup_printf("'%s' is the id of another disk", d->id);
        return disk_invalid(error, SHIM_ERROR_INVALID, i, "id", why);
    }
    if (d->serial && strlen(d->serial) > VSNAP_DISK_SERIAL_MAX) {
        g_autofree char *why = g_strdup_printf("longer than the %d bytes virtio-blk's GET_ID carries",
                                               VSNAP_DISK_SERIAL_MAX);
        return disk_invalid(error, SHIM_ERROR_INVALID, i, "serial", why);
    }
    if (d->num_queues < 1 || d->num_queues > VSNAP_DISK_MAX_QUEUES) {
        g_autofree char *why = g_strdup_printf("%u is outside 1 .. %d", d->num_queues, VSNAP_DISK_MAX_QUEUES);
        return disk_invalid(error, SHIM_ERROR_INVALID, i, "num_queues", why);
    }
    if (!is_power_of_two(d->queue_size) || d->queue_size < 4 || d->queue_size > VSNAP_DISK_MAX_QUEUE_SIZE) {
        g_autofree char *why = g_strdup_printf("%u is not a power of two between 4 and %d", d->queue_size,
                                               VSNAP_DISK_MAX_QUEUE_SIZE);
        return disk_invalid(error, SHIM_ERROR_INVALID, i, "queue_size", why);
    }
    if (!check_layers(d, i, error) || !check_write_policy(d, i, error))
        return false;
    if (d->image_type && strcmp(d->image_type, "Raw") != 0) {
        g_autofree char *why = g_strdup_printf("'%s' is not supported by vsnap: only Raw images "
                                               "(convert with qemu-img convert -O raw)", d->image_type);
        return disk_invalid(error, SHIM_ERROR_UNSUPPORTED, i, "image_type", why);
    }
    return true;
}

bool vm_config_check_disks(const struct vm_config *cfg, GError **error)
{
    bool console = cfg->console.mode != CONSOLE_MODE_OFF; /* a virtio-console device */
    unsigned devices = cfg->ndisks + cfg->nnets + cfg->vsock.present + console + cfg->rng.present;
    if (devices > VSNAP_MAX_VIRTIO_DEVICES) {
        g_autofree char *nets = cfg->nnets ? g_strdup_printf(" and %u network interfaces", cfg->nnets) : g_strdup("");
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_UNSUPPORTED,
                    "invalid field '%s': %u disks%s%s%s%s are more than the %d virtio devices vsnap gives a VM",
                    cfg->nnets ? "net" : "disks", cfg->ndisks, nets, cfg->vsock.present ? " and a vsock device" : "",
                    console ? " and a console" : "", cfg->rng.present ? " and an rng" : "", VSNAP_MAX_VIRTIO_DEVICES);
        return false;
    }
    for (unsigned i = 0; i < cfg->ndisks; i++)
        if (!check_disk(cfg, i, error))
            return false;
    return true;
}

/* ---- the image ---- */

static bool image_failed(GError **error, const char *field, const char *path, const char *why)
{
    g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "invalid field '%s': %s: %s", field, path, why);
    return false;
}

static bool layers_failed(GError **error, const char *field, const char *member, GError *local)
{
    g_autofree char *name = g_strdup(field);
    char *dot = strrchr(name, '.');
    if (dot)
        *dot = '\0';
    g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "invalid field '%s.%s': %s", name, member, local->message);
    return false;
}

/* A disk given on layers (vm.create after a crash or a host restart): the
 * chain opens and fits the image, and an existing overlay sits on its top
 * layer over this very image. */
static bool check_chain_files(const struct disk_config *disk, const char *field, uint64_t capacity, GError **error)
{
    g_autoptr(GError) local = NULL;
    g_autoptr(snap_chain) chain =
        snap_disk_chain_open((const char *const *)disk->vsnap_chain, g_strv_length(disk->vsnap_chain), &local);
    if (!chain)
        return layers_failed(error, field, "vsnap_chain", local);
    if (chain->ram_size != snap_disk_layer_size(capacity)) {
        g_set_error(&local, SNAP_ERROR, SNAP_ERROR_CHAIN, "disk layer %s covers %" G_GUINT64_FORMAT " bytes, but %s "
                    "holds %" G_GUINT64_FORMAT " (another disk's layer?)", chain->layers[0]->path, chain->ram_size,
                    disk->path, capacity);
        return layers_failed(error, field, "vsnap_chain", local);
    }
    if (!disk->vsnap_overlay || !g_file_test(disk->vsnap_overlay, G_FILE_TEST_EXISTS))
        return true;
    g_autoptr(snap_overlay) ov = snap_overlay_open(disk->vsnap_overlay, false, &local);
    if (!ov || !snap_image_lock_free(ov->fd, "disk overlay", disk->vsnap_overlay, true, &local) ||
        !snap_overlay_check_fits(ov, snap_chain_top_id(chain), capacity, disk->path, &local))
        return layers_failed(error, field, "vsnap_overlay", local);
    return true;
}

/* Opening it is the only honest access check: access(2) says yes to root
 * for a file marked immutable, and a block device may refuse writers. */
bool disk_config_check_image(const struct disk_config *disk, const char *field, GError **error)
{
    struct stat st;
    if (stat(disk->path, &st) != 0)
        return image_failed(error, field, disk->path, g_strerror(errno));
    if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
        return image_failed(error, field, disk->path, "not a regular file or a block device");
    /* The base of a chain is only ever read. */
    bool read_only = disk->readonly || disk->vsnap_chain;
    /* The flags the disk's backend opens it with (blk-raw.c): a confined
     * shim keeps this open file, and its lock, for that open to reuse; any
     * other flags would open a second file the kept one's lock refuses. */
    int flags = (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC | (disk->direct ? O_DIRECT : 0);
    int fd = sandbox_open_kept(disk->path, flags);
    if (fd < 0) {
        int e = errno;
        g_autofree char *why =
            e == EINVAL && disk->direct
                ? g_strdup("its file system refuses O_DIRECT (direct=true: libvirt's cache='none' or 'directsync')")
                : g_strdup_printf("cannot open it for %s: %s", read_only ? "reading" : "reading and writing",
                                  g_strerror(e));
        return image_failed(error, field, disk->path, why);
    }
    /* Another VM's image is refused here, before anything is built; the
     * disk's backend takes the lock it holds for good (image-lock.h). */
    g_autoptr(GError) busy = NULL;
    if (!snap_image_lock(fd, "disk image", disk->path, !read_only, &busy)) {
        close(fd);
        g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID, "invalid field '%s': %s", field, busy->message);
        return false;
    }
    uint64_t size = (uint64_t)st.st_size;
    bool sized = S_ISREG(st.st_mode) || ioctl(fd, BLKGETSIZE64, &size) == 0;
    int e = errno;
    close(fd);
    if (!sized) {
        g_autofree char *why = g_strdup_printf("cannot read the block device's size: %s", g_strerror(e));
        return image_failed(error, field, disk->path, why);
    }
    if (size < SECTOR) {
        g_autofree char *why = g_strdup_printf("holds %" G_GUINT64_FORMAT " bytes, less than one %u-byte sector",
                                               size, SECTOR);
        return image_failed(error, field, disk->path, why);
    }
    return !disk->vsnap_chain || check_chain_files(disk, field, size - size % SECTOR, error);
}

/* Two disks of one VM on one file would both write it; the image lock
 * cannot tell (a confined shim reopens a path through one kept open). */
bool disk_config_check_distinct(const struct vm_config *cfg, GError **error)
{
    struct stat st[VSNAP_MAX_VIRTIO_DEVICES];
    for (unsigned i = 0; i < cfg->ndisks && i < G_N_ELEMENTS(st); i++) {
        if (stat(cfg->disks[i].path, &st[i]) != 0)
            return image_failed(error, "disks[].path", cfg->disks[i].path, g_strerror(errno));
        for (unsigned j = 0; j < i; j++) {
            bool same = st[i].st_dev == st[j].st_dev && st[i].st_ino == st[j].st_ino;
            if (same && !(cfg->disks[i].readonly && cfg->disks[j].readonly)) {
                g_set_error(error, SHIM_ERROR, SHIM_ERROR_INVALID,
                            "invalid field 'disks[%u].path': %s is the image of disks[%u] too (%s); an image "
                            "written by a disk is no other disk's", i, cfg->disks[i].path, j, cfg->disks[j].path);
                return false;
            }
        }
    }
    return true;
}

/* ---- JSON ---- */

void disk_config_add_json(JsonBuilder *b, const struct disk_config *disk)
{
    vjson_object_begin(b, NULL);
    vjson_str(b, "path", disk->path);
    vjson_bool(b, "readonly", disk->readonly);
    vjson_bool(b, "direct", disk->direct);
    vjson_bool(b, "sparse", disk->sparse);
    vjson_str(b, "id", disk->id);
    vjson_str(b, "serial", disk->serial);
    vjson_int(b, "num_queues", disk->num_queues);
    vjson_int(b, "queue_size", disk->queue_size);
    vjson_str(b, "image_type", "Raw");
    vjson_strv(b, "vsnap_chain", disk->vsnap_chain);
    vjson_str(b, "vsnap_overlay", disk->vsnap_overlay);
    vjson_bool(b, "vsnap_write_through", disk->vsnap_write_through);
    vjson_bool(b, "vsnap_ignore_flush", disk->vsnap_ignore_flush);
    vjson_bool(b, "vsnap_discard_unmap", disk->vsnap_discard_unmap);
    vjson_str(b, "vsnap_detect_zeroes", disk->vsnap_detect_zeroes);
    vjson_str(b, "vsnap_io", disk->vsnap_io);
    vjson_object_end(b);
}
