#include "record/recorder.h"

#include <signal.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "format/artifact.h"
#include "module/locate.h"
#include "record/probes/bpf_session.h"
#include "record/process/guardian.h"
#include "record/probes/kernel_features.h"
#include "record/intake/mapping_collector.h"
#include "record/probes/probe_attacher.h"
#include "record/probes/probe_cost.h"
#include "record/process/proc_fs.h"
#include "record/process/ptrace_hold.h"
#include "record/process/remote_call.h"
#include "record/intake/event_pipeline.h"
#include "record/intake/ring_poller.h"
#include "record/intake/statm_sampler.h"
#include "record/intake/shm_events.h"
#include "record/process/target_process.h"
#include "record/intake/shm_stacks.h"
#include "record/snapshots.h"
#include "record/unwind_rules/rule_cache.h"
#include "record/unwind_rules/unwind_learner.h"
#include "util/proc_text.h"
#include "wire/attach.h"

namespace memtrack {

namespace {

uint64_t clock_ns(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

std::string default_output(const RecordOptions& options) {
  std::string name = options.attach_pid ? "pid" : std::filesystem::path(options.command[0]).filename().string();
  return "memtrack." + name + "." + std::to_string(getpid()) + ".zst";
}

// The files named by the Mapping records written, each with the paths
// recorded for it, in order of first mapping: what --embed-modules embeds.
class MappedFiles {
 public:
  void note(const std::vector<Event>& batch) {
    for (const Event& event : batch) {
      if (event.type != EventType::Mapping || !event.mapping) continue;
      auto [it, added] = index_.try_emplace(identity_of(*event.mapping), files_.size());
      if (added) files_.push_back({it->first, {}});
      std::vector<std::string>& paths = files_[it->second].second;
      if (std::find(paths.begin(), paths.end(), event.mapping->path) == paths.end())
        paths.push_back(event.mapping->path);
    }
  }
  const std::vector<std::pair<ModuleIdentity, std::vector<std::string>>>& files() const { return files_; }

 private:
  std::map<ModuleIdentity, size_t> index_;
  std::vector<std::pair<ModuleIdentity, std::vector<std::string>>> files_;
};

// Appends a Module record for each file still identical to the one mapped;
// returns the counters.
std::map<std::string, uint64_t> embed_modules(const MappedFiles& mapped, ArtifactWriter& writer, bool quiet) {
  uint64_t embedded = 0, not_embedded = 0;
  for (const auto& [identity, paths] : mapped.files()) {
    LocatedModule located = locate_module(identity, paths);
    std::string why = located.reason;
    if (located.module) {
      try {
        writer.append_module(std::make_shared<const ModuleInfo>(std::move(*located.module)));
        ++embedded;
        continue;
      } catch (const std::invalid_argument& e) {
        why = e.what();  // above the frame limit
      }
    }
    ++not_embedded;
    if (!quiet) std::fprintf(stderr, "memtrack: warning: %s: %s; not embedded\n", located.path.c_str(), why.c_str());
  }
  return {{"modules_embedded", embedded}, {"modules_not_embedded", not_embedded}};
}

// Publishes the artifact under `output`, or says where it went when another
// recording was writing that file (the writer never replaces it).
void publish_artifact(ArtifactWriter& writer, const std::string& output) {
  writer.publish();
  if (writer.file_path() != output)
    std::fprintf(stderr, "memtrack: warning: %s: another recording is writing this file: this recording goes to %s\n",
                 output.c_str(), writer.file_path().c_str());
}

// Signals that end an attach session; blocked so sigtimedwait receives them.
// Returns when the tree's root exits, the duration passes, a stop signal
// comes or `keep_recording` says no.
void wait_for_attach_end(pid_t root, double duration_s, const std::function<bool()>& keep_recording) {
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, root, 0));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(duration_s);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) sigaddset(&stop_signals, s);
  for (;;) {
    if (pidfd >= 0) {
      pollfd p{pidfd, POLLIN, 0};
      if (poll(&p, 1, 0) > 0) break;
    } else if (kill(root, 0) != 0) {
      break;
    }
    if (duration_s > 0 && std::chrono::steady_clock::now() >= deadline) break;
    if (!keep_recording()) break;
    timespec tick{0, 50 * 1000 * 1000};
    if (sigtimedwait(&stop_signals, nullptr, &tick) > 0) break;
  }
  if (pidfd >= 0) close(pidfd);
}

// Processes found running when attaching are introduced as if just forked
// and exec'd, so the artifact names them; their events can only follow.
std::vector<Event> introduce_running_processes(const std::vector<pid_t>& tree, pid_t root) {
  std::vector<Event> introductions;
  for (pid_t pid : tree) {
    Event e;
    e.pid = e.tid = pid;
    e.timestamp = clock_ns(CLOCK_MONOTONIC);
    if (pid != root) {
      e.type = EventType::Fork;
      e.parent_pid = parent_of(pid);
      introductions.push_back(e);
    }
    e.type = EventType::Exec;
    e.image = std::make_shared<ProcessImage>(read_process_image(pid));
    introductions.push_back(e);
  }
  return introductions;
}

