#include "record/probes/bpf_session.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "memtrack.skel.h"
#include "wire/counters.h"
#include "wire/events.h"

namespace memtrack {

namespace {

std::runtime_error bpf_error(const std::string& what, int err) {
  return std::runtime_error(what + ": " + std::strerror(err < 0 ? -err : err));
}

// The uid mapping of the user namespace memtrack runs in ("0 1000 1"), or
// "" in the initial namespace, the only one whose capabilities the kernel's
// checks for tracing programs and perf events accept.
std::string user_namespace_mapping() {
  std::ifstream in("/proc/self/uid_map");
  std::string mapping, word;
  while (in >> word) mapping += (mapping.empty() ? "" : " ") + word;
  return mapping == "0 0 4294967295" ? "" : mapping;
}

// What libbpf says while the programs load, kept rather than printed: on
// failure it holds the program that failed and the verifier's reason (its
// log, hundreds of lines, goes to stderr only with MEMTRACK_BPF_LOG set).
class LoadLog {
 public:
  LoadLog() {
    std::lock_guard lock(mutex());
    current() = this;
    previous_ = libbpf_set_print(&LoadLog::print);
  }
  ~LoadLog() { stop(); }
  void stop() {
    std::lock_guard lock(mutex());
    if (current() != this) return;
    libbpf_set_print(previous_);
    current() = nullptr;
  }
  const std::string& text() const { return text_; }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static LoadLog*& current() {
    static LoadLog* log = nullptr;
    return log;
  }
  static int print(libbpf_print_level level, const char* format, va_list args) {
    if (level == LIBBPF_DEBUG) return 0;
    char line[8192];
    va_list copy;
    va_copy(copy, args);
    int n = vsnprintf(line, sizeof(line), format, copy);
    va_end(copy);
    if (n < 0) return n;
    if (LoadLog* log = current(); log && log->text_.size() < (4u << 20)) log->text_ += line;
    return n;
  }
  std::string text_;
  libbpf_print_fn_t previous_ = nullptr;
};

bool has_capability(int cap) {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  return data[cap / 32].effective & (1u << (cap % 32));
}

std::string lockdown_mode() {
  std::ifstream in("/sys/kernel/security/lockdown");
  std::string line;
  std::getline(in, line);
  size_t open = line.find('['), close = line.find(']');
  return open != std::string::npos && close > open ? line.substr(open + 1, close - open - 1) : "";
}

// The program that failed and the verifier's reason, from libbpf's log:
// "prog 'NAME': BPF program load failed: ..." then the verifier's log,
// whose last lines before its statistics say why.
std::string failed_program_reason(const std::string& log) {
  static const std::string kFailed = "': BPF program load failed: ";
  size_t at = log.find(kFailed);
  if (at == std::string::npos) {
    // Not a program's verification: the first warning (a map, a relocation, BTF).
    size_t warn = log.find("libbpf: ");
    if (warn == std::string::npos) return {};
    size_t end = log.find('\n', warn);
    return log.substr(warn + 8, end == std::string::npos ? std::string::npos : end - warn - 8);
  }
  size_t name_start = log.rfind("prog '", at);
  std::string name = name_start == std::string::npos ? "?" : log.substr(name_start + 6, at - name_start - 6);
  std::string reason;
  size_t begin = log.find("-- BEGIN PROG LOAD LOG --", at), end = log.find("-- END PROG LOAD LOG --", at);
  if (begin != std::string::npos && end != std::string::npos) {
    std::istringstream lines(log.substr(begin, end - begin));
    std::string line;
    while (std::getline(lines, line)) {
      if (line.empty() || line.starts_with("processed ") || line.starts_with("verification time") ||
          line.starts_with("stack depth") || line.starts_with("-- BEGIN") || line.starts_with("libbpf:"))
        continue;
      reason = line;
    }
  }
  size_t failed_end = log.find('\n', at);
  std::string failed = log.substr(at + kFailed.size(), failed_end == std::string::npos ? std::string::npos
                                                                                       : failed_end - at - kFailed.size());
  return "program " + name + ": " + (reason.empty() ? failed : "the verifier said \"" + reason + "\"");
}

// Why loading failed. Privileges are named only when the kernel refused a
// capability memtrack lacks: the verifier refuses a program with EACCES too.
std::runtime_error load_error(int err, const LoadLog& log) {
  int code = err < 0 ? -err : err;
  std::string mapping = user_namespace_mapping();
  bool privileged = has_capability(CAP_SYS_ADMIN) || (has_capability(CAP_BPF) && has_capability(CAP_PERFMON));
  if (const char* verbose = std::getenv("MEMTRACK_BPF_LOG"); verbose && *verbose)
    std::fputs(log.text().c_str(), stderr);
  if ((code == EPERM || code == EACCES) && !mapping.empty()) {
    return bpf_error("cannot load the BPF programs: memtrack runs in a user namespace (uid_map \"" + mapping +
                         "\"), whose capabilities do not count for BPF tracing programs and perf events; run it in "
                         "the initial namespace as root or with CAP_BPF and CAP_PERFMON (setcap "
                         "cap_bpf,cap_perfmon+ep). A BPF token delegated to the namespace (a bpffs mounted with "
                         "delegate_* options) cannot help yet: memtrack's libbpf (1.1) predates tokens",
                     err);
  }
  if ((code == EPERM || code == EACCES) && !privileged)
    return bpf_error("cannot load the BPF programs: memtrack needs root or CAP_BPF and CAP_PERFMON (setcap "
                     "cap_bpf,cap_perfmon+ep)",
                     err);
  std::string reason = failed_program_reason(log.text());
  utsname u{};
  uname(&u);
  std::string what = std::string("cannot load the BPF programs on Linux ") + u.release;
  if (!reason.empty()) what += ": " + reason;
  if (std::string lockdown = lockdown_mode(); lockdown == "confidentiality")
    what += " (the kernel is locked down for confidentiality, which refuses BPF programs reading kernel memory)";
  what += "; MEMTRACK_BPF_LOG=1 prints the verifier's whole log";
  return bpf_error(what, err);
}

// BPF_LINK_CREATE for a uprobe session link (Linux >= 6.13): one link probes
// many offsets of one file, running the program at entry and, when the entry
// asks, at return. libbpf 1.1 predates it, so the attribute layout of the
// kernel ABI (the uprobe_multi member of union bpf_attr) is spelled out here.
constexpr uint32_t kTraceUprobeSession = 57;  // BPF_TRACE_UPROBE_SESSION
// uprobe_multi links (Linux >= 6.6): the same attribute layout, entries and
// returns in separate links (kUprobeMultiReturn).
constexpr uint32_t kTraceUprobeMulti = 48;  // BPF_TRACE_UPROBE_MULTI
constexpr uint32_t kUprobeMultiReturn = 1;  // BPF_F_UPROBE_MULTI_RETURN
struct UprobeMultiLinkAttr {
  uint32_t prog_fd;
  uint32_t target_fd;
  uint32_t attach_type;
  uint32_t flags;
  uint64_t path;
  uint64_t offsets;
  uint64_t ref_ctr_offsets;
  uint64_t cookies;
  uint32_t cnt;
  uint32_t multi_flags;
  uint32_t pid;
};

int create_uprobe_link(uint32_t attach_type, int prog_fd, const std::string& path,
                       const std::vector<uint64_t>& offsets, const std::vector<uint64_t>& cookies, pid_t pid,
                       uint32_t multi_flags = 0) {
  UprobeMultiLinkAttr attr{};
  attr.prog_fd = prog_fd;
  attr.attach_type = attach_type;
  attr.multi_flags = multi_flags;
  attr.path = reinterpret_cast<uint64_t>(path.c_str());
  attr.offsets = reinterpret_cast<uint64_t>(offsets.data());
  attr.cookies = reinterpret_cast<uint64_t>(cookies.data());
  attr.cnt = static_cast<uint32_t>(offsets.size());
  attr.pid = static_cast<uint32_t>(pid);
  return static_cast<int>(syscall(__NR_bpf, BPF_LINK_CREATE, &attr, sizeof(attr)));
}

}  // namespace

namespace {

// The skeleton opened, its maps sized for `config` (only the sizes matter).
memtrack_bpf* open_sized(const BpfConfig& config) {
  memtrack_bpf* skel = memtrack_bpf__open();
  if (!skel) throw bpf_error("cannot open the BPF programs", errno);
  bpf_map__set_max_entries(skel->maps.events, config.event_ring_bytes);
  bpf_map__set_max_entries(skel->maps.process_events, config.process_ring_bytes);
  if (config.stack_mode) {
    bpf_map__set_max_entries(skel->maps.stack_events, config.stack_ring_bytes);
    bpf_map__set_max_entries(skel->maps.stack_copies, std::max(libbpf_num_possible_cpus(), 1));
  } else {
    // Capture off: the stack maps shrink to their minimum.
    bpf_map__set_max_entries(skel->maps.stack_events, static_cast<uint32_t>(sysconf(_SC_PAGESIZE)));
    for (bpf_map* map : {skel->maps.stack_copies, skel->maps.seen_stacks, skel->maps.unwind_rules,
                         skel->maps.module_tables})
      bpf_map__set_max_entries(map, 1);
  }
  return skel;
}

// Whether `skel` was sized as open_sized(config) sizes it.
bool sized_for(memtrack_bpf* skel, const BpfConfig& config) {
  return bpf_map__max_entries(skel->maps.events) == config.event_ring_bytes &&
         bpf_map__max_entries(skel->maps.process_events) == config.process_ring_bytes &&
         (bpf_map__max_entries(skel->maps.seen_stacks) > 1) == (config.stack_mode != 0) &&
         (!config.stack_mode || bpf_map__max_entries(skel->maps.stack_events) == config.stack_ring_bytes);
}

}  // namespace

PreparedSkeleton::PreparedSkeleton(const BpfConfig& sizes) {
  try {
    skel_ = open_sized(sizes);
  } catch (const std::exception&) {
    return;  // BpfSession opens it again and says why it cannot
  }
  // The preallocated hashes (every entry allocated and linked at creation:
  // 65,536 or 262,144 of them), the 1 Mi buckets of the rule table and the
  // rings' memory: a map the kernel refuses here is left to the load, which
  // says why.
  // Two halves of about the same cost, one on a thread of its own (the
  // kernel's work: a second CPU takes half).
  std::vector<bpf_map*> maps = {skel_->maps.seen_stacks, skel_->maps.stack_events, skel_->maps.tracked_pids,
                                skel_->maps.unwind_rules, skel_->maps.events,         skel_->maps.interposed_pids,
                                skel_->maps.paused_pids,  skel_->maps.process_events};
  std::vector<int> fds(maps.size(), -1);
  auto create = [&](size_t first, size_t end) {
    for (size_t i = first; i < end; ++i) {
      LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = bpf_map__map_flags(maps[i]));
      fds[i] = bpf_map_create(bpf_map__type(maps[i]), bpf_map__name(maps[i]), bpf_map__key_size(maps[i]),
                              bpf_map__value_size(maps[i]), bpf_map__max_entries(maps[i]), &opts);
    }
  };
  {
    std::jthread half([&] { create(0, 3); });
    create(3, maps.size());
  }
  for (size_t i = 0; i < maps.size(); ++i) {
    if (fds[i] < 0) continue;
    bpf_map__reuse_fd(maps[i], fds[i]);  // takes a duplicate
    close(fds[i]);
  }
}

