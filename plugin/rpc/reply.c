/* Reply helpers the procedure families share (procedure.h). */
#include <stdlib.h>
#include <string.h>

#include "rpc/procedure.h"
#include "util/virt-error.h"

bool rpc_check_list_max(int32_t max, uint32_t limit, GError **error)
{
    if (max < 0 || (uint32_t)max > limit) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_RPC, "list length %d outside [0, %u]", max, limit);
        return false;
    }
    return true;
}

bool rpc_text_reply(char *text, struct wire_string_value *r)
{
    if (!text)
        return false;
    r->value = strdup(text);   /* malloc'd: xdr_free releases it */
    g_free(text);
    return true;
}

void rpc_names_reply(const GArray *list, size_t elem_size, size_t name_offset, unsigned max,
                     struct wire_string_list *r)
{
    r->len = MIN(list->len, max);
    r->val = calloc(MAX(r->len, 1), sizeof(char *));
    for (unsigned i = 0; i < r->len; i++) {
        const char *item = list->data + (size_t)i * elem_size;
        r->val[i] = strdup(*(const char *const *)(item + name_offset));
    }
}
