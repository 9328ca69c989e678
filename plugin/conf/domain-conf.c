/* Life cycle of struct domain_def and the names of its enums. Parsing is in
 * domain-parse*.c, formatting in domain-format.c, the shim's VmConfig in
 * domain-vm-config.c. */
#include "conf/domain-conf.h"
#include "domain-parse.h"

#include <string.h>

static void domain_chr_clear(struct domain_chr *chr)
{
    g_clear_pointer(&chr->path, g_free);
}

static void domain_sysinfo_clear(struct domain_sysinfo *s)
{
    char **fields[] = { &s->manufacturer, &s->product, &s->version, &s->serial, &s->uuid, &s->sku, &s->family };
    for (size_t i = 0; i < G_N_ELEMENTS(fields); i++)
        g_clear_pointer(fields[i], g_free);
    g_clear_pointer(&s->oem_strings, g_strfreev);
}

static void domain_sysinfo_copy(struct domain_sysinfo *to, const struct domain_sysinfo *from)
{
    to->present = from->present;
    to->manufacturer = g_strdup(from->manufacturer);
    to->product = g_strdup(from->product);
    to->version = g_strdup(from->version);
    to->serial = g_strdup(from->serial);
    to->uuid = g_strdup(from->uuid);
    to->sku = g_strdup(from->sku);
    to->family = g_strdup(from->family);
    to->oem_strings = g_strdupv(from->oem_strings);
}

const char *const domain_disk_cache_names[] = {
    "", "default", "none", "writethrough", "writeback", "directsync", "unsafe", NULL,
};
const char *const domain_disk_io_names[] = { "", "native", "threads", "io_uring", NULL };
const char *const domain_disk_discard_names[] = { "", "unmap", "ignore", NULL };
const char *const domain_disk_detect_zeroes_names[] = { "", "off", "on", "unmap", NULL };

static void domain_disk_clear(struct domain_disk *disk)
{
    g_free(disk->target);
    g_free(disk->path);
    g_free(disk->serial);
    g_strfreev(disk->chain);
}

static void domain_disk_copy_into(struct domain_disk *to, const struct domain_disk *from)
{
    *to = *from;
    to->target = g_strdup(from->target);
    to->path = g_strdup(from->path);
    to->serial = g_strdup(from->serial);
    to->chain = g_strdupv(from->chain);
}

void domain_net_clear(struct domain_net *net)
{
    g_free(net->ifname);
    g_free(net->source);
    g_free(net->port_id);
    g_free(net->port_bridge);
}

void domain_net_free(struct domain_net *net)
{
    if (!net)
        return;
    domain_net_clear(net);
    g_free(net);
}

static void domain_net_copy_into(struct domain_net *to, const struct domain_net *from)
{
    *to = *from;
    to->ifname = g_strdup(from->ifname);
    to->source = g_strdup(from->source);
    to->port_id = g_strdup(from->port_id);
    to->port_bridge = g_strdup(from->port_bridge);
}

void domain_def_forget_net_runtime(struct domain_def *def)
{
    for (size_t i = 0; i < def->n_nets; i++) {
        struct domain_net *net = &def->nets[i];
        if (net->ifname_auto)
            g_clear_pointer(&net->ifname, g_free);
        g_clear_pointer(&net->port_id, g_free);
        g_clear_pointer(&net->port_bridge, g_free);
    }
}

void domain_mac_format(const unsigned char mac[6], char out[DOMAIN_NET_MAC_LEN])
{
    g_snprintf(out, DOMAIN_NET_MAC_LEN, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3],
               mac[4], mac[5]);
}

bool domain_mac_parse(const char *text, unsigned char mac[6])
{
    if (strlen(text) != DOMAIN_NET_MAC_LEN - 1)
        return false;
    for (int i = 0; i < 6; i++) {
        const char *byte = text + 3 * i;
        if (!g_ascii_isxdigit(byte[0]) || !g_ascii_isxdigit(byte[1]) || (i < 5 && byte[2] != ':'))
            return false;
        mac[i] = (unsigned char)(g_ascii_xdigit_value(byte[0]) << 4 | g_ascii_xdigit_value(byte[1]));
    }
    return true;
}

char *domain_net_id(size_t index)
{
    return g_strdup_printf("net%zu", index);
}

struct domain_net *domain_def_find_net(const struct domain_def *def, const char *name)
{
    unsigned char mac[6];
    bool is_mac = domain_mac_parse(name, mac);
    for (size_t i = 0; i < def->n_nets; i++) {
        struct domain_net *net = &def->nets[i];
        if ((net->ifname && strcmp(net->ifname, name) == 0) || (is_mac && memcmp(net->mac, mac, 6) == 0))
            return net;
    }
    return NULL;
}

void domain_disk_set_chain(struct domain_disk *disk, const char *const *chain)
{
    g_strfreev(disk->chain);
    disk->chain = chain && chain[0] ? g_strdupv((char **)chain) : NULL;
}

struct domain_disk *domain_def_find_disk(const struct domain_def *def, const char *name)
{
    for (size_t i = 0; i < def->n_disks; i++) {
        const struct domain_disk *d = &def->disks[i];
        /* The live XML's <source> of a disk with a chain is its overlay. */
        if (strcmp(d->target, name) == 0 || strcmp(d->path, name) == 0 ||
            (d->chain && d->chain[0] && strcmp(d->chain[0], name) == 0))
            return &def->disks[i];
    }
    return NULL;
}

void domain_def_free(struct domain_def *def)
{
    if (!def)
        return;
    g_free(def->name);
    g_free(def->title);
    g_free(def->description);
    g_free(def->os_type);
    g_free(def->kernel);
    g_free(def->initrd);
    g_free(def->cmdline);
    domain_chr_clear(&def->serial);
    domain_chr_clear(&def->console);
    g_free(def->emulator);
    g_free(def->foreign_metadata);
    g_free(def->vsnap.store_url);
    g_free(def->vsnap.from_domain);
    g_free(def->vsnap.from_snapshot);
    for (size_t i = 0; i < def->n_disks; i++)
        domain_disk_clear(&def->disks[i]);
    g_free(def->disks);
    for (size_t i = 0; i < def->n_nets; i++)
        domain_net_clear(&def->nets[i]);
    g_free(def->nets);
    domain_sysinfo_clear(&def->sysinfo);
    g_free(def->rng.backend);
    g_free(def);
}

struct domain_def *domain_def_copy(const struct domain_def *def)
{
    struct domain_def *copy = g_new(struct domain_def, 1);
    *copy = *def;
    copy->name = g_strdup(def->name);
    copy->title = g_strdup(def->title);
    copy->description = g_strdup(def->description);
    copy->os_type = g_strdup(def->os_type);
    copy->kernel = g_strdup(def->kernel);
    copy->initrd = g_strdup(def->initrd);
    copy->cmdline = g_strdup(def->cmdline);
    copy->serial.path = g_strdup(def->serial.path);
    copy->console.path = g_strdup(def->console.path);
    copy->emulator = g_strdup(def->emulator);
    copy->foreign_metadata = g_strdup(def->foreign_metadata);
    copy->vsnap.store_url = g_strdup(def->vsnap.store_url);
    copy->vsnap.from_domain = g_strdup(def->vsnap.from_domain);
    copy->vsnap.from_snapshot = g_strdup(def->vsnap.from_snapshot);
    copy->disks = g_new0(struct domain_disk, def->n_disks);
    for (size_t i = 0; i < def->n_disks; i++)
        domain_disk_copy_into(&copy->disks[i], &def->disks[i]);
    copy->nets = g_new0(struct domain_net, def->n_nets);
    for (size_t i = 0; i < def->n_nets; i++)
        domain_net_copy_into(&copy->nets[i], &def->nets[i]);
    domain_sysinfo_copy(&copy->sysinfo, &def->sysinfo);
    copy->rng.backend = g_strdup(def->rng.backend);
    return copy;
}

const char *restore_mode_to_string(enum restore_mode mode)
{
    switch (mode) {
    case RESTORE_MODE_ONDEMAND:
        return "ondemand";
    case RESTORE_MODE_MERGE:
        return "merge";
    case RESTORE_MODE_COPY:
        return "copy";
    case RESTORE_MODE_SHARED:
        return "shared";
    }
    return "unknown";
}

const char *domain_smbios_mode_to_string(enum domain_smbios_mode mode)
{
    switch (mode) {
    case DOMAIN_SMBIOS_DEFAULT:
        return NULL;
    case DOMAIN_SMBIOS_EMULATE:
        return "emulate";
    case DOMAIN_SMBIOS_SYSINFO:
        return "sysinfo";
    }
    return NULL;
}

char *domain_notify_socket_address(const struct domain_def *def)
{
    return g_strdup_printf("vsock-stream:2:%u", def->notify.port);
}

const char *domain_lifecycle_action_to_string(enum domain_lifecycle_action action)
{
    switch (action) {
    case DOMAIN_ACTION_DESTROY:
        return "destroy";
    case DOMAIN_ACTION_RESTART:
        return "restart";
    case DOMAIN_ACTION_PRESERVE:
        return "preserve";
    case DOMAIN_ACTION_RENAME_RESTART:
        return "rename-restart";
    case DOMAIN_ACTION_COREDUMP_DESTROY:
        return "coredump-destroy";
    case DOMAIN_ACTION_COREDUMP_RESTART:
        return "coredump-restart";
    }
    return "unknown";
}

bool domain_def_is_clone(const struct domain_def *def)
{
    return def && def->vsnap.from_domain != NULL;
}
