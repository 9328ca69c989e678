/* The KVM core end to end on real KVM: vm_new with a tiny ELF "kernel" this
 * test writes itself (a few instructions per scenario), run, and check what
 * the VM reports: stop reasons, pause/resume, CPUID, serial output, and that
 * a big VM costs neither time nor memory up front. */
#include <elf.h>
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "boot/boot.h"
#include "config/vm-config.h"
#include "platform/memory.h"
#include "core/vm.h"
#include "json/vjson.h"

#define GUEST_LOAD_ADDR 0x200000ull
#define GUEST_DATA_ADDR 0x300000ull /* the programs below write results here */
#define STOP_TIMEOUT_US (20 * G_USEC_PER_SEC)

/* The guest programs (64-bit, CPL0, entered by the 64-bit boot protocol). */
#define GUEST_POWEROFF \
    "  mov $0x604, %dx\n  mov $0x3400, %ax\n  out %ax, %dx\n" /* SLP_TYP=5, SLP_EN */ \
    "9: hlt\n  jmp 9b\n"
extern const uint8_t prog_hello_poweroff[], prog_hello_poweroff_end[];
extern const uint8_t prog_i8042_reset[], prog_i8042_reset_end[];
extern const uint8_t prog_acpi_reset[], prog_acpi_reset_end[];
extern const uint8_t prog_triple_fault[], prog_triple_fault_end[];
extern const uint8_t prog_count[], prog_count_end[];
extern const uint8_t prog_cli_hlt[], prog_cli_hlt_end[];
extern const uint8_t prog_cpuid[], prog_cpuid_end[];
extern const uint8_t prog_power_button[], prog_power_button_end[];
extern const uint8_t prog_start_ap[], prog_start_ap_end[];
extern const uint8_t prog_serial_irq[], prog_serial_irq_end[];
extern const uint8_t prog_sci[], prog_sci_end[];
asm(".pushsection .rodata\n.code64\n"
    "prog_hello_poweroff:\n"
    "  mov $0x3f8, %dx\n  mov $'O', %al\n  out %al, %dx\n  mov $'K', %al\n  out %al, %dx\n"
    GUEST_POWEROFF
    "prog_hello_poweroff_end:\n"
    "prog_i8042_reset:\n  mov $0xfe, %al\n  out %al, $0x64\n9: jmp 9b\nprog_i8042_reset_end:\n"
    "prog_acpi_reset:\n  mov $0x60c, %dx\n  mov $1, %al\n  out %al, %dx\n9: jmp 9b\nprog_acpi_reset_end:\n"
    "prog_triple_fault:\n  lidt 8f(%rip)\n  ud2\n8: .quad 0, 0\nprog_triple_fault_end:\n"
    "prog_count:\n  mov $0x300000, %rax\n1: incq (%rax)\n  jmp 1b\nprog_count_end:\n"
    "prog_cli_hlt:\n  cli\n1: hlt\n  jmp 1b\nprog_cli_hlt_end:\n"
    /* Wait for PM1 status PWRBTN_STS, acknowledge it, power off. */
    "prog_power_button:\n"
    "  mov $0x600, %dx\n1: in %dx, %ax\n  test $0x100, %ax\n  jz 1b\n"
    "  mov $0x100, %ax\n  out %ax, %dx\n"
    GUEST_POWEROFF
    "prog_power_button_end:\n"
    /* Start the AP (APIC id 1) the way Linux does, with INIT and SIPI through
     * the LAPIC's ICR; its real-mode code (copied to 0x10000, SIPI vector
     * 0x10) writes 1 to 0x5000; then power off. */
    "prog_start_ap:\n"
    "  lea 5f(%rip), %rsi\n  mov $0x10000, %rdi\n  mov $(6f - 5f), %ecx\n"
    "1: mov (%rsi), %al\n  mov %al, (%rdi)\n  inc %rsi\n  inc %rdi\n  dec %ecx\n  jnz 1b\n"
    "  mov $0xfee00000, %ebx\n"
    "  movl $0x01000000, 0x310(%rbx)\n" /* ICR high: destination APIC id 1 */
    "  movl $0x00004500, 0x300(%rbx)\n" /* INIT, level assert */
    "  movl $0x00004610, 0x300(%rbx)\n" /* SIPI, vector 0x10 */
    "2: cmpb $1, 0x5000\n  jne 2b\n"
    GUEST_POWEROFF
    ".code16\n"
    "5: xor %ax, %ax\n  mov %ax, %ds\n  movb $1, 0x5000\n  cli\n3: hlt\n  jmp 3b\n"
    "6:\n"
    ".code64\n"
    "prog_start_ap_end:\n"
    /* Interrupt-driven serial input, the way Linux takes it: IOAPIC pin 4 ->
     * vector 0x30, UART IER.RDI; the handler drains the FIFO while LSR.DR,
     * counting bytes at 0x5004 and keeping the last at 0x5000; 'q' powers
     * off. 0x5008 = 1 says the guest is ready for input. */
    "prog_serial_irq:\n"
    "  mov $0xff, %al\n  out %al, $0x21\n  out %al, $0xa1\n" /* mask the 8259s */
    "  lea 7f(%rip), %rax\n  mov $0x6300, %rdi\n" /* IDT at 0x6000, entry 0x30 */
    "  mov %ax, (%rdi)\n  movw $0x10, 2(%rdi)\n  movw $0x8e00, 4(%rdi)\n"
    "  shr $16, %rax\n  mov %ax, 6(%rdi)\n  shr $16, %rax\n  mov %eax, 8(%rdi)\n  movl $0, 12(%rdi)\n"
    "  lidt 8f(%rip)\n"
    "  mov $0xfee00000, %ebx\n  movl $0x1ff, 0xf0(%rbx)\n" /* LAPIC on */
    "  mov $0xfec00000, %ebx\n"
    "  movl $0x19, (%rbx)\n  movl $0, 0x10(%rbx)\n"    /* pin 4 -> APIC id 0 */
    "  movl $0x18, (%rbx)\n  movl $0x30, 0x10(%rbx)\n" /* fixed, edge, vector 0x30 */
    "  mov $0x3fc, %dx\n  mov $0x08, %al\n  out %al, %dx\n" /* MCR.OUT2 */
    "  mov $0x3f9, %dx\n  mov $0x01, %al\n  out %al, %dx\n" /* IER.RDI */
    "  movb $1, 0x5008\n"
    "  sti\n"
    "1: hlt\n  cmpb $'q', 0x5000\n  jne 1b\n"
    GUEST_POWEROFF
    "7: push %rax\n  push %rdx\n"
    "2: mov $0x3fd, %dx\n  in %dx, %al\n  test $1, %al\n  jz 3f\n"
    "  mov $0x3f8, %dx\n  in %dx, %al\n  mov %al, 0x5000\n  incl 0x5004\n  jmp 2b\n"
    "3: mov $0xfee000b0, %edx\n  movl $0, (%rdx)\n" /* EOI */
    "  pop %rdx\n  pop %rax\n  iretq\n"
    "8: .word 0xfff\n  .quad 0x6000\n"
    "prog_serial_irq_end:\n"
    /* The power button as an interrupt: IOAPIC pin 9 level-triggered ->
     * vector 0x31, PM1 PWRBTN_EN set; the handler clears PWRBTN_STS (which
     * drops the SCI) before its EOI, counts at 0x5004 and flags 0x5000. */
    "prog_sci:\n"
    "  mov $0xff, %al\n  out %al, $0x21\n  out %al, $0xa1\n"
    "  lea 7f(%rip), %rax\n  mov $0x6310, %rdi\n"
    "  mov %ax, (%rdi)\n  movw $0x10, 2(%rdi)\n  movw $0x8e00, 4(%rdi)\n"
    "  shr $16, %rax\n  mov %ax, 6(%rdi)\n  shr $16, %rax\n  mov %eax, 8(%rdi)\n  movl $0, 12(%rdi)\n"
    "  lidt 8f(%rip)\n"
    "  mov $0xfee00000, %ebx\n  movl $0x1ff, 0xf0(%rbx)\n"
    "  mov $0xfec00000, %ebx\n"
    "  movl $0x23, (%rbx)\n  movl $0, 0x10(%rbx)\n"
    "  movl $0x22, (%rbx)\n  movl $0x8031, 0x10(%rbx)\n" /* level, vector 0x31 */
    "  mov $0x602, %dx\n  mov $0x100, %ax\n  out %ax, %dx\n" /* PWRBTN_EN */
    "  movb $1, 0x5008\n"
    "  sti\n"
    "1: hlt\n  cmpb $1, 0x5000\n  jne 1b\n"
    GUEST_POWEROFF
    "7: push %rax\n  push %rdx\n"
    "  mov $0x600, %dx\n  in %dx, %ax\n  test $0x100, %ax\n  jz 3f\n"
    "  mov $0x100, %ax\n  out %ax, %dx\n  movb $1, 0x5000\n  incl 0x5004\n"
    "3: mov $0xfee000b0, %edx\n  movl $0, (%rdx)\n"
    "  pop %rdx\n  pop %rax\n  iretq\n"
    "8: .word 0xfff\n  .quad 0x6000\n"
    "prog_sci_end:\n"
    "prog_cpuid:\n"
    "  mov $0x40000000, %eax\n  cpuid\n"
    "  mov %ebx, 0x300000\n  mov %ecx, 0x300004\n  mov %edx, 0x300008\n  mov %eax, 0x30000c\n"
    "  mov $0x40000010, %eax\n  cpuid\n  mov %eax, 0x300010\n"
    "  mov $1, %eax\n  cpuid\n  mov %ebx, 0x300014\n  mov %ecx, 0x300018\n"
    GUEST_POWEROFF
    "prog_cpuid_end:\n"
    ".popsection\n");

