/* struct domain_def back to libvirt-style XML. Defaults are written out, so
 * format(parse(format(x))) == format(parse(x)); runtime details (domain id,
 * pty paths, an automatic vsock CID, disk backing chains) only appear in
 * live XML. */
#include "conf/domain-conf.h"

#include <string.h>

static void append_text_element(GString *out, const char *indent, const char *name, const char *text)
{
    if (!text)
        return;
    g_autofree char *escaped = g_markup_escape_text(text, -1);
    g_string_append_printf(out, "%s<%s>%s</%s>\n", indent, name, escaped, name);
}

static void format_metadata(GString *out, const struct domain_def *def)
{
    g_string_append_printf(out,
                           "  <metadata>\n"
                           "    <vsnap:vsnap xmlns:vsnap='%s'>\n"
                           "      <vsnap:restore mode='%s'/>\n"
                           "      <vsnap:readiness port='%u'/>\n"
                           "      <vsnap:notify port='%u'%s/>\n",
                           VSNAP_DOMAIN_NS, restore_mode_to_string(def->vsnap.restore_mode),
                           def->vsnap.readiness_port, def->notify.port,
                           def->notify.no_credential ? " credential='off'" : "");
    if (def->vsnap.store_url) {
        g_autofree char *url = g_markup_escape_text(def->vsnap.store_url, -1);
        g_string_append_printf(out, "      <vsnap:store url='%s'/>\n", url);
    }
    if (domain_def_is_clone(def)) {
        g_autofree char *domain = g_markup_escape_text(def->vsnap.from_domain, -1);
        g_autofree char *snapshot = g_markup_escape_text(def->vsnap.from_snapshot, -1);
        g_string_append_printf(out, "      <vsnap:from domain='%s' snapshot='%s'/>\n", domain, snapshot);
    }
    g_string_append(out, "    </vsnap:vsnap>\n");
    if (def->foreign_metadata) {
        /* Verbatim: re-indenting would change the content of mixed text. */
        g_string_append(out, "    ");
        g_string_append(out, def->foreign_metadata);
        g_string_append_c(out, '\n');
    }
    g_string_append(out, "  </metadata>\n");
}

static void format_os(GString *out, const struct domain_def *def)
{
    g_autofree char *type = g_markup_escape_text(def->os_type ? def->os_type : "hvm", -1);
    g_string_append_printf(out, "  <os>\n    <type arch='x86_64' machine='vsnap'>%s</type>\n", type);
    append_text_element(out, "    ", "kernel", def->kernel);
    append_text_element(out, "    ", "initrd", def->initrd);
    append_text_element(out, "    ", "cmdline", def->cmdline);
    if (def->boot_hd)
        g_string_append(out, "    <boot dev='hd'/>\n");
    if (def->smbios_mode != DOMAIN_SMBIOS_DEFAULT)
        g_string_append_printf(out, "    <smbios mode='%s'/>\n", domain_smbios_mode_to_string(def->smbios_mode));
    g_string_append(out, "  </os>\n");
}

static void format_entry(GString *out, const char *name, const char *value)
{
    if (!value)
        return;
    g_autofree char *escaped = g_markup_escape_text(value, -1);
    if (name)
        g_string_append_printf(out, "      <entry name='%s'>%s</entry>\n", name, escaped);
    else
        g_string_append_printf(out, "      <entry>%s</entry>\n", escaped);
}

static void format_sysinfo(GString *out, const struct domain_sysinfo *s)
{
    if (!s->present)
        return;
    g_string_append(out, "  <sysinfo type='smbios'>\n");
    if (s->manufacturer || s->product || s->version || s->serial || s->uuid || s->sku || s->family) {
        g_string_append(out, "    <system>\n");
        format_entry(out, "manufacturer", s->manufacturer);
        format_entry(out, "product", s->product);
        format_entry(out, "version", s->version);
        format_entry(out, "serial", s->serial);
        format_entry(out, "uuid", s->uuid);
        format_entry(out, "sku", s->sku);
        format_entry(out, "family", s->family);
        g_string_append(out, "    </system>\n");
    }
    if (s->oem_strings && s->oem_strings[0]) {
        g_string_append(out, "    <oemStrings>\n");
        for (char **e = s->oem_strings; *e; e++)
            format_entry(out, NULL, *e);
        g_string_append(out, "    </oemStrings>\n");
    }
    g_string_append(out, "  </sysinfo>\n");
}

