/* What the configuration-layer tests share: the directories meson passes in
 * the environment, reading an example, and libvirt's own schemas. */
#pragma once

#include <glib.h>

#define LIBVIRT_SCHEMAS "/usr/share/libvirt/schemas"

/* g_test_init, then VSNAP_SCHEMA_DIR and VSNAP_EXAMPLES_DIR from the
 * environment (meson test sets them); stops the test when either is unset. */
void conf_test_init(int *argc, char ***argv, const char **schema_dir, const char **examples_dir);
/* The text of the file whose path is made of the given parts (a failed
 * assertion when it cannot be read). */
char *conf_test_read(const char *first_part, ...) G_GNUC_NULL_TERMINATED;
/* Fails the test unless xml (what: its root element, for messages) is valid
 * for libvirt's schema rng in LIBVIRT_SCHEMAS. */
void conf_test_check_libvirt_schema(const char *xml, const char *what, const char *rng);
