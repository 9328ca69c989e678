#include "sandbox/confine.h"

#include <errno.h>
#include <gio/gio.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <pty.h>
#include <pwd.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* Set by sandbox_confine_enter on the main thread before any other thread
 * exists; read by sandbox_drop_privileges on the main thread. */
static struct {
    bool confined, dropped;
    uid_t uid;
    gid_t gid;
} state;

/* Devices every VM may need; a definition's own (a tap's /dev/net/tun) come
 * through "dev" lines. /dev/kvm and /dev/userfaultfd are the user's alone. */
static const struct {
    const char *path;
    mode_t mode;
    bool owned;   /* owned by the shim's user (else root, world-accessible) */
} base_devices[] = {
    {"/dev/kvm", 0600, true},      {"/dev/userfaultfd", 0600, true},
    {"/dev/null", 0666, false},    {"/dev/zero", 0666, false},
    {"/dev/urandom", 0666, false}, {"/dev/random", 0666, false},
};

void sandbox_confine_init(struct sandbox_confine *c)
{
    memset(c, 0, sizeof(*c));
    c->uid = (uid_t)-1;
    c->gid = (gid_t)-1;
    c->ro_paths = g_ptr_array_new_with_free_func(g_free);
    c->rw_paths = g_ptr_array_new_with_free_func(g_free);
    c->devices = g_ptr_array_new_with_free_func(g_free);
}

void sandbox_confine_clear(struct sandbox_confine *c)
{
    g_free(c->root);
    g_free(c->user);
    g_free(c->hostname);
    if (c->ro_paths)
        g_ptr_array_unref(c->ro_paths);
    if (c->rw_paths)
        g_ptr_array_unref(c->rw_paths);
    if (c->devices)
        g_ptr_array_unref(c->devices);
    memset(c, 0, sizeof(*c));
}

void sandbox_confine_expose(struct sandbox_confine *c, const char *path, bool writable)
{
    if (path && *path)
        g_ptr_array_add(writable ? c->rw_paths : c->ro_paths, g_canonicalize_filename(path, "/"));
}

static bool confine_error(GError **error, const char *what, const char *path)
{
    int err = errno;
    g_set_error(error, G_IO_ERROR, g_io_error_from_errno(err), "--confine: %s %s: %s", what,
                path ? path : "", g_strerror(err));
    return false;
}

static bool read_paths_file(const char *file, struct sandbox_confine *c, GError **error)
{
    g_autofree char *text = NULL;
    if (!g_file_get_contents(file, &text, NULL, error)) {
        g_prefix_error(error, "--confine paths=: ");
        return false;
    }
    g_auto(GStrv) lines = g_strsplit(text, "\n", -1);
    for (char **l = lines; *l; l++) {
        char *line = g_strstrip(*l);
        if (!*line || *line == '#')
            continue;
        if (g_str_has_prefix(line, "ro /"))
            sandbox_confine_expose(c, line + 3, false);
        else if (g_str_has_prefix(line, "rw /"))
            sandbox_confine_expose(c, line + 3, true);
        else if (g_str_has_prefix(line, "dev /dev/"))
            g_ptr_array_add(c->devices, g_strdup(line + 4));
        else {
            g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "--confine paths=%s: not \"ro|rw /PATH\" or \"dev /dev/NAME\": %s", file,
                        line);
            return false;
        }
    }
    return true;
}

static bool parse_id(const char *key, const char *value, guint64 *out, GError **error)
{
    if (!g_ascii_string_to_unsigned(value, 10, 1, G_MAXUINT32 - 1, out, NULL)) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--confine %s=%s: not a non-zero id", key, value);
        return false;
    }
    return true;
}

