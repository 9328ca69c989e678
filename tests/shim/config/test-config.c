/* VmConfig JSON and command-line option parsing, without a VM. */
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "config/shim-error.h"
#include "api/cli.h"
#include "config/vm-config-json.h"
#include "api/options.h"

struct fixture {
    char *dir;
    char *kernel;
};

static struct fixture fx;

/* Parse text with fx.kernel substituted for @K@; expect failure with code and a
 * message that contains needle. */
static void expect_refused(const char *text, int code, const char *needle)
{
    g_autoptr(GString) json = g_string_new(text);
    g_string_replace(json, "@K@", fx.kernel, 0);
    g_autoptr(GError) error = NULL;
    g_autoptr(vm_config) cfg = vm_config_from_json_text(json->str, -1, &error);

    g_assert_null(cfg);
    g_assert_error(error, SHIM_ERROR, code);
    if (!strstr(error->message, needle))
        g_error("for %s: message '%s' does not contain '%s'", json->str, error->message, needle);
}

static struct vm_config *expect_parsed(const char *text)
{
    g_autoptr(GString) json = g_string_new(text);
    g_string_replace(json, "@K@", fx.kernel, 0);
    g_autoptr(GError) error = NULL;
    struct vm_config *cfg = vm_config_from_json_text(json->str, -1, &error);
    g_assert_no_error(error);
    g_assert_nonnull(cfg);
    return cfg;
}

static void test_defaults(void)
{
    g_autoptr(vm_config) cfg = expect_parsed("{\"payload\":{\"kernel\":\"@K@\"}}");
    g_assert_cmpuint(cfg->cpus.boot_vcpus, ==, 1);
    g_assert_cmpuint(cfg->cpus.max_vcpus, ==, 1);
    g_assert_cmpuint(cfg->memory.size, ==, 512ull << 20);
    g_assert_cmpint(cfg->serial.mode, ==, CONSOLE_MODE_NULL);
    g_assert_cmpint(cfg->console.mode, ==, CONSOLE_MODE_TTY); /* Cloud Hypervisor's default */
    g_assert_false(cfg->vsock.present);
    g_assert_null(cfg->payload.cmdline);
}

static void test_full(void)
{
    g_autoptr(vm_config) cfg = expect_parsed(
        "{\"payload\":{\"kernel\":\"@K@\",\"cmdline\":\"console=ttyS0\",\"initramfs\":null},"
        "\"cpus\":{\"boot_vcpus\":2,\"max_vcpus\":4},"
        "\"memory\":{\"size\":1073741824,\"shared\":true,\"hugepages\":false,\"prefault\":true},"
        "\"serial\":{\"mode\":\"File\",\"file\":\"/tmp/s.log\"},\"console\":{\"mode\":\"Off\"},"
        "\"vsock\":{\"cid\":3,\"socket\":\"/tmp/v.sock\",\"readiness_port\":2048},"
        "\"disks\":null,\"net\":[],\"iommu\":false}");
    g_assert_cmpstr(cfg->payload.cmdline, ==, "console=ttyS0");
    g_assert_cmpuint(cfg->cpus.boot_vcpus, ==, 2);
    g_assert_cmpuint(cfg->cpus.max_vcpus, ==, 4);
    g_assert_cmpuint(cfg->memory.size, ==, 1ull << 30);
    g_assert_true(cfg->memory.shared);
    g_assert_true(cfg->memory.prefault);
    g_assert_cmpint(cfg->serial.mode, ==, CONSOLE_MODE_FILE);
    g_assert_cmpstr(cfg->serial.file, ==, "/tmp/s.log");
    g_assert_true(cfg->vsock.present);
    g_assert_cmpuint(cfg->vsock.cid, ==, 3);
    g_assert_cmpuint(cfg->vsock.readiness_port, ==, 2048);
    g_assert_cmpstr(cfg->vsock.socket, ==, "/tmp/v.sock");
}

/* vm.info's config and snapshots' config.json must parse back to the same. */
/* Cloud Hypervisor's memory config with huge pages parses and shows back;
 * an unset hugepage_size is null, as Cloud Hypervisor shows it. */