PreparedSkeleton::~PreparedSkeleton() {
  if (skel_) memtrack_bpf__destroy(skel_);
}

memtrack_bpf* PreparedSkeleton::take() { return std::exchange(skel_, nullptr); }

BpfSession::BpfSession(const BpfConfig& config, std::unique_ptr<PreparedSkeleton> prepared) : resume_(config.resume) {
  if (prepared) skel_ = prepared->take();
  if (skel_ && !sized_for(skel_, config)) {
    memtrack_bpf__destroy(skel_);
    skel_ = nullptr;
  }
  if (!skel_) skel_ = open_sized(config);
  skel_->rodata->empty_probes = config.empty_probes ? 1 : 0;
  // Wake the poller when a batch has accumulated, pause producers at 3/4 full.
  skel_->rodata->wakeup_bytes = std::min<uint64_t>(256 * 1024, config.event_ring_bytes / 8);
  skel_->rodata->pause_bytes = config.event_ring_bytes - config.event_ring_bytes / 4;
  skel_->rodata->stack_pause_bytes = config.stack_ring_bytes / 2;
  stack_mode_ = config.stack_mode;
  skel_->rodata->stack_mode = config.stack_mode;
  skel_->rodata->stack_budget = config.stack_budget;
  uprobes_ = config.uprobes;
  memory_records_ = config.memory_records;
  per_process_ = config.per_process;
  skel_->rodata->per_process_attach = per_process_ ? 1 : 0;
  // uprobe_multi links of kernels before 6.11 could fire in other processes
  // than the one they were made for: the programs check the process.
  skel_->rodata->links_filter_process = uprobes_ != UprobeMechanism::Multi;
  bpf_program__set_autoload(skel_->progs.interposer_ready, config.interposer);
  skel_->rodata->ptrace_hold = config.ptrace_hold ? 1 : 0;
  skel_->rodata->child_stops_itself = config.child_stops_itself ? 1 : 0;
  // Entry and return programs: classic perf uprobes or uprobe_multi links.
  // Entry-only functions have their own program with every mechanism
  // (alloc.bpf.c, on_session, says why not a session).
  for (bpf_program* prog : {skel_->progs.alloc_enter, skel_->progs.alloc_exit, skel_->progs.entry_only}) {
    bpf_program__set_autoload(prog, uprobes_ != UprobeMechanism::Session || prog == skel_->progs.entry_only);
    if (uprobes_ != UprobeMechanism::Classic)
      bpf_program__set_expected_attach_type(prog, static_cast<bpf_attach_type>(kTraceUprobeMulti));
  }
  // Without stacks, the program whose verification skips the stack walker.
  session_program_ = stack_mode_ ? skel_->progs.allocator_session_stacks : skel_->progs.allocator_session;
  for (bpf_program* prog : {skel_->progs.allocator_session, skel_->progs.allocator_session_stacks}) {
    bpf_program__set_autoload(prog, uprobes_ == UprobeMechanism::Session && prog == session_program_);
    bpf_program__set_expected_attach_type(prog, static_cast<bpf_attach_type>(kTraceUprobeSession));
  }
  if (uprobes_ != UprobeMechanism::Classic)
    bpf_program__set_expected_attach_type(
        skel_->progs.probe_floor,
        static_cast<bpf_attach_type>(uprobes_ == UprobeMechanism::Session ? kTraceUprobeSession : kTraceUprobeMulti));
  skel_->rodata->rss_step_bytes = config.rss_step_bytes;
  skel_->rodata->rss_interval_ns = config.rss_interval_ns;
  skel_->rodata->nr_cpus = static_cast<uint32_t>(std::max(libbpf_num_possible_cpus(), 1));
  // One of the two rss_stat programs: the one this kernel's tracepoint matches.
  rss_program_ = config.rss_count_argument ? skel_->progs.on_rss_stat_count : skel_->progs.on_rss_stat;
  for (bpf_program* prog : {skel_->progs.on_rss_stat, skel_->progs.on_rss_stat_count})
    bpf_program__set_autoload(prog, config.memory_records && config.rss_hook && prog == rss_program_);
  for (bpf_program* prog : {skel_->progs.on_memory_syscall, skel_->progs.on_memory_exit, skel_->progs.on_memory_fork})
    bpf_program__set_autoload(prog, config.memory_records);
  LoadLog log;
  int err = memtrack_bpf__load(skel_);
  log.stop();
  if (err) {
    memtrack_bpf__destroy(skel_);
    skel_ = nullptr;
    throw load_error(err, log);
  }
  for (bpf_program* prog : {skel_->progs.on_fork, skel_->progs.on_exec, skel_->progs.on_exit,
                            skel_->progs.on_syscall_exit, skel_->progs.on_signal_deliver}) {
    bpf_link* link = bpf_program__attach(prog);
    if (!link) {
      int err = errno;
      for (bpf_link* l : process_links_) bpf_link__destroy(l);
      memtrack_bpf__destroy(skel_);
      skel_ = nullptr;
      throw bpf_error(std::string("cannot attach ") + bpf_program__name(prog), err);
    }
    process_links_.push_back(link);
  }
  if (config.memory_records) {
    // Without the rss_stat hook the recorder samples /proc/PID/statm; the
    // mapping hook is a raw syscall tracepoint like on_syscall_exit above.
    for (bpf_program* prog :
         {rss_program_, skel_->progs.on_memory_exit, skel_->progs.on_memory_syscall, skel_->progs.on_memory_fork}) {
      bpf_link* link = bpf_program__autoload(prog) ? bpf_program__attach(prog) : nullptr;
      if (link) process_links_.push_back(link);
      if (prog == rss_program_) rss_hooked_ = link != nullptr;
    }
  }
}