static bool parse_item(const char *key, const char *value, struct sandbox_confine *c,
                       GError **error)
{
    guint64 id;
    if (g_str_equal(key, "root"))
        g_free(c->root), c->root = g_canonicalize_filename(value, NULL);
    else if (g_str_equal(key, "user"))
        g_free(c->user), c->user = g_strdup(value);
    else if (g_str_equal(key, "hostname"))
        g_free(c->hostname), c->hostname = g_strdup(value);
    else if (g_str_equal(key, "uid") || g_str_equal(key, "gid")) {
        if (!parse_id(key, value, &id, error))
            return false;
        if (key[0] == 'u')
            c->uid = (uid_t)id;
        else
            c->gid = (gid_t)id;
    } else if (g_str_equal(key, "paths"))
        return read_paths_file(value, c, error);
    else {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--confine: unknown key %s (root, user, uid, gid, paths, hostname)", key);
        return false;
    }
    return true;
}

/* The user's ids, resolved now: NSS is out of reach inside the jail. */
static bool resolve_user(struct sandbox_confine *c, GError **error)
{
    if (!c->user)
        return true;
    struct passwd *pw = getpwnam(c->user);
    if (!pw) {
        g_set_error(error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "--confine user=%s: no such user",
                    c->user);
        return false;
    }
    c->uid = pw->pw_uid;
    c->gid = pw->pw_gid;
    return true;
}

bool sandbox_confine_parse(const char *spec, struct sandbox_confine *c, GError **error)
{
    g_auto(GStrv) items = g_strsplit(spec, ",", -1);
    for (char **item = items; *item; item++) {
        if (!**item)
            continue;
        const char *eq = strchr(*item, '=');
        if (!eq || eq == *item || !eq[1]) {
            g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                        "--confine: expected key=value, got %s", *item);
            return false;
        }
        g_autofree char *key = g_strndup(*item, eq - *item);
        if (!parse_item(key, eq + 1, c, error))
            return false;
    }
    if (!resolve_user(c, error))
        return false;
    if (!c->root || c->uid == (uid_t)-1 || c->gid == (gid_t)-1) {
        g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
                    "--confine needs root=DIR and user=NAME (or uid= and gid=)");
        return false;
    }
    return true;
}

/* ---- building the jail ---- */

static bool make_parents(const char *root, const char *path, GError **error)
{
    g_autofree char *dir = g_path_get_dirname(path);
    g_autofree char *inside = g_build_filename(root, dir, NULL);
    if (g_mkdir_with_parents(inside, 0755) < 0)
        return confine_error(error, "cannot create", inside);
    return true;
}

struct exposed {
    const char *path;
    bool writable;
};

static gint by_length(gconstpointer a, gconstpointer b)
{
    const struct exposed *x = a, *y = b;
    size_t lx = strlen(x->path), ly = strlen(y->path);
    return lx < ly ? -1 : lx > ly ? 1 : strcmp(x->path, y->path);
}

static bool already_exposed(GArray *all, const char *path)
{
    for (guint j = 0; j < all->len; j++)
        if (g_str_equal(g_array_index(all, struct exposed, j).path, path))
            return true;
    return false;
}

/* Every path once (writable wins), parents before what they hold: a bind
 * inside a read-only bind needs its mount point to exist already. */
static GArray *exposed_paths(const struct sandbox_confine *c)
{
    GArray *all = g_array_new(FALSE, FALSE, sizeof(struct exposed));
    for (guint i = 0; i < c->rw_paths->len; i++)
        if (!already_exposed(all, c->rw_paths->pdata[i]))
            g_array_append_val(all, ((struct exposed){c->rw_paths->pdata[i], true}));
    for (guint i = 0; i < c->ro_paths->len; i++)
        if (!already_exposed(all, c->ro_paths->pdata[i]))
            g_array_append_val(all, ((struct exposed){c->ro_paths->pdata[i], false}));
    g_array_sort(all, by_length);
    return all;
}

static bool make_mount_point(const char *target, bool dir, GError **error)
{
    if (g_file_test(target, G_FILE_TEST_EXISTS))
        return true;
    if (dir ? mkdir(target, 0755) < 0 : mknod(target, S_IFREG | 0600, 0) < 0)
        return confine_error(error, "cannot create", target);
    return true;
}

