/* <domainCapabilities>: what a vsnap domain may contain, so virt-manager's
 * New-VM wizard offers only that. Every "supported='yes'" here is something
 * domain-parse*.c accepts; everything it refuses is 'no'. Shapes follow
 * libvirt's domaincaps.rng (the element order of <devices> and <features>
 * is fixed there). */
#include "conf/capabilities.h"

#include <string.h>

#include "limits/vsnap-limits.h"

#define VSNAP_MACHINE "vsnap"
#define VSNAP_ARCH "x86_64"
#define VSNAP_VIRTTYPE "kvm"
#define VSNAP_EMULATOR_BASENAME "vsnap-shim"

static bool check_request(const char *requested, const char *supported, const char *what, GError **error)
{
    if (requested && strcmp(requested, supported) != 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                    "%s '%s' is not supported by vsnap: only '%s'", what, requested, supported);
        return false;
    }
    return true;
}

/* Any path to the shim is the shim: clients may pass the <emulator> they
 * read from <capabilities> or from an older definition. */
static bool check_emulator(const char *emulatorbin, const char *emulator, GError **error)
{
    if (!emulatorbin || strcmp(emulatorbin, emulator) == 0)
        return true;
    g_autofree char *base = g_path_get_basename(emulatorbin);
    if (strcmp(base, VSNAP_EMULATOR_BASENAME) == 0)
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_CONFIG_UNSUPPORTED,
                "emulator '%s' is not supported by vsnap: only %s", emulatorbin, emulator);
    return false;
}

static void format_os_cpu(GString *out)
{
    g_string_append(out,
                    "  <os supported='yes'>\n"
                    "    <enum name='firmware'/>\n"
                    "    <loader supported='no'/>\n"
                    "  </os>\n"
                    "  <cpu>\n"
                    "    <mode name='host-passthrough' supported='yes'>\n"
                    "      <enum name='hostPassthroughMigratable'>\n"
                    "        <value>on</value>\n"
                    "        <value>off</value>\n"
                    "      </enum>\n"
                    "    </mode>\n"
                    "    <mode name='maximum' supported='no'/>\n"
                    "    <mode name='host-model' supported='no'/>\n"
                    "    <mode name='custom' supported='no'/>\n"
                    "  </cpu>\n"
                    "  <memoryBacking supported='yes'>\n"
                    "    <enum name='sourceType'>\n"
                    "      <value>memfd</value>\n"
                    "    </enum>\n"
                    "  </memoryBacking>\n");
}

static void format_devices_features(GString *out)
{
    /* In domaincaps.rng order, limited to the elements libvirt 9.0's schema
     * knows (Debian 12's clients). Disks are virtio-blk on raw images and
     * block devices (device 'disk', bus 'virtio' only). Network interfaces
     * (virtio-net on taps) are supported, but libvirt 9.0's domaincaps.rng
     * has no <interface> element to say so in. */
    static const char *const devices[] = {"disk", "graphics", "video",    "hostdev", "rng",
                                          "filesystem", "tpm", "redirdev", "channel"};
    /* genid: every VM has a VM generation ID that changes on each restore, but
     * libvirt's <genid> element (an id chosen by the user) is not accepted. */
    static const char *const features[] = {"vmcoreinfo", "genid", "backingStoreInput", "backup", "sev", "sgx"};
    g_string_append(out, "  <devices>\n");
    for (size_t i = 0; i < G_N_ELEMENTS(devices); i++) {
        if (strcmp(devices[i], "disk") == 0)
            g_string_append(out, "    <disk supported='yes'>\n"
                                 "      <enum name='diskDevice'><value>disk</value></enum>\n"
                                 "      <enum name='bus'><value>virtio</value></enum>\n"
                                 "    </disk>\n");
        else if (strcmp(devices[i], "rng") == 0) /* virtio-rng from the host's random device */
            g_string_append(out, "    <rng supported='yes'>\n"
                                 "      <enum name='model'><value>virtio</value></enum>\n"
                                 "      <enum name='backendModel'><value>random</value></enum>\n"
                                 "    </rng>\n");
        else
            g_string_append_printf(out, "    <%s supported='no'/>\n", devices[i]);
    }
    g_string_append(out, "  </devices>\n  <features>\n");
    for (size_t i = 0; i < G_N_ELEMENTS(features); i++)
        g_string_append_printf(out, "    <%s supported='no'/>\n", features[i]);
    g_string_append(out, "  </features>\n");
}

char *domain_capabilities_format(const char *emulator, const char *emulatorbin, const char *arch,
                                 const char *machine, const char *virttype, GError **error)
{
    if (!emulator || emulator[0] != '/') {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG,
                    "the shim's path must be absolute, not '%s'", emulator ? emulator : "");
        return NULL;
    }
    if (!check_emulator(emulatorbin, emulator, error) || !check_request(arch, VSNAP_ARCH, "architecture", error) ||
        !check_request(machine, VSNAP_MACHINE, "machine type", error) ||
        !check_request(virttype, VSNAP_VIRTTYPE, "virtualization type", error))
        return NULL;

    g_autofree char *path = g_markup_escape_text(emulator, -1);
    GString *out = g_string_new(NULL);
    g_string_append_printf(out,
                           "<domainCapabilities>\n"
                           "  <path>%s</path>\n"
                           "  <domain>%s</domain>\n"
                           "  <machine>%s</machine>\n"
                           "  <arch>%s</arch>\n"
                           "  <vcpu max='%d'/>\n"
                           "  <iothreads supported='no'/>\n",
                           path, VSNAP_VIRTTYPE, VSNAP_MACHINE, VSNAP_ARCH, VSNAP_MAX_VCPUS);
    format_os_cpu(out);
    format_devices_features(out);
    g_string_append(out, "</domainCapabilities>\n");
    return g_string_free(out, false);
}
