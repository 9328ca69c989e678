#include "rpc/wire.h"

#include <libvirt/libvirt.h>
#include <stdlib.h>
#include <string.h>

bool_t xdr_wire_header(XDR *xdrs, struct wire_header *hdr)
{
    return xdr_u_int(xdrs, &hdr->prog) && xdr_u_int(xdrs, &hdr->vers) &&
           xdr_int(xdrs, &hdr->proc) && xdr_u_int(xdrs, &hdr->type) &&
           xdr_u_int(xdrs, &hdr->serial) && xdr_u_int(xdrs, &hdr->status);
}

bool_t xdr_wire_string(XDR *xdrs, char **str)
{
    return xdr_string(xdrs, str, RPC_STRING_MAX);
}

/* remote_string: a pointer (bool "present") followed by the string. */
bool_t xdr_wire_opt_string(XDR *xdrs, char **str)
{
    bool_t present = *str != NULL;
    if (!xdr_bool(xdrs, &present))
        return false;
    if (!present)
        return true;
    return xdr_wire_string(xdrs, str);
}

bool_t xdr_wire_uuid(XDR *xdrs, unsigned char *uuid)
{
    return xdr_opaque(xdrs, (char *)uuid, 16);
}

bool_t xdr_wire_domain(XDR *xdrs, struct wire_domain *dom)
{
    return xdr_wire_string(xdrs, &dom->name) && xdr_wire_uuid(xdrs, dom->uuid) &&
           xdr_int(xdrs, &dom->id);
}

bool_t xdr_wire_opt_domain(XDR *xdrs, struct wire_domain **dom)
{
    return xdr_pointer(xdrs, (char **)dom, sizeof(**dom), XDR_PROC(xdr_wire_domain));
}

bool_t xdr_wire_domain_list(XDR *xdrs, struct wire_domain_list *list)
{
    return xdr_array(xdrs, (char **)&list->val, &list->len, RPC_LIST_MAX,
                     sizeof(struct wire_domain), XDR_PROC(xdr_wire_domain));
}

bool_t xdr_wire_pool(XDR *xdrs, struct wire_pool *pool)
{
    return xdr_wire_string(xdrs, &pool->name) && xdr_wire_uuid(xdrs, pool->uuid);
}

bool_t xdr_wire_vol(XDR *xdrs, struct wire_vol *vol)
{
    return xdr_wire_string(xdrs, &vol->pool) && xdr_wire_string(xdrs, &vol->name) &&
           xdr_wire_string(xdrs, &vol->key);
}

bool_t xdr_wire_string_list(XDR *xdrs, struct wire_string_list *list)
{
    return xdr_array(xdrs, (char **)&list->val, &list->len, RPC_LIST_MAX, sizeof(char *),
                     XDR_PROC(xdr_wire_string));
}

bool_t xdr_wire_typed_param(XDR *xdrs, struct wire_typed_param *p)
{
    if (!xdr_wire_string(xdrs, &p->field) || !xdr_int(xdrs, &p->type))
        return false;
    switch (p->type) {
    case VIR_TYPED_PARAM_INT:
        return xdr_int(xdrs, &p->value.i);
    case VIR_TYPED_PARAM_UINT:
        return xdr_u_int(xdrs, &p->value.ui);
    case VIR_TYPED_PARAM_LLONG:
        return xdr_int64_t(xdrs, &p->value.l);
    case VIR_TYPED_PARAM_ULLONG:
        return xdr_uint64_t(xdrs, &p->value.ul);
    case VIR_TYPED_PARAM_DOUBLE:
        return xdr_double(xdrs, &p->value.d);
    case VIR_TYPED_PARAM_BOOLEAN:
        return xdr_int(xdrs, &p->value.b);
    case VIR_TYPED_PARAM_STRING:
        return xdr_wire_string(xdrs, &p->value.s);
    default:
        return false;   /* an unknown discriminant is a malformed message */
    }
}

bool_t xdr_wire_typed_param_list(XDR *xdrs, struct wire_typed_param_list *list)
{
    return xdr_array(xdrs, (char **)&list->val, &list->len, RPC_LIST_MAX,
                     sizeof(struct wire_typed_param), XDR_PROC(xdr_wire_typed_param));
}

/* remote_network is {name, uuid}; we only ever send or accept it absent. */
static bool_t xdr_wire_absent_network(XDR *xdrs, void **net)
{
    bool_t present = false;
    if (!xdr_bool(xdrs, &present))
        return false;
    return !present;
}

