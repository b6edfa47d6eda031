/* Functions with hand-written CFI for cfi_rules_test.cpp, which asserts the
 * rule at chosen instruction offsets. Each offset is noted with the bytes
 * the assembler emits there; the test checks those bytes first, so a
 * different encoding fails loudly instead of testing the wrong instruction.
 * The functions are valid code but the tests only read them. */

.macro FUNC name
  .globl \name
  .type \name, @function
  .p2align 4
\name:
.endm

.macro END name
  .size \name, . - \name
.endm

  .text

/* Called through this library's PLT (it is a preemptible global symbol). */
FUNC fx_cfi_leaf
  .cfi_startproc
  ret
  .cfi_endproc
END fx_cfi_leaf

/* A frame-pointer frame, as gcc -fno-omit-frame-pointer builds it. */
FUNC fx_cfi_frame
  .cfi_startproc
  push %rbp               /* +0  55 */
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  mov %rsp, %rbp          /* +1  48 89 e5 */
  .cfi_def_cfa_register %rbp
  sub $32, %rsp           /* +4  48 83 ec 20 */
  call fx_cfi_leaf@PLT    /* +8  e8 rel32, returns to +13 */
  leave                   /* +13 c9 */
  .cfi_def_cfa %rsp, 8
  .cfi_restore %rbp
  ret                     /* +14 c3 */
  .cfi_endproc
END fx_cfi_frame

/* No frame pointer: rbp is an ordinary callee-saved register. */
FUNC fx_cfi_pushes
  .cfi_startproc
  push %rbp               /* +0  55 */
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  push %rbx               /* +1  53 */
  .cfi_def_cfa_offset 24
  .cfi_offset %rbx, -24
  sub $40, %rsp           /* +2  48 83 ec 28 */
  .cfi_def_cfa_offset 64
  call fx_cfi_leaf@PLT    /* +6  e8 rel32, returns to +11 */
  add $40, %rsp           /* +11 48 83 c4 28 */
  .cfi_def_cfa_offset 24
  pop %rbx                /* +15 5b */
  .cfi_def_cfa_offset 16
  pop %rbp                /* +16 5d */
  .cfi_def_cfa_offset 8
  ret                     /* +17 c3 */
  .cfi_endproc
END fx_cfi_pushes

/* A noreturn call ends the function: its return address is the first byte
 * of the next function, fx_cfi_after_noreturn (no padding in between). */
FUNC fx_cfi_noreturn
  .cfi_startproc
  sub $24, %rsp           /* +0  48 83 ec 18 */
  .cfi_def_cfa_offset 32
  call fx_cfi_leaf@PLT    /* +4  e8 rel32, returns to +9 */
  .cfi_endproc
END fx_cfi_noreturn
  .globl fx_cfi_after_noreturn
  .type fx_cfi_after_noreturn, @function
fx_cfi_after_noreturn:
  .cfi_startproc
  ret                     /* +0  c3 */
  .cfi_endproc
END fx_cfi_after_noreturn

/* The thread entry convention (_start, clone): the return address is
 * undefined, there is no caller. */
FUNC fx_cfi_outermost
  .cfi_startproc
  .cfi_undefined %rip
  xor %ebp, %ebp          /* +0  31 ed */
  call fx_cfi_leaf@PLT    /* +2  e8 rel32, returns to +7 */
  hlt                     /* +7  f4 */
  .cfi_endproc
END fx_cfi_outermost

/* DW_CFA_def_cfa_expression { DW_OP_breg7 16 }: an expression, but only
 * rsp + 16. */
FUNC fx_cfi_breg_expression
  .cfi_startproc
  .cfi_escape 0x0f, 0x02, 0x77, 0x10
  ret
  .cfi_endproc
END fx_cfi_breg_expression

/* The CFA expression binutils gives .plt entries:
 * rsp + 8 + ((rip & 15) >= 11 ? 8 : 0). */
FUNC fx_cfi_plt_expression
  .cfi_startproc
  .cfi_escape 0x0f, 0x0b, 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3b, 0x2a, 0x33, 0x24, 0x22
  ret
  .cfi_endproc
END fx_cfi_plt_expression

/* CFA on r10, as gcc sets it up to realign the stack of main. */
FUNC fx_cfi_r10_cfa
  .cfi_startproc
  .cfi_def_cfa %r10, 0
  ret
  .cfi_endproc
END fx_cfi_r10_cfa

/* rbp undefined: a callee-saved register, so unchanged by the ABI. */
FUNC fx_cfi_rbp_undefined
  .cfi_startproc
  .cfi_undefined %rbp
  ret
  .cfi_endproc
END fx_cfi_rbp_undefined

/* The caller's rbp lives in rbx. */
FUNC fx_cfi_rbp_in_register
  .cfi_startproc
  .cfi_register %rbp, %rbx
  ret
  .cfi_endproc
END fx_cfi_rbp_in_register

/* DW_CFA_expression rbp { DW_OP_breg6 0 }, also from stack realignment. */
FUNC fx_cfi_rbp_expression
  .cfi_startproc
  .cfi_escape 0x10, 0x06, 0x02, 0x76, 0x00
  ret
  .cfi_endproc
END fx_cfi_rbp_expression

/* The return address is not at CFA - 8. */
FUNC fx_cfi_ra_elsewhere
  .cfi_startproc
  .cfi_def_cfa_offset 16
  .cfi_offset %rip, -16
  ret
  .cfi_endproc
END fx_cfi_ra_elsewhere

/* The caller's rsp is read from memory rather than being the CFA. */
FUNC fx_cfi_rsp_saved
  .cfi_startproc
  .cfi_def_cfa_offset 16
  .cfi_offset %rsp, -16
  ret
  .cfi_endproc
END fx_cfi_rsp_saved

/* An ordinary frame flagged as a signal frame ('S' augmentation). */
FUNC fx_cfi_signal_frame
  .cfi_startproc
  .cfi_signal_frame
  ret
  .cfi_endproc
END fx_cfi_signal_frame

/* A CFA offset the 32-bit rule field cannot hold. */
FUNC fx_cfi_huge_offset
  .cfi_startproc
  .cfi_def_cfa_offset 0x100000008
  ret
  .cfi_endproc
END fx_cfi_huge_offset

/* No CFI at all. */
FUNC fx_cfi_none
  ret
END fx_cfi_none

  .section .note.GNU-stack, "", @progbits
