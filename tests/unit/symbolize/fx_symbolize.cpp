// C++ names: a template instantiated twice, overloads in a namespace, an
// extern "C" function. Code after each capture keeps the call from becoming
// a tail jump (its return address must be in the function).
#include "fx_symbolize.h"

void* volatile fx_return_addresses[FX_SLOTS];

extern "C" __attribute__((noinline, noipa)) void fx_capture(int slot) {
  fx_return_addresses[slot] = __builtin_return_address(0);
}

namespace fx {

template <typename T>
__attribute__((noinline)) T scale(T value, int slot) {
  fx_capture(slot); /* @line:scale */
  return value * 2;
}

__attribute__((noinline)) int overload(int value) {
  fx_capture(FX_SLOT_OVERLOAD_INT); /* @line:overload_int */
  return value + 1;
}

__attribute__((noinline)) double overload(double value, const char* tag) {
  fx_capture(FX_SLOT_OVERLOAD_DOUBLE); /* @line:overload_double */
  return value + tag[0];
}

// A function template instantiated with a lambda gets no DW_AT_linkage_name
// from GCC: only its enclosing scopes tell its qualified name.
template <typename F>
__attribute__((always_inline)) inline int call_with(F f) {
  fx_capture(FX_SLOT_INLINE_TEMPLATE); /* @line:call_with */
  return f() * 2;
}

}  // namespace fx

extern "C" __attribute__((noinline)) int fx_inline_template_entry(int x) {
  int y = fx::call_with([x] { return x + 1; }); /* @line:call_with_entry */
  return y + 1;
}

extern "C" __attribute__((noinline)) int fx_c_entry(int x) {
  fx_capture(FX_SLOT_C_ENTRY); /* @line:c_entry */
  return x - 1;
}

// GCC writes this label's assembly text, quotes and escapes included, as the
// DWARF linkage name; the symbol is `fx label <"quoted">`.
extern "C" __attribute__((noinline)) int fx_asm_labelled(int x) __asm__("\"fx label <\\\"quoted\\\">\"");
extern "C" __attribute__((noinline)) int fx_asm_labelled(int x) {
  fx_capture(FX_SLOT_ASM_LABEL); /* @line:asm_label */
  return x + 3;
}
int (*volatile fx_asm_labelled_pointer)(int) = fx_asm_labelled;

extern "C" int fx_asm_label_entry(int x) { return fx_asm_labelled_pointer(x); }

extern "C" int fx_run_all(void) {
  int sum = fx_inline_outer(1);
  sum += fx::scale<int>(2, FX_SLOT_SCALE_INT);
  sum += static_cast<int>(fx::scale<double>(3.0, FX_SLOT_SCALE_DOUBLE));
  sum += fx::overload(4);
  sum += static_cast<int>(fx::overload(5.0, "x"));
  sum += fx_c_entry(6);
  sum += fx_inline_template_entry(7);
  sum += fx_asm_label_entry(8);
  return sum;
}
