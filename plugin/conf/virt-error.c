/* The GError domain of libvirt error codes (see virt-error.h). Defined here so
 * plugin/conf links on its own; the daemon uses this same definition. */
#include "virt-error.h"

G_DEFINE_QUARK(vsnap-vir-error-quark, vsnap_vir_error)