struct stop_watch {
    GMutex lock;
    GCond cond;
    int count;
    enum vm_stop_reason reason;
    char *detail;
};

static void on_guest_stop(void *opaque, enum vm_stop_reason reason, const char *detail)
{
    struct stop_watch *w = opaque;
    g_mutex_lock(&w->lock);
    if (w->count++ == 0) {
        w->reason = reason;
        w->detail = g_strdup(detail);
    }
    g_cond_broadcast(&w->cond);
    g_mutex_unlock(&w->lock);
}

static bool wait_for_stop(struct stop_watch *w)
{
    gint64 deadline = g_get_monotonic_time() + STOP_TIMEOUT_US;
    g_mutex_lock(&w->lock);
    while (w->count == 0 && g_cond_wait_until(&w->cond, &w->lock, deadline)) {
    }
    bool stopped = w->count > 0;
    g_mutex_unlock(&w->lock);
    return stopped;
}

/* A minimal ET_EXEC x86-64 ELF: one PT_LOAD of code at GUEST_LOAD_ADDR. */
static char *write_guest_elf(const uint8_t *code, const uint8_t *code_end)
{
    size_t code_len = (size_t)(code_end - code);
    size_t offset = 0x1000, size = offset + code_len;
    g_autofree uint8_t *file = g_malloc0(size);
    Elf64_Ehdr *eh = (Elf64_Ehdr *)file;
    memcpy(eh->e_ident, ELFMAG, SELFMAG);
    eh->e_ident[EI_CLASS] = ELFCLASS64;
    eh->e_ident[EI_DATA] = ELFDATA2LSB;
    eh->e_ident[EI_VERSION] = EV_CURRENT;
    eh->e_type = ET_EXEC;
    eh->e_machine = EM_X86_64;
    eh->e_version = EV_CURRENT;
    eh->e_entry = GUEST_LOAD_ADDR;
    eh->e_phoff = sizeof(Elf64_Ehdr);
    eh->e_ehsize = sizeof(Elf64_Ehdr);
    eh->e_phentsize = sizeof(Elf64_Phdr);
    eh->e_phnum = 1;
    Elf64_Phdr *ph = (Elf64_Phdr *)(file + eh->e_phoff);
    ph->p_type = PT_LOAD;
    ph->p_flags = PF_R | PF_X;
    ph->p_offset = offset;
    ph->p_vaddr = ph->p_paddr = GUEST_LOAD_ADDR;
    ph->p_filesz = ph->p_memsz = code_len;
    ph->p_align = 0x1000;
    memcpy(file + offset, code, code_len);
    char *path = NULL;
    int fd = g_file_open_tmp("vsnap-test-guest-XXXXXX", &path, NULL);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(write(fd, file, size), ==, (ssize_t)size);
    close(fd);
    return path;
}

