/* One stub per interrupt vector, ISR_STUB_SIZE (16) bytes apart so cpl0.c can
 * compute each address. Each pushes an error code (0 where the CPU pushes none)
 * and the vector number, then calls cpl0_exception with a struct trap_frame.
 * The guest runs with interrupts off, so any vector that arrives is a fault.
 */
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

isr_common:
    movq %rsp, %rdi                 /* struct trap_frame */
    andq $-16, %rsp
    call cpl0_exception
1:  cli
    hlt
    jmp 1b
