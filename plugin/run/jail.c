#include "run/jail.h"

#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <libvirt/libvirt.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/atomic-file.h"
#include "host/cgroup.h"
#include "domain/save-area.h"
#include "util/virt-error.h"

#define USERADD_WAIT_MS 10000

/* ---- what a domain's jail holds ---- */

/* A character device (an rng's /dev/hwrng) becomes a node of the jail's
 * own /dev; anything else a bind. */
static void add(GPtrArray *paths, const char *kind, const char *path)
{
    if (!path || !*path)
        return;
    if (g_str_has_prefix(path, "/dev/") && !g_str_has_prefix(path, "/dev/disk/") &&
        g_file_test(path, G_FILE_TEST_EXISTS) && !g_file_test(path, G_FILE_TEST_IS_REGULAR)) {
        struct stat st;
        if (stat(path, &st) == 0 && S_ISCHR(st.st_mode))
            kind = "dev";
    }
    g_ptr_array_add(paths, g_strdup_printf("%s %s", kind, path));
}

static void add_disk(GPtrArray *paths, const struct domain_disk *disk)
{
    /* A disk with layers: the guest writes the top one, reads the rest. */
    if (disk->chain && disk->chain[0]) {
        add(paths, "rw", disk->chain[0]);
        for (char **layer = disk->chain + 1; *layer; layer++)
            add(paths, "ro", *layer);
        add(paths, "ro", disk->path);
        return;
    }
    add(paths, disk->readonly ? "ro" : "rw", disk->path);
}

static void add_chr(GPtrArray *paths, const struct domain_chr *chr)
{
    if (chr->type == DOMAIN_CHR_FILE)
        add(paths, "rw", chr->path);   /* created if missing: make_created_files */
}

GPtrArray *jail_paths(const struct vsnap_driver *drv, const struct domain_def *live,
                      const char *run_dir, const char *log_path, const char *const *read_only_dirs)
{
    GPtrArray *paths = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *snapshots = g_build_filename(drv->paths.state_dir, "snapshots", live->name, NULL);
    g_autofree char *saves = save_area_dir(drv->paths.state_dir, live->name);
    g_autofree char *disks = g_build_filename(drv->paths.state_dir, "disks", live->name, NULL);
    /* The domain's definition */
    add(paths, "ro", live->kernel);
    add(paths, "ro", live->initrd);
    for (size_t i = 0; i < live->n_disks; i++)
        add_disk(paths, &live->disks[i]);
    add_chr(paths, &live->serial);
    add_chr(paths, &live->console);
    if (live->rng.present)
        add(paths, "ro", live->rng.backend);
    /* The daemon's directories, each the domain's own (no other domain's
     * files are in any of them): the run (API and vsock sockets, events),
     * the log, where snapshots, managed saves and saves are written and
     * restored from (writable: writable_dirs). */
    add(paths, "rw", run_dir);
    add(paths, "rw", log_path);
    add(paths, "rw", snapshots);
    add(paths, "rw", saves);
    add(paths, "rw", disks);
    /* Another domain's files it reads (a clone's origin snapshot): never written. */
    for (const char *const *dir = read_only_dirs; dir && *dir; dir++)
        add(paths, "ro", *dir);
#if VSNAP_TEST_HOOKS
    /* Test-only: what a test's preloaded library needs inside every jail
     * (tests/lib/crashpoint.c's control directory). */
    g_auto(GStrv) extra = g_strsplit(g_getenv(JAIL_TEST_PATHS_ENV) ?: "", ":", -1);
    for (char **p = extra; *p; p++)
        if (**p == '/')
            add(paths, "rw", *p);
#endif
    return paths;
}

/* The daemon's directories the shim writes into: they exist before the
 * shim starts (a bind needs its source) and belong to the shims' user. */
static GPtrArray *writable_dirs(const struct vsnap_driver *drv, const char *name,
                                const char *run_dir)
{
    GPtrArray *dirs = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(dirs, g_strdup(run_dir));
    g_ptr_array_add(dirs, g_build_filename(drv->paths.state_dir, "snapshots", name, NULL));
    g_ptr_array_add(dirs, save_area_dir(drv->paths.state_dir, name));
    /* The disks' overlays (vsnap_work_dir) and the save images' layers. */
    g_ptr_array_add(dirs, g_build_filename(drv->paths.state_dir, "disks", name, NULL));
    return dirs;
}