BpfSession::~BpfSession() {
  detach_all();
  std::vector<std::thread> closers;
  {
    std::lock_guard lock(probes_mutex_);
    closers_finish_ = true;
    closers.swap(closers_);
  }
  closing_ready_.notify_all();
  for (auto& t : closers) t.join();
  for (bpf_link* l : process_links_) bpf_link__destroy(l);
  memtrack_bpf__destroy(skel_);
}

void BpfSession::track_process(pid_t pid, pid_t parent) {
  uint32_t key = pid, value = parent;
  if (bpf_map__update_elem(skel_->maps.tracked_pids, &key, sizeof(key), &value, sizeof(value), BPF_ANY))
    throw bpf_error("cannot track pid " + std::to_string(pid), errno);
}

namespace {
struct FileKey {  // struct file_key in state.bpf.h
  uint32_t tgid, reserved;
  uint64_t dev, ino;
};
}  // namespace

void BpfSession::mark_file_known(pid_t pid, uint64_t kernel_dev, uint64_t ino) {
  FileKey key{static_cast<uint32_t>(pid), 0, kernel_dev, ino};
  uint8_t one = 1;
  if (bpf_map__update_elem(skel_->maps.known_files, &key, sizeof(key), &one, sizeof(one), BPF_ANY))
    throw bpf_error("cannot record a probed file", errno);
}

