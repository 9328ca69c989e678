/* A device's interrupt that KVM refuses to deliver is not lost in silence:
 * the VM stops as crashed and says which GSI failed.
 *
 * KVM_IRQ_LINE only fails when the VM's interrupt controller is broken, so
 * this test makes it fail: the program's own ioctl() takes precedence over
 * libc's for the whole process, passes every request to the kernel, and
 * refuses KVM_IRQ_LINE while fail_irq_line is set. The VM is real (built on
 * /dev/kvm around the test guest, not started); the interrupt is the ACPI SCI
 * the power button raises once its enable bit is set.
 */
#include <errno.h>
#include <glib.h>
#include <json-glib/json-glib.h>
#include <linux/kvm.h>
#include <stdarg.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "boot/boot.h"
#include "config/vm-config.h"
#include "devices/acpi-pm.h"
#include "core/vm.h"

static volatile bool fail_irq_line;

int ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (fail_irq_line && request == KVM_IRQ_LINE) {
        errno = EIO;
        return -1;
    }
    return (int)syscall(SYS_ioctl, fd, request, arg);
}

struct stops {
    int count;
    enum vm_stop_reason reason;
    char *detail;
};

/* vm_report_guest_stop calls this on the thread that saw the failure: here,
 * the test's own (vm_power_button). */
static void on_guest_stop(void *opaque, enum vm_stop_reason reason, const char *detail)
{
    struct stops *s = opaque;
    if (s->count++ == 0) {
        s->reason = reason;
        s->detail = g_strdup(detail);
    }
}

static struct vm *new_vm(struct stops *stops)
{
    const char *guest = g_getenv("VSNAP_TESTGUEST");
    g_assert_nonnull(guest);
    g_autoptr(vm_config) cfg = vm_config_new_default();
    cfg->payload.kernel = g_strdup(guest);
    cfg->memory.size = 64ull << 20;
    struct vm_callbacks cb = { .on_guest_stop = on_guest_stop, .opaque = stops };
    g_autoptr(GError) error = NULL;
    struct vm *vm = vm_new(cfg, &cb, &error);
    g_assert_no_error(error);
    return vm;
}

/* What a guest's ACPI driver does first: enable the power button event. */
static void enable_power_button(struct vm *vm)
{
    g_autoptr(JsonParser) parser = json_parser_new();
    g_autofree char *text = g_strdup_printf("{\"pm1_sts\": 0, \"pm1_en\": %u, \"pm1_cnt\": 0}", ACPI_PM1_PWRBTN_EN);
    g_assert_true(json_parser_load_from_data(parser, text, -1, NULL));
    g_autoptr(GError) error = NULL;
    g_assert_true(acpi_pm_restore_state(vm_acpi_pm(vm), json_node_get_object(json_parser_get_root(parser)),
                                        &error));
    g_assert_no_error(error);
}

static void test_delivered(void)
{
    struct stops stops = { 0 };
    struct vm *vm = new_vm(&stops);
    enable_power_button(vm);
    vm_power_button(vm);
    g_assert_cmpint(stops.count, ==, 0);
    vm_free(vm);
}

static void test_refused(void)
{
    struct stops stops = { 0 };
    struct vm *vm = new_vm(&stops);
    enable_power_button(vm);
    g_test_expect_message(NULL, G_LOG_LEVEL_WARNING, "cannot raise GSI*KVM_IRQ_LINE*");
    fail_irq_line = true;
    vm_power_button(vm);
    fail_irq_line = false;
    g_test_assert_expected_messages();
    g_assert_cmpint(stops.count, ==, 1);
    g_assert_cmpstr(vm_stop_reason_to_string(stops.reason), ==, "crash");
    g_autofree char *gsi = g_strdup_printf("GSI %u", ACPI_SCI_IRQ);
    g_assert_nonnull(strstr(stops.detail, gsi));
    g_assert_nonnull(strstr(stops.detail, g_strerror(EIO)));
    vm_free(vm);
    g_free(stops.detail);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    if (access("/dev/kvm", R_OK | W_OK) != 0) {
        g_printerr("/dev/kvm is not usable: this test needs KVM\n");
        return 1;
    }
    g_test_add_func("/irq-line/delivered", test_delivered);
    g_test_add_func("/irq-line/refused-stops-the-vm", test_refused);
    return g_test_run();
}
