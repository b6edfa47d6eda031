#include "output/text/timeline_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "output/text/text_writer.h"
#include "output/text/units.h"

namespace memtrack {

namespace {

using text::TextWriter;

constexpr size_t kChartRows = 8;
constexpr size_t kLabelWidth = 10;
constexpr size_t kChartColumns = text::kLineWidth - kLabelWidth - 4;  // "label |" and a margin
constexpr size_t kProcessesShown = 10;

size_t idx(Series s) { return static_cast<size_t>(s); }

// Each column's maximum of the series over the buckets it covers.
std::vector<uint64_t> column_maxima(const ProcessTimeline& t, Series series, size_t columns) {
  std::vector<uint64_t> maxima(columns, 0);
  const size_t n = t.buckets.size();
  for (size_t i = 0; i < n; ++i) {
    size_t column = i * columns / n;
    maxima[column] = std::max(maxima[column], t.buckets[i].max[idx(series)]);
  }
  // Fewer buckets than columns: a bucket spans several columns.
  for (size_t c = 0; c < columns && n < columns; ++c) {
    size_t bucket = c * n / columns;
    maxima[c] = t.buckets[bucket].max[idx(series)];
  }
  return maxima;
}

// Cells filled from the bottom: a non-zero value shows at least one.
size_t height(uint64_t value, uint64_t top) {
  if (value == 0 || top == 0) return 0;
  size_t h = static_cast<size_t>((value * kChartRows + top / 2) / top);
  return std::clamp<size_t>(h, 1, kChartRows);
}

std::string peak_text(const SeriesPeak& peak) {
  if (!peak.time_ns) return "0 B";
  return fmt::format("{} at {}", format_bytes(peak.bytes), format_duration(*peak.time_ns));
}

std::string ratio_text(const ProcessTimeline& t) {
  std::optional<double> ratio = t.rss_to_heap();
  return ratio ? fmt::format("{:.2f}x", *ratio) : "-";
}

void write_chart(TextWriter& w, const ProcessTimeline& total, uint64_t window_start_ns) {
  bool rss = total.has_rss;
  uint64_t top = total.peaks[idx(Series::Heap)].bytes;
  if (rss) top = std::max(top, total.peaks[idx(Series::Rss)].bytes);
  if (top == 0 || total.buckets.empty()) {
    w.line("  (no memory in use)");
    return;
  }
  std::vector<uint64_t> heap = column_maxima(total, Series::Heap, kChartColumns);
  std::vector<uint64_t> resident = rss ? column_maxima(total, Series::Rss, kChartColumns) : std::vector<uint64_t>();
  w.line(rss ? "  # heap (live bytes)   * RSS above the heap   (each column: its maximum)"
             : "  # heap (live bytes; the recording has no RSS records)   (each column: its maximum)");
  for (size_t row = 0; row < kChartRows; ++row) {
    size_t level = kChartRows - row;  // 8 at the top
    std::string label;
    if (row == 0) label = format_bytes(top);
    if (row == kChartRows / 2) label = format_bytes(top / 2);
    std::string cells;
    for (size_t c = 0; c < kChartColumns; ++c) {
      if (height(heap[c], top) >= level)
        cells += '#';
      else if (rss && height(resident[c], top) >= level)
        cells += '*';
      else
        cells += ' ';
    }
    while (!cells.empty() && cells.back() == ' ') cells.pop_back();
    w.line(fmt::format("{:>{}} |{}", label, kLabelWidth, cells));
  }
  w.line(fmt::format("{:>{}} +{}", "0", kLabelWidth, std::string(kChartColumns, '-')));
  uint64_t span = total.bucket_ns * total.buckets.size();
  auto when = [](uint64_t ns) { return ns == 0 ? std::string("0 s") : format_duration(ns); };
  std::string start = when(window_start_ns), middle = format_duration(window_start_ns + span / 2),
              end = format_duration(window_start_ns + span);
  std::string axis(kChartColumns + 2, ' ');
  auto put = [&](size_t at, const std::string& text) {
    at = std::min(at, axis.size() - std::min(axis.size(), text.size()));
    axis.replace(at, text.size(), text);
  };
  put(1, start);
  put(kChartColumns / 2 + 1 - middle.size() / 2, middle);
  put(kChartColumns + 2 - end.size(), end);
  w.line(std::string(kLabelWidth, ' ') + axis);
}

}  // namespace

void write_timeline_text(const Timeline& timeline, std::ostream& out, bool color, bool verbose) {
  TextWriter w(out, color);
  const ProcessTimeline& total = timeline.total;
  w.title("Memory over time");
  write_chart(w, total, timeline.from_ns);
  w.field("heap peak", peak_text(total.peaks[idx(Series::Heap)]));
  if (total.has_rss) {
    w.field("RSS peak", peak_text(total.peaks[idx(Series::Rss)]) + fmt::format("  (anon {}, file {}, shmem {})",
                                                                                format_bytes(total.peaks[idx(Series::RssAnon)].bytes),
                                                                                format_bytes(total.peaks[idx(Series::RssFile)].bytes),
                                                                                format_bytes(total.peaks[idx(Series::RssShmem)].bytes)));
    w.field("RSS/heap", ratio_text(total) + " (peak over peak)");
  }
  if (total.has_mapped)
    w.field("mapped", peak_text(total.peaks[idx(Series::Mapped)]) + "  (peak of its own mmap/brk memory)");
  if (total.has_own)
    w.field("memtrack", fmt::format("{} resident, {} mapped at most in the program, not counted above",
                                    format_bytes(total.peaks[idx(Series::MemtrackRss)].bytes),
                                    format_bytes(total.peaks[idx(Series::MemtrackMapped)].bytes)));
  std::vector<const ProcessTimeline*> shown;
  for (const ProcessTimeline& p : timeline.processes)
    if (!p.buckets.empty()) shown.push_back(&p);
  if (shown.size() < 2 && !verbose) return;
  std::stable_sort(shown.begin(), shown.end(), [](const ProcessTimeline* a, const ProcessTimeline* b) {
    return std::max(a->peaks[idx(Series::Rss)].bytes, a->peaks[idx(Series::Heap)].bytes) >
           std::max(b->peaks[idx(Series::Rss)].bytes, b->peaks[idx(Series::Heap)].bytes);
  });
  w.line();
  w.line(fmt::format("  {:>7}  {:>10}  {:>10}  {:>8}  {:>10}", "PID", "HEAP PEAK", "RSS PEAK", "RSS/HEAP", "MAPPED"));
  size_t limit = verbose ? shown.size() : std::min(shown.size(), kProcessesShown);
  for (size_t i = 0; i < limit; ++i) {
    const ProcessTimeline& p = *shown[i];
    w.line(fmt::format("  {:>7}  {:>10}  {:>10}  {:>8}  {:>10}", p.pid, format_bytes(p.peaks[idx(Series::Heap)].bytes),
                       p.has_rss ? format_bytes(p.peaks[idx(Series::Rss)].bytes) : "-", ratio_text(p),
                       p.has_mapped ? format_bytes(p.peaks[idx(Series::Mapped)].bytes) : "-"));
  }
  if (limit < shown.size()) w.line(fmt::format("  ... and {} more (--verbose shows all)", shown.size() - limit));
}

}  // namespace memtrack