static bool bind_path(const char *root, const struct exposed *e, GError **error)
{
    struct stat st;
    if (stat(e->path, &st) < 0) {
        g_info("--confine: %s does not exist; not exposed", e->path);
        return true;
    }
    g_autofree char *target = g_build_filename(root, e->path, NULL);
    if (!make_parents(root, e->path, error) ||
        !make_mount_point(target, S_ISDIR(st.st_mode), error))
        return false;
    if (mount(e->path, target, NULL, MS_BIND, NULL) < 0)
        return confine_error(error, "cannot bind-mount", e->path);
    return true;
}

/* A bind takes its flags from a remount. */
static bool restrict_bind(const char *root, const struct exposed *e, GError **error)
{
    g_autofree char *target = g_build_filename(root, e->path, NULL);
    struct stat st;
    if (stat(e->path, &st) < 0)
        return true;
    /* A device (a block device disk) must stay usable through its bind. */
    bool device = S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode);
    unsigned long flags = MS_REMOUNT | MS_BIND | MS_NOSUID | (device ? 0 : MS_NODEV) |
                          (e->writable ? 0 : MS_RDONLY);
    if (mount(NULL, target, NULL, flags, NULL) < 0)
        return confine_error(error, "cannot remount", target);
    return true;
}

static bool expose_all(const struct sandbox_confine *c, GError **error)
{
    g_autoptr(GArray) all = exposed_paths(c);
    for (guint i = 0; i < all->len; i++)
        if (!bind_path(c->root, &g_array_index(all, struct exposed, i), error))
            return false;
    for (guint i = 0; i < all->len; i++)
        if (!restrict_bind(c->root, &g_array_index(all, struct exposed, i), error))
            return false;
    return true;
}

static bool make_device(const char *root, const char *path, mode_t mode, bool owned,
                        GError **error)
{
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISCHR(st.st_mode)) {
        g_info("--confine: no device %s on this host; not in the jail", path);
        return true;
    }
    g_autofree char *node = g_build_filename(root, path, NULL);
    if (!make_parents(root, path, error))
        return false;
    if (mknod(node, S_IFCHR | mode, st.st_rdev) < 0 && errno != EEXIST)
        return confine_error(error, "cannot create the device node", node);
    if (chmod(node, mode) < 0 ||
        (owned && chown(node, state.uid, state.gid) < 0))
        return confine_error(error, "cannot set the owner of", node);
    return true;
}

/* Ptys come from the host's devpts (their paths are reported to clients,
 * who open them outside the jail); /dev/ptmx points at its multiplexer. */
static bool expose_ptys(const char *root, GError **error)
{
    g_autofree char *pts = g_build_filename(root, "/dev/pts", NULL);
    g_autofree char *ptmx = g_build_filename(root, "/dev/ptmx", NULL);
    if (!g_file_test("/dev/pts/ptmx", G_FILE_TEST_EXISTS))
        return true;
    if (mkdir(pts, 0755) < 0 && errno != EEXIST)
        return confine_error(error, "cannot create", pts);
    if (mount("/dev/pts", pts, NULL, MS_BIND, NULL) < 0)
        return confine_error(error, "cannot bind-mount", "/dev/pts");
    if (symlink("pts/ptmx", ptmx) < 0 && errno != EEXIST)
        return confine_error(error, "cannot create", ptmx);
    return true;
}