static void test_hugepages(void)
{
    g_autoptr(vm_config) cfg = expect_parsed(
        "{\"payload\":{\"kernel\":\"@K@\"},\"memory\":{\"size\":67108864,\"hugepages\":true,"
        "\"hugepage_size\":2097152}}");
    g_assert_true(cfg->memory.hugepages);
    g_assert_cmpuint(cfg->memory.hugepage_size, ==, 2ull << 20);
    g_autoptr(JsonNode) node = vm_config_to_json(cfg);
    JsonObject *memory = json_object_get_object_member(json_node_get_object(node), "memory");
    g_assert_true(json_object_get_boolean_member(memory, "hugepages"));
    g_assert_cmpint(json_object_get_int_member(memory, "hugepage_size"), ==, 2097152);
    g_autoptr(vm_config) plain = expect_parsed("{\"payload\":{\"kernel\":\"@K@\"},\"memory\":{\"hugepages\":true}}");
    g_assert_cmpuint(memory_config_page_size(&plain->memory), ==, 2ull << 20);
    g_autoptr(JsonNode) plain_node = vm_config_to_json(plain);
    memory = json_object_get_object_member(json_node_get_object(plain_node), "memory");
    g_assert_true(json_object_get_null_member(memory, "hugepage_size"));
}

static void test_round_trip(void)
{
    g_autoptr(vm_config) cfg = expect_parsed(
        "{\"payload\":{\"kernel\":\"@K@\",\"cmdline\":\"a b\"},\"cpus\":{\"boot_vcpus\":3},"
        "\"memory\":{\"size\":33554432},\"serial\":{\"mode\":\"Socket\",\"socket\":\"/tmp/x\"},"
        "\"vsock\":{\"cid\":7,\"socket\":\"/tmp/v\"}}");
    g_autoptr(JsonNode) node = vm_config_to_json(cfg);
    g_autofree char *text = json_to_string(node, FALSE);
    g_autoptr(GError) error = NULL;
    g_autoptr(vm_config) again = vm_config_from_json_text(text, -1, &error);
    g_assert_no_error(error);
    g_autoptr(JsonNode) node2 = vm_config_to_json(again);
    g_autofree char *text2 = json_to_string(node2, FALSE);
    g_assert_cmpstr(text, ==, text2);
    g_assert_cmpuint(again->cpus.max_vcpus, ==, 3);
    g_assert_cmpuint(again->vsock.readiness_port, ==, VSNAP_DEFAULT_READINESS_PORT);
    g_autoptr(vm_config) copy = vm_config_copy(again);
    g_assert_cmpstr(copy->serial.socket, ==, "/tmp/x");
    g_assert_true(copy->serial.socket != again->serial.socket);
}

static void test_refused(void)
{
    expect_refused("{bad", SHIM_ERROR_INVALID, "not valid JSON");
    expect_refused("", SHIM_ERROR_INVALID, "empty");
    expect_refused("[1]", SHIM_ERROR_INVALID, "JSON object");
    expect_refused("{}", SHIM_ERROR_INVALID, "'payload'");
    expect_refused("{\"payload\":{}}", SHIM_ERROR_INVALID, "'payload.kernel'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\",\"kernal\":1}}", SHIM_ERROR_INVALID,
                   "unknown field 'payload.kernal'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"bogus\":{}}", SHIM_ERROR_INVALID,
                   "unknown field 'bogus'");
    expect_refused("{\"payload\":{\"kernel\":5}}", SHIM_ERROR_INVALID, "'payload.kernel'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"memory\":{\"size\":0}}",
                   SHIM_ERROR_INVALID, "'memory.size'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"memory\":{\"size\":1e30}}",
                   SHIM_ERROR_INVALID, "'memory.size'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"memory\":{\"size\":-4096}}",
                   SHIM_ERROR_INVALID, "'memory.size'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"memory\":{\"size\":1099511627776}}",
                   SHIM_ERROR_INVALID, "'memory.size'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"memory\":{\"size\":33554433}}",
                   SHIM_ERROR_INVALID, "4 KiB");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"memory\":{\"size\":\"512M\"}}",
                   SHIM_ERROR_INVALID, "'memory.size'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"memory\":{\"shared\":1}}",
                   SHIM_ERROR_INVALID, "'memory.shared'");
    /* Huge pages: Cloud Hypervisor's rules, then 2 MiB pages only and RAM of whole ones. */
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"memory\":{\"hugepage_size\":2097152}}",
                   SHIM_ERROR_INVALID, "given without memory.hugepages");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"memory\":{\"hugepages\":true,\"hugepage_size\":3145728}}",
                   SHIM_ERROR_INVALID, "not a power of two");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"memory\":{\"hugepages\":true,\"hugepage_size\":1073741824}}",
                   SHIM_ERROR_UNSUPPORTED, "2 MiB huge pages (2097152) only");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"memory\":{\"size\":33558528,\"hugepages\":true}}",
                   SHIM_ERROR_INVALID, "not a whole number of 2 MiB huge pages");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"cpus\":{\"boot_vcpus\":0}}",
                   SHIM_ERROR_INVALID, "'cpus.boot_vcpus'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"cpus\":{\"boot_vcpus\":65}}",
                   SHIM_ERROR_INVALID, "'cpus.boot_vcpus'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"cpus\":{\"boot_vcpus\":4,\"max_vcpus\":2}}",
                   SHIM_ERROR_INVALID, "'cpus.boot_vcpus'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"serial\":{\"mode\":\"Serial\"}}",
                   SHIM_ERROR_INVALID, "'serial.mode'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"serial\":{\"mode\":\"File\"}}",
                   SHIM_ERROR_INVALID, "'serial.file'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"serial\":{\"mode\":\"Tty\"}}",
                   SHIM_ERROR_INVALID, "Tty for both serial and console");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"console\":{\"mode\":\"File\"}}",
                   SHIM_ERROR_INVALID, "'console.file'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"vsock\":{\"cid\":2,\"socket\":\"/x\"}}",
                   SHIM_ERROR_INVALID, "'vsock.cid'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"vsock\":{\"socket\":\"/x\"}}",
                   SHIM_ERROR_INVALID, "'vsock.cid'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"vsock\":{\"cid\":3}}",
                   SHIM_ERROR_INVALID, "'vsock.socket'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"net\":[{\"tap\":\"t\",\"vhost_user\":true}]}",
                   SHIM_ERROR_UNSUPPORTED, "'net[0].vhost_user'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"net\":[{\"tap\":\"t\",\"num_queues\":4}]}",
                   SHIM_ERROR_UNSUPPORTED, "'net[0].num_queues'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"balloon\":{\"size\":1048576}}",
                   SHIM_ERROR_UNSUPPORTED, "'balloon'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"memory\":{\"hotplug_size\":1048576}}",
                   SHIM_ERROR_UNSUPPORTED, "'memory.hotplug_size'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"cpus\":{\"topology\":{\"threads_per_core\":2}}}",
                   SHIM_ERROR_UNSUPPORTED, "'cpus.topology'");
}