/* ---- the user ---- */

static bool wait_child(pid_t pid, int timeout_ms, int *status)
{
    int pidfd = pidfd_open(pid, 0);
    bool done = false;
    if (pidfd >= 0) {
        struct pollfd p = {.fd = pidfd, .events = POLLIN};
        int rc;
        do {
            rc = poll(&p, 1, timeout_ms);
        } while (rc < 0 && errno == EINTR);
        done = rc > 0;
        close(pidfd);
    }
    if (!done)
        kill(pid, SIGKILL);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
    return done;
}

/* useradd, as the package's postinst does; two daemons racing to it both
 * end with the user there. */
static bool create_user(const char *user, GError **error)
{
    char *argv[] = {"useradd", "--system", "--user-group", "--no-create-home",
                    "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
                    "--comment", "vsnap VMs", (char *)user, NULL};
    GPid pid;
    g_autoptr(GError) local = NULL;
    if (!g_spawn_async(NULL, argv, NULL, G_SPAWN_SEARCH_PATH | G_SPAWN_DO_NOT_REAP_CHILD |
                                             G_SPAWN_STDOUT_TO_DEV_NULL,
                       NULL, NULL, &pid, &local)) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR,
                    "cannot create the user %s for confined shims: %s", user, local->message);
        return false;
    }
    int status = 0;
    if (!wait_child(pid, USERADD_WAIT_MS, &status))
        g_warning("useradd %s did not finish within %d ms", user, USERADD_WAIT_MS);
    g_message("created the system user %s for confined shims (useradd status %d)", user, status);
    return true;
}

static bool lookup_user(const char *user, uid_t *uid, gid_t *gid)
{
    struct passwd pw, *found = NULL;
    char buf[4096];
    if (getpwnam_r(user, &pw, buf, sizeof(buf), &found) != 0 || !found)
        return false;
    *uid = found->pw_uid;
    *gid = found->pw_gid;
    return true;
}

static bool ensure_user(const char *user, uid_t *uid, gid_t *gid, GError **error)
{
    if (lookup_user(user, uid, gid))
        return true;
    if (!create_user(user, error))
        return false;
    if (lookup_user(user, uid, gid))
        return true;
    g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR,
                "the user %s for confined shims does not exist and useradd did not create it "
                "(create it, or set confine=false in virtvsnapd.conf)", user);
    return false;
}

/* ---- preparing a launch ---- */

static bool make_owned_dir(const char *dir, uid_t uid, gid_t gid, GError **error)
{
    if (g_mkdir_with_parents(dir, 0700) < 0 || chown(dir, uid, gid) < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot prepare %s: %s", dir,
                    g_strerror(errno));
        return false;
    }
    return true;
}

/* A file the shim creates (a serial log) must exist to be bound. */
static bool make_file(const char *path, GError **error)
{
    if (!path || g_file_test(path, G_FILE_TEST_EXISTS))
        return true;
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot create %s: %s", path,
                    g_strerror(errno));
        return false;
    }
    close(fd);
    return true;
}

static const char *file_of(const struct domain_chr *chr)
{
    return chr->type == DOMAIN_CHR_FILE ? chr->path : NULL;
}

/* The files a shim creates, made here for their binds: its log, its serial
 * and console files. Nothing else: every other path is the user's (a
 * kernel, an image) or a disk's (a chain's overlay and layers), and one
 * that is missing is an error naming it (domain_def_check_disk_access),
 * never an empty stand-in the shim would then run on. */
static bool make_created_files(const struct domain_def *live, const char *log_path,
                               GError **error)
{
    return make_file(log_path, error) && make_file(file_of(&live->serial), error) &&
           make_file(file_of(&live->console), error);
}

static bool write_paths_file(const char *file, GPtrArray *paths, GError **error)
{
    g_autoptr(GString) text = g_string_new("# the jail of this run (plugin/run/jail.c)\n");
    for (guint i = 0; i < paths->len; i++)
        g_string_append_printf(text, "%s\n", (char *)paths->pdata[i]);
    return atomic_file_write(file, text->str, error);
}

