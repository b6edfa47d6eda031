// `go tool pprof` for the tests that check pprof files with the tool people
// read them with: finding go, running it inside a test's directory, and the
// sums of `-raw`'s samples.
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace memtrack::testing {

inline std::string go_binary() {
  for (const char* candidate : {"/usr/bin/go", "/usr/local/go/bin/go", "/usr/lib/go/bin/go"})
    if (access(candidate, X_OK) == 0) return candidate;
  return "";
}

// `go tool pprof -symbolize=none ARGS... FILE` (go writes nothing outside
// `dir`; pprof symbolizes nothing: the mappings say has_functions).
inline RunResult run_go_pprof(const std::string& go, const TempDir& dir, const std::vector<std::string>& args,
                              const std::string& file) {
  SpawnOptions env;
  env.env = {{"HOME", dir.path()}, {"GOCACHE", dir.file("gocache")}, {"PPROF_TMPDIR", dir.path()},
             {"GOFLAGS", "-mod=mod"}, {"GOTOOLCHAIN", "local"}};
  std::vector<std::string> argv = {go, "tool", "pprof", "-symbolize=none"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back(file);
  return run_process(argv, std::chrono::seconds(60), env);
}

// The samples of `go tool pprof -raw`: each one's values by sample type
// ("inuse_space/bytes", ...).
inline std::vector<std::map<std::string, uint64_t>> raw_samples(const std::string& out) {
  std::vector<std::map<std::string, uint64_t>> samples;
  // "Samples:", a line of TYPE/UNIT names, then "V1 V2 ...: LOCATION..." lines
  // (with label lines between), until "Locations".
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line) && line != "Samples:") {}
  if (!std::getline(in, line)) return samples;
  std::vector<std::string> types;
  std::istringstream names(line);
  for (std::string t; names >> t;) types.push_back(t.ends_with("[dflt]") ? t.substr(0, t.size() - 6) : t);
  static const std::regex sample(R"(^\s*((?:\d+\s+)*\d+):(.*)$)");
  while (std::getline(in, line) && line.rfind("Locations", 0) != 0) {
    std::smatch m;
    if (!std::regex_match(line, m, sample)) continue;
    std::istringstream values(m[1].str());
    std::map<std::string, uint64_t>& values_of = samples.emplace_back();
    size_t i = 0;
    for (uint64_t x; values >> x; ++i)
      if (i < types.size()) values_of[types[i]] = x;
    EXPECT_EQ(i, types.size()) << line;
  }
  return samples;
}

// The sum of each sample type over the samples of `go tool pprof -raw`.
inline std::map<std::string, uint64_t> raw_totals(const std::string& out) {
  std::map<std::string, uint64_t> totals;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line) && line != "Samples:") {}
  if (std::getline(in, line)) {
    std::istringstream names(line);
    for (std::string t; names >> t;) totals[t.ends_with("[dflt]") ? t.substr(0, t.size() - 6) : t] = 0;
  }
  for (const auto& values : raw_samples(out))
    for (const auto& [type, value] : values) totals[type] += value;
  return totals;
}

}  // namespace memtrack::testing
