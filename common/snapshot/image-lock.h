/* Locks on disk images and overlays: one writer, or readers and no writer.
 *
 * Every file a VM's disk reads or writes is locked for as long as it is
 * open: a writable image or overlay exclusively, an image read as the base
 * of disk layers (or as a read-only disk) shared. The locks are open file
 * description locks over the whole file (F_OFD_SETLK): they conflict between
 * any two opens, within one process too, whoever made them (two daemons, a
 * shim started by hand, the daemon's own fold), and they go when the last
 * descriptor of that open goes, so a process killed with SIGKILL leaves none
 * behind. Nothing waits: a lock held elsewhere is an error at once. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

/* Lock fd's file: exclusive (a writer) or shared (a reader), replacing any
 * lock this open holds already (so an exclusive lock can become shared in
 * place, with no moment unlocked). A lock held by another open fails with
 * SNAP_ERROR_BUSY naming the file (`what` says which: "disk image", "disk
 * overlay"), what is held and, when /proc shows it, the holder's pid. */
bool snap_image_lock(int fd, const char *what, const char *path, bool exclusive, GError **error);

/* Fail as snap_image_lock would, without taking a lock (fd may be open
 * read-only where an exclusive lock would need it writable): for checks
 * ahead of the real open. */
bool snap_image_lock_free(int fd, const char *what, const char *path, bool exclusive, GError **error);

/* Whether another open holds a lock on fd's file that would refuse
 * snap_image_lock(fd, ..., exclusive): 0 none, else the holder's pid as
 * /proc shows it (its descriptors' fdinfo), or -1 when it does not. This
 * reads every process's descriptors: for errors, not for every open. */
pid_t snap_image_lock_holder(int fd, bool exclusive);
