/* domain_def_check_disk_access: what the daemon checks before it spawns a
 * shim for a domain with disks, on real files in a private directory. */
#include <fcntl.h>
#include <glib/gstdio.h>
#include <grp.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conf-test.h"
#include "conf/domain-conf.h"

static const char *schema_dir;
static const char *examples_dir;
static char *dir;

static char *path_in_dir(const char *name)
{
    return g_build_filename(dir, name, NULL);
}

static void make_file(const char *path, int mode)
{
    g_assert_true(g_file_set_contents(path, "raw bytes", -1, NULL));
    g_assert_cmpint(chmod(path, mode), ==, 0);
}

/* A domain whose one disk is path, parsed as the daemon would. */
static struct domain_def *domain_with_disk(const char *path, bool is_block, bool readonly)
{
    g_autofree char *escaped = g_markup_escape_text(path, -1);
    g_autofree char *xml = g_strdup_printf(
        "<domain type='kvm'><name>t</name><memory unit='MiB'>64</memory>"
        "<os><type>hvm</type><kernel>/k</kernel></os><devices>"
        "<disk type='%s'><source %s='%s'/><target dev='vda'/>%s</disk></devices></domain>",
        is_block ? "block" : "file", is_block ? "dev" : "file", escaped, readonly ? "<readonly/>" : "");
    g_autoptr(GError) error = NULL;
    struct domain_def *def = domain_def_parse_string(xml, schema_dir, &error);
    g_assert_no_error(error);
    return def;
}

static void check_refused(const struct domain_def *def, int code, const char *part1, const char *part2)
{
    g_autoptr(GError) error = NULL;
    if (domain_def_check_disk_access(def, &error))
        g_error("disk '%s' accepted, expected '%s'", def->disks[0].path, part1);
    g_assert_true(error->domain == VSNAP_VIR_ERROR);
    if (error->code != code || !strstr(error->message, part1) || !strstr(error->message, part2))
        g_error("expected code %d with '%s' and '%s', got %d '%s'", code, part1, part2, error->code,
                error->message);
}

static void check_accepted(const struct domain_def *def)
{
    g_autoptr(GError) error = NULL;
    if (!domain_def_check_disk_access(def, &error))
        g_error("disk '%s' refused: %s", def->disks[0].path, error->message);
}

static void test_missing(void)
{
    g_autofree char *path = path_in_dir("missing.img");
    g_autoptr(domain_def) def = domain_with_disk(path, false, false);
    g_autofree char *expected = g_strdup_printf("Cannot access storage file '%s' of disk 'vda'", path);
    check_refused(def, VIR_ERR_SYSTEM_ERROR, expected, "No such file or directory");
    g_autoptr(domain_def) block = domain_with_disk(path, true, true);
    check_refused(block, VIR_ERR_SYSTEM_ERROR, expected, "No such file or directory");
}

static void test_regular_file(void)
{
    g_autofree char *path = path_in_dir("ok.img");
    make_file(path, 0600);
    g_autoptr(domain_def) def = domain_with_disk(path, false, false);
    check_accepted(def);
    /* The same file as <disk type='block'> is not what the definition says. */
    g_autoptr(domain_def) block = domain_with_disk(path, true, false);
    check_refused(block, VIR_ERR_OPERATION_FAILED, "is not a block device", "type='block'");
}

/* A read-only image needs only read access; a writable one needs both.
 * Permission bits refuse root nothing, so as root the refusals are checked
 * in a child that runs as nobody, for whom root's 0400 file is unreadable. */
static void test_permissions(void)
{
    g_autofree char *path = path_in_dir("ro.img");
    make_file(path, 0400);
    g_autoptr(domain_def) readonly = domain_with_disk(path, false, true);
    g_autoptr(domain_def) writable = domain_with_disk(path, false, false);
    check_accepted(readonly);
    if (geteuid() != 0) {
        check_refused(writable, VIR_ERR_SYSTEM_ERROR, "for reading and writing", "Permission denied");
        g_assert_cmpint(chmod(path, 0000), ==, 0);
        check_refused(readonly, VIR_ERR_SYSTEM_ERROR, "for reading)", "Permission denied");
        return;
    }
    g_assert_cmpint(chmod(dir, 0755), ==, 0);
    pid_t pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
            _exit(2);
        check_refused(writable, VIR_ERR_SYSTEM_ERROR, "for reading and writing", "Permission denied");
        check_refused(readonly, VIR_ERR_SYSTEM_ERROR, "(as uid:65534, gid:65534, for reading)",
                      "Permission denied");
        _exit(0);
    }
    int status = 0;
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
}

