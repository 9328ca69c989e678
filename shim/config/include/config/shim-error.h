/* One error domain for everything between the command line / REST API and the
 * VM: each code says which HTTP status the API answers with. */
#pragma once

#include <glib.h>

#define SHIM_ERROR (shim_error_quark())
GQuark shim_error_quark(void);

enum shim_error_code {
    SHIM_ERROR_INVALID,      /* 400: bad JSON, unknown field, bad value */
    SHIM_ERROR_UNSUPPORTED,  /* 400: a Cloud Hypervisor feature vsnap does not have yet */
    SHIM_ERROR_NOT_CREATED,  /* 404: no VM */
    SHIM_ERROR_WRONG_STATE,  /* 405: the VM is not in a state that allows this */
    SHIM_ERROR_ALREADY_CREATED, /* 500: vm.create or vm.restore with a VM there (as Cloud Hypervisor) */
    SHIM_ERROR_NOT_FOUND,    /* 404: no device with that id */
    SHIM_ERROR_CONFLICT,     /* 409: a device with that id exists already */
    SHIM_ERROR_FAILED,       /* 500: building or running the VM failed */
    SHIM_ERROR_CANCELLED,    /* 409: a live snapshot ended by vm.cancel-snapshot */
    SHIM_ERROR_BUSY,         /* 409: a live snapshot is under way */
    SHIM_ERROR_TIMEOUT,      /* 504: a server the request needs (a snapshot store) did not finish in time */
};

unsigned shim_error_http_status(const GError *error);
