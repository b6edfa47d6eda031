#include "record/process/sanitizer_runtime.h"

#include <gelf.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <regex>
#include <vector>

#include "module/elf_file.h"
#include "util/proc_text.h"

namespace memtrack {

std::string runtime_that_must_come_first(const std::string& executable) {
  static const std::regex kRuntime(R"(lib(a|t|m|l|hwa|ub)san\.so(\.[0-9]+)*)");
  for (const std::string& needed : ElfFile(executable).dynamic_strings(DT_NEEDED))
    if (std::regex_match(needed, kRuntime)) return needed;
  return {};
}

namespace {

// env_start and env_end of /proc/PID/stat (fields 50 and 51).
bool environment_range(pid_t pid, uint64_t* start, uint64_t* end) {
  std::optional<std::string> stat = read_proc_text("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  size_t close = stat->rfind(')');
  if (close == std::string::npos) return false;
  std::vector<std::string> fields;  // from field 3 on
  size_t at = close + 2;
  while (at < stat->size()) {
    size_t space = stat->find(' ', at);
    if (space == std::string::npos) space = stat->size();
    fields.push_back(stat->substr(at, space - at));
    at = space + 1;
  }
  if (fields.size() < 49) return false;
  *start = std::strtoull(fields[47].c_str(), nullptr, 10);
  *end = std::strtoull(fields[48].c_str(), nullptr, 10);
  return *end > *start && *end - *start <= (16u << 20);
}

}  // namespace

bool remove_from_ld_preload(pid_t pid, const std::string& library, std::string* error) {
  uint64_t start = 0, end = 0;
  if (!environment_range(pid, &start, &end)) {
    *error = "cannot read where its environment is";
    return false;
  }
  std::string env(end - start, '\0');
  iovec local{env.data(), env.size()}, remote{reinterpret_cast<void*>(start), env.size()};
  if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(env.size())) {
    *error = std::string("cannot read its environment: ") + std::strerror(errno);
    return false;
  }
  static const std::string kPreload = "LD_PRELOAD=";
  for (size_t entry = 0; entry < env.size(); entry = env.find('\0', entry) + 1) {
    size_t entry_end = env.find('\0', entry);
    if (entry_end == std::string::npos) entry_end = env.size();
    if (env.compare(entry, kPreload.size(), kPreload) != 0) {
      if (entry_end == env.size()) break;
      continue;
    }
    // The loader splits the value at spaces and colons.
    for (size_t word = entry + kPreload.size(); word < entry_end;) {
      size_t word_end = env.find_first_of(" :", word);
      if (word_end == std::string::npos || word_end > entry_end) word_end = entry_end;
      if (env.compare(word, word_end - word, library) == 0 && word_end - word == library.size()) {
        std::string spaces(library.size(), ' ');
        iovec blank{spaces.data(), spaces.size()}, at{reinterpret_cast<void*>(start + word), spaces.size()};
        if (process_vm_writev(pid, &blank, 1, &at, 1, 0) != static_cast<ssize_t>(spaces.size())) {
          *error = std::string("cannot write its environment: ") + std::strerror(errno);
          return false;
        }
        return true;
      }
      word = word_end + 1;
    }
    break;  // the loader reads the first LD_PRELOAD only
  }
  *error = "its LD_PRELOAD does not name " + library;
  return false;
}

}  // namespace memtrack
