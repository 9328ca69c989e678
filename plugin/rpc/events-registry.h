/* Who wants which domain events: registrations made with
 * DOMAIN_EVENT_CALLBACK_REGISTER_ANY, and delivery of driver events to them
 * as MESSAGE packets. */
#pragma once

struct event_registry;
struct rpc_client;
struct vsnap_driver;

/* Installs itself as the driver's event sink. */
struct event_registry *event_registry_new(struct vsnap_driver *driver);
void event_registry_free(struct event_registry *reg);
void event_registry_remove_client(struct event_registry *reg, struct rpc_client *client);