static void format_rng(GString *out, const struct domain_def *def)
{
    if (!def->rng.present)
        return;
    g_autofree char *backend = g_markup_escape_text(def->rng.backend, -1);
    g_string_append(out, "    <rng model='virtio'>\n");
    if (def->rng.rate_bytes)
        g_string_append_printf(out, "      <rate bytes='%" G_GUINT64_FORMAT "' period='%" G_GUINT64_FORMAT "'/>\n",
                               def->rng.rate_bytes, def->rng.rate_period_ms);
    g_string_append_printf(out, "      <backend model='random'>%s</backend>\n    </rng>\n", backend);
}

static void format_features_cpu_clock(GString *out, const struct domain_def *def)
{
    if (def->features.acpi || def->features.apic || def->features.pae)
        g_string_append_printf(out, "  <features>\n%s%s%s  </features>\n",
                               def->features.acpi ? "    <acpi/>\n" : "",
                               def->features.apic ? "    <apic/>\n" : "",
                               def->features.pae ? "    <pae/>\n" : "");
    if (def->cpu.present)
        g_string_append_printf(out, "  <cpu mode='host-passthrough'%s%s/>\n",
                               def->cpu.check_none ? " check='none'" : "",
                               def->cpu.migratable == CPU_MIGRATABLE_ON    ? " migratable='on'"
                               : def->cpu.migratable == CPU_MIGRATABLE_OFF ? " migratable='off'"
                                                                           : "");
    if (def->clock_utc)
        g_string_append(out, "  <clock offset='utc'/>\n");
}

static void format_lifecycle(GString *out, const struct domain_def *def)
{
    g_string_append_printf(out,
                           "  <on_poweroff>%s</on_poweroff>\n"
                           "  <on_reboot>%s</on_reboot>\n"
                           "  <on_crash>%s</on_crash>\n",
                           domain_lifecycle_action_to_string(def->on_poweroff),
                           domain_lifecycle_action_to_string(def->on_reboot),
                           domain_lifecycle_action_to_string(def->on_crash));
}

static void format_source(GString *out, const char *path)
{
    g_autofree char *escaped = g_markup_escape_text(path, -1);
    g_string_append_printf(out, "      <source path='%s'/>\n", escaped);
}

static void format_serial(GString *out, const struct domain_def *def, bool live)
{
    const struct domain_chr *serial = &def->serial;
    if (serial->type == DOMAIN_CHR_NONE)
        return;
    g_string_append_printf(out, "    <serial type='%s'>\n", serial->type == DOMAIN_CHR_FILE ? "file" : "pty");
    if (serial->path && (serial->type == DOMAIN_CHR_FILE || live))
        format_source(out, serial->path);
    g_string_append(out, "      <target port='0'/>\n    </serial>\n");
}

static void format_console(GString *out, const struct domain_def *def, bool live)
{
    if (def->console.type == DOMAIN_CHR_NONE)
        return;
    /* The console is the serial port: its pty is the serial's pty. */
    const char *pty = def->console.path ? def->console.path : def->serial.path;
    if (live && pty) {
        g_autofree char *escaped = g_markup_escape_text(pty, -1);
        g_string_append_printf(out, "    <console type='pty' tty='%s'>\n", escaped);
        format_source(out, pty);
    } else {
        g_string_append(out, "    <console type='pty'>\n");
    }
    g_string_append(out, "      <target type='serial' port='0'/>\n    </console>\n");
}

static void format_vsock(GString *out, const struct domain_def *def, bool live)
{
    if (!def->vsock.present)
        return;
    g_string_append(out, "    <vsock model='virtio'>\n");
    if (!def->vsock.auto_cid)
        g_string_append_printf(out, "      <cid auto='no' address='%u'/>\n", def->vsock.cid);
    else if (live && def->vsock.cid)
        g_string_append_printf(out, "      <cid auto='yes' address='%u'/>\n", def->vsock.cid);
    else
        g_string_append(out, "      <cid auto='yes'/>\n");
    g_string_append(out, "    </vsock>\n");
}

static void format_disk_source(GString *out, int depth, const char *path, bool is_block)
{
    g_autofree char *escaped = g_markup_escape_text(path, -1);
    g_string_append_printf(out, "%*s<source %s='%s'/>\n", 6 + 2 * depth, "", is_block ? "dev" : "file",
                           escaped);
}

/* Live XML: the layers below the top one, each a <backingStore> inside the
 * one above, down to the image, then the empty <backingStore/> that tells
 * libvirt clients the chain ends there. */