static bool make_dev(const struct sandbox_confine *c, GError **error)
{
    g_autofree char *shm = g_build_filename(c->root, "/dev/shm", NULL);
    if (g_mkdir_with_parents(shm, 0755) < 0)
        return confine_error(error, "cannot create", shm);
    if (mount("tmpfs", shm, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") < 0)
        return confine_error(error, "cannot mount a tmpfs on", shm);
    for (size_t i = 0; i < G_N_ELEMENTS(base_devices); i++)
        if (!make_device(c->root, base_devices[i].path, base_devices[i].mode,
                         base_devices[i].owned, error))
            return false;
    for (guint i = 0; i < c->devices->len; i++)
        if (!make_device(c->root, c->devices->pdata[i], 0600, true, error))
            return false;
    return expose_ptys(c->root, error);
}

/* The first process of a PID namespace of its own (the daemon's launch)
 * gets a procfs of that namespace: /proc/self, and nobody else's. A shim
 * started by hand shares the host's PIDs and gets none. */
static bool mount_proc(const char *root, GError **error)
{
    if (getpid() != 1)
        return true;
    g_autofree char *proc = g_build_filename(root, "/proc", NULL);
    if (mkdir(proc, 0555) < 0 && errno != EEXIST)
        return confine_error(error, "cannot create", proc);
    if (mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        return confine_error(error, "cannot mount a procfs on", proc);
    return true;
}

static bool build_jail(const struct sandbox_confine *c, GError **error)
{
    /* Nothing done here reaches the host's mount table. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return confine_error(error, "cannot make the mounts private", NULL);
    if (mount("tmpfs", c->root, "tmpfs", MS_NOSUID, "mode=0755,size=16m") < 0)
        return confine_error(error, "cannot mount the jail's tmpfs on", c->root);
    return make_dev(c, error) && mount_proc(c->root, error) && expose_all(c, error);
}

static bool enter_jail(const char *root, GError **error)
{
    g_autofree char *old = g_build_filename(root, ".old-root", NULL);
    if (mkdir(old, 0700) < 0)
        return confine_error(error, "cannot create", old);
    if (syscall(SYS_pivot_root, root, old) < 0)
        return confine_error(error, "pivot_root into", root);
    if (chdir("/") < 0 || umount2("/.old-root", MNT_DETACH) < 0 || rmdir("/.old-root") < 0)
        return confine_error(error, "cannot let go of the host's root", NULL);
    /* The jail's own tmpfs is read-only from now on; the binds keep theirs. */
    if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID, NULL) < 0)
        return confine_error(error, "cannot make the jail's root read-only", NULL);
    return true;
}

static bool drop_bounding_set(GError **error)
{
    for (int cap = 0; cap <= CAP_LAST_CAP; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            return confine_error(error, "cannot empty the capability bounding set", NULL);
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
        return confine_error(error, "cannot clear the ambient capabilities", NULL);
    return true;
}

bool sandbox_confine_enter(const struct sandbox_confine *c, GError **error)
{
    state.uid = c->uid;
    state.gid = c->gid;
    if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS) < 0)
        return confine_error(error, "cannot create mount, IPC and UTS namespaces", NULL);
    const char *name = c->hostname ? c->hostname : "vsnap";
    if (sethostname(name, strlen(name)) < 0)
        return confine_error(error, "cannot set the host name", name);
    if (!build_jail(c, error) || !enter_jail(c->root, error) || !drop_bounding_set(error))
        return false;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return confine_error(error, "cannot set no_new_privs", NULL);
    state.confined = true;
    g_info("confined: jail %s, user %u:%u until the guest starts", c->root, (unsigned)c->uid,
           (unsigned)c->gid);
    return true;
}

/* glibc applies setgroups and setres[ug]id to every thread of the process;
 * a uid that leaves 0 in all three slots clears every capability. */
bool sandbox_drop_privileges(GError **error)
{
    if (!state.confined || state.dropped)
        return true;
    if (setgroups(1, &state.gid) < 0 || setresgid(state.gid, state.gid, state.gid) < 0 ||
        setresuid(state.uid, state.uid, state.uid) < 0)
        return confine_error(error, "cannot switch to the unprivileged user", NULL);
    state.dropped = true;
    g_info("dropped to uid %u, gid %u: no capabilities left", (unsigned)state.uid,
           (unsigned)state.gid);
    return true;
}

