// A file of the build tree that a test uses (the memtrack command, a fixture),
// named by CMake relative to the test's own executable
// (memtrack_build_file_definition, tests/CMakeLists.txt): the same text in
// every build tree, so that the sanitizer build's compile of the test is the
// plain build's and CI's ccache serves it (.ci/run).
#pragma once

#include <deque>
#include <filesystem>
#include <mutex>
#include <string>

namespace memtrack::testing {

// The absolute path, as a C string that lives as long as the process (tests
// pass it where a string literal was).
inline const char* build_file(const char* relative_to_test) {
  static const std::filesystem::path test_dir = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  static std::mutex mutex;
  static std::deque<std::string> paths;
  std::lock_guard lock(mutex);
  return paths.emplace_back((test_dir / relative_to_test).lexically_normal().string()).c_str();
}

}  // namespace memtrack::testing