static bool prepare_jail(struct vsnap_driver *drv, const struct domain_def *live, const char *run_dir,
                         const char *log_path, const char *const *read_only_dirs, struct jail_launch *out,
                         GError **error)
{
    uid_t uid;
    gid_t gid;
    if (!ensure_user(drv->paths.confine_user, &uid, &gid, error))
        return false;
    g_autoptr(GPtrArray) dirs = writable_dirs(drv, live->name, run_dir);
    for (guint i = 0; i < dirs->len; i++)
        if (!make_owned_dir(dirs->pdata[i], uid, gid, error))
            return false;
    g_autofree char *root = g_build_filename(run_dir, "root", NULL);
    g_autofree char *paths_file = g_build_filename(run_dir, "jail.paths", NULL);
    g_autoptr(GPtrArray) paths = jail_paths(drv, live, run_dir, log_path, read_only_dirs);
    if (g_mkdir_with_parents(root, 0755) < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot create %s: %s", root,
                    g_strerror(errno));
        return false;
    }
    if (!make_created_files(live, log_path, error))
        return false;
    if (!write_paths_file(paths_file, paths, error))
        return false;
    out->confine_arg = g_strdup_printf("root=%s,uid=%u,gid=%u,paths=%s,hostname=%s", root,
                                       (unsigned)uid, (unsigned)gid, paths_file, live->name);
    return true;
}

bool jail_prepare(struct vsnap_driver *drv, const struct domain_def *live, const char *run_dir,
                  const char *log_path, const char *const *read_only_dirs, struct jail_launch *out,
                  GError **error)
{
    memset(out, 0, sizeof(*out));
    if (drv->paths.confine && !prepare_jail(drv, live, run_dir, log_path, read_only_dirs, out, error))
        return false;
    if (drv->paths.privileged && !cgroup_create(drv->paths.run_dir, live, &out->cgroup_procs, error))
        return false;
    return true;
}

void jail_launch_clear(struct jail_launch *l)
{
    g_clear_pointer(&l->confine_arg, g_free);
    if (l->cgroup_procs) {
        for (guint i = 0; i < l->cgroup_procs->len; i++)
            close(g_array_index(l->cgroup_procs, int, i));
        g_clear_pointer(&l->cgroup_procs, g_array_unref);
    }
}

/* The shims' user gets the save area for a run (writable_dirs) and loses
 * it after: a stopped domain's managed save image, the guest RAM another
 * shim would want, is then not reachable as that user even outside a jail. */
static void take_back_save_area(struct vsnap_driver *drv, const char *name)
{
    g_autofree char *area = save_area_dir(drv->paths.state_dir, name);
    if (chown(area, geteuid(), getegid()) < 0 && errno != ENOENT)
        g_warning("cannot give %s back to the daemon's user: %s", area, g_strerror(errno));
}

void jail_cleanup(struct vsnap_driver *drv, const char *name)
{
    if (drv->paths.confine)
        take_back_save_area(drv, name);
    if (drv->paths.privileged)
        cgroup_remove(drv->paths.run_dir, name);
}

bool jail_give_dir(const struct vsnap_driver *drv, const char *dir, GError **error)
{
    uid_t uid;
    gid_t gid;
    if (!drv->paths.confine || !lookup_user(drv->paths.confine_user, &uid, &gid))
        return true;
    if (chown(dir, uid, gid) < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot give %s to %s: %s", dir,
                    drv->paths.confine_user, g_strerror(errno));
        return false;
    }
    return true;
}

bool jail_share_read(const struct vsnap_driver *drv, const char *path, GError **error)
{
    uid_t uid;
    gid_t gid;
    struct stat st;
    if (!drv->paths.confine || !lookup_user(drv->paths.confine_user, &uid, &gid))
        return true;
    mode_t read = 0;
    if (lstat(path, &st) == 0)
        read = S_ISDIR(st.st_mode) ? 0050 : 0040;
    if (!read || lchown(path, (uid_t)-1, gid) < 0 || chmod(path, (st.st_mode & 07777) | read) < 0) {
        g_set_error(error, VSNAP_VIR_ERROR, VIR_ERR_SYSTEM_ERROR, "cannot let %s read %s: %s",
                    drv->paths.confine_user, path, read ? g_strerror(errno) : "not found");
        return false;
    }
    return true;
}