void BpfSession::forget_file(pid_t pid, uint64_t kernel_dev, uint64_t ino) {
  FileKey key{static_cast<uint32_t>(pid), 0, kernel_dev, ino};
  bpf_map__delete_elem(skel_->maps.known_files, &key, sizeof(key), 0);
}

size_t BpfSession::attach_probes(const std::string& path, const std::vector<ProbePoint>& points, pid_t pid,
                                 std::string* error) {
  std::vector<int> fds;
  size_t attached = 0;
  auto keep = [&](int fd, size_t probes) {
    if (fd < 0) return;
    fds.push_back(fd);
    attached += probes;
  };
  if (uprobes_ == UprobeMechanism::Classic) {
    for (const auto& point : points) {
      if (!point.entry_only) keep(attach_classic(path, point, true, pid, error), 1);
      keep(attach_classic(path, point, false, pid, error), 1);
    }
  } else {
    std::vector<uint64_t> offsets[2], cookies[2];  // [0]: entry and return, [1]: entry only
    for (const auto& p : points) {
      offsets[p.entry_only].push_back(p.offset);
      cookies[p.entry_only].push_back(p.cookie);
    }
    auto link = [&](uint32_t type, bpf_program* prog, int which, uint32_t flags, size_t probes_per_site) {
      if (offsets[which].empty()) return;
      int fd = create_uprobe_link(type, bpf_program__fd(prog), path, offsets[which], cookies[which], pid, flags);
      if (fd < 0) *error = std::strerror(errno);
      keep(fd, offsets[which].size() * probes_per_site);
    };
    if (uprobes_ == UprobeMechanism::Session) {
      link(kTraceUprobeSession, session_program_, 0, 0, 2);
    } else {
      link(kTraceUprobeMulti, skel_->progs.alloc_exit, 0, kUprobeMultiReturn, 1);  // returns first
      link(kTraceUprobeMulti, skel_->progs.alloc_enter, 0, 0, 1);
    }
    link(kTraceUprobeMulti, skel_->progs.entry_only, 1, 0, 1);
  }
  std::lock_guard lock(probes_mutex_);
  auto& owned = probe_fds_[pid];
  owned.insert(owned.end(), fds.begin(), fds.end());
  if (pid) {
    auto& of_file = file_fds_[{pid, path}];
    of_file.insert(of_file.end(), fds.begin(), fds.end());
  }
  return attached;
}

