#include "output/pprof_output.h"

#include "output/output.h"

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "analyze/call_tree.h"
#include "output/profile.pb.h"
#include "output/utf8.h"

namespace memtrack {
namespace {

namespace pb = perftools::profiles;

class StringTable {
 public:
  explicit StringTable(pb::Profile* profile) : profile_(profile) {
    index("");  // pprof requires string 0 to be ""
  }
  // proto3 strings must be UTF-8: readers refuse the whole profile otherwise.
  int64_t index(const std::string& raw) {
    std::string s = valid_utf8(raw);
    auto [it, added] = indexes_.try_emplace(s, static_cast<int64_t>(indexes_.size()));
    if (added) profile_->add_string_table(s);
    return it->second;
  }

 private:
  pb::Profile* profile_;
  std::unordered_map<std::string, int64_t> indexes_;
};

// pprof values are signed; no real total comes near 2^63, but never wrap.
int64_t to_value(uint64_t v) {
  return static_cast<int64_t>(std::min<uint64_t>(v, std::numeric_limits<int64_t>::max()));
}

void gzip_to(const std::string& data, std::ostream& out) {
  z_stream z{};
  // 16 + MAX_WBITS: a gzip wrapper, which pprof expects on disk.
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("pprof output: deflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  if (data.size() != z.avail_in) {
    deflateEnd(&z);
    throw std::runtime_error("pprof output: profile too large to compress (" + std::to_string(data.size()) +
                             " bytes)");
  }
  char buffer[65536];
  int rc;
  do {
    z.next_out = reinterpret_cast<Bytef*>(buffer);
    z.avail_out = sizeof(buffer);
    rc = deflate(&z, Z_FINISH);
    if (rc == Z_STREAM_ERROR) {
      deflateEnd(&z);
      throw std::runtime_error("pprof output: deflate failed");
    }
    out.write(buffer, static_cast<std::streamsize>(sizeof(buffer) - z.avail_out));
  } while (rc != Z_STREAM_END);
  deflateEnd(&z);
  out.flush();
  if (!out) throw std::runtime_error("pprof output: writing the profile failed");
}

}  // namespace

extern const OutputFormat kPprofOutput{
    .name = "pprof",
    .summary = "a gzipped profile.proto, for go tool pprof, Pyroscope, Parca",
    .noun = "pprof profile",
    .binary = true,
    .carries_notes = false,
    .sites_by_thread = true,  // samples labelled pid, thread and command
    .write = [](const ReportModel& model, const OutputOptions&, std::ostream& sink) {
      write_pprof(model.profile, sink, commands_by_pid(model.report));
    }};

void write_pprof(const Profile& profile, std::ostream& out, const std::map<int32_t, std::string>& commands) {
  pb::Profile p;
  StringTable strings(&p);

  for (auto [type, unit] : {std::pair{"alloc_objects", "count"}, {"alloc_space", "bytes"},
                            {"inuse_objects", "count"}, {"inuse_space", "bytes"},
                            {"peak_objects", "count"}, {"peak_space", "bytes"}}) {
    pb::ValueType* vt = p.add_sample_type();
    vt->set_type(strings.index(type));
    vt->set_unit(strings.index(unit));
  }
  // With --at the question is what was live then (a snapshot's): shown first.
  p.set_default_sample_type(strings.index(profile.live_at_ns ? "peak_space" : "inuse_space"));
  // Not sampled: every allocation is recorded, so the period is 1 byte.
  p.mutable_period_type()->set_type(strings.index("space"));
  p.mutable_period_type()->set_unit(strings.index("bytes"));
  p.set_period(1);
  p.set_time_nanos(static_cast<int64_t>(profile.start_realtime_ns));
  p.set_duration_nanos(static_cast<int64_t>(profile.duration_ns));
  if (!profile.command.empty())
    p.add_comment(strings.index((profile.attached ? "memtrack record " : "memtrack record -- ") + profile.command));
  // In use at the end: leaked where the address space ended, live at end where the recording ended first.
  if (profile.totals.live_at_end_allocations > 0)
    p.add_comment(strings.index(
        fmt::format("inuse_objects and inuse_space: {} bytes in {} blocks live at the end of the recording in processes "
                    "still running (not leaks), {} bytes in {} blocks leaked (live at exit or exec)",
                    profile.totals.live_at_end_bytes, profile.totals.live_at_end_allocations,
                    profile.totals.leaked_bytes, profile.totals.leaked_allocations)));
  if (profile.live_at_ns)
    p.add_comment(strings.index(fmt::format("peak_objects and peak_space: live at {:.9g} s (memtrack report --at)",
                                            static_cast<double>(*profile.live_at_ns) / 1e9)));

  // Locations are shared by every process mapping the file, wherever it was
  // placed: each mapping covers its file from offset 0 (in the first
  // placement seen) and each address is given in that placement, so that
  // address - memory_start + file_offset is the location's file offset, the
  // rule by which pprof, Pyroscope and Parca symbolize.
  std::vector<uint64_t> base(profile.modules.size()), limit(profile.modules.size());
  for (size_t i = 0; i < profile.modules.size(); ++i) {
    const ProfileModule& module = profile.modules[i];
    base[i] = module.start >= module.file_offset ? module.start - module.file_offset : 0;
    limit[i] = std::max(module.limit, base[i] + 1);
  }
  for (const ProfileLocation& location : profile.locations)
    if (location.module >= 0 && static_cast<size_t>(location.module) < profile.modules.size())
      limit[location.module] = std::max(limit[location.module], base[location.module] + location.file_offset + 1);

  // Ids are indexes + 1 (pprof ids must be nonzero).
  for (size_t i = 0; i < profile.modules.size(); ++i) {
    const ProfileModule& module = profile.modules[i];
    pb::Mapping* m = p.add_mapping();
    m->set_id(i + 1);
    m->set_memory_start(base[i]);
    m->set_memory_limit(limit[i]);
    m->set_file_offset(0);
    m->set_filename(strings.index(module.path));
    m->set_build_id(strings.index(module.build_id));
    // Symbolized locations carry their names, files, lines and inline levels:
    // pprof then does not try to symbolize them again.
    m->set_has_functions(module.symbolized);
    m->set_has_filenames(module.symbolized);
    m->set_has_line_numbers(module.symbolized);
    m->set_has_inline_frames(module.symbolized);
  }

  std::map<std::pair<std::string, std::string>, uint64_t> function_ids;  // (name, file) -> id
  auto function_id = [&](const std::string& name, const std::string& file) {
    auto [it, added] = function_ids.try_emplace({name, file}, function_ids.size() + 1);
    if (added) {
      pb::Function* f = p.add_function();
      f->set_id(it->second);
      f->set_name(strings.index(name));
      f->set_system_name(f->name());
      f->set_filename(strings.index(file));
    }
    return it->second;
  };

  for (size_t i = 0; i < profile.locations.size(); ++i) {
    const ProfileLocation& location = profile.locations[i];
    pb::Location* l = p.add_location();
    l->set_id(i + 1);
    if (location.module >= static_cast<int64_t>(profile.modules.size()))
      throw std::runtime_error("pprof output: a location refers to module " + std::to_string(location.module) +
                               " of " + std::to_string(profile.modules.size()));
    if (location.module >= 0) {
      l->set_mapping_id(static_cast<uint64_t>(location.module) + 1);
      // A return address is given inside its call instruction (the spec
      // allows it), so consumers that symbolize by address name the call.
      uint64_t in_call = location.exact || location.file_offset == 0 ? 0 : 1;
      l->set_address(base[location.module] + location.file_offset - in_call);
    } else {
      l->set_address(location.address);
    }
    // Same order as ours: innermost inline level first, the containing
    // function last. A frame without a function name is named by its
    // address ("[libfoo.so+0x1234]"): pprof would otherwise fold every such
    // location of a file into one node named after the file.
    std::vector<std::string> names = frame_labels(profile, location, FrameNaming::Function);
    for (size_t f = 0; f < names.size(); ++f) {
      const SourceFrame* frame = f < location.frames.size() ? &location.frames[f] : nullptr;
      pb::Line* line = l->add_line();
      line->set_function_id(function_id(names[f], frame ? frame->file : ""));
      line->set_line(frame ? frame->line : 0);
      line->set_column(frame ? frame->column : 0);
    }
  }

  // A frame of our own (no address, no mapping): go tool pprof leaves a
  // sample without locations out of -raw, -traces and every node, and a
  // path cut short must not be a root of its own.
  std::map<std::string, uint64_t> synthetic_locations;
  auto synthetic_location = [&](const std::string& name) {
    auto [it, added] = synthetic_locations.try_emplace(name, 0);
    if (added) {
      pb::Location* l = p.add_location();
      it->second = static_cast<uint64_t>(p.location_size());
      l->set_id(it->second);
      l->add_line()->set_function_id(function_id(name, ""));
    }
    return it->second;
  };
  for (const ProfileSite& site : profile.sites) {
    pb::Sample* s = p.add_sample();
    if (site.locations.empty()) s->add_location_id(synthetic_location(std::string(stackless_label(site))));
    for (uint32_t index : site.locations) {
      if (index >= profile.locations.size())
        throw std::runtime_error("pprof output: a site refers to location " + std::to_string(index) + " of " +
                                 std::to_string(profile.locations.size()));
      s->add_location_id(index + 1ull);  // both leaf first
    }
    if (site_is_truncated(site)) s->add_location_id(synthetic_location(kTruncatedLabel));
    s->add_value(to_value(site.costs.allocations));
    s->add_value(to_value(site.costs.allocated_bytes));
    s->add_value(to_value(site.costs.leaked_allocations + site.costs.live_at_end_allocations));
    s->add_value(to_value(site.costs.leaked_bytes + site.costs.live_at_end_bytes));
    s->add_value(to_value(site.costs.peak_allocations));
    s->add_value(to_value(site.costs.peak_bytes));
    // String labels: Pyroscope and Parca keep those (numeric ones they drop),
    // and -tagfocus matches them by regular expression.
    auto label = [&](const char* key, const std::string& value) {
      pb::Label* l = s->add_label();
      l->set_key(strings.index(key));
      l->set_str(strings.index(value));
    };
    if (site.pid != 0) {
      label("pid", std::to_string(site.pid));
      if (auto command = commands.find(site.pid); command != commands.end() && !command->second.empty())
        label("command", command->second);
    }
    if (site.tid != 0) label("thread", std::to_string(site.tid));
  }

  std::string serialized;
  if (!p.SerializeToString(&serialized)) throw std::runtime_error("pprof output: serializing the profile failed");
  gzip_to(serialized, out);
}

}  // namespace memtrack