static void format_backing_chain(GString *out, const struct domain_disk *disk)
{
    int depth = 0;
    for (char **layer = disk->chain ? disk->chain + 1 : NULL; layer && *layer; layer++, depth++) {
        g_string_append_printf(out, "%*s<backingStore type='file'>\n%*s<format type='raw'/>\n", 6 + 2 * depth,
                               "", 8 + 2 * depth, "");
        format_disk_source(out, depth + 1, *layer, false);
    }
    if (disk->chain) {
        g_string_append_printf(out, "%*s<backingStore type='%s'>\n%*s<format type='raw'/>\n", 6 + 2 * depth,
                               "", disk->is_block ? "block" : "file", 8 + 2 * depth, "");
        format_disk_source(out, depth + 1, disk->path, disk->is_block);
        depth++;
    }
    g_string_append_printf(out, "%*s<backingStore/>\n", 6 + 2 * depth, "");
    for (depth--; depth >= 0; depth--)
        g_string_append_printf(out, "%*s</backingStore>\n", 6 + 2 * depth, "");
}

static void append_keyword(GString *out, const char *attribute, const char *const *names, int value)
{
    if (value)
        g_string_append_printf(out, " %s='%s'", attribute, names[value]);
}

/* <driver>: the name as written, raw, and the modes that were given. */
static void format_disk_driver(GString *out, const struct domain_disk *disk)
{
    g_string_append_printf(out, "      <driver name='%s' type='raw'",
                           disk->driver == DOMAIN_DISK_DRIVER_QEMU ? "qemu" : "vsnap");
    append_keyword(out, "cache", domain_disk_cache_names, disk->cache);
    append_keyword(out, "io", domain_disk_io_names, disk->io);
    append_keyword(out, "discard", domain_disk_discard_names, disk->discard);
    append_keyword(out, "detect_zeroes", domain_disk_detect_zeroes_names, disk->detect_zeroes);
    g_string_append(out, "/>\n");
}

/* Inactive XML is the user's definition (the image as <source>); live XML
 * shows the chain's top as <source> with the chain below it. */
static void format_disk(GString *out, const struct domain_disk *disk, bool live)
{
    bool top_is_block = disk->is_block && !(live && disk->chain);
    g_string_append_printf(out, "    <disk type='%s' device='disk'>\n", top_is_block ? "block" : "file");
    format_disk_driver(out, disk);
    format_disk_source(out, 0, live && disk->chain ? disk->chain[0] : disk->path, top_is_block);
    if (live)
        format_backing_chain(out, disk);
    g_string_append_printf(out, "      <target dev='%s' bus='virtio'/>\n", disk->target);
    if (disk->readonly)
        g_string_append(out, "      <readonly/>\n");
    append_text_element(out, "      ", "serial", disk->serial);
    if (disk->boot_order)
        g_string_append_printf(out, "      <boot order='%u'/>\n", disk->boot_order);
    if (disk->address_mmio)
        g_string_append(out, "      <address type='virtio-mmio'/>\n");
    g_string_append(out, "    </disk>\n");
}

static const char *net_type_name(enum domain_net_type type)
{
    switch (type) {
    case DOMAIN_NET_ETHERNET:
        return "ethernet";
    case DOMAIN_NET_BRIDGE:
        return "bridge";
    case DOMAIN_NET_NETWORK:
        return "network";
    }
    return "ethernet";
}

static void format_net_source(GString *out, const struct domain_net *net, bool live)
{
    if (net->type == DOMAIN_NET_ETHERNET)
        return;
    g_autofree char *source = g_markup_escape_text(net->source, -1);
    g_string_append_printf(out, "      <source %s='%s'", net->type == DOMAIN_NET_BRIDGE ? "bridge" : "network",
                           source);
    if (live && net->port_id)
        g_string_append_printf(out, " portid='%s'", net->port_id);
    if (live && net->port_bridge)
        g_string_append_printf(out, " bridge='%s'", net->port_bridge);
    g_string_append(out, "/>\n");
}

/* As libvirt writes it: mac, source, target, model, mtu, link, alias. A tap
 * the daemon named shows in live XML only; the alias is live only. */
static void format_interface(GString *out, const struct domain_net *net, size_t index, bool live)
{
    char mac[DOMAIN_NET_MAC_LEN];
    domain_mac_format(net->mac, mac);
    g_string_append_printf(out, "    <interface type='%s'>\n      <mac address='%s'/>\n", net_type_name(net->type),
                           mac);
    format_net_source(out, net, live);
    if (net->ifname && (live || !net->ifname_auto)) {
        g_autofree char *dev = g_markup_escape_text(net->ifname, -1);
        g_string_append_printf(out, "      <target dev='%s'%s/>\n", dev, net->unmanaged ? " managed='no'" : "");
    }
    g_string_append(out, "      <model type='virtio'/>\n");
    if (net->mtu)
        g_string_append_printf(out, "      <mtu size='%u'/>\n", net->mtu);
    if (net->link_down)
        g_string_append(out, "      <link state='down'/>\n");
    if (live)
        g_string_append_printf(out, "      <alias name='net%zu'/>\n", index);
    g_string_append(out, "    </interface>\n");
}

