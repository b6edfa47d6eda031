// ELF and DWARF files as a report and export-modules find them on disk
// (recorded paths, --sysroot, debug files): the symbolizer (libelf, libdw,
// the demangler) and export-modules' ELF reader on arbitrary files.
#include <cstddef>
#include <cstdint>
#include <exception>

#include "memory_file.h"
#include "module/module_elf.h"
#include "symbolize/symbolizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static memtrack::fuzz::MemoryFile file;
  const std::string& path = file.hold(data, size);
  {
    memtrack::Symbolizer symbolizer;
    const auto id = symbolizer.add_module({path, {}, 0, 0, nullptr});
    // Code of small files lies in the first pages.
    for (uint64_t offset = 0; offset < 0x3000; offset += 0x18) symbolizer.symbolize(id, offset);
    symbolizer.warnings();
  }
  try {
    memtrack::read_elf_module(path);
  } catch (const std::exception&) {
    // Not an ELF file it can read: refused with a message.
  }
  return 0;
}