// Per-process probes hold a few descriptors per live tracked process.
void raise_fd_limit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// Why the options take every allocation through the uprobes, or "": raw
// stacks are the kernel's copies, --global-probes and --empty-probes are
// about the probes themselves.
std::string uprobes_only(const RecordOptions& options, const Mechanisms& mechanisms) {
  if (options.uprobes) return "--uprobes";
  if (options.stack_mode == StackMode::Raw) return "--stack-mode raw keeps the kernel's raw copies";
  if (options.global_probes) return "--global-probes";
  if (mechanisms.child_stop == ChildStop::GlobalProbes) return "probes for every process";
  if (options.empty_probes) return "--empty-probes";
  return {};
}

// The interposer's shared memory, events and (with call paths) the rule
// table the interposers walk with; empty when the options take everything
// through the uprobes (with a note unless --uprobes asked for it) or when it
// cannot be set up (with a warning: the recording is then exact but pays a
// kernel entry per call).
struct FastPath {
  std::unique_ptr<InterposerChannel> channel;
  std::unique_ptr<InterposerStacks> stacks;
};

FastPath open_fast_path(const RecordOptions& options, const Mechanisms& mechanisms, GuardianLink& guardian) {
  FastPath fast;
  if (std::string reason = uprobes_only(options, mechanisms); !reason.empty()) {
    if (!options.uprobes && !options.quiet)
      std::fprintf(stderr, "memtrack: note: no fast path (%s): every allocation goes through uprobes\n", reason.c_str());
    return fast;
  }
  std::string library = find_interposer_library();
  std::string why_not;
  if (library.empty()) {
    why_not = "libmemtrack-interpose.so is neither next to memtrack nor in ../lib/memtrack";
  } else {
    // Under sudo the command runs as the invoking user (target_process.cpp).
    uid_t owner = static_cast<uid_t>(-1);
    if (const char* uid = std::getenv("SUDO_UID"); uid && getuid() == 0) owner = static_cast<uid_t>(std::strtoul(uid, nullptr, 10));
    try {
      fast.channel = std::make_unique<InterposerChannel>(library, owner);
      if (options.stack_mode == StackMode::Walk) fast.stacks = std::make_unique<InterposerStacks>(owner, options.stack_budget);
    } catch (const std::exception& e) {
      why_not = e.what();
      fast = {};
    }
  }
  if (!why_not.empty() && !options.quiet)
    std::fprintf(stderr, "memtrack: warning: no fast path (%s): every allocation goes through uprobes\n", why_not.c_str());
  if (fast.channel) guardian.remove_if_left(fast.channel->path());
  if (fast.stacks) guardian.remove_if_left(fast.stacks->path());
  return fast;
}

// The mechanism of each concern on this kernel (record/probes/kernel_features.h);
// throws when memtrack cannot record here, naming what is missing.
Mechanisms choose_for_this_kernel(const RecordOptions& options) {
  KernelFeatures kernel = KernelFeatures::probe();
  if (std::string missing = kernel.missing_requirement(); !missing.empty())
    throw std::runtime_error("cannot record on this kernel: " + missing);
  MechanismRequest request;
  request.classic_uprobes = options.classic_uprobes;
  request.global_probes = options.global_probes;
  request.ptrace_hold = options.hold == HoldMode::Ptrace;
  request.can_ptrace = options.attach_pid == 0;
  request.memory_records = options.memory_records;
  request.rss_sampling = options.rss_sampling;
  Mechanisms mechanisms = choose_mechanisms(kernel, request);
  if (!options.quiet)
    for (const auto& fallback : mechanisms.fallbacks)
      std::fprintf(stderr, "memtrack: Linux %s: %s\n", kernel.release.c_str(), fallback.c_str());
  return mechanisms;
}

// The command memtrack runs (none with --pid), started stopped before its
// exec (and before the BPF programs load, so it never holds their
// descriptors): mapping collection and tracking begin before its first
// instruction. With --hold ptrace, the tracer that holds its tasks; when
// ptrace is refused, tasks are held by SIGSTOP and `mechanisms` says how a
// new child stops instead.
struct Command {
  std::unique_ptr<TargetProcess> target;
  std::unique_ptr<PtraceHold> hold;
};

