/* The only code of libfx_unwind_nocfi.so: a file without any CFI. */
  .text
  .globl fx_nocfi_function
  .type fx_nocfi_function, @function
fx_nocfi_function:
  ret
  .size fx_nocfi_function, . - fx_nocfi_function

  .section .note.GNU-stack, "", @progbits
