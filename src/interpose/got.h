/* The interposer loaded into a running process (`memtrack record --pid`):
 * symbol interposition no longer applies, so each loaded module's GOT
 * entries of the allocator names are pointed at the wrappers, and back. */
#ifndef MEMTRACK_GOT_H
#define MEMTRACK_GOT_H

#include <stddef.h>

struct mt_got_name {
  const char* name;
  void* wrapper;
  void* real; /* what the entries hold, resolved (the global definition) */
};

/* Points every entry of `names` (jump slots and GLOB_DAT entries) that holds
 * the real function, or, bound lazily, still its PLT stub, at the wrapper,
 * in every loaded module but the loader, the vDSO and the one at `own`.
 * Returns the entries changed; `*unrelocated` is set when a module's entries
 * are not relocated yet (loaded by another thread right now): look again. */
size_t mt_got_redirect(const struct mt_got_name* names, size_t count, const void* own, int* unrelocated);

/* Points every entry holding a wrapper back at the real function (a lazily
 * bound one then holds what binding it would have written). Returns the
 * entries changed. */
size_t mt_got_restore(const struct mt_got_name* names, size_t count, const void* own);

#endif