struct test_vm {
    struct vm_config *cfg;
    struct stop_watch watch;
    struct vm *vm;
    char *kernel;
};

static void test_vm_init(struct test_vm *t, const uint8_t *code, const uint8_t *code_end, unsigned vcpus,
                         uint64_t mem)
{
    memset(t, 0, sizeof(*t));
    g_mutex_init(&t->watch.lock);
    g_cond_init(&t->watch.cond);
    t->kernel = write_guest_elf(code, code_end);
    t->cfg = vm_config_new_default();
    t->cfg->payload.kernel = g_strdup(t->kernel);
    t->cfg->cpus.boot_vcpus = t->cfg->cpus.max_vcpus = vcpus;
    t->cfg->memory.size = mem;
}

static void test_vm_build(struct test_vm *t)
{
    struct vm_callbacks cb = { .on_guest_stop = on_guest_stop, .opaque = &t->watch };
    g_autoptr(GError) error = NULL;
    t->vm = vm_new(t->cfg, &cb, &error);
    g_assert_no_error(error);
    g_assert_nonnull(t->vm);
}

static void test_vm_start(struct test_vm *t)
{
    g_autoptr(GError) error = NULL;
    g_assert_true(vm_start(t->vm, &error));
    g_assert_no_error(error);
}

static void test_vm_clear(struct test_vm *t)
{
    vm_free(t->vm);
    g_unlink(t->kernel);
    g_free(t->kernel);
    vm_config_free(t->cfg);
    g_free(t->watch.detail);
    g_mutex_clear(&t->watch.lock);
    g_cond_clear(&t->watch.cond);
}