/* DiskConfig: Cloud Hypervisor's defaults, every field vsnap takes, ids. */
static void test_disks(void)
{
    g_autoptr(vm_config) cfg = expect_parsed(
        "{\"payload\":{\"kernel\":\"@K@\"},\"vsock\":{\"cid\":3,\"socket\":\"/v\"},\"disks\":["
        "{\"path\":\"/a\"},"
        "{\"path\":\"/b\",\"readonly\":true,\"direct\":true,\"sparse\":false,\"id\":\"_disk0\","
        "\"serial\":\"SER-1\",\"num_queues\":2,\"queue_size\":64,\"image_type\":\"Raw\","
        "\"iommu\":false,\"vhost_user\":false,\"pci_segment\":0,\"backing_files\":false},"
        "{\"path\":\"/c\"}]}");
    g_assert_cmpuint(cfg->ndisks, ==, 3);
    const struct disk_config *a = &cfg->disks[0], *b = &cfg->disks[1], *c = &cfg->disks[2];
    g_assert_cmpstr(a->path, ==, "/a");
    g_assert_false(a->readonly);
    g_assert_false(a->direct);
    g_assert_true(a->sparse);
    g_assert_cmpuint(a->num_queues, ==, 1);
    g_assert_cmpuint(a->queue_size, ==, 128);
    g_assert_null(a->serial);
    /* Unnamed disks get the first free "_disk<n>", after the explicit ids. */
    g_assert_cmpstr(a->id, ==, "_disk1");
    g_assert_cmpstr(b->id, ==, "_disk0");
    g_assert_cmpstr(c->id, ==, "_disk2");
    g_assert_true(b->readonly && b->direct && !b->sparse);
    g_assert_cmpstr(b->serial, ==, "SER-1");
    g_assert_cmpuint(b->num_queues, ==, 2);
    g_assert_cmpuint(b->queue_size, ==, 64);
    g_assert_true(vm_config_find_disk(cfg, "_disk2") == c);

    /* vm.info shows them, and that parses back to the same. */
    g_autoptr(JsonNode) node = vm_config_to_json(cfg);
    g_autofree char *text = json_to_string(node, FALSE);
    g_autoptr(GError) error = NULL;
    g_autoptr(vm_config) again = vm_config_from_json_text(text, -1, &error);
    g_assert_no_error(error);
    g_autoptr(JsonNode) node2 = vm_config_to_json(again);
    g_autofree char *text2 = json_to_string(node2, FALSE);
    g_assert_cmpstr(text, ==, text2);
    g_assert_nonnull(strstr(text, "\"image_type\":\"Raw\""));

    g_autoptr(vm_config) copy = vm_config_copy(cfg);
    g_assert_true(copy->disks[1].serial != cfg->disks[1].serial);
    g_assert_true(vm_config_remove_disk(copy, "_disk0"));
    g_assert_false(vm_config_remove_disk(copy, "_disk0"));
    g_assert_cmpuint(copy->ndisks, ==, 2);
    g_assert_cmpstr(copy->disks[1].path, ==, "/c");

    g_autoptr(vm_config) none = expect_parsed("{\"payload\":{\"kernel\":\"@K@\"},\"disks\":[]}");
    g_assert_cmpuint(none->ndisks, ==, 0);
}

