#include "util/virt-error.h"

G_DEFINE_QUARK(vsnap-vir-error-quark, vsnap_vir_error)
