// heaptrack's data file: the text format heaptrack_interpret writes and
// heaptrack_print and heaptrack_gui read (heaptrack 1.4, file format 3),
// gzipped. Learned from heaptrack's writer and reader and checked with
// Debian's heaptrack_print (tests/integration/exports_test.cpp):
//
//   v 10400 3            heaptrack version (hex), file format version
//   X CMDLINE            the debuggee: one per file, so one process per file
//   I PAGESIZE PAGES     system information (hex)
//   s LEN STRING         a string (1-based index, hex length)
//   i IP MODULE [FUNCTION FILE LINE]...  a code address: its module string
//                        and one frame per inline level, innermost first
//   t IP PARENT          a trace node (1-based; parent 0 is the root)
//   a SIZE TRACE         an allocation info (0-based): a size at a trace
//   + INFO / - INFO      an allocation / a deallocation of an info
//   c MS                 time stamp (ms, hex);  R PAGES  RSS (hex)
//   # ...                a comment
//
// heaptrack computes its figures from the + and - lines: calls (+ lines),
// the peak of the running sum of sizes (each trace's share taken when it is
// first reached), leaks (the sum at the end) and temporary allocations (a -
// directly after a + of the same info). memtrack's own rules differ (its
// temporaries are per thread and per block, docs/REPORT.md), so the file does
// not replay the events: it writes, per site, a sequence that makes heaptrack
// compute exactly memtrack's per-site figures (docs/REPORT.md, "heaptrack").
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "analyze/call_tree.h"
#include "output/output.h"