#define DISK_CFG(d) "{\"payload\":{\"kernel\":\"@K@\"},\"disks\":[" d "]}"

static void test_disks_refused(void)
{
    expect_refused(DISK_CFG("{\"path\":\"/a\",\"image_type\":\"Qcow2\"}"), SHIM_ERROR_UNSUPPORTED,
                   "invalid field 'disks[0].image_type': 'Qcow2' is not supported");
    expect_refused(DISK_CFG("{\"path\":\"/a\"},{\"path\":\"/b\",\"image_type\":\"Vhdx\"}"),
                   SHIM_ERROR_UNSUPPORTED, "'disks[1].image_type': 'Vhdx'");
    expect_refused(DISK_CFG("{\"path\":\"/a\",\"vhost_user\":true}"), SHIM_ERROR_UNSUPPORTED,
                   "field 'disks[0].vhost_user' is not supported");
    expect_refused(DISK_CFG("{\"path\":\"/a\",\"rate_limiter_config\":{\"ops\":{\"size\":1}}}"),
                   SHIM_ERROR_UNSUPPORTED, "'disks[0].rate_limiter_config'");
    expect_refused(DISK_CFG("{\"path\":\"/a\",\"bogus\":1}"), SHIM_ERROR_INVALID,
                   "unknown field 'disks[0].bogus'");
    expect_refused(DISK_CFG("{\"readonly\":true}"), SHIM_ERROR_INVALID, "'disks[0].path': required");
    expect_refused(DISK_CFG("{\"path\":\"/a\",\"readonly\":\"yes\"}"), SHIM_ERROR_INVALID,
                   "'disks[0].readonly'");
    expect_refused(DISK_CFG("{\"path\":\"/a\",\"num_queues\":0}"), SHIM_ERROR_INVALID, "'disks[0].num_queues'");
    expect_refused(DISK_CFG("{\"path\":\"/a\",\"num_queues\":5}"), SHIM_ERROR_INVALID, "'disks[0].num_queues'");
    expect_refused(DISK_CFG("{\"path\":\"/a\",\"queue_size\":100}"), SHIM_ERROR_INVALID,
                   "'disks[0].queue_size'");
    expect_refused(DISK_CFG("{\"path\":\"/a\",\"queue_size\":512}"), SHIM_ERROR_INVALID,
                   "'disks[0].queue_size'");
    expect_refused(DISK_CFG("{\"path\":\"/a\",\"id\":\"d\"},{\"path\":\"/b\",\"id\":\"d\"}"),
                   SHIM_ERROR_INVALID, "'disks[1].id': 'd' is the id of another disk");
    expect_refused(DISK_CFG("{\"path\":\"/a\",\"id\":\"vcpu0\"}"), SHIM_ERROR_INVALID, "'disks[0].id'");
    expect_refused(DISK_CFG("{\"path\":\"/a\",\"id\":\"console\"}"), SHIM_ERROR_INVALID, "names another device");
    expect_refused(DISK_CFG("{\"path\":\"/a\",\"id\":\"rng\"}"), SHIM_ERROR_INVALID, "names another device");
    expect_refused(DISK_CFG("{\"path\":\"/a\",\"serial\":\"123456789012345678901\"}"), SHIM_ERROR_INVALID,
                   "'disks[0].serial'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"disks\":{\"path\":\"/a\"}}", SHIM_ERROR_INVALID,
                   "'disks': expected an array");
    expect_refused(DISK_CFG("\"/a\""), SHIM_ERROR_INVALID, "'disks[0]': expected an object");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"vsock\":{\"cid\":3,\"socket\":\"/v\"},\"disks\":["
                   "{\"path\":\"/1\"},{\"path\":\"/2\"},{\"path\":\"/3\"},{\"path\":\"/4\"},"
                   "{\"path\":\"/5\"},{\"path\":\"/6\"},{\"path\":\"/7\"},{\"path\":\"/8\"}]}",
                   SHIM_ERROR_UNSUPPORTED, "8 disks and a vsock device and a console are more than the 8 virtio devices");

    /* vm.add-disk's body alone. */
    struct disk_config disk;
    g_autoptr(GError) error = NULL;
    g_assert_true(disk_config_from_json_text("{\"path\":\"/x\",\"readonly\":true}", -1, &disk, &error));
    g_assert_cmpstr(disk.path, ==, "/x");
    g_assert_true(disk.readonly);
    disk_config_clear(&disk);
    g_assert_false(disk_config_from_json_text("{\"path\":\"/x\",\"nope\":1}", -1, &disk, &error));
    g_assert_nonnull(strstr(error->message, "unknown field 'nope'"));
    g_clear_error(&error);
    g_assert_false(disk_config_from_json_text("[]", -1, &disk, &error));
    g_clear_error(&error);
}

