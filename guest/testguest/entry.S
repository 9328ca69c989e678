/* Entry from the shim (Linux 64-bit boot protocol): long mode, CS=0x10,
 * interrupts off, RSI = boot_params. Sets up the CPL0 structures, then drops to
 * CPL3 with IOPL=3 and runs testguest_main(boot_params, cpl0_info) there, natively.
 */
#include "layout.h"

    .section .text.entry, "ax"
    .code64
    .globl _start
_start:
    cli
    cld
    movq %rsi, %rbx                 /* boot_params, callee-saved across the call */
    leaq kernel_stack_top(%rip), %rsp
    movq %rbx, %rdi
    call cpl0_setup
    movq %rax, %r12                 /* struct cpl0_info *, callee-saved; second argument at CPL3 */

    /* iretq frame: SS, RSP, RFLAGS, CS, RIP */
    pushq $SEL_USER_DATA
    leaq user_stack_top(%rip), %rax
    pushq %rax
    pushq $USER_RFLAGS
    pushq $SEL_USER_CODE
    leaq user_entry(%rip), %rax
    pushq %rax
    movq %rbx, %rdi
    movq %r12, %rsi
    iretq

    .text
/* CPL3 from here. Clear .bss at native speed (the RAM may not be fresh, after a
 * reset), then run the guest. */
user_entry:
    movq %rdi, %rbx
    movq %rsi, %r12
    leaq __bss_start(%rip), %rdi
    leaq __bss_end(%rip), %rcx
    subq %rdi, %rcx
    shrq $3, %rcx
    xorl %eax, %eax
    rep stosq
    movq %rbx, %rdi
    movq %r12, %rsi
    call testguest_main
1:  pause
    jmp 1b

/* Stacks, outside .bss so clearing it cannot pull them away from under us. */
    .section .bss.stacks, "aw", @nobits
    .balign 16
    .skip 16384
    .globl kernel_stack_top
kernel_stack_top:
    .skip 65536
    .globl user_stack_top
user_stack_top:
