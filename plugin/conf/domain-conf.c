/* Life cycle of struct domain_def and the names of its enums. Parsing is in
 * domain-parse*.c, formatting in domain-format.c, the shim's VmConfig in
 * domain-vm-config.c. */
#include "domain-conf.h"

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
    for (size_t i = 0; i < def->n_disks; i++)
        domain_disk_clear(&def->disks[i]);
    g_free(def->disks);
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
    copy->disks = g_new0(struct domain_disk, def->n_disks);
    for (size_t i = 0; i < def->n_disks; i++)
        domain_disk_copy_into(&copy->disks[i], &def->disks[i]);
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