/* Images at vm.create: present, a file or block device, openable as asked,
 * at least a sector. */
static void test_disk_images(void)
{
    g_autofree char *image = g_build_filename(fx.dir, "disk.img", NULL);
    g_autofree char *tiny = g_build_filename(fx.dir, "tiny.img", NULL);
    g_assert_true(g_file_set_contents(image, "", 0, NULL));
    g_assert_cmpint(truncate(image, 1 << 20), ==, 0);
    g_assert_true(g_file_set_contents(tiny, "0123", 4, NULL));
    struct disk_config disk;
    disk_config_init(&disk);
    g_autoptr(GError) error = NULL;

    disk.path = g_strdup(image);
    g_assert_true(disk_config_check_image(&disk, "disks[0].path", &error));
    g_free(disk.path);
    disk.path = g_build_filename(fx.dir, "missing.img", NULL);
    g_assert_false(disk_config_check_image(&disk, "disks[0].path", &error));
    g_assert_error(error, SHIM_ERROR, SHIM_ERROR_INVALID);
    g_assert_nonnull(strstr(error->message, "'disks[0].path'"));
    g_assert_nonnull(strstr(error->message, "No such file"));
    g_clear_error(&error);
    g_free(disk.path);
    disk.path = g_strdup(fx.dir);
    g_assert_false(disk_config_check_image(&disk, "disks[1].path", &error));
    g_assert_nonnull(strstr(error->message, "not a regular file or a block device"));
    g_clear_error(&error);
    g_free(disk.path);
    disk.path = g_strdup(tiny);
    g_assert_false(disk_config_check_image(&disk, "disks[0].path", &error));
    g_assert_nonnull(strstr(error->message, "less than one 512-byte sector"));
    g_clear_error(&error);
    disk_config_clear(&disk);
}

