/* One stub per interrupt vector, ISR_STUB_SIZE (16) bytes apart so cpl0.c can
 * compute each address. Each pushes an error code (0 where the CPU pushes none)
 * and the vector number, then calls cpl0_exception with a struct trap_frame.
 * Interrupts are only enabled inside cpl0_halt, and the vectors expected there
 * (LAPIC timer, spurious), the NMI and #UD have their own handlers below; anything else
 * that arrives is a fault.
 */
#include "layout.h"

    .text
    .code64
    .balign 16
    .globl isr_stubs
isr_stubs:
    vector = 0
    .rept 256
    .balign 16
    /* vectors where the CPU pushes an error code: #DF #TS #NP #SS #GP #PF #AC #CP #VC #SX */
    .if vector == 8 || (vector >= 10 && vector <= 14) || vector == 17 || vector == 21 || vector == 29 || vector == 30
    .else
    pushq $0
    .endif
    pushq $vector
    jmp isr_common
    vector = vector + 1
    .endr

/* LAPIC timer: it only ends a cpl0_halt, so acknowledge and return. */
    .globl lapic_timer_isr
lapic_timer_isr:
    pushq %rax
    movabsq $0xfee000b0, %rax       /* LAPIC EOI */
    movl $0, (%rax)
    popq %rax
    iretq

/* NMI (virsh inject-nmi): counted for the command port's NMI, then back to
 * whatever ran, a cpl0_halt's hlt included. On its own stack (IST 1). */
    .globl nmi_isr
nmi_isr:
    incq cpl0_nmi_count(%rip)
    iretq

/* The LAPIC's spurious vector needs no EOI. */
    .globl spurious_isr
spurious_isr:
    iretq

/* cpl0_halt(lapic_count), called at CPL3 (see cpl0.h). */
    .globl cpl0_halt
cpl0_halt:
halt_ud2:
    ud2
    ret

/* #UD: at halt_ud2 it is cpl0_halt's request, %edi = LAPIC timer count. A
 * timer that fires before the hlt stays pending (IF=0) and is taken right after
 * the sti shadow, so the hlt cannot miss its wake-up. Any other #UD is a fault,
 * reported by the vector's usual stub. */
    .globl invalid_opcode_isr
invalid_opcode_isr:
    pushq %rax
    leaq halt_ud2(%rip), %rax
    cmpq %rax, 8(%rsp)              /* the frame's RIP */
    jne 1f
    movabsq $0xfee00380, %rax       /* LAPIC timer initial count: starts it */
    movl %edi, (%rax)
    sti
    hlt
    cli
    popq %rax
    addq $2, (%rsp)                 /* return past the ud2 */
    iretq
1:  popq %rax
    jmp isr_stubs + 6 * 16

isr_common:
    movq %rsp, %rdi                 /* struct trap_frame */
    andq $-16, %rsp
    call cpl0_exception
1:  cli
    hlt
    jmp 1b
