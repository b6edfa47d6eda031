/* fx_export_dlopen LIB: the end-to-end export-modules test's fixture.
 * Dlopens LIB (libfx_export_lib.so) and allocates through its
 * fx_export_alloc; dlcloses it, reserves the range its code occupied and
 * dlopens it again, so that it is placed elsewhere, and allocates through
 * it again. Prints "placed <code start hex>" for each placement. Exits 3
 * (reason on stderr) when a step does not behave as described. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

enum { kRounds = 50 };

static void fail(const char* what) {
  fprintf(stderr, "fixture error: %s\n", what);
  exit(3);
}

/* The executable mapping of `path` in /proc/self/maps; 0 when there is none. */
static uint64_t code_range(const char* path, uint64_t* end) {
  FILE* maps = fopen("/proc/self/maps", "r");
  if (!maps) fail("cannot open /proc/self/maps");
  char line[PATH_MAX + 128];
  uint64_t start = 0;
  while (fgets(line, sizeof(line), maps)) {
    unsigned long from = 0, to = 0;
    char perms[5];
    int path_at = 0;
    if (sscanf(line, "%lx-%lx %4s %*x %*x:%*x %*u %n", &from, &to, perms, &path_at) < 3 || path_at == 0) continue;
    line[strcspn(line, "\n")] = '\0';
    if (perms[2] == 'x' && strcmp(line + path_at, path) == 0) {
      start = from;
      *end = to;
      break;
    }
  }
  fclose(maps);
  return start;
}

/* Returns the start of the library's code, its end in *end. */
static uint64_t load_and_allocate(const char* path, void** handle, uint64_t* end) {
  *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!*handle) fail(dlerror());
  void* (*alloc)(size_t) = (void* (*)(size_t))dlsym(*handle, "fx_export_alloc");
  if (!alloc) fail("no fx_export_alloc");
  for (int i = 0; i < kRounds; ++i) free(alloc(100 + (size_t)i));
  uint64_t start = code_range(path, end);
  if (start == 0) fail("the library's code is not mapped");
  printf("placed %lx\n", (unsigned long)start);
  return start;
}

int main(int argc, char** argv) {
  static char path[PATH_MAX];
  if (argc != 2 || !realpath(argv[1], path)) fail("usage: fx_export_dlopen LIB");
  void* handle;
  uint64_t first_end = 0, second_end = 0;
  uint64_t first = load_and_allocate(path, &handle, &first_end);
  if (dlclose(handle) != 0) fail(dlerror());
  uint64_t ignored;
  if (code_range(path, &ignored) != 0) fail("dlclose left the library mapped");
  /* Taken, so the library cannot come back to the same place. */
  if (mmap((void*)first, first_end - first, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) !=
      (void*)first)
    fail("cannot reserve the first placement's range");
  uint64_t second = load_and_allocate(path, &handle, &second_end);
  if (second == first) fail("the library came back to the same address");
  return 0;
}