Command start_command(const RecordOptions& options, const FastPath& fast, GuardianLink& guardian,
                      Mechanisms& mechanisms) {
  Command command;
  if (!options.attach_pid) {
    std::vector<std::string> environment;
    if (fast.channel) {
      for (char** e = environ; *e; ++e) environment.emplace_back(*e);
      environment = fast.channel->environment_for_command(environment);
      name_stacks_file(environment, fast.stacks.get());
    }
    command.target = std::make_unique<TargetProcess>(options.command, guardian.job_pgrp(),
                                                     fast.channel ? &environment : nullptr);
    guardian.target_started(command.target->pid());
  }
  if (!mechanisms.ptrace_hold) return command;
  try {
    if (!command.target) throw std::runtime_error("--pid attaches to processes memtrack did not start");
    command.hold = std::make_unique<PtraceHold>(command.target->pid(), mechanisms.child_stop != ChildStop::GlobalProbes);
    // Set here, not at construction: the hold needs the started command.
    command.target->set_reaper(command.hold.get());
  } catch (const std::exception& e) {
    if (!options.quiet)
      std::fprintf(stderr, "memtrack: warning: --hold ptrace: %s; tasks are held by SIGSTOP instead (their "
                   "parents can see those stops)\n", e.what());
    // The child then stops the way the kernel allows without the hold.
    if (mechanisms.child_stop == ChildStop::PtraceHold) mechanisms.child_stop = mechanisms.child_stop_without_hold;
  }
  return command;
}

uint8_t wire_stack_mode(StackMode mode) {
  switch (mode) {
    case StackMode::Walk: return MT_STACKS_WALK;
    case StackMode::Raw: return MT_STACKS_RAW;
    case StackMode::Off: return MT_STACKS_OFF;
  }
  return MT_STACKS_OFF;
}

// What the sizes of the BPF maps depend on: the options and whether the
// fast path serves the processes it can.
BpfConfig map_sizes(const RecordOptions& options, const FastPath& fast) {
  BpfConfig config;
  const RingSizes& rings = fast.channel ? kFastPathRings : kUprobeRings;
  config.event_ring_bytes = options.event_ring_bytes ? options.event_ring_bytes : rings.event_ring_bytes;
  config.stack_ring_bytes = options.stack_ring_bytes ? options.stack_ring_bytes : rings.stack_ring_bytes;
  config.stack_mode = wire_stack_mode(options.stack_mode);
  return config;
}

BpfConfig bpf_config(const RecordOptions& options, const Mechanisms& mechanisms, const FastPath& fast,
                     const Command& command) {
  BpfConfig config = map_sizes(options, fast);
  config.empty_probes = options.empty_probes;
  config.uprobes = mechanisms.uprobes;
  config.per_process = mechanisms.child_stop != ChildStop::GlobalProbes;
  config.stack_budget = options.stack_budget;
  config.memory_records = options.memory_records;
  config.rss_step_bytes = options.rss_step_bytes;
  config.rss_hook = mechanisms.rss == RssMechanism::Tracepoint || mechanisms.rss == RssMechanism::TracepointCountArgument;
  config.rss_count_argument = mechanisms.rss == RssMechanism::TracepointCountArgument;
  config.interposer = fast.channel != nullptr;
  config.ptrace_hold = command.hold != nullptr;
  config.child_stops_itself = mechanisms.child_stop == ChildStop::ChildSelfStop;
  if (command.hold) config.resume = [hold = command.hold.get()](pid_t pid) { hold->release(pid); };
  return config;
}

// Where RSS over time comes from: nowhere (--no-memory-records), the
// kernel's rss_stat hook, or /proc/PID/statm where the hook was refused.
enum class RssSource { None, Kernel, Statm };

RssSource rss_source_of(const RecordOptions& options, const BpfSession& session) {
  if (!options.memory_records) return RssSource::None;
  return session.rss_hooked() ? RssSource::Kernel : RssSource::Statm;
}

ArtifactHeader make_header(const RecordOptions& options, const Mechanisms& mechanisms, std::string_view mapping_source,
                           bool interposer, RssSource rss) {
  ArtifactHeader h;
  h.features = {"alloc-events", "process-tree", std::string(mapping_source)};
  if (interposer) h.features.push_back("interposer");
  if (options.stack_mode == StackMode::Walk) h.features.push_back("stacks-walk");
  if (options.stack_mode == StackMode::Raw) h.features.push_back("stacks-raw");
  if (options.embed_modules) h.features.push_back("modules-embedded");
  if (rss == RssSource::Kernel) h.features.push_back("rss-kernel");
  if (rss == RssSource::Statm) h.features.push_back("rss-statm");
  if (options.memory_records) h.features.push_back("direct-mappings");
  // The recording may end before its processes and cannot see what they
  // allocated before it: the report words its figures so.
  if (options.attach_pid) h.features.push_back("attached");
  h.recorder_version = MEMTRACK_VERSION;
  if (options.attach_pid)
    h.command = {"--pid", std::to_string(options.attach_pid)};
  else
    h.command = options.command;
  utsname u;
  if (uname(&u) == 0) {
    h.host = u.nodename;
    h.kernel = std::string(u.sysname) + " " + u.release + " " + u.machine;
  }
  h.start_monotonic_ns = clock_ns(CLOCK_MONOTONIC);
  h.start_realtime_ns = clock_ns(CLOCK_REALTIME);
  h.page_size = static_cast<uint32_t>(sysconf(_SC_PAGESIZE));
  h.kernel_fallbacks = mechanisms.fallbacks;
  return h;
}

