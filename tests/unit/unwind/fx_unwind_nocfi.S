/* The only code of libfx_unwind_nocfi.so: a file without any CFI. */
  .text
  .globl fx_nocfi_function
  .type fx_nocfi_function, @function
fx_nocfi_function:
  ret
  .size fx_nocfi_function, . - fx_nocfi_function

/* int fx_nocfi_call(fn, out, stack_end): fn(out, stack_end) from a
 * frame-pointer frame, so only the rbp chain leads past it. */
  .globl fx_nocfi_call
  .type fx_nocfi_call, @function
fx_nocfi_call:
  push %rbp
  mov %rsp, %rbp
  mov %rdi, %rax
  mov %rsi, %rdi
  mov %rdx, %rsi
  call *%rax
  pop %rbp
  ret
  .size fx_nocfi_call, . - fx_nocfi_call

  .section .note.GNU-stack, "", @progbits
