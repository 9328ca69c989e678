/* The daemon's definition of the VSNAP_VIR_ERROR domain (plugin/conf keeps a
 * copy for its unit tests, linked only when nothing else defines it). */
#include "virt-error.h"

G_DEFINE_QUARK(vsnap-vir-error-quark, vsnap_vir_error)