WriterOptions writer_options(const RecordOptions& options, const ArtifactHeader& header) {
  WriterOptions writer;
  writer.layout = options.layout;
  if (options.aggregator) {
    writer.aggregator = options.aggregator(header);
    writer.checkpoint_interval =
        std::chrono::milliseconds(static_cast<int64_t>(std::llround(options.checkpoint_every_s * 1000)));
  }
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  // A worker encodes 8.5 M events/s and takes ~8 MiB; a CPU produces at most
  // ~1.1 M events/s (docs/BENCHMARKS.md): one worker per 7 CPUs keeps up.
  writer.workers = options.encode_workers ? options.encode_workers : (cores + 6) / 7;
  return writer;
}

// The unwind learner, with call paths: it learns the rules the kernel's and
// the interposers' walks miss, with the cache of files' prepared rules.
std::unique_ptr<UnwindLearner> open_learner(const RecordOptions& options, BpfSession& session, const FastPath& fast) {
  if (!session.captures_stacks()) return nullptr;
  std::unique_ptr<RuleCache> cache;
  if (options.unwind_cache) {
    std::string dir = RuleCache::default_dir(), why;
    if (!dir.empty()) {
      cache = RuleCache::open(dir, &why);
      if (!cache && !options.quiet)
        std::fprintf(stderr, "memtrack: the cache of unwind rules is not used: %s\n", why.c_str());
    }
  }
  if (fast.stacks) return std::make_unique<UnwindLearner>(session, std::move(cache), fast.stacks.get(), fast.channel->library());
  return std::make_unique<UnwindLearner>(session, std::move(cache));
}

// Everything that takes records from the kernel and the interposers to the
// pipeline: the learner, the attacher, the poller (started) and, where the
// kernel's RSS hook is refused, the statm sampler. Declared in the order
// they must be destroyed in reverse.
class Intake {
 public:
  Intake(const RecordOptions& options, BpfSession& session, MappingCollector& mappings, const FastPath& fast,
         EventPipeline& pipeline, RssSource rss)
      : mappings_(mappings),
        learner_(open_learner(options, session, fast)),
        attacher_(session, {learner_.get(), fast.channel.get(), fast.channel ? fast.channel->library() : "",
                            options.attach_pid != 0,
                            // Without perf records, a process's mappings are read while it is
                            // stopped for its new executable mappings.
                            mappings.source() == MappingCollector::Source::ProcMaps
                                ? std::function<void(pid_t)>([this](pid_t pid) { snapshot(pid); })
                                : nullptr}),
        poller_(session, attacher_, mappings, learner_.get(),
                {[&pipeline](std::vector<Event>&& batch) { pipeline.push(std::move(batch)); },
                 [&pipeline] { return pipeline.spare_batch(); }, fast.channel.get(),
                 fast.channel ? RingPoller::Room([&pipeline](std::chrono::milliseconds wait) {
                   return pipeline.interposer_room(wait);
                 })
                              : nullptr,
                 learner_ ? fast.stacks.get() : nullptr}) {
    poller_.start();
    if (rss != RssSource::Statm) return;
    statm_ = std::make_unique<StatmSampler>([&session] { return session.tracked_pids(); },
                                            [this](std::vector<Event>&& batch) { poller_.post(std::move(batch)); });
  }

  // Posts `pid`'s mappings as read from /proc now.
  void snapshot(pid_t pid) { poller_.post(mappings_.snapshot_mappings(pid, clock_ns(CLOCK_MONOTONIC))); }
  ProbeAttacher& attacher() { return attacher_; }
  // Every event stamped at or before it is in the pipeline (RingPoller::handed_through).
  uint64_t handed_through() const { return poller_.handed_through(); }

  // The last events are in the rings: drains them, answers the requests
  // already made (so no task is left stopped) and stops learning.
  void stop() {
    if (statm_) statm_->stop();
    poller_.stop();
    attacher_.drain();
    if (learner_) learner_->finish();
  }

  std::map<std::string, uint64_t> counters() const {
    std::map<std::string, uint64_t> all = attacher_.counters();
    all.merge(poller_.counters());
    if (learner_) all.merge(learner_->counters());
    if (statm_) all.merge(statm_->counters());
    return all;
  }

 private:
  MappingCollector& mappings_;
  std::unique_ptr<UnwindLearner> learner_;
  ProbeAttacher attacher_;
  RingPoller poller_;
  std::unique_ptr<StatmSampler> statm_;
};

