#include "record/snapshots.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "format/artifact.h"
#include "format/heap_runs.h"
#include "record/process/proc_fs.h"
#include "util/proc_text.h"

namespace memtrack {
namespace {

using Clock = std::chrono::steady_clock;

// How often conditions are looked at: reading the process tree's RSS costs
// a walk of /proc.
constexpr auto kPollInterval = std::chrono::milliseconds(100);
constexpr double kRearmGrowth = 1.10;

double parse_number(std::string_view text, std::string_view whole) {
  std::string copy(text);
  char* end = nullptr;
  errno = 0;
  double value = std::strtod(copy.c_str(), &end);
  if (copy.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(value) || value <= 0)
    throw std::invalid_argument("--snapshot-when " + std::string(whole) + ": expected a number > 0 before the unit");
  return value;
}

std::string describe_bytes(uint64_t bytes) {
  char text[64];
  if (bytes >= (1ull << 30))
    std::snprintf(text, sizeof text, "%.2f GiB", double(bytes) / double(1ull << 30));
  else
    std::snprintf(text, sizeof text, "%.2f MiB", double(bytes) / double(1ull << 20));
  return text;
}

// "1.234567890": exact, so `report --at` of the finished artifact can be
// given the same moment.
std::string seconds_text(uint64_t ns) {
  char text[48];
  std::snprintf(text, sizeof text, "%llu.%09llu", static_cast<unsigned long long>(ns / 1000000000),
                static_cast<unsigned long long>(ns % 1000000000));
  return text;
}

// The resident memory of `root` and its descendants, as /proc/PID/statm says.
uint64_t tree_rss_bytes(pid_t root) {
  static const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t total = 0;
  for (pid_t pid : process_tree(root)) {
    std::optional<std::string> statm = read_proc_text("/proc/" + std::to_string(pid) + "/statm");
    unsigned long long size = 0, resident = 0;
    if (statm && std::sscanf(statm->c_str(), "%llu %llu", &size, &resident) == 2) total += resident * page;
  }
  return total;
}

std::optional<uint64_t> read_number_file(const std::string& path) {
  std::optional<std::string> text = read_proc_text(path);
  if (!text || text->empty() || !std::isdigit(static_cast<unsigned char>((*text)[0]))) return std::nullopt;
  return std::strtoull(text->c_str(), nullptr, 10);
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, separator);) parts.push_back(part);
  return parts;
}

bool lists(const std::string& comma_list, const std::string& name) {
  std::vector<std::string> names = split(comma_list, ',');
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The cgroup of `pid` or of its nearest ancestor that limits memory: in
// cgroup v2 when the memory controller is there (memory.max), else in v1's
// memory hierarchy (memory.limit_in_bytes; "no limit" is a value near
// 2^63). `own` is set to pid's cgroup, for messages.
std::optional<CgroupLimit> limiting_cgroup(pid_t pid, std::string& own) {
  std::string v2_root, v1_root;
  for (const std::string& line : split(read_proc_text("/proc/self/mounts").value_or(""), '\n')) {
    std::vector<std::string> fields = split(line, ' ');
    if (fields.size() < 4) continue;
    if (fields[2] == "cgroup2") v2_root = fields[1];
    if (fields[2] == "cgroup" && lists(fields[3], "memory")) v1_root = fields[1];
  }
  std::string v2_path, v1_path;
  for (const std::string& line : split(read_proc_text("/proc/" + std::to_string(pid) + "/cgroup").value_or(""), '\n')) {
    std::vector<std::string> fields = split(line, ':');
    if (fields.size() < 3) continue;
    if (fields[0] == "0" && fields[1].empty()) v2_path = fields[2];
    if (lists(fields[1], "memory")) v1_path = fields[2];
  }
  auto nearest = [](const std::string& root, const std::string& path, const char* limit_file, const char* usage_file,
                    uint64_t unlimited) -> std::optional<CgroupLimit> {
    for (std::filesystem::path dir = root + path;; dir = dir.parent_path()) {
      std::optional<uint64_t> limit = read_number_file(dir.string() + "/" + limit_file);
      if (limit && *limit < unlimited) return CgroupLimit{dir.string(), dir.string() + "/" + usage_file, *limit};
      if (dir.string().size() <= root.size()) return std::nullopt;
    }
  };
  // The memory controller is v2's when v2's root lists it.
  const bool v2_memory = !v2_root.empty() && read_proc_text(v2_root + "/cgroup.controllers")
                                                 .value_or("")
                                                 .find("memory") != std::string::npos;
  if (v2_memory && !v2_path.empty()) {
    own = v2_path;
    return nearest(v2_root, v2_path, "memory.max", "memory.current", UINT64_MAX);
  }
  if (v1_root.empty() || v1_path.empty()) return std::nullopt;
  own = v1_path + " (cgroup v1)";
  return nearest(v1_root, v1_path, "memory.limit_in_bytes", "memory.usage_in_bytes", uint64_t{1} << 62);
}

}  // namespace