/* The stock-guest parts: the notify port, virtio-rng, SMBIOS identity. */
static void test_stock_guest(void)
{
    g_autoptr(vm_config) plain = expect_parsed(
        "{\"payload\":{\"kernel\":\"@K@\"},\"vsock\":{\"cid\":3,\"socket\":\"/v\"},\"rng\":{}}");
    g_assert_cmpuint(plain->vsock.notify_port, ==, VSNAP_DEFAULT_NOTIFY_PORT);
    g_assert_true(plain->rng.present);
    g_assert_cmpstr(plain->rng.src, ==, "/dev/urandom");
    g_assert_cmpuint(plain->rng.bandwidth.size, ==, 0);
    g_assert_null(plain->platform.uuid);

    g_autoptr(vm_config) cfg = expect_parsed(
        "{\"payload\":{\"kernel\":\"@K@\"},\"vsock\":{\"cid\":3,\"socket\":\"/v\",\"notify_port\":7000},"
        "\"rng\":{\"src\":\"/dev/random\",\"rate_limiter\":{\"bandwidth\":{\"size\":4096,\"refill_time\":100}}},"
        "\"platform\":{\"uuid\":\"4dea22b3-1d52-d8f3-2516-782e98ab3fa0\",\"serial_number\":\"ds=nocloud;s=http://h/\","
        "\"oem_strings\":[\"io.systemd.credential:a=b\",\"two\"],\"system\":{\"manufacturer\":\"ACME\"}}}");
    g_assert_cmpuint(cfg->vsock.notify_port, ==, 7000);
    g_assert_cmpstr(cfg->rng.src, ==, "/dev/random");
    g_assert_cmpuint(cfg->rng.bandwidth.size, ==, 4096);
    g_assert_cmpuint(cfg->rng.bandwidth.refill_time_ms, ==, 100);
    g_assert_cmpstr(cfg->platform.serial_number, ==, "ds=nocloud;s=http://h/");
    g_assert_cmpuint(g_strv_length(cfg->platform.oem_strings), ==, 2);
    g_assert_cmpstr(cfg->platform.oem_strings[1], ==, "two");
    g_assert_cmpstr(cfg->platform.system.manufacturer, ==, "ACME");

    /* What vm.info shows parses back to the same. */
    g_autoptr(JsonNode) json = vm_config_to_json(cfg);
    g_autoptr(GError) error = NULL;
    g_autoptr(vm_config) again = vm_config_from_json(json, &error);
    g_assert_no_error(error);
    g_assert_cmpuint(again->vsock.notify_port, ==, 7000);
    g_assert_cmpuint(again->rng.bandwidth.refill_time_ms, ==, 100);
    g_assert_cmpstr(again->platform.uuid, ==, cfg->platform.uuid);
    g_assert_cmpstr(again->platform.oem_strings[0], ==, "io.systemd.credential:a=b");
    g_assert_cmpstr(again->platform.system.manufacturer, ==, "ACME");
    g_assert_null(again->platform.system.family);

    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"vsock\":{\"cid\":3,\"socket\":\"/v\",\"notify_port\":1024}}",
                   SHIM_ERROR_INVALID, "'vsock.notify_port'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"platform\":{\"uuid\":\"not-a-uuid\"}}",
                   SHIM_ERROR_INVALID, "'platform.uuid'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"platform\":{\"oem_strings\":[\"a\",3]}}",
                   SHIM_ERROR_INVALID, "'platform.oem_strings'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"platform\":{\"oem_strings\":[\"\"]}}",
                   SHIM_ERROR_INVALID, "'platform.oem_strings'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"platform\":{\"num_pci_segments\":2}}",
                   SHIM_ERROR_UNSUPPORTED, "'platform.num_pci_segments'");
    expect_refused("{\"payload\":{\"kernel\":\"@K@\"},\"rng\":{\"rate_limiter\":{\"bandwidth\":{\"size\":1}}}}",
                   SHIM_ERROR_INVALID, "'rng.rate_limiter.bandwidth.refill_time'");

    struct platform_config platform = { 0 };
    g_assert_true(cli_parse_platform("serial_number=abc,oem_strings=[x,y=z],uuid=00000000-0000-0000-0000-000000000001",
                                     &platform, &error));
    g_assert_no_error(error);
    g_assert_cmpstr(platform.serial_number, ==, "abc");
    g_assert_cmpuint(g_strv_length(platform.oem_strings), ==, 2);
    g_assert_cmpstr(platform.oem_strings[1], ==, "y=z");
    g_free(platform.serial_number);
    g_free(platform.uuid);
    g_strfreev(platform.oem_strings);
    g_assert_false(cli_parse_platform("oem_strings=[x,y", &platform, &error));
    g_clear_error(&error);
    struct rng_config rng = { 0 };
    g_assert_true(cli_parse_rng("src=/dev/random,bw_size=100,bw_refill_time=10", &rng, &error));
    g_assert_true(rng.present);
    g_assert_cmpstr(rng.src, ==, "/dev/random");
    g_assert_cmpuint(rng.bandwidth.size, ==, 100);
    g_free(rng.src);
}

static void test_files(void)
{
    g_autoptr(GError) error = NULL;
    g_autoptr(vm_config) cfg = expect_parsed("{\"payload\":{\"kernel\":\"@K@\"}}");
    g_assert_true(vm_config_check_files(cfg, &error));

    g_free(cfg->payload.kernel);
    cfg->payload.kernel = g_build_filename(fx.dir, "missing", NULL);
    g_assert_false(vm_config_check_files(cfg, &error));
    g_assert_error(error, SHIM_ERROR, SHIM_ERROR_INVALID);
    g_assert_nonnull(strstr(error->message, "No such file"));
    g_clear_error(&error);

    g_free(cfg->payload.kernel);
    cfg->payload.kernel = g_strdup(fx.dir);
    g_assert_false(vm_config_check_files(cfg, &error));
    g_assert_nonnull(strstr(error->message, "not a regular file"));
}

static void test_console_mode_names(void)
{
    enum console_mode mode;
    for (int m = CONSOLE_MODE_OFF; m <= CONSOLE_MODE_SOCKET; m++) {
        g_assert_true(console_mode_from_string(console_mode_to_string(m), &mode));
        g_assert_cmpint(mode, ==, m);
    }
    g_assert_false(console_mode_from_string("tty", &mode)); /* JSON spelling is "Tty" */
}