// Loads the interposer into the running process `pid` and starts it
// (record --pid): its threads then record in-process, as a command's do.
// Returns why not (the process then stays on the uprobes), or "";
// `safe_point` says where the thread that loaded it was stopped.
std::string attach_interposer(pid_t pid, const FastPath& fast, BpfSession& session, SafePoint& safe_point) {
  const std::string& library = fast.channel->library();
  struct stat st;
  if (stat(library.c_str(), &st) != 0) return library + ": " + std::strerror(errno);
  // Its mapping needs no probes: the process is not stopped for it.
  session.mark_file_known(session.per_process() ? pid : 0, kernel_dev_of(st.st_dev), st.st_ino);
  fast.channel->set_decision(pid, true);
  RemoteCall call{library, MT_ATTACH_FUNCTION, fast.channel->path(), fast.stacks ? fast.stacks->path() : ""};
  try {
    RemoteResult answer = call_in_process(pid, call);
    safe_point = answer.safe_point;
    int result = answer.value;
    if (result == MT_ATTACH_OK) return {};
    static const char* const kWhy[] = {
#define MT_ATTACH_TEXT(name, text) text,
        MT_ATTACH_RESULTS(MT_ATTACH_TEXT)
#undef MT_ATTACH_TEXT
    };
    return result > 0 && result < MT_ATTACH_RESULT_COUNT ? kWhy[result] : "the interposer answered " + std::to_string(result);
  } catch (const std::exception& e) {
    return e.what();
  }
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// How a run ended: the command's wait status (0 for an attached tree), or
// nullopt when the command was left running.
struct RunEnd {
  std::optional<int> wait_status;
};

// The recorder's own cost (its threads; the writer's last frame excepted),
// apart from the program's.
std::map<std::string, uint64_t> recorder_cost() {
  std::map<std::string, uint64_t> cost;
  if (rusage usage{}; getrusage(RUSAGE_SELF, &usage) == 0) {
    auto microseconds = [](const timeval& t) { return uint64_t(t.tv_sec) * 1000000 + uint64_t(t.tv_usec); };
    cost["recorder_user_us"] = microseconds(usage.ru_utime);
    cost["recorder_system_us"] = microseconds(usage.ru_stime);
    cost["recorder_minor_faults"] = uint64_t(usage.ru_minflt);
    cost["recorder_max_rss_kib"] = uint64_t(usage.ru_maxrss);  // its peak so far
  }
  return cost;
}

// What stderr says at the end of a complete recording.
void print_summary(const ArtifactWriter& writer, const ArtifactTrailer& trailer, const ProbeAttacher& attacher,
                   const BpfConfig& config, bool ptrace_hold) {
  for (const auto& w : attacher.warnings()) std::fprintf(stderr, "memtrack: warning: %s\n", w.c_str());
  auto counter = [&](const char* name) { return trailer.counters.count(name) ? trailer.counters.at(name) : 0; };
  // Each classic perf uprobe costs ~60 ms to close, one after another
  // (docs/BENCHMARKS.md, "Kernels"): say what a process-heavy run paid.
  if (uint64_t probes = counter("probes_attached");
      config.uprobes == UprobeMechanism::Classic && config.per_process && probes >= 200)
    std::fprintf(stderr,
                 "memtrack: note: %lu classic perf uprobes were attached for the processes one by one, each "
                 "costing ~60 ms to remove on this kernel; --global-probes attaches them once for the whole run\n",
                 static_cast<unsigned long>(probes));
  uint64_t lost = 0;
  for (const auto& [name, value] : trailer.counters)  // saturating, as report's sum
    if ((name.ends_with("_lost") || name.ends_with("_dropped")) && __builtin_add_overflow(lost, value, &lost))
      lost = UINT64_MAX;
  const WriterStats stats = writer.stats();
  // record --aggregate: the events it kept figures of, and the records written.
  std::string written = std::to_string(stats.events) + " events";
  if (stats.aggregated_events > 0)
    written = std::to_string(stats.aggregated_events) + " events aggregated, " + std::to_string(stats.events) + " records";
  std::fprintf(stderr, "memtrack: %s written to %s (%lu lost; tasks held by %s)\n", written.c_str(),
               writer.file_path().c_str(),
               static_cast<unsigned long>(lost), ptrace_hold ? "ptrace" : "SIGSTOP");
  if (uint64_t implausible = counter("interposer_counters_implausible") + counter("interposer_stack_counters_implausible"))
    std::fprintf(stderr,
                 "memtrack: warning: %lu counter(s) in the memory memtrack shares with the command's processes "
                 "had values no recording reaches (written over?): left out of the trailer (counters "
                 "interposer_*counters_implausible)\n",
                 static_cast<unsigned long>(implausible));
}

// What stderr says when the artifact could not be completely written.
void print_write_failure(const ArtifactWriter& writer, const std::string& error, bool reported) {
  WriterStats stats = writer.stats();
  if (!reported) std::fprintf(stderr, "memtrack: error: %s\n", error.c_str());
  if (!stats.replaced)
    std::fprintf(stderr, "memtrack: %s is incomplete: %lu records written, %s\n", writer.file_path().c_str(),
                 static_cast<unsigned long>(stats.events),
                 stats.trailer_written ? "then the trailer (its counters say what was dropped)"
                                       : "no trailer (it ends with the last complete frame)");
}

// One recording, from the kernel's mechanisms to the artifact's trailer. The
// parts are members in the order they must be destroyed in reverse: the
// ptrace hold outlives everything that resumes tasks, and the guard that
// makes the kernel stop no more tasks goes first.
class Recording {
 public:
  Recording(const RecordOptions& options, const std::string& output, GuardianLink& guardian)
      : options_(options),
        output_(output),
        guardian_(guardian),
        mechanisms_(choose_for_this_kernel(options)),
        fast_(open_fast_path(options, mechanisms_, guardian)),
        command_(start_command(options, fast_, guardian, mechanisms_)),
        prepared_(std::async(std::launch::async,
                             [sizes = map_sizes(options, fast_)] { return std::make_unique<PreparedSkeleton>(sizes); })),
        config_(bpf_config(options, mechanisms_, fast_, command_)),
        session_((raise_fd_limit(), config_), prepared_.get()),
        // Measured before the target runs, to warn before it does. On the
        // fast path only the processes that cannot load the interposer pay
        // it: no warning, and it is measured while the recording starts and
        // runs (its attach waits for a grace period of the kernel's).
        probe_cost_(fast_.channel ? std::map<std::string, uint64_t>{}
                                  : check_probe_cost(session_, options.probe_cost_warning_ns, options.quiet)),
        probe_cost_later_(fast_.channel ? std::async(std::launch::async, [this] {
          return check_probe_cost(session_, 0, true);
        })
                                        : std::future<std::map<std::string, uint64_t>>()),
        mappings_(command_.target ? MappingCollector(command_.target->pid()) : MappingCollector()),
        rss_(rss_source_of(options, session_)),
        header_(make_header(options, mechanisms_, mappings_.feature(), fast_.channel != nullptr, rss_)),
        writer_(output, header_, writer_options(options, header_)),
        pipeline_(writer_, options.embed_modules ? EventPipeline::Observer([this](const std::vector<Event>& batch) {
          mapped_.note(batch);
        })
                                                 : nullptr),
        intake_(options, session_, mappings_, fast_, pipeline_, rss_),
        stop_stopping_tasks_{session_, fast_} {
    guardian.tracking(session_.tracked_pids_fd());
    if (!mappings_.fallback_reason().empty() && !options.quiet)
      std::fprintf(stderr, "memtrack: mappings from /proc snapshots: %s\n", mappings_.fallback_reason().c_str());
    if (rss_ == RssSource::Statm && config_.rss_hook && !options.quiet)
      std::fprintf(stderr, "memtrack: the kernel refused the rss_stat hook: RSS sampled from /proc/PID/statm\n");
  }

  // Runs the command or records the attached tree until the end, then
  // finishes the artifact; returns memtrack's exit code.
  int run() {
    RunEnd end = options_.attach_pid ? record_attached() : record_command();
    return finish(end);
  }

  // The recording is over and `exit_code` is memtrack's: what anyone can see
  // is finished (the artifact, stderr, the /dev/shm files), so memtrack
  // exits now. The destruction that follows (closing the probe links, each
  // close waiting for a grace period of the kernel's, ~0.05-0.13 s, and the
  // maps) goes on in this process after memtrack has exited, holding no
  // descriptor of the caller's (its pipes see their end with memtrack's).
  void hand_back(int exit_code) {
    if (fast_.channel) fast_.channel->remove_file();
    if (fast_.stacks) fast_.stacks->remove_file();
    std::fflush(stdout);
    std::fflush(stderr);
    if (int null = open("/dev/null", O_RDWR | O_CLOEXEC); null >= 0) {
      for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) dup2(null, fd);
      close(null);
    }
    guardian_.done(exit_code);
  }

  // After hand_back: the probes detach (no program runs any more, so nothing
  // can have paused a task after this last look), then the destructor
  // releases the rest.
  void release_kernel_objects() {
    session_.detach_all();
    session_.resume_paused();
  }

 private:
  // Once the artifact cannot be written (or memtrack's main process is
  // gone), recording stops at once: the kernel stops no task and records
  // nothing, the probes detach, and the command runs on undisturbed.
  // Returns whether to wait on.
  bool keep_recording() {
    std::string write_error = pipeline_.error();
    bool orphaned = guardian_.guardian_gone();
    if (!stopped_early_ && (orphaned || !write_error.empty())) {
      stopped_early_ = true;
      std::string what = options_.attach_pid ? "the process tree" : "'" + options_.command[0] + "'";
      if (!write_error.empty())
        std::fprintf(stderr, "memtrack: error: %s: recording stopped; %s runs on unrecorded\n", write_error.c_str(),
                     what.c_str());
      else
        std::fprintf(stderr, "memtrack: memtrack's main process is gone: recording stopped; %s runs on\n", what.c_str());
      stop_stopping_tasks_.now();
      session_.detach_all();
      if (command_.hold) command_.hold->stop();
    }
    // Without the guardian nobody waits for memtrack's status: finish now.
    return !orphaned && (write_error.empty() || !options_.attach_pid);
  }

  RunEnd record_attached() {
    std::vector<pid_t> tree = process_tree(options_.attach_pid);
    pipeline_.push(introduce_running_processes(tree, options_.attach_pid));
    for (pid_t pid : tree) intake_.snapshot(pid);
    for (pid_t pid : tree) session_.track_process(pid, parent_of(pid));
    if (fast_.channel) {
      for (pid_t pid : tree) {
        auto start = std::chrono::steady_clock::now();
        SafePoint safe_point = SafePoint::kWaiting;
        std::string why_not = attach_interposer(pid, fast_, session_, safe_point);
        attach_us_ = std::max<uint64_t>(attach_us_, uint64_t(seconds_since(start) * 1e6));
        if (why_not.empty()) {
          ++attached_in_process_;
          attached_pids_.push_back(pid);
          ++safe_points_[static_cast<size_t>(safe_point)];
        } else {
          ++attach_refused_;
          if (!options_.quiet)
            std::fprintf(stderr, "memtrack: pid %d: not attached in-process (%s): its allocations go through uprobes\n",
                         pid, why_not.c_str());
        }
      }
    }
    // An interposed process's glibc entry points are left out.
    for (pid_t pid : tree) intake_.attacher().probe_process(pid);
    publish_artifact(writer_, output_);
    start_snapshots(options_.attach_pid);
    if (!options_.quiet)
      std::fprintf(stderr, "memtrack: recording %zu process(es) of tree %d; Ctrl-C to stop\n", tree.size(),
                   options_.attach_pid);
    wait_for_attach_end(options_.attach_pid, options_.duration_s, [this] { return keep_recording(); });
    return {0};
  }

  RunEnd record_command() {
    // A failed start leaves an existing file at `output` untouched: the
    // unpublished writer removes only its own temporary file.
    session_.track_process(command_.target->pid(), getpid());
    command_.target->resume();
    publish_artifact(writer_, output_);
    start_snapshots(command_.target->pid());
    std::optional<int> status = command_.target->wait([this] { return keep_recording(); });
    if (status) guardian_.target_exited(*status);
    return {status};  // nullopt: left running
  }

  // Once the artifact is published: snapshots are reports of its file.
  void start_snapshots(pid_t root) {
    auto events_appended_through = [this] {
      uint64_t handed = intake_.handed_through();
      pipeline_.sync();
      return handed;
    };
    snapshots_ = std::make_unique<SnapshotTaker>(
        options_.snapshots,
        SnapshotTaker::Recording{writer_, output_, header_.start_monotonic_ns, root, events_appended_through,
                                 static_cast<bool>(options_.aggregator)});
  }

  // Teardown: requests already made are answered (so no task is left
  // stopped), then the writer finishes; the probes detach after memtrack
  // has exited (hand_back, release_kernel_objects).
  int finish(const RunEnd& end) {
    if (snapshots_) snapshots_->stop();  // a snapshot in progress is written
    stop_stopping_tasks_.now();
    wait_for_detach();
    intake_.stop();
    session_.resume_paused();
    pipeline_.close();
    std::string write_error = pipeline_.error();

    ArtifactTrailer trailer;
    trailer.counters = session_.counters();
    trailer.counters.merge(intake_.counters());
    trailer.counters.merge(mappings_.counters());
    if (probe_cost_later_.valid()) probe_cost_ = probe_cost_later_.get();
    trailer.counters.merge(probe_cost_);
    if (fast_.channel) trailer.counters.merge(fast_.channel->counters());
    if (fast_.stacks) trailer.counters.merge(fast_.stacks->counters());
    if (!write_error.empty()) trailer.counters["write_error_records_dropped"] = pipeline_.dropped();
    // After every Mapping record, before the trailer.
    if (options_.embed_modules && write_error.empty())
      trailer.counters.merge(embed_modules(mapped_, writer_, options_.quiet));
    trailer.end_monotonic_ns = clock_ns(CLOCK_MONOTONIC);
    trailer.exit_status = end.wait_status.value_or(0);
    if (!end.wait_status) trailer.counters["exit_status_unknown"] = 1;
    session_.resume_paused();  // anything paused while the rings were drained last
    if (command_.hold) {
      command_.hold->stop();
      trailer.counters.merge(command_.hold->counters());
      if (uint64_t expired = trailer.counters["ptrace_holds_expired"]; expired && !options_.quiet)
        std::fprintf(stderr, "memtrack: warning: %lu ptrace hold(s) got no release for 10 s and were ended\n",
                     static_cast<unsigned long>(expired));
    }
    if (options_.attach_pid && fast_.channel) {
      trailer.counters["attach_in_process"] = attached_in_process_;
      trailer.counters["attach_in_process_refused"] = attach_refused_;
      trailer.counters["attach_in_process_us"] = attach_us_;
      trailer.counters["detach_in_process_us"] = detach_us_;
      trailer.counters["detach_in_process_pending"] = detach_pending_;
      trailer.counters["attach_at_waiting_call"] = safe_points_[size_t(SafePoint::kWaiting)];
      trailer.counters["attach_in_program_code"] = safe_points_[size_t(SafePoint::kProgramCode)];
      trailer.counters["attach_at_breakpoint"] = safe_points_[size_t(SafePoint::kBreakpoint)];
    }
    trailer.counters.merge(recorder_cost());
    if (snapshots_) trailer.counters.merge(snapshots_->counters());
    bool reported = !write_error.empty();  // when it happened
    try {
      writer_.finish(trailer);
    } catch (const std::exception& e) {
      write_error = e.what();
      reported = false;
    }
    if (!write_error.empty())
      print_write_failure(writer_, write_error, reported);
    else if (!options_.quiet)
      print_summary(writer_, trailer, intake_.attacher(), config_, command_.hold != nullptr);
    // The command's status is memtrack's; without a command, a failed write
    // is. With --pid, an incomplete artifact is memtrack's failure: 125, as in
    // src/cli/exit_status.h (README, "Exit statuses").
    if (options_.attach_pid) return write_error.empty() ? 0 : 125;
    return end.wait_status ? exit_code_of(*end.wait_status) : 0;
  }

  // The processes attached in-process put their GOT entries back at their
  // first allocator call after the end (interpose.c, detach_from_process).
  // One that made none within 0.05 s (idle, or allocating through its own
  // pools) is made to, through ptrace as at the attach; one that cannot be
  // does at its next call.
  void wait_for_detach() {
    if (!attached_in_process_) return;
    auto start = std::chrono::steady_clock::now();
    while (fast_.channel->detached() < attached_in_process_ && seconds_since(start) < 0.05)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    for (pid_t pid : attached_pids_) {
      std::string maps = read_proc_text("/proc/" + std::to_string(pid) + "/maps").value_or("");
      if (maps.find(fast_.channel->path()) == std::string::npos) continue;  // detached (or gone)
      try {
        call_in_process(pid, {fast_.channel->library(), MT_DETACH_FUNCTION, "", ""});
      } catch (const std::exception& e) {
        if (!options_.quiet) std::fprintf(stderr, "memtrack: pid %d: cannot detach now: %s\n", pid, e.what());
      }
    }
    while (fast_.channel->detached() < attached_in_process_ && seconds_since(start) < 0.2)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    detach_us_ = uint64_t(seconds_since(start) * 1e6);
    detach_pending_ = attached_in_process_ - std::min<uint64_t>(fast_.channel->detached(), attached_in_process_);
    if (detach_pending_ && !options_.quiet)
      std::fprintf(stderr,
                   "memtrack: note: %lu attached process(es) still have their allocator entry points redirected: "
                   "the interposer puts them back at their next allocator call\n",
                   static_cast<unsigned long>(detach_pending_));
  }

  // However the recording ends (an exception included), the kernel stops no
  // task any more and no producer stays paused.
  struct StopStoppingTasks {
    BpfSession& session;
    FastPath& fast;
    void now() {
      session.end_recording();
      if (fast.channel) fast.channel->end();
      session.resume_paused();
    }
    ~StopStoppingTasks() { now(); }
  };

  const RecordOptions& options_;
  const std::string& output_;
  GuardianLink& guardian_;
  Mechanisms mechanisms_;
  FastPath fast_;
  Command command_;  // its ptrace hold outlives everything that resumes tasks
  // The skeleton's largest maps, created by two threads (taken by session_).
  // Started once the command is forked: the command's image before its exec
  // is a copy of this process, whose RSS the kernel records as the command's
  // when that image is torn down at the exec (its peak included memory the
  // threads had allocated by the fork, or not: DefaultsTest
  // MemtracksOwnMemoryIsNotTheProgramsOnEitherPath failed one run in two).
  std::future<std::unique_ptr<PreparedSkeleton>> prepared_;
  BpfConfig config_;
  BpfSession session_;
  std::map<std::string, uint64_t> probe_cost_;
  std::future<std::map<std::string, uint64_t>> probe_cost_later_;  // on the fast path
  MappingCollector mappings_;
  RssSource rss_;
  ArtifactHeader header_;
  ArtifactWriter writer_;
  MappedFiles mapped_;  // read by this thread only after pipeline_.close()
  EventPipeline pipeline_;
  Intake intake_;
  std::unique_ptr<SnapshotTaker> snapshots_;  // reads writer_: stopped before it finishes
  bool stopped_early_ = false;
  // record --pid: processes whose interposer records, refused, the longest
  // attach and the wait for the detaches (microseconds).
  uint64_t attached_in_process_ = 0, attach_refused_ = 0, attach_us_ = 0, detach_us_ = 0, detach_pending_ = 0;
  std::array<uint64_t, 3> safe_points_{};  // by SafePoint
  std::vector<pid_t> attached_pids_;
  StopStoppingTasks stop_stopping_tasks_;  // last: runs first
};

}  // namespace

int record(const RecordOptions& options) {
  if (options.attach_pid && kill(options.attach_pid, 0) != 0) {
    const std::string pid = std::to_string(options.attach_pid);
    throw std::runtime_error(errno == EPERM ? "not permitted to attach to process " + pid +
                                                  " (another user's): run memtrack as root"
                                            : "no process " + pid);
  }
  std::string output = options.output.empty() ? default_output(options) : options.output;
  return run_guarded(output, [&](GuardianLink& guardian) {
    Recording recording(options, output, guardian);
    int code = recording.run();
    recording.hand_back(code);
    recording.release_kernel_objects();
    return code;
  });
}

}  // namespace memtrack