static void expect_stop(struct test_vm *t, enum vm_stop_reason reason)
{
    g_assert_true(wait_for_stop(&t->watch));
    g_test_message("stop: %s (%s)", vm_stop_reason_to_string(t->watch.reason), t->watch.detail);
    g_assert_cmpstr(vm_stop_reason_to_string(t->watch.reason), ==, vm_stop_reason_to_string(reason));
}

static void test_poweroff_and_serial(void)
{
    struct test_vm t;
    test_vm_init(&t, prog_hello_poweroff, prog_hello_poweroff_end, 1, 64ull << 20);
    g_autofree char *out = NULL;
    int fd = g_file_open_tmp("vsnap-test-serial-XXXXXX", &out, NULL);
    close(fd);
    t.cfg->serial.mode = CONSOLE_MODE_FILE;
    t.cfg->serial.file = g_strdup(out);
    test_vm_build(&t);
    test_vm_start(&t);
    expect_stop(&t, VM_STOP_POWEROFF);

    g_autoptr(JsonBuilder) b = json_builder_new();
    vjson_object_begin(b, NULL);
    vm_add_counters(t.vm, b);
    vjson_object_end(b);
    g_autoptr(JsonNode) root = json_builder_get_root(b);
    JsonObject *serial = json_object_get_object_member(json_node_get_object(root), "serial");
    g_assert_cmpint(json_object_get_int_member(serial, "tx_bytes"), ==, 2);
    JsonObject *vcpus = json_object_get_object_member(json_node_get_object(root), "vcpus");
    g_assert_cmpint(json_object_get_int_member(vcpus, "exits_io"), >=, 3);

    g_autoptr(GError) error = NULL;
    g_assert_false(vm_resume(t.vm, &error)); /* a stopped guest does not come back */
    g_assert_nonnull(error);
    test_vm_clear(&t);

    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents(out, &text, NULL, NULL));
    g_assert_cmpstr(text, ==, "OK");
    g_unlink(out);
}

static void run_to_stop(const uint8_t *code, const uint8_t *code_end, enum vm_stop_reason reason)
{
    struct test_vm t;
    test_vm_init(&t, code, code_end, 1, 32ull << 20);
    test_vm_build(&t);
    test_vm_start(&t);
    expect_stop(&t, reason);
    test_vm_clear(&t);
}

static void test_reset_i8042(void)
{
    run_to_stop(prog_i8042_reset, prog_i8042_reset_end, VM_STOP_RESET);
}

static void test_reset_acpi(void)
{
    run_to_stop(prog_acpi_reset, prog_acpi_reset_end, VM_STOP_RESET);
}

static void test_triple_fault(void)
{
    run_to_stop(prog_triple_fault, prog_triple_fault_end, VM_STOP_RESET);
}

static void test_power_button(void)
{
    struct test_vm t;
    test_vm_init(&t, prog_power_button, prog_power_button_end, 1, 32ull << 20);
    test_vm_build(&t);
    test_vm_start(&t);
    g_usleep(50 * 1000);
    g_assert_cmpint(t.watch.count, ==, 0); /* polling, not stopped */
    vm_power_button(t.vm);
    expect_stop(&t, VM_STOP_POWEROFF);
    test_vm_clear(&t);
}

/* vCPU 1 waits for SIPI and answers to APIC id 1. */
static void test_start_ap(void)
{
    struct test_vm t;
    test_vm_init(&t, prog_start_ap, prog_start_ap_end, 2, 32ull << 20);
    test_vm_build(&t);
    test_vm_start(&t);
    expect_stop(&t, VM_STOP_POWEROFF);
    g_assert_cmpuint(*(uint8_t *)guest_memory_ptr(vm_memory(t.vm), 0x5000, 1), ==, 1);
    test_vm_clear(&t);
}

static int connect_unix(const char *path)
{
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    g_strlcpy(addr.sun_path, path, sizeof(addr.sun_path));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), ==, 0);
    return fd;
}

