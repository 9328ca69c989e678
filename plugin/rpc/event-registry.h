/* Who wants which domain events: the registrations made with
 * DOMAIN_EVENT_CALLBACK_REGISTER_ANY (xdr-events.c), and the delivery of the
 * driver's events to them as MESSAGE packets (lifecycle 318, reboot 319,
 * agent lifecycle 348, job completed 363, metadata change 379). Sends
 * through client.c only. */
#pragma once

#include <stdbool.h>

struct event_registry;
struct rpc_client;
struct vsnap_driver;

/* Installs itself as the driver's event sink. */
struct event_registry *event_registry_new(struct vsnap_driver *driver);
void event_registry_free(struct event_registry *reg);
/* A new registration of client for event_id, on one domain (dom_uuid) or on
 * all (NULL); returns its callback id. */
int event_registry_add(struct event_registry *reg, struct rpc_client *client, int event_id,
                       const unsigned char *dom_uuid);
/* false when client has no registration with that callback id. */
bool event_registry_remove(struct event_registry *reg, struct rpc_client *client,
                           int callback_id);
void event_registry_remove_client(struct event_registry *reg, struct rpc_client *client);