SnapshotCondition parse_snapshot_condition(std::string_view text) {
  SnapshotCondition condition;
  condition.text = std::string(text);
  size_t op = text.find(">=");
  if (op == std::string_view::npos)
    throw std::invalid_argument("--snapshot-when " + condition.text + ": expected FIGURE>=VALUE (rss>=2GiB, "
                                "heap>=512MiB, cgroup>=90%)");
  std::string_view figure = text.substr(0, op), value = text.substr(op + 2);
  if (figure == "cgroup") {
    condition.figure = SnapshotCondition::Figure::Cgroup;
    if (!value.ends_with('%'))
      throw std::invalid_argument("--snapshot-when " + condition.text + ": cgroup takes a percentage of memory.max");
    condition.fraction = parse_number(value.substr(0, value.size() - 1), text) / 100;
    if (condition.fraction > 1)
      throw std::invalid_argument("--snapshot-when " + condition.text + ": at most 100%");
    return condition;
  }
  if (figure == "rss") condition.figure = SnapshotCondition::Figure::Rss;
  else if (figure == "heap") condition.figure = SnapshotCondition::Figure::Heap;
  else
    throw std::invalid_argument("--snapshot-when " + condition.text + ": unknown figure \"" + std::string(figure) +
                                "\": rss, heap or cgroup");
  struct Unit {
    std::string_view name;
    double factor;
  };
  // Longest suffix first: "B" ends every other one.
  static constexpr Unit kUnits[] = {{"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
                                    {"TiB", 1099511627776.0}, {"B", 1.0}};
  for (const Unit& unit : kUnits) {
    if (!value.ends_with(unit.name)) continue;
    double bytes = parse_number(value.substr(0, value.size() - unit.name.size()), text) * unit.factor;
    if (bytes >= 0x1p63) throw std::invalid_argument("--snapshot-when " + condition.text + ": too large");
    condition.bytes = static_cast<uint64_t>(bytes);
    return condition;
  }
  throw std::invalid_argument("--snapshot-when " + condition.text + ": give the size with a unit: B, KiB, MiB, GiB "
                              "or TiB");
}

bool ConditionArming::fires(uint64_t value) {
  if (value < threshold_) {
    armed_at_ = threshold_;
    return false;
  }
  if (value < armed_at_) return false;
  armed_at_ = static_cast<uint64_t>(std::ceil(static_cast<double>(value) * kRearmGrowth));
  return true;
}

SnapshotTaker::SnapshotTaker(const SnapshotOptions& options, Recording recording)
    : options_(options), recording_(std::move(recording)) {
  for (const SnapshotCondition& condition : options_.when) {
    uint64_t threshold = condition.bytes;
    if (condition.figure == SnapshotCondition::Figure::Cgroup) {
      std::string own;
      cgroup_ = limiting_cgroup(recording_.root, own);
      if (cgroup_) {
        threshold = static_cast<uint64_t>(std::ceil(static_cast<double>(cgroup_->limit) * condition.fraction));
        std::fprintf(stderr, "memtrack: --snapshot-when %s: a snapshot when %s uses %s of its memory limit %s\n",
                     condition.text.c_str(), cgroup_->dir.c_str(), describe_bytes(threshold).c_str(),
                     describe_bytes(cgroup_->limit).c_str());
      } else {
        std::fprintf(stderr,
                     "memtrack: warning: --snapshot-when %s: pid %d's cgroup (%s) and its parents set no memory "
                     "limit: this condition never holds\n",
                     condition.text.c_str(), recording_.root, own.empty() ? "none with a memory controller" : own.c_str());
        threshold = UINT64_MAX;
      }
    }
    arming_.emplace_back(threshold);
  }
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { run(); });
}

void SnapshotTaker::stop() {
  stopping_ = true;
  const uint64_t one = 1;
  // A failed write leaves the thread to its next tick.
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  if (wake_fd_ >= 0) close(std::exchange(wake_fd_, -1));
}

