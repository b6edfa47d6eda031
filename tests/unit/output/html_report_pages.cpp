// Writes the pages the browser test loads (tests/browser/html_report_test.py):
//   html_report_pages DIR  ->  DIR/stacks.html, DIR/stacks.json, DIR/no-stacks.html
// The JSON report of the same data is what the page's figures must equal.
#include <fstream>
#include <iostream>

#include "output/html_output.h"
#include "output/json_output.h"
#include "unit/output/html_samples.h"

int main(int argc, char** argv) {
  using namespace memtrack;
  if (argc != 2) {
    std::cerr << "usage: html_report_pages DIR\n";
    return 2;
  }
  std::string dir = argv[1];
  Report report = testing::sample_report();
  Profile stacks = testing::sample_profile_with_hostile_name();
  Profile no_stacks = testing::profile_without_stacks();
  ProfileView stacks_view{&stacks, CostKind::Bytes, 10, std::nullopt};
  ProfileView no_stacks_view{&no_stacks, CostKind::Bytes, 10, std::nullopt};
  std::ofstream page(dir + "/stacks.html"), json(dir + "/stacks.json"), no_stacks_page(dir + "/no-stacks.html");
  write_html_report(report, stacks_view, page);
  write_json_report(report, json, &stacks_view);
  write_html_report(report, no_stacks_view, no_stacks_page);
  page.flush();
  json.flush();
  no_stacks_page.flush();
  return page && json && no_stacks_page ? 0 : 1;
}