static void test_sizes(void)
{
    uint64_t v;
    g_autoptr(GError) error = NULL;
    g_assert_true(parse_size("512M", &v, NULL) && v == 512ull << 20);
    g_assert_true(parse_size("2G", &v, NULL) && v == 2ull << 30);
    g_assert_true(parse_size("64K", &v, NULL) && v == 64ull << 10);
    g_assert_true(parse_size("4096", &v, NULL) && v == 4096);
    g_assert_true(parse_size("1GiB", &v, NULL) && v == 1ull << 30);
    g_assert_false(parse_size("", &v, &error));
    g_clear_error(&error);
    g_assert_false(parse_size("12Q", &v, &error));
    g_clear_error(&error);
    g_assert_false(parse_size("-1M", &v, &error));
    g_clear_error(&error);
    g_assert_false(parse_size("99999999999999999999G", &v, &error));
    g_clear_error(&error);
    g_assert_false(parse_size("17179869184G", &v, &error)); /* overflows 64 bits */
}

static void test_cli_pieces(void)
{
    g_autoptr(GError) error = NULL;
    struct console_config con = { 0 };
    struct memory_config mem = { .size = 1 };
    struct cpus_config cpus = { .boot_vcpus = 1, .max_vcpus = 1 };
    struct vsock_config vsock = { .readiness_port = 1024 };

    g_assert_true(cli_parse_console("--serial", "file=/tmp/f", &con, &error));
    g_assert_cmpint(con.mode, ==, CONSOLE_MODE_FILE);
    g_assert_cmpstr(con.file, ==, "/tmp/f");
    g_assert_true(cli_parse_console("--serial", "pty", &con, &error));
    g_assert_cmpint(con.mode, ==, CONSOLE_MODE_PTY);
    g_assert_null(con.file);
    g_assert_false(cli_parse_console("--serial", "tty=3", &con, &error));
    g_clear_error(&error);
    g_assert_false(cli_parse_console("--serial", "file=", &con, &error));
    g_clear_error(&error);
    g_assert_false(cli_parse_console("--serial", "off,pty", &con, &error));
    g_clear_error(&error);
    g_free(con.file);
    g_free(con.socket);

    g_assert_true(cli_parse_memory("size=1G,prefault=on,shared=off", &mem, &error));
    g_assert_cmpuint(mem.size, ==, 1ull << 30);
    g_assert_true(mem.prefault);
    g_assert_false(cli_parse_memory("size=1G,hotplug_size=1G", &mem, &error));
    g_assert_nonnull(strstr(error->message, "hotplug_size"));
    g_clear_error(&error);
    g_assert_false(cli_parse_memory("size=1G,size=2G", &mem, &error));
    g_clear_error(&error);
    g_assert_false(cli_parse_memory("prefault=maybe", &mem, &error));
    g_clear_error(&error);
    g_assert_true(cli_parse_memory("size=64M,hugepages=on,hugepage_size=2M", &mem, &error));
    g_assert_true(mem.hugepages);
    g_assert_cmpuint(mem.hugepage_size, ==, 2ull << 20);
    g_assert_cmpuint(memory_config_page_size(&mem), ==, 2ull << 20);

    g_assert_true(cli_parse_cpus("boot=2", &cpus, &error));
    g_assert_cmpuint(cpus.boot_vcpus, ==, 2);
    g_assert_cmpuint(cpus.max_vcpus, ==, 2);
    g_assert_true(cli_parse_cpus("boot=2,max=8", &cpus, &error));
    g_assert_cmpuint(cpus.max_vcpus, ==, 8);
    g_assert_false(cli_parse_cpus("boot=two", &cpus, &error));
    g_clear_error(&error);

    g_assert_true(cli_parse_vsock("cid=3,socket=/tmp/v.sock", &vsock, &error));
    g_assert_true(vsock.present);
    g_assert_cmpuint(vsock.cid, ==, 3);
    g_assert_cmpuint(vsock.readiness_port, ==, 1024);
    g_assert_false(cli_parse_vsock("cid=3", &vsock, &error));
    g_clear_error(&error);
    g_free(vsock.socket);

    struct disk_config disk;
    disk_config_init(&disk);
    g_assert_true(cli_parse_disk("path=/img,readonly=on,id=root,serial=S,num_queues=2,queue_size=64,"
                                 "image_type=raw,direct=on,sparse=off", &disk, &error));
    g_assert_cmpstr(disk.path, ==, "/img");
    g_assert_true(disk.readonly && disk.direct && !disk.sparse);
    g_assert_cmpstr(disk.id, ==, "root");
    g_assert_cmpstr(disk.serial, ==, "S");
    g_assert_cmpuint(disk.num_queues, ==, 2);
    g_assert_cmpuint(disk.queue_size, ==, 64);
    g_assert_cmpstr(disk.image_type, ==, "Raw");
    g_assert_false(cli_parse_disk("readonly=on", &disk, &error));
    g_assert_nonnull(strstr(error->message, "path= is required"));
    g_clear_error(&error);
    g_assert_false(cli_parse_disk("path=/x,vhost_user=on", &disk, &error));
    g_assert_nonnull(strstr(error->message, "vhost_user"));
    g_clear_error(&error);
    disk_config_clear(&disk);
}

