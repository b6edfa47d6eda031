/* A function whose CFI is only in .debug_frame (as gcc emits it with
 * -fno-asynchronous-unwind-tables -g): no .eh_frame FDE covers it. */
  .cfi_sections .debug_frame
  .text
  .globl fx_cfi_debug_frame_only
  .type fx_cfi_debug_frame_only, @function
  .p2align 4
fx_cfi_debug_frame_only:
  .cfi_startproc
  push %rbp               /* +0  55 */
  .cfi_def_cfa_offset 16
  .cfi_offset %rbp, -16
  pop %rbp                /* +1  5d */
  .cfi_def_cfa_offset 8
  ret                     /* +2  c3 */
  .cfi_endproc
  .size fx_cfi_debug_frame_only, . - fx_cfi_debug_frame_only

  .section .note.GNU-stack, "", @progbits