bool_t xdr_wire_error(XDR *xdrs, struct wire_error *err)
{
    return xdr_int(xdrs, &err->code) && xdr_int(xdrs, &err->domain) &&
           xdr_wire_opt_string(xdrs, &err->message) && xdr_int(xdrs, &err->level) &&
           xdr_wire_opt_domain(xdrs, &err->dom) && xdr_wire_opt_string(xdrs, &err->str1) &&
           xdr_wire_opt_string(xdrs, &err->str2) && xdr_wire_opt_string(xdrs, &err->str3) &&
           xdr_int(xdrs, &err->int1) && xdr_int(xdrs, &err->int2) &&
           xdr_wire_absent_network(xdrs, &err->net);
}

bool_t xdr_wire_int_value(XDR *xdrs, struct wire_int_value *v)
{
    return xdr_int(xdrs, &v->value);
}

bool_t xdr_wire_u64_value(XDR *xdrs, struct wire_u64_value *v)
{
    return xdr_uint64_t(xdrs, &v->value);
}

bool_t xdr_wire_string_value(XDR *xdrs, struct wire_string_value *v)
{
    return xdr_wire_string(xdrs, &v->value);
}

bool_t xdr_wire_opt_string_value(XDR *xdrs, struct wire_string_value *v)
{
    return xdr_wire_opt_string(xdrs, &v->value);
}

bool_t xdr_wire_domain_only(XDR *xdrs, struct wire_domain_only *v)
{
    return xdr_wire_domain(xdrs, &v->dom);
}

bool_t xdr_wire_domain_flags(XDR *xdrs, struct wire_domain_flags *v)
{
    return xdr_wire_domain(xdrs, &v->dom) && xdr_u_int(xdrs, &v->flags);
}

bool_t xdr_wire_list_all_args(XDR *xdrs, struct wire_list_all_args *v)
{
    return xdr_int(xdrs, &v->need_results) && xdr_u_int(xdrs, &v->flags);
}

bool_t xdr_wire_uuid_value(XDR *xdrs, struct wire_uuid_value *v)
{
    return xdr_wire_uuid(xdrs, v->uuid);
}

bool_t xdr_wire_xml_flags(XDR *xdrs, struct wire_xml_flags *v)
{
    return xdr_wire_string(xdrs, &v->xml) && xdr_u_int(xdrs, &v->flags);
}

bool_t xdr_wire_pool_only(XDR *xdrs, struct wire_pool_only *v)
{
    return xdr_wire_pool(xdrs, &v->pool);
}

bool_t xdr_wire_pool_uint(XDR *xdrs, struct wire_pool_uint *v)
{
    return xdr_wire_pool(xdrs, &v->pool) && xdr_u_int(xdrs, &v->arg);
}

bool_t xdr_wire_vol_only(XDR *xdrs, struct wire_vol_only *v)
{
    return xdr_wire_vol(xdrs, &v->vol);
}

bool_t xdr_rpc_void(XDR *xdrs, struct rpc_void *v)
{
    return true;
}

void wire_domain_set(struct wire_domain *dom, const char *name, const unsigned char uuid[16],
                     int id)
{
    dom->name = strdup(name);
    memcpy(dom->uuid, uuid, 16);
    dom->id = id;
}

void wire_param_int(struct wire_typed_param *p, const char *field, int32_t v)
{
    p->field = strdup(field);
    p->type = VIR_TYPED_PARAM_INT;
    p->value.i = v;
}

void wire_param_uint(struct wire_typed_param *p, const char *field, uint32_t v)
{
    p->field = strdup(field);
    p->type = VIR_TYPED_PARAM_UINT;
    p->value.ui = v;
}

void wire_param_llong(struct wire_typed_param *p, const char *field, int64_t v)
{
    p->field = strdup(field);
    p->type = VIR_TYPED_PARAM_LLONG;
    p->value.l = v;
}

void wire_param_string(struct wire_typed_param *p, const char *field, const char *v)
{
    p->field = strdup(field);
    p->type = VIR_TYPED_PARAM_STRING;
    p->value.s = strdup(v);
}

void wire_param_ullong(struct wire_typed_param *p, const char *field, uint64_t v)
{
    p->field = strdup(field);
    p->type = VIR_TYPED_PARAM_ULLONG;
    p->value.ul = v;
}

void wire_param_bool(struct wire_typed_param *p, const char *field, bool v)
{
    p->field = strdup(field);
    p->type = VIR_TYPED_PARAM_BOOLEAN;
    p->value.b = v ? 1 : 0;
}