void BpfSession::detach_file(pid_t pid, const std::string& path) {
  std::vector<int> fds;
  {
    std::lock_guard lock(probes_mutex_);
    auto it = file_fds_.find({pid, path});
    if (it == file_fds_.end()) return;
    fds.swap(it->second);
    file_fds_.erase(it);
    auto owned = probe_fds_.find(pid);
    if (owned != probe_fds_.end())
      std::erase_if(owned->second, [&](int fd) { return std::find(fds.begin(), fds.end(), fd) != fds.end(); });
  }
  close_in_background(fds);
}

// Once for the whole recording rather than per process: a per-process perf
// uprobe cost an attach per image and, closed when the process exec'd or
// ended, a grace period under the kernel's event_mutex each (closes of
// several processes queued behind one another: up to ~190 ms at the end of
// `sh -c 'true; /bin/true; /bin/true'`, and the exec waited for its own).
bool BpfSession::attach_interposer_ready(const std::string& path, uint64_t offset, std::string* error) {
  bpf_link* link = bpf_program__attach_uprobe(skel_->progs.interposer_ready, false, -1, path.c_str(), offset);
  if (!link) {
    *error = std::strerror(errno);
    return false;
  }
  int fd = dup(bpf_link__fd(link));  // closing the perf event detaches it
  bpf_link__destroy(link);
  std::lock_guard lock(probes_mutex_);
  probe_fds_[0].push_back(fd);  // with the global probes: closed by detach_all
  return true;
}

