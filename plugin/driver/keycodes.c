/* Key codes to i8042 scan codes (see keycodes.h). Every codeset is first
 * mapped to a "qnum": the set-1 code of the key, with bit 7 standing for the
 * 0xe0 prefix of the extended keys (the numbering QEMU and libvirt's keymaps
 * call qnum), then to bytes. */
#include "driver/keycodes.h"

#include <libvirt/libvirt.h>

#include "util/virt-error.h"

#define QNUM_EXTENDED 0x80
#define SET1_RELEASE 0x80
#define SET1_PREFIX 0xe0

/* Linux input key codes 1 to 88 are the set-1 codes of the keys of the PC/AT
 * keyboard (KEY_ESC 1 ... KEY_KPDOT 83, KEY_102ND 86, KEY_F11 87, KEY_F12
 * 88); the rest of the keys a PC keyboard has are extended ones. */
static const struct {
    uint16_t linux_code;
    uint8_t qnum;
} linux_extended[] = {
    {96, 0x9c},  /* KEY_KPENTER */   {97, 0x9d},  /* KEY_RIGHTCTRL */
    {98, 0xb5},  /* KEY_KPSLASH */   {99, 0xb7},  /* KEY_SYSRQ */
    {100, 0xb8}, /* KEY_RIGHTALT */  {102, 0xc7}, /* KEY_HOME */
    {103, 0xc8}, /* KEY_UP */        {104, 0xc9}, /* KEY_PAGEUP */
    {105, 0xcb}, /* KEY_LEFT */      {106, 0xcd}, /* KEY_RIGHT */
    {107, 0xcf}, /* KEY_END */       {108, 0xd0}, /* KEY_DOWN */
    {109, 0xd1}, /* KEY_PAGEDOWN */  {110, 0xd2}, /* KEY_INSERT */
    {111, 0xd3}, /* KEY_DELETE */    {113, 0xa0}, /* KEY_MUTE */
    {114, 0xae}, /* KEY_VOLUMEDOWN */ {115, 0xb0}, /* KEY_VOLUMEUP */
    {116, 0xde}, /* KEY_POWER */     {117, 0x59}, /* KEY_KPEQUAL */
    {125, 0xdb}, /* KEY_LEFTMETA */  {126, 0xdc}, /* KEY_RIGHTMETA */
    {127, 0xdd}, /* KEY_COMPOSE */
};

static int linux_to_qnum(uint32_t code)
{
    if ((code >= 1 && code <= 83) || (code >= 86 && code <= 88))
        return (int)code;
    for (size_t i = 0; i < G_N_ELEMENTS(linux_extended); i++)
        if (linux_extended[i].linux_code == code)
            return linux_extended[i].qnum;
    return -1;
}

/* A set-1 make code: 0x01-0x7f, or 0xe001-0xe07f for an extended key. */
static int set1_to_qnum(uint32_t code, bool extended_allowed)
{
    if (code >= 1 && code <= 0x7f)
        return (int)code;
    if (extended_allowed && code >> 8 == SET1_PREFIX && (code & 0xff) >= 1 && (code & 0xff) <= 0x7f)
        return (int)(QNUM_EXTENDED | (code & 0x7f));
    return -1;
}

static int qnum_of(int codeset, uint32_t code)
{
    switch (codeset) {
    case VIR_KEYCODE_SET_LINUX:
        return linux_to_qnum(code);
    case VIR_KEYCODE_SET_XT: /* the original XT keyboard: no extended keys */
        return code <= 0x53 ? set1_to_qnum(code, false) : -1;
    case VIR_KEYCODE_SET_ATSET1:
    case VIR_KEYCODE_SET_XT_KBD:
        return set1_to_qnum(code, true);
    case VIR_KEYCODE_SET_QNUM:
        return code >= 1 && code <= 0xff && (code & 0x7f) ? (int)code : -1;
    }
    return -1;
}

static const char *codeset_name(int codeset)
{
    static const char *const names[] = {
        [VIR_KEYCODE_SET_LINUX] = "linux", [VIR_KEYCODE_SET_XT] = "xt",
        [VIR_KEYCODE_SET_ATSET1] = "atset1", [VIR_KEYCODE_SET_ATSET2] = "atset2",
        [VIR_KEYCODE_SET_ATSET3] = "atset3", [VIR_KEYCODE_SET_OSX] = "os_x",
        [VIR_KEYCODE_SET_XT_KBD] = "xt_kbd", [VIR_KEYCODE_SET_USB] = "usb",
        [VIR_KEYCODE_SET_WIN32] = "win32", [VIR_KEYCODE_SET_QNUM] = "qnum",
    };
    return codeset >= 0 && codeset < (int)G_N_ELEMENTS(names) && names[codeset] ? names[codeset] : NULL;
}

static bool codeset_supported(int codeset, GError **error)
{
    switch (codeset) {
    case VIR_KEYCODE_SET_LINUX:
    case VIR_KEYCODE_SET_XT:
    case VIR_KEYCODE_SET_ATSET1:
    case VIR_KEYCODE_SET_XT_KBD:
    case VIR_KEYCODE_SET_QNUM:
        return true;
    }
    const char *name = codeset_name(codeset);
    if (name)
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_ARGUMENT_UNSUPPORTED,
                    "codeset %s is not supported by vsnap's i8042 keyboard (it types scan code set 1: use "
                    "linux, xt, atset1, xt_kbd or qnum)", name);
    else
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG, "unknown keycode set %d", codeset);
    return false;
}

static unsigned put_code(uint8_t *out, int qnum, bool release)
{
    unsigned n = 0;
    if (qnum & QNUM_EXTENDED)
        out[n++] = SET1_PREFIX;
    out[n++] = (uint8_t)((qnum & 0x7f) | (release ? SET1_RELEASE : 0));
    return n;
}

bool keycodes_to_scancodes(int codeset, const uint32_t *codes, unsigned n, uint8_t *press,
                           unsigned *n_press, uint8_t *release, unsigned *n_release, GError **error)
{
    if (!codeset_supported(codeset, error))
        return false;
    int qnums[n ? n : 1];
    for (unsigned i = 0; i < n; i++) {
        qnums[i] = qnum_of(codeset, codes[i]);
        if (qnums[i] < 0) {
            g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_INVALID_ARG,
                        "cannot translate keycode %u of the %s codeset to a key of vsnap's i8042 keyboard",
                        codes[i], codeset_name(codeset));
            return false;
        }
    }
    *n_press = *n_release = 0;
    for (unsigned i = 0; i < n; i++) {
        *n_press += put_code(press + *n_press, qnums[i], false);
        *n_release += put_code(release + *n_release, qnums[n - 1 - i], true);
    }
    return true;
}
