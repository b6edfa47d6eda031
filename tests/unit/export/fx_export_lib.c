/* The library the export-modules tests export (libfx_export_lib.so).
 *
 * Function symbols of known layout, in assembly so the compiler cannot move
 * or resize them: from fx_export_first (64-byte aligned), consecutively,
 *   +0x00 fx_export_first    global, size 0x20
 *   +0x20 fx_export_unsized  global, no .size: symbols.map extends it to
 *                            the next symbol, 0x10
 *   +0x30 fx_export_local    local (.symtab only), size 8
 *   +0x38 $x                 a function named like an ARM mapping symbol:
 *                            symbols.map drops it
 * The bytes are int3: never called. Besides: an IFUNC (kept), a data object
 * (not a function: dropped), and fx_export_alloc, which allocates for
 * fx_export_dlopen (the end-to-end test's fixture). */
#include <stdlib.h>

__asm__(
    ".text\n"
    ".p2align 6\n"
    ".globl fx_export_first\n"
    ".type fx_export_first, @function\n"
    "fx_export_first:\n"
    "  .fill 0x20, 1, 0xcc\n"
    ".size fx_export_first, 0x20\n"
    ".globl fx_export_unsized\n"
    ".type fx_export_unsized, @function\n"
    "fx_export_unsized:\n"
    "  .fill 0x10, 1, 0xcc\n"
    ".type fx_export_local, @function\n"
    "fx_export_local:\n"
    "  .fill 8, 1, 0xcc\n"
    ".size fx_export_local, 8\n"
    ".type \"$x\", @function\n"
    "\"$x\":\n"
    "  .fill 8, 1, 0xcc\n"
    ".size \"$x\", 8\n");

int fx_export_data = 7;

/* Returns malloc's block; the barrier keeps malloc from being a tail call,
 * so a stack captured in malloc has its return address in this function. */
__attribute__((noinline)) void* fx_export_alloc(size_t size) {
  void* block = malloc(size);
  __asm__ volatile("" : "+r"(block) : : "memory");
  return block;
}

static int fx_export_ifunc_impl(void) { return 42; }
static int (*fx_export_ifunc_resolver(void))(void) { return fx_export_ifunc_impl; }
int fx_export_ifunc(void) __attribute__((ifunc("fx_export_ifunc_resolver")));