static void format_devices(GString *out, const struct domain_def *def, bool live)
{
    g_string_append(out, "  <devices>\n");
    append_text_element(out, "    ", "emulator", def->emulator);
    for (size_t i = 0; i < def->n_disks; i++)
        format_disk(out, &def->disks[i], live);
    for (size_t i = 0; i < def->n_nets; i++)
        format_interface(out, &def->nets[i], i, live);
    format_serial(out, def, live);
    format_console(out, def, live);
    format_vsock(out, def, live);
    format_rng(out, def);
    if (def->memballoon_none)
        g_string_append(out, "    <memballoon model='none'/>\n");
    g_string_append(out, "  </devices>\n");
}

static void append_limit(GString *out, const char *name, uint64_t kib)
{
    if (kib)
        g_string_append_printf(out, "    <%s unit='KiB'>%" G_GUINT64_FORMAT "</%s>\n", name, kib,
                               name);
}

static void append_number(GString *out, const char *name, uint64_t value)
{
    if (value)
        g_string_append_printf(out, "    <%s>%" G_GUINT64_FORMAT "</%s>\n", name, value, name);
}

/* After <memtune>, as libvirt writes them. */
static void format_memory_backing(GString *out, const struct domain_def *def)
{
    if (!def->memory_backing.present)
        return;
    g_string_append(out, "  <memoryBacking>\n");
    if (def->memory_backing.hugepages && def->memory_backing.page_kib)
        g_string_append_printf(out, "    <hugepages>\n      <page size='%" G_GUINT64_FORMAT "' unit='KiB'/>\n"
                               "    </hugepages>\n", def->memory_backing.page_kib);
    else if (def->memory_backing.hugepages)
        g_string_append(out, "    <hugepages/>\n");
    if (def->memory_backing.source_memfd)
        g_string_append(out, "    <source type='memfd'/>\n");
    g_string_append(out, "  </memoryBacking>\n");
}

static void format_tune(GString *out, const struct domain_def *def)
{
    if (def->memtune.present) {
        g_string_append(out, "  <memtune>\n");
        append_limit(out, "hard_limit", def->memtune.hard_limit_kib);
        append_limit(out, "soft_limit", def->memtune.soft_limit_kib);
        append_limit(out, "swap_hard_limit", def->memtune.swap_hard_limit_kib);
        g_string_append(out, "  </memtune>\n");
    }
    format_memory_backing(out, def);
    if (def->cputune.present) {
        g_string_append(out, "  <cputune>\n");
        append_number(out, "shares", def->cputune.shares);
        append_number(out, "period", def->cputune.period_us);
        append_number(out, "quota", def->cputune.quota_us);
        g_string_append(out, "  </cputune>\n");
    }
}

char *domain_def_format(const struct domain_def *def, bool live, int id)
{
    GString *out = g_string_new(NULL);
    char uuid[DOMAIN_UUID_STRING_LEN];
    domain_uuid_format(def->uuid, uuid);

    if (live && id >= 0)
        g_string_append_printf(out, "<domain type='kvm' id='%d'>\n", id);
    else
        g_string_append(out, "<domain type='kvm'>\n");
    append_text_element(out, "  ", "name", def->name);
    append_text_element(out, "  ", "uuid", uuid);
    append_text_element(out, "  ", "title", def->title);
    append_text_element(out, "  ", "description", def->description);
    format_metadata(out, def);
    g_string_append_printf(out,
                           "  <memory unit='KiB'>%" G_GUINT64_FORMAT "</memory>\n"
                           "  <currentMemory unit='KiB'>%" G_GUINT64_FORMAT "</currentMemory>\n"
                           "  <vcpu placement='static'>%u</vcpu>\n",
                           def->memory_kib, def->current_memory_kib, def->vcpus);
    format_tune(out, def);
    format_sysinfo(out, &def->sysinfo);
    format_os(out, def);
    format_features_cpu_clock(out, def);
    format_lifecycle(out, def);
    format_devices(out, def, live);
    g_string_append(out, "</domain>\n");
    return g_string_free(out, false);
}
