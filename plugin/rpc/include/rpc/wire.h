/* XDR encoders/decoders for the types every procedure shares: strings,
 * domain handles, typed parameters, the message header and remote_error.
 * Built on libtirpc's xdr_* primitives; each filter works for ENCODE, DECODE
 * and FREE like rpcgen's output would. */
#pragma once

#include <rpc/xdr.h>
#include <stdbool.h>
#include <stdint.h>

#include "rpc/protocol.h"

/* libtirpc declares xdrproc_t variadic; our filters take (XDR *, T *), as
 * rpcgen's do. The double cast states that on purpose. */
#define XDR_PROC(fn) ((xdrproc_t)(void (*)(void))(fn))

struct wire_header {
    uint32_t prog;
    uint32_t vers;
    int32_t proc;
    uint32_t type;
    uint32_t serial;
    uint32_t status;
};

/* remote_nonnull_domain: a domain handle as the client sees it. */
struct wire_domain {
    char *name;
    unsigned char uuid[16];
    int32_t id;   /* -1 when inactive */
};

/* remote_nonnull_storage_pool and remote_nonnull_storage_vol: the storage
 * handles (xdr-storage-pool.c, xdr-storage-vol.c). */
struct wire_pool {
    char *name;
    unsigned char uuid[16];
};
struct wire_vol {
    char *pool;
    char *name;
    char *key;
};

struct wire_domain_list {
    unsigned len;
    struct wire_domain *val;
};

struct wire_string_list {
    unsigned len;
    char **val;
};

/* Values of virTypedParameterType (libvirt-common.h). */
struct wire_typed_param {
    char *field;
    int32_t type;
    union {
        int32_t i;
        uint32_t ui;
        int64_t l;
        uint64_t ul;
        double d;
        int32_t b;
        char *s;
    } value;
};

struct wire_typed_param_list {
    unsigned len;
    struct wire_typed_param *val;
};

struct wire_error {
    int32_t code;
    int32_t domain;
    char *message;        /* optional */
    int32_t level;
    struct wire_domain *dom;  /* optional, always NULL from us */
    char *str1, *str2, *str3; /* optional */
    int32_t int1, int2;
    void *net;            /* optional network, always NULL from us */
};

/* The one-member wrappers many procedures take or return, once for all
 * procedure families: an int, an unsigned hyper, a string, a domain handle,
 * a domain handle with flags. */
struct wire_int_value {
    int32_t value;
};
struct wire_u64_value {
    uint64_t value;
};
struct wire_string_value {
    char *value;
};
struct wire_domain_only {
    struct wire_domain dom;
};
struct wire_domain_flags {
    struct wire_domain dom;
    uint32_t flags;
};

/* The argument shapes several procedure families share: the
 * remote_connect_list_all_*_args (need_results, flags), a uuid alone (the
 * lookup_by_uuid calls), an XML document with flags (define and create
 * calls), a storage pool or volume handle alone, and a pool with an
 * unsigned int (flags, or the int of set_autostart and list_volumes). */
struct wire_list_all_args {
    int32_t need_results;
    uint32_t flags;
};
struct wire_uuid_value {
    unsigned char uuid[16];
};
struct wire_xml_flags {
    char *xml;
    uint32_t flags;
};
struct wire_pool_only {
    struct wire_pool pool;
};
struct wire_pool_uint {
    struct wire_pool pool;
    uint32_t arg;
};
struct wire_vol_only {
    struct wire_vol vol;
};

/* For procedures without arguments or return value. */
struct rpc_void {
    int unused;
};

bool_t xdr_wire_header(XDR *xdrs, struct wire_header *hdr);
bool_t xdr_wire_string(XDR *xdrs, char **str);
bool_t xdr_wire_opt_string(XDR *xdrs, char **str);
bool_t xdr_wire_uuid(XDR *xdrs, unsigned char *uuid);
bool_t xdr_wire_domain(XDR *xdrs, struct wire_domain *dom);
bool_t xdr_wire_opt_domain(XDR *xdrs, struct wire_domain **dom);
bool_t xdr_wire_domain_list(XDR *xdrs, struct wire_domain_list *list);
bool_t xdr_wire_pool(XDR *xdrs, struct wire_pool *pool);
bool_t xdr_wire_vol(XDR *xdrs, struct wire_vol *vol);
bool_t xdr_wire_string_list(XDR *xdrs, struct wire_string_list *list);
bool_t xdr_wire_typed_param(XDR *xdrs, struct wire_typed_param *param);
bool_t xdr_wire_typed_param_list(XDR *xdrs, struct wire_typed_param_list *list);
bool_t xdr_wire_error(XDR *xdrs, struct wire_error *err);
bool_t xdr_wire_int_value(XDR *xdrs, struct wire_int_value *v);
bool_t xdr_wire_u64_value(XDR *xdrs, struct wire_u64_value *v);
bool_t xdr_wire_string_value(XDR *xdrs, struct wire_string_value *v);
bool_t xdr_wire_opt_string_value(XDR *xdrs, struct wire_string_value *v);
bool_t xdr_wire_domain_only(XDR *xdrs, struct wire_domain_only *v);
bool_t xdr_wire_domain_flags(XDR *xdrs, struct wire_domain_flags *v);
bool_t xdr_wire_list_all_args(XDR *xdrs, struct wire_list_all_args *v);
bool_t xdr_wire_uuid_value(XDR *xdrs, struct wire_uuid_value *v);
bool_t xdr_wire_xml_flags(XDR *xdrs, struct wire_xml_flags *v);
bool_t xdr_wire_pool_only(XDR *xdrs, struct wire_pool_only *v);
bool_t xdr_wire_pool_uint(XDR *xdrs, struct wire_pool_uint *v);
bool_t xdr_wire_vol_only(XDR *xdrs, struct wire_vol_only *v);
bool_t xdr_rpc_void(XDR *xdrs, struct rpc_void *v);

/* Fill a handle (strings are copied with malloc so xdr_free can release them). */
void wire_domain_set(struct wire_domain *dom, const char *name, const unsigned char uuid[16],
                     int id);

/* Typed parameter builders for replies (field copied). */
void wire_param_int(struct wire_typed_param *p, const char *field, int32_t v);
void wire_param_uint(struct wire_typed_param *p, const char *field, uint32_t v);
void wire_param_llong(struct wire_typed_param *p, const char *field, int64_t v);
void wire_param_ullong(struct wire_typed_param *p, const char *field, uint64_t v);
void wire_param_string(struct wire_typed_param *p, const char *field, const char *v);
void wire_param_bool(struct wire_typed_param *p, const char *field, bool v);
