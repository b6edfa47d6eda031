// Fixture of the symbolizer tests (libfx_symbolize.so, -O2 -g): each
// function records, through fx_capture, the return address of a call made on
// a line marked `@line:<name>` in its source; the test symbolizes those
// addresses and compares with the marked lines.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

enum {
  FX_SLOT_INLINE,          // inside inline_inner, inlined into inline_middle, into fx_inline_outer
  FX_SLOT_SCALE_INT,       // fx::scale<int>
  FX_SLOT_SCALE_DOUBLE,    // fx::scale<double>
  FX_SLOT_OVERLOAD_INT,    // fx::overload(int)
  FX_SLOT_OVERLOAD_DOUBLE, // fx::overload(double, const char*)
  FX_SLOT_C_ENTRY,         // fx_c_entry, extern "C" in C++
  FX_SLOT_INLINE_TEMPLATE, // fx::call_with<lambda>, a function template inlined into fx_inline_template_entry
  FX_SLOT_ASM_LABEL,       // a function named by an asm label that needs quotes in assembly
  FX_SLOT_EXE,             // a function of the test executable
  FX_SLOTS
};

// Return addresses recorded by fx_capture, by slot.
extern void* volatile fx_return_addresses[FX_SLOTS];
void fx_capture(int slot);

int fx_inline_outer(int x);
int fx_c_entry(int x);
int fx_inline_template_entry(int x);
// Calls the function named `fx label <"quoted">` (gas cannot call a quoted
// name directly).
int fx_asm_label_entry(int x);
// Calls every function above once (fills every slot but FX_SLOT_EXE).
int fx_run_all(void);

#ifdef __cplusplus
}
#endif