static void wait_guest_byte(struct vm *vm, uint64_t gpa, uint8_t value)
{
    volatile uint8_t *p = guest_memory_ptr(vm_memory(vm), gpa, 1);
    gint64 deadline = g_get_monotonic_time() + STOP_TIMEOUT_US;
    while (*p != value && g_get_monotonic_time() < deadline)
        g_usleep(1000);
    g_assert_cmpuint(*p, ==, value);
}

/* Bytes from a Socket client reach the guest through IRQ 4 and the IOAPIC. */
static void test_serial_interrupt_input(void)
{
    struct test_vm t;
    test_vm_init(&t, prog_serial_irq, prog_serial_irq_end, 1, 32ull << 20);
    g_autofree char *dir = g_dir_make_tmp("vsnap-test-vm-XXXXXX", NULL);
    g_autofree char *sock = g_build_filename(dir, "serial.sock", NULL);
    t.cfg->serial.mode = CONSOLE_MODE_SOCKET;
    t.cfg->serial.socket = g_strdup(sock);
    test_vm_build(&t);
    test_vm_start(&t);
    wait_guest_byte(t.vm, 0x5008, 1);
    int client = connect_unix(sock);
    g_assert_cmpint(write(client, "ab", 2), ==, 2);
    g_usleep(20 * 1000);
    g_assert_cmpint(write(client, "q", 1), ==, 1);
    expect_stop(&t, VM_STOP_POWEROFF);
    const uint32_t *count = guest_memory_ptr(vm_memory(t.vm), 0x5004, 4);
    g_assert_cmpuint(*count, ==, 3);
    close(client);
    test_vm_clear(&t);
    g_rmdir(dir);
}

/* vm_power_button raises the level-triggered SCI; one interrupt, one press. */
static void test_power_button_sci(void)
{
    struct test_vm t;
    test_vm_init(&t, prog_sci, prog_sci_end, 1, 32ull << 20);
    test_vm_build(&t);
    test_vm_start(&t);
    wait_guest_byte(t.vm, 0x5008, 1);
    vm_power_button(t.vm);
    expect_stop(&t, VM_STOP_POWEROFF);
    const uint32_t *count = guest_memory_ptr(vm_memory(t.vm), 0x5004, 4);
    g_assert_cmpuint(*count, ==, 1);
    test_vm_clear(&t);
}

static uint64_t read_guest_u64(struct vm *vm, uint64_t gpa)
{
    volatile uint64_t *p = guest_memory_ptr(vm_memory(vm), gpa, 8);
    g_assert_nonnull((void *)p);
    return *p;
}

static uint64_t wait_counter_above(struct vm *vm, uint64_t value)
{
    gint64 deadline = g_get_monotonic_time() + STOP_TIMEOUT_US;
    uint64_t now;
    while ((now = read_guest_u64(vm, GUEST_DATA_ADDR)) <= value && g_get_monotonic_time() < deadline)
        g_usleep(1000);
    g_assert_cmpuint(now, >, value);
    return now;
}

/* vCPU 0 counts in guest RAM, vCPU 1 sits in wait-for-SIPI: pausing must stop
 * both, and the counter must not move while paused. */
static unsigned open_fds(void)
{
    g_autoptr(GDir) dir = g_dir_open("/proc/self/fd", 0, NULL);
    g_assert_nonnull(dir);
    unsigned n = 0;
    while (g_dir_read_name(dir))
        n++;
    return n;
}

static void test_pause_resume(void)
{
    unsigned fds_before = open_fds();
    struct test_vm t;
    test_vm_init(&t, prog_count, prog_count_end, 2, 64ull << 20);
    test_vm_build(&t);
    g_autoptr(GError) error = NULL;
    g_assert_false(vm_pause(t.vm, &error)); /* not started yet */
    g_clear_error(&error);
    test_vm_start(&t);
    uint64_t before = wait_counter_above(t.vm, 0);
    for (int round = 0; round < 3; round++) {
        gint64 t0 = g_get_monotonic_time();
        g_assert_true(vm_pause(t.vm, &error));
        g_assert_no_error(error);
        g_test_message("pause took %" G_GINT64_FORMAT " us", g_get_monotonic_time() - t0);
        uint64_t paused = read_guest_u64(t.vm, GUEST_DATA_ADDR);
        g_assert_cmpuint(paused, >=, before);
        g_usleep(50 * 1000);
        g_assert_cmpuint(read_guest_u64(t.vm, GUEST_DATA_ADDR), ==, paused);
        g_assert_true(vm_pause(t.vm, &error)); /* pausing a paused VM is fine */
    g_assert_false(vm_start(t.vm, &error));   /* starting twice is not */
    g_clear_error(&error);
        g_assert_true(vm_resume(t.vm, &error));
        g_assert_no_error(error);
        before = wait_counter_above(t.vm, paused);
    }
    g_assert_cmpuint(t.watch.count, ==, 0);
    test_vm_clear(&t); /* frees a running VM */
    g_assert_cmpuint(open_fds(), ==, fds_before);
}

