/* --confine: the shim confines itself as Firecracker's jailer would.
 *
 * At start (as root, before any other thread exists): new mount, IPC and UTS
 * namespaces; a tmpfs jail at `root` holding only the exposed paths, each
 * bind-mounted at its own path (so no path the shim is given needs
 * translating), the device nodes a VM needs (owned by the shim's user), a
 * private /dev/shm; pivot_root into it; the capability bounding set
 * emptied; no_new_privs.
 *
 * At the first start of guest code (vm_start, before any vCPU runs): the
 * switch to the unprivileged user (setresgid, setgroups, setresuid: every
 * thread's capabilities are cleared with the uid). Until then the shim opens
 * what needs root: /dev/kvm, the disk images, the userfaultfd that sees
 * KVM's faults (Debian's vm.unprivileged_userfaultfd=0) and the snapshot
 * layers it restores from. */
#pragma once

#include <glib.h>
#include <stdbool.h>
#include <sys/types.h>

struct sandbox_confine {
    char *root;          /* the jail's mount point (an empty directory) */
    char *user;          /* the unprivileged user, by name, or NULL with uid/gid */
    uid_t uid;
    gid_t gid;
    char *hostname;      /* the UTS namespace's name; NULL: "vsnap" */
    GPtrArray *ro_paths; /* char *: bind-mounted read-only */
    GPtrArray *rw_paths; /* char *: bind-mounted read-write */
    GPtrArray *devices;  /* char *: device nodes made in the jail's /dev */
};

void sandbox_confine_init(struct sandbox_confine *c);
void sandbox_confine_clear(struct sandbox_confine *c);
/* "root=DIR,user=NAME|uid=N,gid=N,paths=FILE,hostname=NAME". FILE holds one
 * "ro PATH", "rw PATH" or "dev PATH" a line (# starts a comment). */
bool sandbox_confine_parse(const char *spec, struct sandbox_confine *c, GError **error);
/* Adds a path to expose (a path that does not exist is skipped at enter). */
void sandbox_confine_expose(struct sandbox_confine *c, const char *path, bool writable);

/* The start-up half (see above). Call once, single-threaded. */
bool sandbox_confine_enter(const struct sandbox_confine *c, GError **error);
/* The second half; a no-op when not confined or already done. */
bool sandbox_drop_privileges(GError **error);
/* open(2) for a file the shim may open again once unprivileged (a disk
 * image, which a guest reset reopens): in a confined shim, an open before
 * the drop keeps a duplicate, and an open of the same path with the same
 * flags after it gets a dup of that (the same open file). Otherwise, and
 * for paths not kept, plain open. */
int sandbox_open_kept(const char *path, int flags);
/* openpty(3) for a console the shim makes again once unprivileged (a guest
 * reset builds its serial port and console anew): in a confined shim, the
 * pty made before the drop is kept under key ("serial", "console"), and a
 * later call with that key gets duplicates of both its ends and its name.
 * The shims' user cannot open the host's ptmx (root's), a pty it made
 * would be open to every other shim (they share the user), and clients
 * were told the first one's path. Otherwise plain openpty. 0, or -1 with
 * errno; g_free *name. */
int sandbox_openpty_kept(const char *key, int *master, int *slave, char **name);
/* Whether sandbox_confine_enter ran. */
bool sandbox_is_confined(void);