struct kept_file {
    char *path;
    int flags;
    int fd;
};

static GMutex kept_lock;
static GArray *kept;   /* struct kept_file, under kept_lock */

static int find_kept_locked(const char *path, int flags)
{
    for (guint i = 0; kept && i < kept->len; i++) {
        struct kept_file *k = &g_array_index(kept, struct kept_file, i);
        if (k->flags == flags && g_str_equal(k->path, path))
            return k->fd;
    }
    return -1;
}

struct kept_pty {
    char *key;
    int master, slave;
    char *name;
};

static GArray *kept_ptys;   /* struct kept_pty, under kept_lock */

static const struct kept_pty *find_kept_pty_locked(const char *key)
{
    for (guint i = 0; kept_ptys && i < kept_ptys->len; i++) {
        const struct kept_pty *k = &g_array_index(kept_ptys, struct kept_pty, i);
        if (g_str_equal(k->key, key))
            return k;
    }
    return NULL;
}

static int dup_kept_pty(const struct kept_pty *k, int *master, int *slave, char **name)
{
    *master = fcntl(k->master, F_DUPFD_CLOEXEC, 0);
    *slave = *master < 0 ? -1 : fcntl(k->slave, F_DUPFD_CLOEXEC, 0);
    if (*slave < 0) {
        int err = errno;
        if (*master >= 0)
            close(*master);
        errno = err;
        return -1;
    }
    *name = g_strdup(k->name);
    return 0;
}

static void keep_pty_locked(const char *key, int master, int slave, const char *name)
{
    struct kept_pty k = {g_strdup(key), fcntl(master, F_DUPFD_CLOEXEC, 0),
                         fcntl(slave, F_DUPFD_CLOEXEC, 0), g_strdup(name)};
    if (k.master < 0 || k.slave < 0) {
        g_warning("cannot keep the %s pty %s for a guest reset: %s", key, name, g_strerror(errno));
        if (k.master >= 0)
            close(k.master);
        if (k.slave >= 0)
            close(k.slave);
        g_free(k.key);
        g_free(k.name);
        return;
    }
    if (!kept_ptys)
        kept_ptys = g_array_new(FALSE, FALSE, sizeof(struct kept_pty));
    g_array_append_val(kept_ptys, k);
}

int sandbox_openpty_kept(const char *key, int *master, int *slave, char **name)
{
    char path[256];
    g_mutex_lock(&kept_lock);
    const struct kept_pty *have = state.confined ? find_kept_pty_locked(key) : NULL;
    int rc = have ? dup_kept_pty(have, master, slave, name) : openpty(master, slave, path, NULL, NULL);
    int err = errno;
    if (!have && rc == 0) {
        *name = g_strdup(path);
        if (state.confined && !state.dropped)
            keep_pty_locked(key, *master, *slave, path);
    }
    g_mutex_unlock(&kept_lock);
    errno = err;
    return rc;
}

int sandbox_open_kept(const char *path, int flags)
{
    if (!state.confined)
        return open(path, flags);
    g_mutex_lock(&kept_lock);
    int have = find_kept_locked(path, flags);
    int fd = have >= 0 ? fcntl(have, F_DUPFD_CLOEXEC, 0) : open(path, flags);
    int err = errno;
    if (have < 0 && fd >= 0 && !state.dropped) {
        struct kept_file k = {g_strdup(path), flags, fcntl(fd, F_DUPFD_CLOEXEC, 0)};
        if (!kept)
            kept = g_array_new(FALSE, FALSE, sizeof(struct kept_file));
        if (k.fd >= 0)
            g_array_append_val(kept, k);
        else
            g_free(k.path);
    }
    g_mutex_unlock(&kept_lock);
    errno = err;
    return fd;
}

bool sandbox_is_confined(void)
{
    return state.confined;
}
