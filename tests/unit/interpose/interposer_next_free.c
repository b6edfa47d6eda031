/* A `free` between the interposer's and glibc's (interposer_test.cpp): the
 * interposer's next definition of free, which lets the program act once the
 * block is back in glibc's hands and before the interposer's wrapper has
 * returned. Defines no malloc, so glibc's comes next and the interposer
 * records. */
#define _GNU_SOURCE
#include "interposer_next_free.h"

#include <dlfcn.h>
#include <stdlib.h>

void (*volatile next_free_then)(void* block);

void free(void* block) {
  static void (*libc_free)(void*);
  if (!libc_free) {
    libc_free = (void (*)(void*))dlsym(RTLD_NEXT, "free");
    if (!libc_free) abort();
  }
  libc_free(block);
  if (next_free_then && block) next_free_then(block);
}
