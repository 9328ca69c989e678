/* The vsnap save image: one self-contained file for `virsh save` / `restore`
 * / `save-image-dumpxml`.
 *
 *   [0, 4096)   header: magic "VSNAPSAV", format version, the state to restore
 *               into (running or paused), a table of sections (name, offset,
 *               length, CRC-32C, flags), the header's own CRC-32C
 *   sections    each at a 4 KiB aligned offset: "domain.xml" (the definition
 *               to restore with), then each file of a full snapshot directory
 *               (config.json, state.json, ..., the memory layer)
 *
 * The memory layer has checksums of its own (header, index, one per data
 * block, checked when read) and is marked so; every other section is checked
 * against its CRC when read. Integers are little-endian. The image is written
 * to a temporary name, fsynced and renamed: never half an image under the
 * final name. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <stdint.h>

struct caller;

/* Called while sections are copied: bytes done of the total. False stops
 * the write there (VIR_ERR_OPERATION_ABORTED, nothing left: a domjobabort). */
typedef bool (*save_image_progress)(void *data, guint64 done, guint64 total);

bool save_image_write(const char *path, const char *domain_xml, const char *snapshot_dir,
                      bool paused, save_image_progress progress, void *data, GError **error);
/* The temporary name save_image_write writes path under. */
char *save_image_temp_path(const char *path);

struct save_image_info {
    char *domain_xml;
    bool paused;
};
void save_image_info_clear(struct save_image_info *info);

/* Header and the definition, checked, read from a regular file opened as
 * caller could (caller.h). Errors name the file. */
bool save_image_read_info(const char *path, const struct caller *caller,
                          struct save_image_info *info, GError **error);

/* The snapshot directory again (every section but domain.xml) into dir. */
bool save_image_extract(const char *path, const char *dir, GError **error);