std::string SnapshotTaker::file_name(const std::string& output, uint64_t number) {
  std::string base = output.ends_with(".zst") ? output.substr(0, output.size() - 4) : output;
  return base + ".snapshot-" + std::to_string(number) + ".pb.gz";
}

std::map<std::string, uint64_t> SnapshotTaker::counters() const {
  // A recording that asked for none and got no SIGUSR1 keeps its trailer as before.
  if (written_ + failed_ == 0 && options_.every_s == 0 && options_.when.empty()) return {};
  return {{"snapshots_written", written_},         {"snapshots_failed", failed_},
          {"snapshots_on_signal", on_signal_},     {"snapshots_on_interval", on_interval_},
          {"snapshots_on_condition", on_condition_}, {"snapshot_longest_ms", longest_ms_}};
}

std::optional<uint64_t> SnapshotTaker::figure_now(const SnapshotCondition& condition) {
  switch (condition.figure) {
    case SnapshotCondition::Figure::Heap: return recording_.writer.live_heap_bytes();
    case SnapshotCondition::Figure::Rss: return tree_rss_bytes(recording_.root);
    case SnapshotCondition::Figure::Cgroup:
      if (!cgroup_) return std::nullopt;
      return read_number_file(cgroup_->usage_file);
  }
  return std::nullopt;
}

void SnapshotTaker::run() {
  sigset_t snapshot_signal;
  sigemptyset(&snapshot_signal);
  sigaddset(&snapshot_signal, kSnapshotSignal);
  const auto every = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.every_s));
  Clock::time_point next_due = Clock::now() + every;
  // Woken by SIGUSR1 (the signalfd only wakes: sigtimedwait takes the
  // signal, so a failed signalfd costs latency, not the snapshot), by stop()
  // (the recording's end waited up to a whole interval before), or by the
  // interval's tick.
  const int signal_fd = signalfd(-1, &snapshot_signal, SFD_CLOEXEC | SFD_NONBLOCK);
  while (!stopping_) {
    pollfd wake[2] = {{wake_fd_, POLLIN, 0}, {signal_fd, POLLIN, 0}};
    poll(wake, 2, static_cast<int>(kPollInterval.count()));
    if (stopping_) break;
    const timespec now{0, 0};
    if (sigtimedwait(&snapshot_signal, nullptr, &now) == kSnapshotSignal) {
      take(Trigger::Signal, "SIGUSR1");
      continue;
    }
    if (options_.every_s > 0 && Clock::now() >= next_due) {
      char every_text[48];
      std::snprintf(every_text, sizeof every_text, "every %g s", options_.every_s);
      take(Trigger::Interval, every_text);
      // From its end: a snapshot that takes longer than the interval is not
      // followed by another at once, the analysis running back to back.
      next_due = Clock::now() + every;
      continue;
    }
    for (size_t i = 0; i < options_.when.size(); ++i) {
      const SnapshotCondition& condition = options_.when[i];
      std::optional<uint64_t> value = figure_now(condition);
      if (!value || !arming_[i].fires(*value)) continue;
      const char* figure = condition.figure == SnapshotCondition::Figure::Rss    ? "rss"
                           : condition.figure == SnapshotCondition::Figure::Heap ? "heap"
                                                                                 : "cgroup memory";
      take(Trigger::Condition, condition.text + ": " + figure + " " + describe_bytes(*value));
      break;  // the figures have moved on meanwhile
    }
  }
  if (signal_fd >= 0) close(signal_fd);
}