/* A vCPU halted with interrupts off sleeps inside KVM: pause must still work. */
static void test_pause_halted(void)
{
    struct test_vm t;
    test_vm_init(&t, prog_cli_hlt, prog_cli_hlt_end, 1, 32ull << 20);
    test_vm_build(&t);
    test_vm_start(&t);
    g_usleep(20 * 1000);
    g_autoptr(GError) error = NULL;
    g_assert_true(vm_pause(t.vm, &error));
    g_assert_true(vm_resume(t.vm, &error));
    g_assert_true(vm_pause(t.vm, &error));
    g_assert_no_error(error);
    test_vm_clear(&t); /* frees a paused VM */
}

static void test_cpuid(void)
{
    struct test_vm t;
    test_vm_init(&t, prog_cpuid, prog_cpuid_end, 1, 32ull << 20);
    test_vm_build(&t);
    test_vm_start(&t);
    expect_stop(&t, VM_STOP_POWEROFF);
    const uint32_t *r = guest_memory_ptr(vm_memory(t.vm), GUEST_DATA_ADDR, 0x20);
    g_assert_cmpmem(r, 12, "vsnapvsnapvs", 12);
    g_assert_cmphex(r[3], >=, 0x40000010);
    g_test_message("TSC %u kHz", r[4]);
    g_assert_cmpuint(r[4], >, 100000); /* a TSC slower than 100 MHz is not believable */
    g_assert_cmphex(r[5] >> 24, ==, 0);    /* APIC id of vCPU 0 */
    g_assert_cmphex(r[6] & (1u << 31), !=, 0); /* hypervisor bit */
    test_vm_clear(&t);
}

static bool page_bit(const uint64_t *bitmap, uint64_t page)
{
    return (bitmap[page / 64] >> (page % 64)) & 1;
}

/* vm_mark_dirty records VMM writes by RAM page, above 4 GiB too; fetching
 * clears. No vCPU needs to run for this. */
static void test_vmm_dirty_bitmap(void)
{
    struct test_vm t;
    test_vm_init(&t, prog_cli_hlt, prog_cli_hlt_end, 1, 4ull << 30);
    test_vm_build(&t);
    size_t nwords = 0;
    g_free(vm_fetch_and_clear_vmm_dirty(t.vm, &nwords)); /* start from a clean slate */
    g_assert_cmpuint(nwords, ==, (4ull << 30) / GUEST_PAGE_SIZE / 64);
    vm_mark_dirty(t.vm, 0x1ff8, 16);                 /* straddles pages 1 and 2 */
    vm_mark_dirty(t.vm, MEM_32BIT_GAP_END + 0x10, 1); /* first page above the hole */
    vm_mark_dirty(t.vm, MEM_32BIT_GAP_START, 4096);  /* the hole: not RAM, ignored */
    vm_mark_dirty(t.vm, 0x5000, 0);                  /* nothing */
    g_autofree uint64_t *bits = vm_fetch_and_clear_vmm_dirty(t.vm, &nwords);
    uint64_t above = MEM_32BIT_GAP_START / GUEST_PAGE_SIZE; /* RAM offset 3 GiB */
    unsigned set = 0;
    for (size_t i = 0; i < nwords; i++)
        set += (unsigned)__builtin_popcountll(bits[i]);
    g_assert_cmpuint(set, ==, 3);
    g_assert_true(page_bit(bits, 1) && page_bit(bits, 2) && page_bit(bits, above));
    g_autofree uint64_t *again = vm_fetch_and_clear_vmm_dirty(t.vm, &nwords);
    for (size_t i = 0; i < nwords; i++)
        g_assert_cmphex(again[i], ==, 0);
    test_vm_clear(&t); /* never started */
}

static void test_serial_pty_path(void)
{
    struct test_vm t;
    test_vm_init(&t, prog_cli_hlt, prog_cli_hlt_end, 1, 32ull << 20);
    t.cfg->serial.mode = CONSOLE_MODE_PTY;
    test_vm_build(&t);
    const char *path = vm_serial_pty_path(t.vm);
    g_assert_nonnull(path);
    g_assert_true(g_str_has_prefix(path, "/dev/pts/"));
    test_vm_clear(&t);
    test_vm_init(&t, prog_cli_hlt, prog_cli_hlt_end, 1, 32ull << 20);
    t.cfg->serial.mode = CONSOLE_MODE_OFF;
    test_vm_build(&t);
    g_assert_null(vm_serial_pty_path(t.vm));
    test_vm_clear(&t);
}