namespace memtrack {
namespace {

// Lines compressed as they are written: a file has a line per allocation.
class GzipWriter {
 public:
  explicit GzipWriter(std::ostream& sink) : sink_(sink) {
    // 16 + MAX_WBITS: a gzip wrapper (heaptrack picks the decompressor by the ".gz" name).
    if (deflateInit2(&z_, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
      throw std::runtime_error("heaptrack output: deflateInit2 failed");
  }
  ~GzipWriter() { deflateEnd(&z_); }
  GzipWriter(const GzipWriter&) = delete;
  GzipWriter& operator=(const GzipWriter&) = delete;

  void line(std::string_view text) {
    pending_.append(text);
    pending_.push_back('\n');
    if (pending_.size() >= kChunk) deflate_pending(Z_NO_FLUSH);
  }
  void finish() {
    deflate_pending(Z_FINISH);
    sink_.flush();
    if (!sink_) throw std::runtime_error("heaptrack output: writing the file failed");
  }

 private:
  static constexpr size_t kChunk = 1 << 20;

  void deflate_pending(int flush) {
    z_.next_in = reinterpret_cast<Bytef*>(pending_.data());
    z_.avail_in = static_cast<uInt>(pending_.size());
    char buffer[65536];
    int rc;
    do {
      z_.next_out = reinterpret_cast<Bytef*>(buffer);
      z_.avail_out = sizeof(buffer);
      rc = deflate(&z_, flush);
      if (rc == Z_STREAM_ERROR) throw std::runtime_error("heaptrack output: deflate failed");
      sink_.write(buffer, static_cast<std::streamsize>(sizeof(buffer) - z_.avail_out));
    } while (z_.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
    pending_.clear();
  }

  std::ostream& sink_;
  z_stream z_{};
  std::string pending_;
};

// A string on one line of the file (heaptrack's records end at a newline).
std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

// The strings, code addresses and trace nodes of the file, each written once
// before its first use.
class Dictionary {
 public:
  Dictionary(const Profile& profile, GzipWriter& out)
      : profile_(profile), out_(out), ip_of_location_(profile.locations.size()) {}

  // The trace of a site: its frames from the outermost (the root's child)
  // to the allocator's caller, named as every output names them.
  uint64_t trace_of(const ProfileSite& site) {
    std::vector<uint64_t> ips;  // outermost first
    if (site_is_truncated(site)) ips.push_back(label_ip(kTruncatedLabel));
    if (site.locations.empty()) ips.push_back(label_ip(std::string(stackless_label(site))));
    for (auto it = site.locations.rbegin(); it != site.locations.rend(); ++it) ips.push_back(location_ip(*it));
    uint64_t parent = 0;
    for (uint64_t ip : ips) {
      auto [node, added] = traces_.try_emplace({ip, parent}, traces_.size() + 1);
      if (added) out_.line(fmt::format("t {:x} {:x}", ip, parent));
      parent = node->second;
    }
    return parent;
  }

 private:
  uint64_t string_index(const std::string& raw) {
    if (raw.empty()) return 0;
    std::string text = one_line(raw);
    auto [it, added] = strings_.try_emplace(text, strings_.size() + 1);
    if (added) out_.line(fmt::format("s {:x} {}", text.size(), text));
    return it->second;
  }

  uint64_t location_ip(uint32_t index) {
    if (index >= profile_.locations.size())
      throw std::runtime_error(fmt::format("heaptrack output: a site refers to location {} of {}", index,
                                           profile_.locations.size()));
    uint64_t& ip = ip_of_location_[index];
    if (ip != 0) return ip;
    const ProfileLocation& location = profile_.locations[index];
    std::vector<std::string> names = frame_labels(profile_, location, FrameNaming::Function);
    uint64_t module = 0;
    if (location.module >= 0 && static_cast<size_t>(location.module) < profile_.modules.size())
      module = string_index(profile_.modules[location.module].path);
    std::string line = fmt::format("i {:x} {:x}", location.address, module);
    for (size_t f = 0; f < names.size(); ++f) {
      const SourceFrame* frame = f < location.frames.size() ? &location.frames[f] : nullptr;
      line += fmt::format(" {:x} {:x} {:x}", string_index(names[f]), frame ? string_index(frame->file) : 0,
                          frame ? frame->line : 0);
    }
    out_.line(line);
    return ip = ++ips_;
  }

  // A frame of our own ([truncated], [no stack]): no address, no module.
  uint64_t label_ip(const std::string& label) {
    auto [it, added] = label_ips_.try_emplace(label, 0);
    if (added) {
      out_.line(fmt::format("i 0 0 {:x} 0 0", string_index(label)));
      it->second = ++ips_;
    }
    return it->second;
  }

  const Profile& profile_;
  GzipWriter& out_;
  std::map<std::string, uint64_t> strings_;
  std::vector<uint64_t> ip_of_location_;  // 0: not written yet
  std::map<std::string, uint64_t> label_ips_;
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> traces_;  // (ip, parent) -> node
  uint64_t ips_ = 0;
};

// An allocation info: a size at a trace. Its "a" line is written just
// before its first "+": heaptrack_gui counts infos in the order they are
// first allocated, and crashes on an info allocated before a lower one.
struct Info {
  uint64_t size = 0;
  uint64_t trace = 0;
  std::optional<uint64_t> index{};
};

class Lines {
 public:
  explicit Lines(GzipWriter& out) : out_(out) {}
  void allocate(Info& info) {
    if (!info.index) {
      out_.line(fmt::format("a {:x} {:x}", info.size, info.trace));
      info.index = infos_++;
    }
    out_.line(fmt::format("+ {:x}", *info.index));
    last_allocated_ = info.index;
  }
  // A "-" right after a "+" of the same info is heaptrack's temporary. A free
  // that is not one is preceded there by a free of the separator (info 0, a
  // block of size 0 allocated first), which resets heaptrack's rule; the
  // separator's own free never directly follows its "+" or another "-".
  void free(const Info& info, bool temporary) {
    if (!temporary && last_allocated_ == info.index) {
      if (!separator_)
        throw std::runtime_error("heaptrack output: a free needs the separator, which was not allocated");
      out_.line("- 0");
    }
    out_.line(fmt::format("- {:x}", *info.index));
    last_allocated_.reset();
  }
  void allocate_separator(uint64_t trace) {
    Info separator{0, trace};
    allocate(separator);
    separator_ = true;
  }

 private:
  GzipWriter& out_;
  uint64_t infos_ = 0;
  std::optional<uint64_t> last_allocated_;
  bool separator_ = false;
};

// What the file says of one site: heaptrack's four figures made from lines.
//   phase 1 (start): `temporaries` pairs "+t -t"; `fillers` allocations freed
//     in pairs "+f +g -f -g" (a run of three: "+f +g +f -g -f -f"), never a
//     "-" right after its own "+".
//   phase 2 (the peak): "+extra" (the peak's part freed in phase 3), then
//     "+keep" (live to the end, min(peak, unfreed)).
//   phase 3 (the end): "-extra", then "+leak_extra" (unfreed minus keep).
// Unfreed: leaked, or live at the end of a recording that ended before the
// process; heaptrack has one word for both ("leaked": not freed at the end).
// Every running sum before the last peak line stays below the peak, so
// heaptrack takes each site's share at the same moment memtrack did.
struct SitePlan {
  uint64_t temporaries = 0;
  uint64_t fillers = 0;
  bool extra_is_temporary = false;  // "+extra -extra" ends the peak phase
  Info temporary, filler[2], keep, extra, leak_extra;
};

void write_heaptrack(const ReportModel& model, std::ostream& sink) {
  const Profile& profile = model.profile;
  std::vector<const ProfileSite*> sites;
  std::set<int32_t> pids;
  for (const ProfileSite& site : profile.sites)
    if (site.costs.allocations > 0) {
      sites.push_back(&site);
      pids.insert(site.pid);
    }
  std::map<int32_t, std::string> commands = commands_by_pid(model.report);
  if (pids.size() > 1) {
    std::string listed;
    for (int32_t pid : pids) listed += fmt::format("{}{} ({})", listed.empty() ? "" : ", ", pid, commands[pid]);
    throw std::runtime_error(
        "a heaptrack file holds one process and this selection has allocations of " + std::to_string(pids.size()) +
        ": pids " + listed + "; choose one with --pid");
  }
  int32_t pid = pids.empty() ? 0 : *pids.begin();

  GzipWriter out(sink);
  out.line("v 10400 3");
  out.line("# memtrack: the per-site figures of one process, not its events (docs/REPORT.md, \"heaptrack\")");
  std::string command = pid != 0 && !commands[pid].empty() ? commands[pid] : profile.command;
  out.line("X " + one_line(command.empty() ? "memtrack" : command));
  uint64_t page_size = model.report.header.page_size ? model.report.header.page_size : 4096;
  out.line(fmt::format("I {:x} 0", page_size));

  Dictionary dictionary(profile, out);
  std::vector<SitePlan> plans(sites.size());
  std::vector<uint64_t> traces(sites.size());
  auto unfreed_of = [](const SiteCosts& c) { return c.leaked_bytes + c.live_at_end_bytes; };
  uint64_t peak = 0, unfreed = 0, live_at_end = 0;
  for (size_t i = 0; i < sites.size(); ++i) {
    traces[i] = dictionary.trace_of(*sites[i]);
    peak += sites[i]->costs.peak_bytes;
    unfreed += unfreed_of(sites[i]->costs);
    live_at_end += sites[i]->costs.live_at_end_bytes;
  }

  // Sizes of phase 1 stay below the peak: it is first reached in phase 2.
  const uint64_t below_peak = peak > 0 ? peak - 1 : 0;
  uint64_t dropped_temporaries = 0, added_calls = 0;
  bool peak_temporary_used = false;
  for (size_t i = 0; i < sites.size(); ++i) {
    const SiteCosts& c = sites[i]->costs;
    SitePlan& plan = plans[i];
    uint64_t keep = std::min(c.peak_bytes, unfreed_of(c));
    plan.keep = {keep, traces[i]};
    plan.extra = {c.peak_bytes - keep, traces[i]};
    plan.leak_extra = {unfreed_of(c) - keep, traces[i]};
    plan.temporaries = c.temporary_allocations;
    uint64_t needed = plan.temporaries + (plan.keep.size > 0) + (plan.extra.size > 0) + (plan.leak_extra.size > 0);
    // A temporary block live at the peak: one site can end the peak phase
    // with it; for others a temporary is dropped (a call added if need be).
    if (needed > c.allocations && plan.extra.size > 0 && plan.temporaries > 0 && !peak_temporary_used) {
      plan.extra_is_temporary = peak_temporary_used = true;
      --plan.temporaries;
      --needed;
    }
    while (needed > c.allocations && plan.temporaries > 0) {
      --plan.temporaries;
      --needed;
      ++dropped_temporaries;
    }
    if (needed > c.allocations) added_calls += needed - c.allocations;
    plan.fillers = c.allocations > needed ? c.allocations - needed : 0;
    uint64_t temporary_size = c.temporary_allocations ? c.temporary_bytes / c.temporary_allocations : 0;
    plan.temporary = {std::min(temporary_size, below_peak), traces[i]};
    // Three fillers may be live at once.
    uint64_t filler_size = std::min(c.allocated_bytes / c.allocations, below_peak / 3);
    plan.filler[0] = plan.filler[1] = {filler_size, traces[i]};
  }
  // The separator is needed by a lone filler, by a lone extra freed right
  // after its "+" (phase 2 ends with it when no site keeps a block), and
  // whenever info 0 would be freed after a "-": heaptrack's rule then takes
  // it for a temporary (its "last allocation" is 0 after every "-"). With
  // a filler anywhere it is always allocated (info 0, at no cost); without
  // one, info 0 is a temporary (freed right after its "+"), a kept block, or
  // an extra freed after a "-" only when the peak phase ends with a
  // temporary.
  size_t extras = 0;
  bool keeps = false, fillers = false, early_temporaries = false;
  for (const SitePlan& plan : plans) {
    extras += plan.extra.size > 0 && !plan.extra_is_temporary;
    keeps |= plan.keep.size > 0;
    fillers |= plan.fillers > 0;
    early_temporaries |= plan.temporaries > 0;
  }
  bool lone_extra = extras == 1 && !keeps && !peak_temporary_used;
  bool extra_after_free = !fillers && !early_temporaries && peak_temporary_used && extras > 0;
  auto lone_filler = std::find_if(plans.begin(), plans.end(), [](const SitePlan& p) { return p.fillers == 1; });
  Lines lines(out);
  if (fillers || lone_extra || extra_after_free) {
    // One allocation of a site becomes the separator: a lone filler's, else
    // any filler's; else it is one call more.
    auto donor = lone_filler != plans.end()
                     ? lone_filler
                     : std::find_if(plans.begin(), plans.end(), [](const SitePlan& p) { return p.fillers > 0; });
    if (donor != plans.end()) {
      --donor->fillers;
      lines.allocate_separator(traces[donor - plans.begin()]);
    } else {
      ++added_calls;
      lines.allocate_separator(traces[0]);
    }
  }
  if (dropped_temporaries)
    out.line(fmt::format("# {} temporary allocations live at the peak are written as ordinary ones", dropped_temporaries));
  if (added_calls) out.line(fmt::format("# {} allocation calls added to carry the peak and leaks", added_calls));
  if (unfreed > peak)
    out.line(fmt::format("# the leaks ({} B, at exec and exit) exceed the peak ({} B): heaptrack's peak is the leaks",
                         unfreed, peak));
  if (live_at_end > 0)
    out.line(fmt::format("# {} B of what heaptrack counts as leaked were live at the end of the recording, the "
                         "process still running: not leaks",
                         live_at_end));

  // Phase 1: temporaries and the other allocations, at the start.
  for (SitePlan& plan : plans) {
    for (uint64_t t = 0; t < plan.temporaries; ++t) {
      lines.allocate(plan.temporary);
      lines.free(plan.temporary, true);
    }
    Info& f = plan.filler[0];
    Info& g = plan.filler[1];
    uint64_t left = plan.fillers;
    if (left == 1) {
      lines.allocate(f);
      lines.free(f, false);  // after the separator
      left = 0;
    } else if (left % 2 == 1) {
      lines.allocate(f);
      lines.allocate(g);
      lines.allocate(f);
      lines.free(g, false);
      lines.free(f, false);
      lines.free(f, false);
      left -= 3;
    }
    for (; left > 0; left -= 2) {
      lines.allocate(f);
      lines.allocate(g);
      lines.free(f, false);
      lines.free(g, false);
    }
  }
  // Phase 2: the peak, at its time; the blocks kept to the end come last.
  auto stamp = [&](uint64_t ns) { out.line(fmt::format("c {:x}", ns / 1'000'000)); };
  stamp(profile.peak_time_ns);
  SitePlan* peak_temporary = nullptr;
  for (SitePlan& plan : plans) {
    if (plan.extra.size && !plan.extra_is_temporary) lines.allocate(plan.extra);
    if (plan.extra_is_temporary) peak_temporary = &plan;
  }
  for (SitePlan& plan : plans)
    if (plan.keep.size) lines.allocate(plan.keep);
  if (peak_temporary) {
    lines.allocate(peak_temporary->extra);
    lines.free(peak_temporary->extra, true);
  }
  // Phase 3: what was live at the peak and not leaked is freed; the leaks.
  stamp(std::max(profile.peak_time_ns, profile.duration_ns));
  for (const SitePlan& plan : plans)
    if (plan.extra.size && !plan.extra_is_temporary) lines.free(plan.extra, false);
  for (SitePlan& plan : plans)
    if (plan.leak_extra.size) lines.allocate(plan.leak_extra);
  uint64_t rss = 0;
  if (model.timeline)
    for (const ProcessTimeline& timeline : model.timeline->processes)
      if (timeline.pid == pid && timeline.has_rss)
        rss = std::max(rss, timeline.peaks[static_cast<int>(Series::Rss)].bytes);
  if (rss) out.line(fmt::format("R {:x}", rss / page_size));
  out.finish();
}

}  // namespace

extern const OutputFormat kHeaptrackOutput{
    .name = "heaptrack",
    .summary = "a heaptrack data file (gzipped; name it .gz) of one process, for heaptrack_gui and heaptrack_print",
    .noun = "heaptrack file",
    .binary = true,
    .carries_notes = false,
    .sites_by_thread = true,  // one process per file
    .write = [](const ReportModel& model, const OutputOptions& options, std::ostream& sink) {
      // heaptrack_print and heaptrack_gui read any other name as plain text.
      if (!options.output_path.empty() && !options.output_path.ends_with(".gz"))
        throw std::runtime_error("heaptrack's tools decompress a file by its name: end it in .gz (" +
                                 options.output_path + ")");
      write_heaptrack(model, sink);
    }};

}  // namespace memtrack