void SnapshotTaker::take(Trigger trigger, const std::string& why) {
  const auto started = Clock::now();
  const uint64_t number = written_ + failed_ + 1;
  (trigger == Trigger::Signal ? on_signal_ : trigger == Trigger::Interval ? on_interval_ : on_condition_) += 1;
  const std::string name = file_name(recording_.output, number);
  auto fail = [&](const std::string& reason) {
    ++failed_;
    std::fprintf(stderr, "memtrack: warning: snapshot %llu (%s) failed: %s\n", static_cast<unsigned long long>(number),
                 why.c_str(), reason.c_str());
  };

  // The moment: just before the tick the recorder has every event up to
  // (the compact layout rounds times down to ticks), so that every event up
  // to it is in the file and none that comes later is stamped at or before it.
  const uint64_t through = recording_.events_appended_through();
  if (recording_.aggregated) {
    // Its state so far, next to the artifact: what the report reads.
    if (!recording_.writer.checkpoint()) return fail("the checkpoint could not be written");
  } else {
    try {
      recording_.writer.flush();
    } catch (const std::exception& e) {
      return fail(e.what());
    }
  }
  const uint64_t tick_start = through / records::kHeapTickNs * records::kHeapTickNs;
  const uint64_t moment_ns =
      tick_start > recording_.start_monotonic_ns ? tick_start - 1 - recording_.start_monotonic_ns : 0;
  const std::string at = seconds_text(moment_ns);

  // An unnamed file in the snapshot's directory, named once complete.
  std::string dir = std::filesystem::path(name).parent_path().string();
  int out = open(dir.empty() ? "." : dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (out < 0) return fail("cannot create a file in " + (dir.empty() ? std::string(".") : dir) + ": " + std::strerror(errno));
  int errors = static_cast<int>(syscall(SYS_memfd_create, "memtrack-snapshot-stderr", MFD_CLOEXEC));
  const std::string artifact = recording_.writer.file_path();
  const char* argv[] = {"memtrack", "report", artifact.c_str(), "--format", "pprof", nullptr, nullptr, nullptr};
  if (!recording_.aggregated) {
    argv[5] = "--at";
    argv[6] = at.c_str();
  }
  const pid_t recorder = getpid();
  pid_t child = fork();
  if (child == 0) {
    // Only async-signal-safe calls here: the recorder has other threads.
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // killed with the recorder: its file then vanishes
    if (getppid() != recorder) _exit(127);
    dup2(out, STDOUT_FILENO);
    if (errors >= 0) dup2(errors, STDERR_FILENO);
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, STDIN_FILENO);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    setpriority(PRIO_PROCESS, 0, 10);  // the program and the recorder go first
    execv("/proc/self/exe", const_cast<char* const*>(argv));
    _exit(127);
  }
  int pidfd = child > 0 ? static_cast<int>(syscall(SYS_pidfd_open, child, 0)) : -1;
  auto close_all = [&] {
    close(out);
    if (errors >= 0) close(errors);
    if (pidfd >= 0) close(pidfd);
  };
  if (child < 0) {
    close_all();
    return fail(std::string("fork: ") + std::strerror(errno));
  }
  // Waited for even when the recording ends meanwhile: it is nearly done.
  siginfo_t info{};
  int waited = -1;
  if (pidfd >= 0) {
    pollfd exited{pidfd, POLLIN, 0};
    while (poll(&exited, 1, -1) < 0 && errno == EINTR) {
    }
    waited = waitid(P_PIDFD, pidfd, &info, WEXITED);
  } else {
    waited = waitid(P_PID, child, &info, WEXITED);
  }
  // A ptrace hold's waitpid(-1) may have reaped it first: the profile then
  // stands for itself when it was written whole (report writes it last).
  struct stat written{};
  fstat(out, &written);
  bool ok = waited == 0 ? info.si_code == CLD_EXITED && (info.si_status == 0 || info.si_status == 1)
                        : errno == ECHILD && written.st_size > 0;
  if (!ok) {
    std::string message;
    if (errors >= 0) {
      lseek(errors, 0, SEEK_SET);
      message = read_fd_text(errors).value_or("");
      while (!message.empty() && message.back() == '\n') message.pop_back();
      if (size_t last = message.rfind('\n'); last != std::string::npos) message = message.substr(last + 1);
    }
    close_all();
    return fail("memtrack report" + (recording_.aggregated ? std::string() : " --at " + at) +
                (message.empty() ? " failed" : ": " + message));
  }
  // linkat never replaces a file: a name left by an earlier recording is
  // replaced by a rename from a name of our own.
  const std::string fd_path = "/proc/self/fd/" + std::to_string(out);
  int linked = linkat(AT_FDCWD, fd_path.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW);
  if (linked != 0 && errno == EEXIST) {
    const std::string own = name + ".tmp-" + std::to_string(getpid());
    linked = linkat(AT_FDCWD, fd_path.c_str(), AT_FDCWD, own.c_str(), AT_SYMLINK_FOLLOW);
    if (linked == 0 && rename(own.c_str(), name.c_str()) != 0) {
      linked = -1;
      unlink(own.c_str());
    }
  }
  const int link_error = errno;
  close_all();
  if (linked != 0) return fail(name + ": " + std::strerror(link_error));
  const uint64_t took_ms =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count());
  longest_ms_ = std::max<uint64_t>(longest_ms_, took_ms);
  ++written_;
  std::fprintf(stderr, "memtrack: snapshot %llu (%s): the heap live at %s s in %s (%.2f s)\n",
               static_cast<unsigned long long>(number), why.c_str(), at.c_str(), name.c_str(), double(took_ms) / 1e3);
}

}  // namespace memtrack