/* Once a chain layers over the image, the image is opened read-only. */
static void test_chain_base_read_only(void)
{
    g_autofree char *path = path_in_dir("base.img");
    g_autofree char *overlay = path_in_dir("vda.overlay");
    make_file(path, 0400);
    make_file(overlay, 0600);
    g_autoptr(domain_def) def = domain_with_disk(path, false, false);
    const char *const chain[] = {overlay, NULL};
    domain_disk_set_chain(&def->disks[0], chain);
    check_accepted(def);
}

/* A chain file that is gone is named, overlay or layer: no shim may start
 * on a stand-in (the jail once bound an empty file in its place). */
static void test_chain_file_missing(void)
{
    g_autofree char *path = path_in_dir("chained.img");
    g_autofree char *overlay = path_in_dir("chained.overlay");
    g_autofree char *layer = path_in_dir("chained.layer");
    make_file(path, 0600);
    make_file(layer, 0400);
    g_autoptr(domain_def) def = domain_with_disk(path, false, false);
    const char *const chain[] = {overlay, layer, NULL};
    domain_disk_set_chain(&def->disks[0], chain);
    check_refused(def, VIR_ERR_OPERATION_FAILED, "its overlay", overlay);
    g_assert_false(g_file_test(overlay, G_FILE_TEST_EXISTS));
    make_file(overlay, 0600);
    check_accepted(def);
    g_assert_cmpint(g_unlink(layer), ==, 0);
    check_refused(def, VIR_ERR_OPERATION_FAILED, "sealed disk layer", layer);
}

static void test_not_a_file(void)
{
    g_autoptr(domain_def) directory = domain_with_disk(dir, false, false);
    check_refused(directory, VIR_ERR_SYSTEM_ERROR, "Cannot access storage file", "Is a directory");
    g_autoptr(domain_def) directory_ro = domain_with_disk(dir, false, true);
    check_refused(directory_ro, VIR_ERR_OPERATION_FAILED, "is not a regular file", "type='file'");
    g_autoptr(domain_def) device = domain_with_disk("/dev/null", false, true);
    check_refused(device, VIR_ERR_OPERATION_FAILED, "'/dev/null' is not a regular file", "type='file'");
    /* A FIFO must not block the check (the daemon would hang in it). */
    g_autofree char *fifo = path_in_dir("fifo");
    g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
    g_autoptr(domain_def) pipe = domain_with_disk(fifo, false, true);
    check_refused(pipe, VIR_ERR_OPERATION_FAILED, "is not a regular file", "type='file'");
}

/* Every disk is checked, the first bad one is named. */
static void test_several_disks(void)
{
    g_autofree char *good = path_in_dir("good.img");
    g_autofree char *bad = path_in_dir("absent.img");
    make_file(good, 0600);
    g_autofree char *xml = g_strdup_printf(
        "<domain type='kvm'><name>t</name><memory unit='MiB'>64</memory>"
        "<os><type>hvm</type><kernel>/k</kernel></os><devices>"
        "<disk><source file='%s'/><target dev='vda'/></disk>"
        "<disk><source file='%s'/><target dev='vdb'/></disk></devices></domain>",
        good, bad);
    g_autoptr(GError) error = NULL;
    g_autoptr(domain_def) def = domain_def_parse_string(xml, schema_dir, &error);
    g_assert_no_error(error);
    g_autofree char *expected = g_strdup_printf("'%s' of disk 'vdb'", bad);
    check_refused(def, VIR_ERR_SYSTEM_ERROR, expected, "No such file");
    g_autoptr(domain_def) none = domain_def_parse_string(
        "<domain type='kvm'><name>t</name><memory unit='MiB'>64</memory>"
        "<os><type>hvm</type><kernel>/k</kernel></os></domain>",
        schema_dir, &error);
    g_assert_no_error(error);
    check_accepted(none);
}

static void remove_dir(void)
{
    g_autoptr(GDir) d = g_dir_open(dir, 0, NULL);
    for (const char *name; d && (name = g_dir_read_name(d));) {
        g_autofree char *path = path_in_dir(name);
        g_unlink(path);
    }
    g_rmdir(dir);
}

int main(int argc, char **argv)
{
    conf_test_init(&argc, &argv, &schema_dir, &examples_dir);
    dir = g_dir_make_tmp("vsnap-disk-access-XXXXXX", NULL);
    g_assert_nonnull(dir);
    g_test_add_func("/conf/disk-access/missing", test_missing);
    g_test_add_func("/conf/disk-access/regular-file", test_regular_file);
    g_test_add_func("/conf/disk-access/permissions", test_permissions);
    g_test_add_func("/conf/disk-access/chain-base-read-only", test_chain_base_read_only);
    g_test_add_func("/conf/disk-access/chain-file-missing", test_chain_file_missing);
    g_test_add_func("/conf/disk-access/not-a-file", test_not_a_file);
    g_test_add_func("/conf/disk-access/several-disks", test_several_disks);
    int status = g_test_run();
    remove_dir();
    g_free(dir);
    return status;
}