bool BpfSession::is_interposed(pid_t pid) const {
  uint32_t key = pid;
  uint64_t value;  // where its shared memory is
  return bpf_map__lookup_elem(skel_->maps.interposed_pids, &key, sizeof(key), &value, sizeof(value), 0) == 0;
}

bool BpfSession::attach_floor_probe(const std::string& path, uint64_t offset, std::string* error) {
  pid_t self = getpid();
  std::vector<int> fds;
  if (uprobes_ == UprobeMechanism::Classic) {
    for (bool is_return : {true, false}) {
      LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = is_return);
      bpf_link* link = bpf_program__attach_uprobe_opts(skel_->progs.probe_floor, self, path.c_str(), offset, &opts);
      if (!link) {
        *error = std::strerror(errno);
        break;
      }
      fds.push_back(dup(bpf_link__fd(link)));
      bpf_link__destroy(link);
    }
  } else if (uprobes_ == UprobeMechanism::Multi) {
    for (uint32_t flags : {kUprobeMultiReturn, 0u}) {
      int fd = create_uprobe_link(kTraceUprobeMulti, bpf_program__fd(skel_->progs.probe_floor), path, {offset}, {0},
                                  self, flags);
      if (fd < 0) {
        *error = std::strerror(errno);
        break;
      }
      fds.push_back(fd);
    }
  } else {
    int fd = create_uprobe_link(kTraceUprobeSession, bpf_program__fd(skel_->progs.probe_floor), path, {offset}, {0},
                                self);
    if (fd < 0)
      *error = std::strerror(errno);
    else
      fds.push_back(fd);
  }
  bool complete = fds.size() == (uprobes_ == UprobeMechanism::Session ? 1u : 2u);
  std::lock_guard lock(probes_mutex_);
  auto& owned = probe_fds_[self];
  owned.insert(owned.end(), fds.begin(), fds.end());
  return complete;
}

int BpfSession::attach_classic(const std::string& path, const ProbePoint& point, bool is_return, pid_t pid,
                               std::string* error) {
  LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = point.cookie, .retprobe = is_return);
  bpf_program* prog = point.entry_only ? skel_->progs.entry_only
                      : is_return   ? skel_->progs.alloc_exit
                                    : skel_->progs.alloc_enter;
  bpf_link* link = bpf_program__attach_uprobe_opts(prog, pid ? pid : -1, path.c_str(), point.offset, &opts);
  if (!link) {
    *error = std::strerror(errno);
    return -1;
  }
  // Keep only the perf event: closing it detaches the program.
  int fd = dup(bpf_link__fd(link));
  bpf_link__destroy(link);
  return fd;
}

void BpfSession::detach_process(pid_t pid, bool wait) {
  std::vector<int> fds;
  {
    std::lock_guard lock(probes_mutex_);
    std::erase_if(file_fds_, [&](const auto& entry) { return entry.first.first == pid; });
    auto it = probe_fds_.find(pid);
    if (it == probe_fds_.end()) return;
    fds.swap(it->second);
    probe_fds_.erase(it);
  }
  if (!wait) {
    close_in_background(fds);
    return;
  }
  std::vector<std::thread> closers;
  for (int fd : fds) closers.emplace_back([fd] { close(fd); });
  for (auto& t : closers) t.join();
}

