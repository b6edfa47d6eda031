// Fixture for probe_sites_test: links libjemalloc.a, so malloc, mallocx,
// operator new... are defined in this executable.
#include <cstdio>
#include <cstdlib>

int main() {
  void* block = std::malloc(64);
  int* object = new int(42);
  // Printing the addresses keeps the compiler from eliding the new/delete
  // pair, so the linker pulls jemalloc's operators in.
  std::printf("%p %p\n", block, static_cast<void*>(object));
  delete object;
  std::free(block);
  return 0;
}