static void test_cli_parse(void)
{
    g_autoptr(GError) error = NULL;
    struct shim_options opts = { 0 };
    char *ok_argv[] = { "vsnap-shim", "--kernel", fx.kernel, "--memory", "size=64M",
                        "--cpus", "boot=2", "--serial", "off", "-v", "-v",
                        "--api-socket", "path=/tmp/x.sock", NULL };

    g_assert_true(shim_options_parse(G_N_ELEMENTS(ok_argv) - 1, ok_argv, &opts, &error));
    g_assert_no_error(error);
    g_assert_nonnull(opts.direct_config);
    g_assert_cmpuint(opts.direct_config->memory.size, ==, 64ull << 20);
    g_assert_cmpuint(opts.direct_config->cpus.boot_vcpus, ==, 2);
    g_assert_cmpint(opts.direct_config->serial.mode, ==, CONSOLE_MODE_OFF);
    g_assert_cmpint(opts.verbosity, ==, 2);
    g_assert_cmpstr(opts.api_socket, ==, "path=/tmp/x.sock");
    shim_options_clear(&opts);

    char *none_argv[] = { "vsnap-shim", NULL };
    g_assert_false(shim_options_parse(1, none_argv, &opts, &error));
    g_assert_nonnull(strstr(error->message, "--api-socket"));
    g_clear_error(&error);
    shim_options_clear(&opts);

    char *disk_argv[] = { "vsnap-shim", "--kernel", fx.kernel, "--disk", "path=/a", "--disk", "path=/b,id=_disk0",
                          "--disk", "path=/c,image_type=qcow2", NULL };
    g_assert_false(shim_options_parse(G_N_ELEMENTS(disk_argv) - 1, disk_argv, &opts, &error));
    g_assert_nonnull(strstr(error->message, "'disks[2].image_type': 'qcow2'"));
    g_clear_error(&error);
    shim_options_clear(&opts);
    g_assert_true(shim_options_parse(G_N_ELEMENTS(disk_argv) - 3, disk_argv, &opts, &error));
    g_assert_cmpuint(opts.direct_config->ndisks, ==, 2);
    g_assert_cmpstr(opts.direct_config->disks[0].id, ==, "_disk1");
    g_assert_cmpstr(opts.direct_config->disks[1].path, ==, "/b");
    shim_options_clear(&opts);

    char *tiny_argv[] = { "vsnap-shim", "--kernel", fx.kernel, "--memory", "size=1M", NULL };
    g_assert_false(shim_options_parse(5, tiny_argv, &opts, &error));
    g_assert_nonnull(strstr(error->message, "memory.size"));
    g_clear_error(&error);
    shim_options_clear(&opts);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    fx.dir = g_dir_make_tmp("vsnap-api-test-XXXXXX", NULL);
    fx.kernel = g_build_filename(fx.dir, "kernel", NULL);
    g_file_set_contents(fx.kernel, "not checked here", -1, NULL);

    g_test_add_func("/config/defaults", test_defaults);
    g_test_add_func("/config/full", test_full);
    g_test_add_func("/config/round-trip", test_round_trip);
    g_test_add_func("/config/hugepages", test_hugepages);
    g_test_add_func("/config/refused", test_refused);
    g_test_add_func("/config/files", test_files);
    g_test_add_func("/config/disks", test_disks);
    g_test_add_func("/config/disks-refused", test_disks_refused);
    g_test_add_func("/config/disk-images", test_disk_images);
    g_test_add_func("/config/stock-guest", test_stock_guest);
    g_test_add_func("/config/console-mode-names", test_console_mode_names);
    g_test_add_func("/options/sizes", test_sizes);
    g_test_add_func("/options/cli-pieces", test_cli_pieces);
    g_test_add_func("/options/cli-parse", test_cli_parse);
    int rc = g_test_run();

    g_unlink(fx.kernel);
    g_rmdir(fx.dir);
    return rc;
}