// Closing a uprobe waits for an RCU grace period (~90 ms here). Classic perf
// uprobes close one after another (the kernel serializes them), a
// uprobe session link closes all its probes with one grace period, and links
// closed concurrently share their grace periods. A descriptor never waits for
// a busy closer: glibc's link, left to the interposer, waited behind the
// floor probe's close, and python3 trapped at every allocator call
// meanwhile (~0.1-0.2 s of its start).
void BpfSession::close_in_background(const std::vector<int>& fds) {
  constexpr size_t kClosers = 128;
  std::lock_guard lock(probes_mutex_);
  closing_.insert(closing_.end(), fds.begin(), fds.end());
  while (idle_closers_ < closing_.size() && closers_.size() < kClosers) {
    ++idle_closers_;
    closers_.emplace_back([this] { run_closer(); });
  }
  closing_ready_.notify_all();
}

void BpfSession::run_closer() {
  std::unique_lock lock(probes_mutex_);
  for (;;) {
    closing_ready_.wait(lock, [&] { return closers_finish_ || !closing_.empty(); });
    if (closing_.empty()) return;
    int fd = closing_.front();
    closing_.pop_front();
    --idle_closers_;
    lock.unlock();
    close(fd);
    lock.lock();
    ++idle_closers_;
  }
}

int BpfSession::tracked_pids_fd() const { return bpf_map__fd(skel_->maps.tracked_pids); }
int BpfSession::event_ring_fd() const { return bpf_map__fd(skel_->maps.events); }
int BpfSession::stack_ring_fd() const { return bpf_map__fd(skel_->maps.stack_events); }

void BpfSession::set_module_table(pid_t pid, const mt_module_table& table) {
  uint32_t key = pid;
  if (bpf_map__update_elem(skel_->maps.module_tables, &key, sizeof(key), &table, sizeof(table), BPF_ANY))
    throw bpf_error("cannot store the module table of pid " + std::to_string(pid), errno);
}

void BpfSession::forget_module_table(pid_t pid) {
  uint32_t key = pid;
  bpf_map__delete_elem(skel_->maps.module_tables, &key, sizeof(key), 0);
}

size_t BpfSession::add_unwind_rules(const std::vector<mt_rule_key>& keys, const std::vector<mt_unwind_rule>& rules) {
  // One syscall per batch rather than per rule: a module has thousands.
  int fd = bpf_map__fd(skel_->maps.unwind_rules);
  size_t stored = 0;
  while (stored < keys.size()) {
    uint32_t count = static_cast<uint32_t>(std::min<size_t>(keys.size() - stored, 4096));
    if (bpf_map_update_batch(fd, &keys[stored], &rules[stored], &count, nullptr) != 0) {
      stored += count;  // the ones before the failure were stored
      // Full: misses must stop stopping processes to learn.
      __atomic_store_n(&skel_->bss->rules_full, 1, __ATOMIC_RELEASE);
      break;
    }
    stored += count;
  }
  return stored;
}
int BpfSession::process_ring_fd() const { return bpf_map__fd(skel_->maps.process_events); }

uint64_t BpfSession::pause_generation() const {
  return __atomic_load_n(&skel_->bss->pause_generation, __ATOMIC_ACQUIRE);
}

void BpfSession::end_recording() {
  __atomic_store_n(&skel_->bss->recording_ended, 1, __ATOMIC_RELEASE);
  // A program that read the flag just before runs to completion within
  // microseconds; after this, every record it made is in a ring.
  usleep(1000);
}

size_t BpfSession::resume_paused() {
  int fd = bpf_map__fd(skel_->maps.paused_pids);
  std::vector<uint32_t> pids;
  uint32_t key, next;
  for (uint32_t* prev = nullptr; bpf_map_get_next_key(fd, prev, &next) == 0; prev = &key) {
    pids.push_back(next);
    key = next;
  }
  for (uint32_t pid : pids) {
    // Delete first: the kernel may pause the task again once it produces more.
    bpf_map_delete_elem(fd, &pid);
    resume_task(static_cast<pid_t>(pid));
  }
  return pids.size();
}

