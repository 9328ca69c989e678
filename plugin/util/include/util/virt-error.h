/* Errors inside virtvsnapd travel as GError whose domain is VSNAP_VIR_ERROR and
 * whose code is one of libvirt's public virErrorNumber values
 * (<libvirt/virterror.h>), so the RPC layer can put them on the wire unchanged
 * (remote_error.code, with domain VIR_FROM_* chosen by the caller). */
#pragma once

#include <glib.h>
#include <libvirt/virterror.h>

#define VSNAP_VIR_ERROR (vsnap_vir_error_quark())
GQuark vsnap_vir_error_quark(void);
