// Writes the pages the diff's browser test loads (tests/browser/html_diff_test.py):
//   html_diff_pages DIR  ->  DIR/diff.html, DIR/diff.json, DIR/check.html, DIR/check.json, DIR/totals-only.html
// The JSON output of the same diff (with the page's 500 changed call paths)
// is what the page's figures must equal.
#include <fstream>
#include <iostream>

#include "output/diff/diff_output.h"
#include "unit/output/diff_samples.h"

namespace {

bool write(const std::string& path, void (*writer)(const memtrack::DiffView&, std::ostream&),
           const memtrack::DiffView& view) {
  std::ofstream out(path);
  writer(view, out);
  out.flush();
  if (!out) std::cerr << "html_diff_pages: cannot write " << path << "\n";
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace memtrack;
  if (argc != 2) {
    std::cerr << "usage: html_diff_pages DIR\n";
    return 2;
  }
  const std::string dir = argv[1];
  testing::SampleDiff sample;
  sample.view.top = 500;
  testing::SampleCheck check;
  RecordingDiff totals_only = diff_recordings(sample.base, nullptr, sample.head, nullptr);
  DiffView totals_view;
  totals_view.diff = &totals_only;
  totals_view.base_file = "base.zst";
  totals_view.head_file = "head.zst";
  bool ok = write(dir + "/diff.html", write_diff_html, sample.view) &&
            write(dir + "/diff.json", write_diff_json, sample.view) &&
            write(dir + "/check.html", write_diff_html, check.view) &&
            write(dir + "/check.json", write_diff_json, check.view) &&
            write(dir + "/totals-only.html", write_diff_html, totals_view);
  return ok ? 0 : 1;
}
