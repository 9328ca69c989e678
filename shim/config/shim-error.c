#include "config/shim-error.h"

G_DEFINE_QUARK(vsnap-shim-error, shim_error)

unsigned shim_error_http_status(const GError *error)
{
    if (error->domain != SHIM_ERROR)
        return 500;
    switch ((enum shim_error_code)error->code) {
    case SHIM_ERROR_INVALID:
    case SHIM_ERROR_UNSUPPORTED:
        return 400;
    case SHIM_ERROR_NOT_CREATED:
    case SHIM_ERROR_NOT_FOUND:
        return 404;
    case SHIM_ERROR_CONFLICT:
    case SHIM_ERROR_CANCELLED:
    case SHIM_ERROR_BUSY:
        return 409;
    case SHIM_ERROR_WRONG_STATE:
        return 405;
    case SHIM_ERROR_TIMEOUT:
        return 504;
    case SHIM_ERROR_ALREADY_CREATED:
    case SHIM_ERROR_FAILED:
        break;
    }
    return 500;
}