std::vector<pid_t> BpfSession::tracked_pids() const {
  std::vector<pid_t> pids;
  int fd = bpf_map__fd(skel_->maps.tracked_pids);
  uint32_t key = 0, next = 0;
  for (uint32_t* prev = nullptr; bpf_map_get_next_key(fd, prev, &next) == 0; prev = &key) {
    pids.push_back(static_cast<pid_t>(next));
    key = next;
  }
  return pids;
}

void BpfSession::resume_task(pid_t pid) const {
  if (resume_)
    resume_(pid);
  else
    kill(pid, SIGCONT);
}

std::map<std::string, uint64_t> BpfSession::counters() const {
  int ncpus = libbpf_num_possible_cpus();
  std::vector<mt_kernel_counters> per_cpu(std::max(ncpus, 1));
  uint32_t zero = 0;
  mt_kernel_counters sum{};
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.counters), &zero, per_cpu.data()) == 0) {
    for (const auto& c : per_cpu) {
#define MT_ADD(name) sum.name += c.name;
      MT_KERNEL_COUNTERS(MT_ADD)
#undef MT_ADD
    }
  }
  std::map<std::string, uint64_t> stack_counters;
  if (stack_mode_) {
    stack_counters = {
        {"stacks_captured", sum.stacks_captured},
        {"stack_copy_failed", sum.stack_copy_failed},
#define MT_WALK(name) {"stack_" #name, sum.name},
        MT_WALK_COUNTERS(MT_WALK)
#undef MT_WALK
        {"stack_definitions", sum.stack_definitions},
        {"stack_definitions_lost", sum.stack_definitions_lost},
        {"stack_scratch_busy", sum.stack_scratch_busy},
        {"stack_live_reads", sum.stack_live_reads},
        {"stack_rewalks", sum.stack_rewalks},
    };
  }
  std::map<std::string, uint64_t> all = {
      {"kernel_events_lost", sum.events_lost},
      {"kernel_process_events_lost", sum.process_events_lost},
      {"attach_requests_lost", sum.attach_requests_lost},
      {"backpressure_pauses", sum.pauses},
      {"nested_calls_folded", sum.nested_skipped},
      {"runtime_frees_left_out", sum.runtime_frees},
      {"signal_handlers_nested_too_deep", sum.handlers_nested_too_deep},
      {"stops_refused", sum.stops_refused},
      {"unwind_restores_requested", sum.unwind_restores_requested},
      {"unwind_restores_lost", sum.unwind_restores_lost},
  };
  all.merge(stack_counters);
  // The instructions the verifier walked to load the programs: most of the
  // start's CPU when it is large (docs/benchmarks-history.md, "A cheaper start").
  uint64_t verified = 0;
  bpf_program* prog;
  bpf_object__for_each_program(prog, skel_->obj) {
    bpf_prog_info info{};
    uint32_t length = sizeof(info);
    if (bpf_program__fd(prog) >= 0 && bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &length) == 0)
      verified += info.verified_insns;
  }
  all["bpf_verified_insns"] = verified;
  if (memory_records_) {
    all.merge(std::map<std::string, uint64_t>{
        {"rss_changes", sum.rss_changes},
        {"rss_changes_by_owner", sum.rss_changes_by_owner},
        {"rss_changes_unattributed", sum.rss_unattributed},
        {"rss_records", sum.rss_records},
        {"memory_records_lost", sum.memory_records_lost},
        {"map_calls", sum.map_calls},
        {"map_calls_in_allocator", sum.map_calls_in_allocator},
    });
  }
  return all;
}

void BpfSession::detach_all() {
  size_t helpers_wanted;
  {
    std::lock_guard lock(probes_mutex_);
    for (auto& [pid, owned] : probe_fds_) closing_.insert(closing_.end(), owned.begin(), owned.end());
    probe_fds_.clear();
    file_fds_.clear();
    helpers_wanted = std::min<size_t>(128, closing_.size());
  }
  // Helpers of this call's own close the queue alongside the background
  // closers (which live until the destructor), each close in parallel.
  std::vector<std::thread> helpers;
  for (size_t i = 0; i < helpers_wanted; ++i) helpers.emplace_back([this] { close_queued(); });
  for (auto& t : helpers) t.join();
}

void BpfSession::close_queued() {
  std::unique_lock lock(probes_mutex_);
  while (!closing_.empty()) {
    int fd = closing_.front();
    closing_.pop_front();
    lock.unlock();
    close(fd);
    lock.lock();
  }
}

}  // namespace memtrack
