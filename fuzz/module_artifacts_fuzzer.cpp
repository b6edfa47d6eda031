// What `report --modules DIR` reads: memtrack.metadata, the section and
// symbols files it names, and the unwind tables built from them.
#include <fuzzer/FuzzedDataProvider.h>
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "module/module_artifacts.h"
#include "unwind/stack_unwinder.h"

namespace {

// A directory of this process, removed at exit.
struct Directory {
  std::string path;
  Directory() {
    char pattern[] = "/tmp/memtrack-fuzz-modules-XXXXXX";
    if (!mkdtemp(pattern)) std::abort();
    path = pattern;
  }
  ~Directory() { std::filesystem::remove_all(path); }
  void put(const std::string& name, const std::string& bytes) const {
    std::ofstream(path + "/" + name, std::ios::binary | std::ios::trunc) << bytes;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Directory dir;
  FuzzedDataProvider input(data, size);
  // The files the seed metadata names, then the metadata itself.
  dir.put("m.symbols.map", input.ConsumeRandomLengthString(4096));
  dir.put("m.eh_frame", input.ConsumeRandomLengthString(4096));
  dir.put("m.eh_frame_hdr", input.ConsumeRandomLengthString(1024));
  dir.put("memtrack.metadata", input.ConsumeRemainingBytesAsString());
  try {
    memtrack::ModuleArtifacts artifacts = memtrack::read_module_artifacts(dir.path);
    for (const memtrack::ModuleInfo& module : artifacts.modules) {
      try {
        memtrack::UnwindModule::from_module_info(module);
      } catch (const std::runtime_error&) {
        // Sections that make no usable ELF image: refused with a message.
      }
    }
  } catch (const std::runtime_error&) {
    // Metadata that is not JSON of version 1: refused with a message.
  }
  return 0;
}