static uint64_t rss_bytes(void)
{
    g_autofree char *statm = NULL;
    g_assert_true(g_file_get_contents("/proc/self/statm", &statm, NULL, NULL));
    unsigned long size = 0, resident = 0;
    g_assert_cmpint(sscanf(statm, "%lu %lu", &size, &resident), ==, 2);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* 8 GiB: built in well under a second, nothing touched, RAM above 4 GiB. */
static void test_big_vm(void)
{
    struct test_vm t;
    test_vm_init(&t, prog_hello_poweroff, prog_hello_poweroff_end, 2, 8ull << 30);
    uint64_t rss_before = rss_bytes();
    gint64 t0 = g_get_monotonic_time();
    test_vm_build(&t);
    gint64 elapsed = g_get_monotonic_time() - t0;
    uint64_t resident = vm_ram_resident_bytes(t.vm);
    g_test_message("8 GiB VM built in %" G_GINT64_FORMAT " us, %" G_GUINT64_FORMAT " bytes of RAM resident, "
                   "RSS grew by %" G_GINT64_FORMAT " bytes",
                   elapsed, resident, (gint64)(rss_bytes() - rss_before));
    g_assert_cmpint(elapsed, <, G_USEC_PER_SEC);
    g_assert_cmpuint(resident, <, 64ull << 20);
    g_assert_cmpint((gint64)(rss_bytes() - rss_before), <, 64ll << 20);
    g_assert_cmpuint(vm_ram_size(t.vm), ==, 8ull << 30);
    struct guest_memory *mem = vm_memory(t.vm);
    g_assert_cmpuint(mem->nregions, ==, 2);
    g_assert_cmpuint(guest_memory_end(mem), ==, MEM_32BIT_GAP_END + (8ull << 30) - MEM_32BIT_GAP_START);
    test_vm_start(&t);
    expect_stop(&t, VM_STOP_POWEROFF);
    test_vm_clear(&t);
}

/* ---- the real test guest (guest/testguest), when it was built ---- */

static const char *testguest_path(void)
{
    const char *path = g_getenv("VSNAP_TESTGUEST");
    return path && g_file_test(path, G_FILE_TEST_EXISTS) ? path : NULL;
}

static char *serial_to_temp_file(struct vm_config *cfg)
{
    char *path = NULL;
    int fd = g_file_open_tmp("vsnap-test-serial-XXXXXX", &path, NULL);
    g_assert_cmpint(fd, >=, 0);
    close(fd);
    cfg->serial.mode = CONSOLE_MODE_FILE;
    cfg->serial.file = g_strdup(path);
    return path;
}

static bool file_contains(const char *path, const char *needle)
{
    g_autofree char *text = NULL;
    return g_file_get_contents(path, &text, NULL, NULL) && strstr(text, needle);
}

static void init_testguest_vm(struct test_vm *t, const char *cmdline)
{
    memset(t, 0, sizeof(*t));
    g_mutex_init(&t->watch.lock);
    g_cond_init(&t->watch.cond);
    t->cfg = vm_config_new_default();
    t->cfg->payload.kernel = g_strdup(testguest_path());
    t->cfg->payload.cmdline = g_strdup(cmdline);
    t->cfg->cpus.boot_vcpus = t->cfg->cpus.max_vcpus = 2;
    t->cfg->memory.size = 256ull << 20;
}

static void clear_testguest_vm(struct test_vm *t, char *serial_path)
{
    g_autofree char *text = NULL;
    g_file_get_contents(serial_path, &text, NULL, NULL);
    g_test_message("guest serial output:\n%s", text ? text : "(none)");
    g_unlink(serial_path);
    g_free(serial_path);
    vm_free(t->vm);
    vm_config_free(t->cfg);
    g_free(t->watch.detail);
    g_mutex_clear(&t->watch.lock);
    g_cond_clear(&t->watch.cond);
}

/* The test guest boots, fills RAM at CPL3, reads the TSC frequency from
 * CPUID 0x40000010 and powers off through ACPI S5. */
static void test_testguest_halt(void)
{
    if (!testguest_path()) {
        g_test_skip("VSNAP_TESTGUEST not set or not built");
        return;
    }
    struct test_vm t;
    init_testguest_vm(&t, "console=ttyS0 vsnap.fill_mib=8 vsnap.halt_after_ready=1");
    char *serial = serial_to_temp_file(t.cfg);
    test_vm_build(&t);
    test_vm_start(&t);
    expect_stop(&t, VM_STOP_POWEROFF);
    g_assert_true(file_contains(serial, "vsnap-testguest: booted"));
    g_assert_true(file_contains(serial, "vsnap-testguest: ready sum="));
    g_assert_false(file_contains(serial, "no TSC frequency"));
    g_assert_cmpuint(vm_ram_resident_bytes(t.vm), >=, 8ull << 20);
    clear_testguest_vm(&t, serial);
}

static void test_prefault(void)
{
    struct test_vm t;
    test_vm_init(&t, prog_cli_hlt, prog_cli_hlt_end, 1, 64ull << 20);
    t.cfg->memory.prefault = true;
    test_vm_build(&t);
    g_assert_cmpuint(vm_ram_resident_bytes(t.vm), ==, 64ull << 20);
    test_vm_clear(&t);
}

static void expect_refused(void (*tweak)(struct vm_config *), const char *words)
{
    struct test_vm t;
    test_vm_init(&t, prog_hello_poweroff, prog_hello_poweroff_end, 1, 32ull << 20);
    tweak(t.cfg);
    g_autoptr(GError) error = NULL;
    g_assert_null(vm_new(t.cfg, NULL, &error));
    g_assert_nonnull(error);
    g_test_message("refused: %s", error->message);
    g_assert_nonnull(strstr(error->message, words));
    test_vm_clear(&t);
}

static void want_firmware(struct vm_config *cfg)
{
    cfg->payload.firmware = g_strdup("/usr/share/ovmf/OVMF.fd");
}

static void want_missing_kernel(struct vm_config *cfg)
{
    g_free(cfg->payload.kernel);
    cfg->payload.kernel = g_strdup("/nonexistent/vmlinux");
}

static void want_bad_serial_file(struct vm_config *cfg)
{
    cfg->serial.mode = CONSOLE_MODE_FILE;
    cfg->serial.file = g_strdup("/nonexistent-dir/serial.log");
}

/* More 2 MiB huge pages than the host has free: refused at build time with
 * the numbers, not a SIGBUS at the guest's first touch. */
static void want_more_hugepages_than_free(struct vm_config *cfg)
{
    g_autofree char *text = NULL;
    g_assert_true(g_file_get_contents("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", &text, NULL,
                                      NULL));
    cfg->memory.hugepages = true;
    cfg->memory.size = (g_ascii_strtoull(text, NULL, 10) + 8) * (2ull << 20);
}

static void want_too_many_vcpus(struct vm_config *cfg)
{
    cfg->cpus.boot_vcpus = cfg->cpus.max_vcpus = VSNAP_MAX_VCPUS + 1;
}

static void test_refusals(void)
{
    unsigned fds_before = open_fds();
    expect_refused(want_more_hugepages_than_free, "huge pages of 2 MiB");
    expect_refused(want_too_many_vcpus, "boot_vcpus");
    expect_refused(want_firmware, "firmware");
    expect_refused(want_missing_kernel, "/nonexistent/vmlinux");
    expect_refused(want_bad_serial_file, "/nonexistent-dir/serial.log");
    g_assert_cmpuint(open_fds(), ==, fds_before); /* half-built VMs leave nothing open */
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    if (access("/dev/kvm", R_OK | W_OK) != 0) {
        g_printerr("/dev/kvm is not usable: this test needs KVM\n");
        return 1;
    }
    g_test_add_func("/vm/poweroff-and-serial", test_poweroff_and_serial);
    g_test_add_func("/vm/reset-i8042", test_reset_i8042);
    g_test_add_func("/vm/reset-acpi", test_reset_acpi);
    g_test_add_func("/vm/triple-fault", test_triple_fault);
    g_test_add_func("/vm/power-button", test_power_button);
    g_test_add_func("/vm/start-ap", test_start_ap);
    g_test_add_func("/vm/serial-interrupt-input", test_serial_interrupt_input);
    g_test_add_func("/vm/power-button-sci", test_power_button_sci);
    g_test_add_func("/vm/pause-resume-2-vcpus", test_pause_resume);
    g_test_add_func("/vm/pause-halted", test_pause_halted);
    g_test_add_func("/vm/cpuid", test_cpuid);
    g_test_add_func("/vm/big-vm", test_big_vm);
    g_test_add_func("/vm/vmm-dirty-bitmap", test_vmm_dirty_bitmap);
    g_test_add_func("/vm/serial-pty-path", test_serial_pty_path);
    g_test_add_func("/vm/prefault", test_prefault);
    g_test_add_func("/vm/refusals", test_refusals);
    g_test_add_func("/vm/testguest-halt", test_testguest_halt);
    return g_test_run();
}
