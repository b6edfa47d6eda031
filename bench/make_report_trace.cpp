// Writes an artifact for measuring `memtrack report` (bench/report.sh): the
// realistic allocation mix of realistic_trace.h with call paths. Stack
// records (complete chains of 8-40 return addresses) point into the real
// libc text segment of this process, placed by a Mapping record, so the
// report resolves and symbolizes real code. Like a real program's, the
// paths share their return addresses: they are drawn from ADDRESSES
// distinct call sites.
// With a fifth argument `raw`, every allocation instead gets a Stack record
// of its own holding a raw copy (1 KiB of stack bytes, registers with the pc
// in libc), as `record --stack-mode raw` writes: the worst case for the
// report's memory, which must follow distinct call paths, not definitions.
// The artifact is in the compact layout, as `record` writes; with the
// environment variable LAYOUT=records, in the records layout.
//   make_report_trace OUT EVENTS STACKS ADDRESSES [raw]
#include <sys/sysmacros.h>

#include <cinttypes>
#include <cmath>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>

#include "format/artifact.h"
#include "realistic_trace.h"
#include "util/proc_maps.h"

namespace {

// libc's executable mapping, as /proc/self/maps shows it.
memtrack::MappingInfo libc_text(uint64_t* start) {
  for (const memtrack::MapEntry& e : memtrack::read_maps_file("/proc/self/maps")) {
    if (e.path.find("libc.so.6") == std::string::npos || e.perms != "r-xp") continue;
    memtrack::MappingInfo info;
    info.len = e.end - e.start;
    info.file_offset = e.offset;
    info.dev = e.kernel_dev();
    info.ino = e.ino;
    info.prot = 5;
    info.path = e.path;
    *start = e.start;
    return info;
  }
  throw std::runtime_error("no libc.so.6 r-xp mapping in /proc/self/maps");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 && !(argc == 6 && std::string(argv[5]) == "raw")) {
    std::cerr << "usage: make_report_trace OUT EVENTS STACKS ADDRESSES [raw]\n";
    return 2;
  }
  const std::string out = argv[1];
  const size_t events = std::stoull(argv[2]);
  const size_t stacks = std::stoull(argv[3]);
  const size_t addresses = std::max<size_t>(1, std::stoull(argv[4]));
  std::vector<memtrack::Event> trace = memtrack::bench::realistic_trace(events, 42);
  const int32_t pid = trace.empty() ? 1 : trace.front().pid;

  memtrack::ArtifactHeader header;
  header.command = {"make_report_trace"};
  header.start_monotonic_ns = trace.empty() ? 0 : trace.front().timestamp - 1000;
  memtrack::WriterOptions options;
  const char* layout = std::getenv("LAYOUT");
  options.layout = layout && std::string(layout) == "records" ? memtrack::ArtifactLayout::Records
                                                               : memtrack::ArtifactLayout::Compact;
  memtrack::ArtifactWriter writer(out, header, options);

  uint64_t start = 0;
  memtrack::Event mapping;
  mapping.type = memtrack::EventType::Mapping;
  mapping.pid = mapping.tid = pid;
  mapping.timestamp = header.start_monotonic_ns;
  mapping.mapping = std::make_shared<const memtrack::MappingInfo>(libc_text(&start));
  mapping.addr = start;
  writer.append(mapping);

  std::mt19937_64 random(7);
  const uint64_t text_len = mapping.mapping->len;
  std::vector<uint64_t> call_sites(addresses);
  for (uint64_t& site : call_sites) site = start + 1 + random() % (text_len - 1);
  for (size_t i = 0; i < stacks; ++i) {
    auto definition = std::make_shared<memtrack::StackDefinition>();
    definition->hash = i + 1;
    size_t depth = 8 + random() % 33;
    for (size_t f = 0; f < depth; ++f) definition->chain.push_back(call_sites[random() % addresses]);
    memtrack::Event stack;
    stack.type = memtrack::EventType::Stack;
    stack.pid = stack.tid = pid;
    stack.timestamp = header.start_monotonic_ns;
    stack.stack = definition;
    writer.append(stack);
  }
  // Zipf-like reuse: a few call paths make most allocations, as in real programs.
  std::uniform_real_distribution<double> unit(0, 1);
  for (memtrack::Event& event : trace) {
    if (!memtrack::is_allocation(event.type) || stacks == 0) continue;
    double u = unit(random);
    event.stack_hash = 1 + static_cast<uint64_t>(std::pow(u, 3) * static_cast<double>(stacks)) % stacks;
  }
  if (argc == 6) {
    // One raw definition before each allocation, replacing the hashes above.
    std::vector<memtrack::Event> with_stacks;
    uint64_t next_hash = stacks + 1;
    for (memtrack::Event& event : trace) {
      if (memtrack::is_allocation(event.type)) {
        auto definition = std::make_shared<memtrack::StackDefinition>();
        definition->hash = next_hash++;
        definition->end = memtrack::StackEnd::NotWalked;
        definition->sp = 0x7ffd00000000 + (random() % 4096) * 16;
        definition->regs.assign(17, 0);
        definition->regs[7] = definition->sp;
        definition->regs[16] = call_sites[random() % addresses];
        definition->bytes.resize(1024);
        for (size_t i = 0; i + 8 <= definition->bytes.size(); i += 8) {
          uint64_t word = random() % 2 ? call_sites[random() % addresses] : random();
          std::memcpy(definition->bytes.data() + i, &word, 8);
        }
        memtrack::Event stack;
        stack.type = memtrack::EventType::Stack;
        stack.pid = stack.tid = event.pid;
        stack.timestamp = event.timestamp;
        stack.stack = definition;
        with_stacks.push_back(stack);
        event.stack_hash = definition->hash;
      }
      with_stacks.push_back(event);
    }
    trace = std::move(with_stacks);
  }
  writer.append(trace);
  writer.finish(memtrack::ArtifactTrailer{});
  std::cerr << "wrote " << out << ": " << trace.size() << " events, " << stacks << " stacks over " << addresses << " call sites\n";
  return 0;
}
