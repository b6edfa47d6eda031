#include "record/recorder.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
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
#include "record/intake/ring_poller.h"
#include "record/intake/statm_sampler.h"
#include "record/intake/shm_events.h"
#include "record/process/target_process.h"
#include "record/intake/shm_stacks.h"
#include "record/unwind_rules/rule_cache.h"
#include "record/unwind_rules/unwind_learner.h"
#include "util/bounded_queue.h"

namespace memtrack {

namespace {

uint64_t clock_ns(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

ArtifactHeader make_header(const RecordOptions& options, std::string_view mapping_source, bool interposer,
                           std::string_view rss_source) {
  ArtifactHeader h;
  h.features = {"alloc-events", "process-tree", std::string(mapping_source)};
  if (interposer) h.features.push_back("interposer");
  if (options.stack_mode != "off") h.features.push_back("stacks-" + options.stack_mode);
  if (options.embed_modules) h.features.push_back("modules-embedded");
  if (!rss_source.empty()) h.features.push_back("rss-" + std::string(rss_source));
  if (options.memory_records) h.features.push_back("direct-mappings");
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
  return h;
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

// Moves event batches from the ring poller to the artifact writer on its own
// thread. Bounded by the memory the queued events hold: when the writer falls
// behind, the poller waits, the ring fills and the kernel pauses the
// producers; nothing is dropped. After a write error (e.g. the disk is full)
// batches are still taken and counted, so the poller and the kernel keep going
// until the recording is stopped.
class EventPipeline {
 public:
  // `mapped`, when given, notes every batch before it is written.
  EventPipeline(ArtifactWriter& writer, MappedFiles* mapped)
      : writer_(writer), mapped_(mapped), thread_([this] { run(); }) {}
  ~EventPipeline() { close(); }

  // An empty batch with the storage of a written one, if any. Any thread.
  std::vector<Event> spare_batch() {
    std::lock_guard lock(mutex_);
    if (spare_batches_.empty()) return {};
    std::vector<Event> batch = std::move(spare_batches_.back());
    spare_batches_.pop_back();
    return batch;
  }

  void push(std::vector<Event>&& batch) {
    size_t events = batch.size(), bytes = memory_of(batch);
    if (batches_.push(std::move(batch), bytes)) return;
    std::lock_guard lock(mutex_);  // after close(): counted, never silently lost
    dropped_ += events;
  }
  // How many interposer events the poller should drain now: as many as keep
  // the queue's events under kInterposerQueuedBytes. When there is no room,
  // waits up to `wait` for the queue to be half empty.
  size_t interposer_room(std::chrono::milliseconds wait) {
    size_t queued = batches_.wait_until_at_most(kInterposerQueuedBytes / 2, wait);
    return queued < kInterposerQueuedBytes ? (kInterposerQueuedBytes - queued) / sizeof(Event) : 0;
  }
  // Waits for the writer to take every batch.
  void close() {
    batches_.close();
    if (thread_.joinable()) thread_.join();
  }
  // The writer's first error, or empty. Any thread. Asks the writer too: a
  // frame that fails after the last append (the program went quiet) would
  // otherwise be known only at finish.
  std::string error() const {
    {
      std::lock_guard lock(mutex_);
      if (!error_.empty()) return error_;
    }
    return writer_.error();
  }
  // Records taken after the write error, not written.
  uint64_t dropped() const {
    std::lock_guard lock(mutex_);
    return dropped_;
  }

 private:
  // A few frames' worth of events; a stack-heavy batch counts its copies.
  static constexpr size_t kMaxQueuedBytes = size_t{64} << 20;
  // The interposer's events are drained only while the queue holds less:
  // they wait in their chunks instead (shared memory, already resident,
  // 56 bytes an event against an Event's 120), and a full chunk makes its
  // thread wait, so a program that allocates faster than the writer packs
  // does not fill the queue. Drained as fast as they came, they filled it
  // towards kMaxQueuedBytes in whole-chunk batches that the spare pools
  // then kept: the recorder of a 400,000-call malloc loop was ~33 MiB
  // bigger than on the uprobe path, whose events come slower than the
  // writer takes them.
  static constexpr size_t kInterposerQueuedBytes = size_t{256} << 10;
  // Written batches kept for the poller to fill again.
  static constexpr size_t kSpareBatches = 4;

  static size_t memory_of(const std::vector<Event>& batch) {
    size_t bytes = batch.capacity() * sizeof(Event);
    for (const Event& e : batch) {
      if (e.stack)
        bytes += sizeof(StackDefinition) + e.stack->bytes.size() +
                 sizeof(uint64_t) * (e.stack->chain.size() + e.stack->regs.size() + e.stack->fp_chain.size());
      if (e.mapping) bytes += sizeof(MappingInfo) + e.mapping->path.size() + e.mapping->build_id.size();
      if (e.image) bytes += sizeof(ProcessImage) + e.image->path.size() + e.image->comm.size();
    }
    return bytes;
  }

  void run() {
    while (std::optional<std::vector<Event>> batch = batches_.pop()) {
      if (mapped_) mapped_->note(*batch);
      if (!error().empty()) {
        std::lock_guard lock(mutex_);
        dropped_ += batch->size();
        continue;
      }
      try {
        writer_.append(*batch);
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex_);
        error_ = e.what();  // the writer counts what it held
      }
      batch->clear();
      std::lock_guard lock(mutex_);
      if (spare_batches_.size() < kSpareBatches) spare_batches_.push_back(std::move(*batch));
    }
  }
  ArtifactWriter& writer_;
  MappedFiles* mapped_;
  mutable std::mutex mutex_;
  std::string error_;
  uint64_t dropped_ = 0;
  std::vector<std::vector<Event>> spare_batches_;
  BoundedQueue<std::vector<Event>> batches_{kMaxQueuedBytes};
  std::thread thread_;
};

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

// Why the options take every allocation through the uprobes, or "": --pid
// attaches to processes that cannot load the interposer any more, raw
// stacks are the kernel's copies, --global-probes and --empty-probes are
// about the probes themselves.
std::string uprobes_only(const RecordOptions& options, const Mechanisms& mechanisms) {
  if (options.uprobes) return "--uprobes";
  if (options.attach_pid) return "--pid attaches to running processes";
  if (options.stack_mode == "raw") return "--stack-mode raw keeps the kernel's raw copies";
  if (options.global_probes) return "--global-probes";
  if (mechanisms.child_stop == ChildStop::GlobalProbes) return "probes for every process";
  if (options.empty_probes) return "--empty-probes";
  return {};
}

// The interposer's shared memory in `channel`, or nothing: by the options
// (with a note unless --uprobes asked for it), or because it cannot be set
// up (with a warning: the recording is then exact but pays a kernel entry
// per call).
// With call paths, `stacks` holds the rule table the interposers walk with.
void open_interposer(const RecordOptions& options, const Mechanisms& mechanisms,
                     std::optional<InterposerChannel>& channel, std::optional<InterposerStacks>& stacks) {
  if (std::string reason = uprobes_only(options, mechanisms); !reason.empty()) {
    if (!options.uprobes && !options.quiet)
      std::fprintf(stderr, "memtrack: note: no fast path (%s): every allocation goes through uprobes\n", reason.c_str());
    return;
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
      channel.emplace(library, owner);
      if (options.stack_mode == "walk") stacks.emplace(owner, options.stack_budget);
    } catch (const std::exception& e) {
      why_not = e.what();
      channel.reset();
    }
  }
  if (!why_not.empty() && !options.quiet)
    std::fprintf(stderr, "memtrack: warning: no fast path (%s): every allocation goes through uprobes\n", why_not.c_str());
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
  request.hold = options.hold;
  request.can_ptrace = options.attach_pid == 0;
  request.memory_records = options.memory_records;
  request.rss_sampling = options.rss_sampling;
  Mechanisms mechanisms = choose_mechanisms(kernel, request);
  if (!options.quiet)
    for (const auto& fallback : mechanisms.fallbacks)
      std::fprintf(stderr, "memtrack: Linux %s: %s\n", kernel.release.c_str(), fallback.c_str());
  return mechanisms;
}

int record_guarded(const RecordOptions& options, const std::string& output, GuardianLink& guardian) {
  Mechanisms mechanisms = choose_for_this_kernel(options);
  std::optional<InterposerChannel> interposer;
  std::optional<InterposerStacks> interposer_stacks;
  open_interposer(options, mechanisms, interposer, interposer_stacks);
  if (interposer) guardian.remove_if_left(interposer->path());
  if (interposer_stacks) guardian.remove_if_left(interposer_stacks->path());
  // The command starts stopped before its exec (and before the BPF programs
  // load, so it never holds their descriptors), so mapping collection and
  // tracking begin before its first instruction.
  std::optional<TargetProcess> target;
  if (!options.attach_pid) {
    std::vector<std::string> environment;
    if (interposer) {
      for (char** e = environ; *e; ++e) environment.emplace_back(*e);
      environment = interposer->environment_for_command(environment);
      name_stacks_file(environment, interposer_stacks ? &*interposer_stacks : nullptr);
    }
    target.emplace(options.command, guardian.job_pgrp(), interposer ? &environment : nullptr);
    guardian.target_started(target->pid());
  }
  // Declared before everything that resumes tasks, so it outlives them.
  std::optional<PtraceHold> ptrace_hold;
  if (mechanisms.ptrace_hold) {
    try {
      if (!target) throw std::runtime_error("--pid attaches to processes memtrack did not start");
      ptrace_hold.emplace(target->pid(), mechanisms.child_stop != ChildStop::GlobalProbes);
      target->set_reaper(&*ptrace_hold);
    } catch (const std::exception& e) {
      if (!options.quiet)
        std::fprintf(stderr, "memtrack: warning: --hold ptrace: %s; tasks are held by SIGSTOP instead (their "
                     "parents can see those stops)\n", e.what());
      // The child then stops the way the kernel allows without the hold.
      if (mechanisms.child_stop == ChildStop::PtraceHold) mechanisms.child_stop = mechanisms.child_stop_without_hold;
    }
  }
  BpfConfig config;
  config.event_ring_bytes = options.event_ring_bytes;
  config.empty_probes = options.empty_probes;
  config.uprobes = mechanisms.uprobes;
  config.per_process = mechanisms.child_stop != ChildStop::GlobalProbes;
  config.stack_mode = options.stack_mode == "walk" ? MT_STACKS_WALK : options.stack_mode == "raw" ? MT_STACKS_RAW
                                                                                                : MT_STACKS_OFF;
  config.stack_budget = options.stack_budget;
  config.memory_records = options.memory_records;
  config.rss_step_bytes = options.rss_step_bytes;
  config.rss_hook = mechanisms.rss == RssMechanism::Tracepoint || mechanisms.rss == RssMechanism::TracepointCountArgument;
  config.rss_count_argument = mechanisms.rss == RssMechanism::TracepointCountArgument;
  config.interposer = interposer.has_value();
  config.ptrace_hold = ptrace_hold.has_value();
  config.child_stops_itself = mechanisms.child_stop == ChildStop::ChildSelfStop;
  raise_fd_limit();
  BpfSession session(config);
  if (ptrace_hold) session.set_resume([&](pid_t pid) { ptrace_hold->release(pid); });
  // Measured before the target runs. On the fast path only the processes
  // that cannot load the interposer pay it: no warning.
  auto probe_cost = check_probe_cost(session, options.probe_cost_warning_ns, options.quiet || interposer.has_value());
  guardian.tracking(session.tracked_pids_fd());

  MappingCollector mappings = target ? MappingCollector(target->pid()) : MappingCollector();
  if (!mappings.fallback_reason().empty() && !options.quiet)
    std::fprintf(stderr, "memtrack: mappings from /proc snapshots: %s\n", mappings.fallback_reason().c_str());

  WriterOptions writer_options;
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  // A worker encodes 8.5 M events/s and takes ~8 MiB; a CPU produces at most
  // ~1.1 M events/s (docs/BENCHMARKS.md): one worker per 7 CPUs keeps up.
  writer_options.workers = options.encode_workers ? options.encode_workers : (cores + 6) / 7;
  std::string_view rss_source = !options.memory_records ? "" : session.rss_hooked() ? "kernel" : "statm";
  ArtifactHeader header = make_header(options, mappings.feature(), interposer.has_value(), rss_source);
  header.kernel_fallbacks = mechanisms.fallbacks;
  ArtifactWriter writer(output, header, writer_options);
  MappedFiles mapped;  // read by this thread only after pipeline.close()
  EventPipeline pipeline(writer, options.embed_modules ? &mapped : nullptr);
  std::optional<UnwindLearner> learner;
  if (session.captures_stacks()) {
    learner.emplace(session);
    if (options.unwind_cache) {
      std::string dir = RuleCache::default_dir(), why;
      if (!dir.empty()) {
        if (auto cache = RuleCache::open(dir, &why))
          learner->use_cache(std::move(cache));
        else if (!options.quiet)
          std::fprintf(stderr, "memtrack: the cache of unwind rules is not used: %s\n", why.c_str());
      }
    }
  }
  UnwindLearner* learner_ptr = learner ? &*learner : nullptr;
  ProbeAttacher attacher(session, learner_ptr);
  RingPoller poller(session, attacher, mappings, learner_ptr,
                    [&](std::vector<Event>&& batch) { pipeline.push(std::move(batch)); });
  poller.take_storage_from([&] { return pipeline.spare_batch(); });
  if (interposer) {
    attacher.set_interposer(&*interposer, interposer->library());
    poller.set_interposer(&*interposer);
    poller.limit_interposer_by([&](std::chrono::milliseconds wait) { return pipeline.interposer_room(wait); });
    if (interposer_stacks && learner) {
      learner->share_with(&*interposer_stacks, interposer->library());
      poller.set_interposer_stacks(&*interposer_stacks);
    }
  }
  auto snapshot = [&](pid_t pid) { poller.post(mappings.snapshot_mappings(pid, clock_ns(CLOCK_MONOTONIC))); };
  // Without perf records, a process's mappings are read while it is stopped
  // for its new executable mappings.
  if (mappings.source() == MappingCollector::Source::ProcMaps) attacher.set_after_probe(snapshot);
  poller.start();
  std::optional<StatmSampler> statm;
  if (rss_source == "statm") {
    if (!options.quiet && config.rss_hook)
      std::fprintf(stderr, "memtrack: the kernel refused the rss_stat hook: RSS sampled from /proc/PID/statm\n");
    statm.emplace([&] { return session.tracked_pids(); }, [&](std::vector<Event>&& batch) { poller.post(std::move(batch)); });
  }
  // However record() ends (an exception included), the kernel stops no task
  // any more and no producer stays paused; declared last, so this runs
  // before the attacher, learner and poller go away.
  struct StopStoppingTasks {
    BpfSession& session;
    std::optional<InterposerChannel>& interposer;
    ~StopStoppingTasks() {
      session.end_recording();
      if (interposer) interposer->end();
      session.resume_paused();
    }
  } stop_stopping_tasks{session, interposer};

  // Once the artifact cannot be written (or memtrack's main process is
  // gone), recording stops at once: the kernel stops no task and records
  // nothing, the probes detach, and the command runs on undisturbed.
  bool stopped_early = false;
  std::string command_name = options.attach_pid ? "the process tree" : "'" + options.command[0] + "'";
  auto keep_recording = [&] {
    std::string write_error = pipeline.error();
    bool orphaned = guardian.guardian_gone();
    if (!stopped_early && (orphaned || !write_error.empty())) {
      stopped_early = true;
      if (!write_error.empty())
        std::fprintf(stderr, "memtrack: error: %s: recording stopped; %s runs on unrecorded\n", write_error.c_str(),
                     command_name.c_str());
      else
        std::fprintf(stderr, "memtrack: memtrack's main process is gone: recording stopped; %s runs on\n",
                     command_name.c_str());
      session.end_recording();
      if (interposer) interposer->end();
      session.resume_paused();
      session.detach_all();
      if (ptrace_hold) ptrace_hold->stop();
    }
    // Without the guardian nobody waits for memtrack's status: finish now.
    return !orphaned && (write_error.empty() || !options.attach_pid);
  };

  int wait_status = 0;
  int exit_code = 0;
  bool status_known = true;
  if (options.attach_pid) {
    std::vector<pid_t> tree = process_tree(options.attach_pid);
    pipeline.push(introduce_running_processes(tree, options.attach_pid));
    for (pid_t pid : tree) snapshot(pid);
    for (pid_t pid : tree) session.track_process(pid, parent_of(pid));
    for (pid_t pid : tree) attacher.probe_process(pid);
    publish_artifact(writer, output);
    if (!options.quiet)
      std::fprintf(stderr, "memtrack: recording %zu process(es) of tree %d; Ctrl-C to stop\n", tree.size(),
                   options.attach_pid);
    wait_for_attach_end(options.attach_pid, options.duration_s, keep_recording);
  } else {
    // A failed start leaves an existing file at `output` untouched: the
    // unpublished writer removes only its own temporary file.
    session.track_process(target->pid(), getpid());
    target->resume();
    publish_artifact(writer, output);
    if (std::optional<int> status = target->wait(keep_recording)) {
      wait_status = *status;
      exit_code = exit_code_of(wait_status);
      guardian.target_exited(wait_status);
    } else {
      status_known = false;  // left running
    }
  }

  // Teardown: the last events are in the rings; requests already made are
  // answered (so no task is left stopped), then probes detach in parallel
  // while the writer finishes.
  session.end_recording();
  if (statm) statm->stop();
  if (interposer) interposer->end();
  poller.stop();
  attacher.drain();
  if (learner) learner->finish();
  std::jthread detach([&] { session.detach_all(); });
  session.resume_paused();
  pipeline.close();
  std::string write_error = pipeline.error();

  ArtifactTrailer trailer;
  trailer.counters = session.counters();
  trailer.counters.merge(attacher.counters());
  trailer.counters.merge(poller.counters());
  trailer.counters.merge(mappings.counters());
  trailer.counters.merge(probe_cost);
  if (learner) trailer.counters.merge(learner->counters());
  if (statm) trailer.counters.merge(statm->counters());
  if (interposer) trailer.counters.merge(interposer->counters());
  if (interposer_stacks) trailer.counters.merge(interposer_stacks->counters());
  if (!write_error.empty()) trailer.counters["write_error_records_dropped"] = pipeline.dropped();
  // After every Mapping record, before the trailer.
  if (options.embed_modules && write_error.empty())
    trailer.counters.merge(embed_modules(mapped, writer, options.quiet));
  trailer.end_monotonic_ns = clock_ns(CLOCK_MONOTONIC);
  trailer.exit_status = wait_status;
  if (!status_known) trailer.counters["exit_status_unknown"] = 1;
  detach.join();
  session.resume_paused();  // anything paused while the rings were drained last
  if (ptrace_hold) {
    ptrace_hold->stop();
    trailer.counters.merge(ptrace_hold->counters());
    if (uint64_t expired = trailer.counters["ptrace_holds_expired"]; expired && !options.quiet)
      std::fprintf(stderr, "memtrack: warning: %lu ptrace hold(s) got no release for 10 s and were ended\n",
                   static_cast<unsigned long>(expired));
  }
  // The recorder's own cost (its threads; the writer's last frame excepted),
  // apart from the program's: docs/benchmarks-history.md breaks it down.
  if (rusage usage{}; getrusage(RUSAGE_SELF, &usage) == 0) {
    auto microseconds = [](const timeval& t) { return uint64_t(t.tv_sec) * 1000000 + uint64_t(t.tv_usec); };
    trailer.counters["recorder_user_us"] = microseconds(usage.ru_utime);
    trailer.counters["recorder_system_us"] = microseconds(usage.ru_stime);
    trailer.counters["recorder_minor_faults"] = uint64_t(usage.ru_minflt);
  }
  bool reported = !write_error.empty();  // when it happened
  try {
    writer.finish(trailer);
  } catch (const std::exception& e) {
    write_error = e.what();
    reported = false;
  }

  if (!write_error.empty()) {
    WriterStats stats = writer.stats();
    if (!reported) std::fprintf(stderr, "memtrack: error: %s\n", write_error.c_str());
    if (!stats.replaced)
      std::fprintf(stderr, "memtrack: %s is incomplete: %lu records written, %s\n", writer.file_path().c_str(),
                   static_cast<unsigned long>(stats.events),
                   stats.trailer_written ? "then the trailer (its counters say what was dropped)"
                                         : "no trailer (it ends with the last complete frame)");
  } else if (!options.quiet) {
    for (const auto& w : attacher.warnings()) std::fprintf(stderr, "memtrack: warning: %s\n", w.c_str());
    // Each classic perf uprobe costs ~60 ms to close, one after another
    // (docs/BENCHMARKS.md, "Kernels"): say what a process-heavy run paid.
    if (uint64_t probes = trailer.counters["probes_attached"];
        config.uprobes == UprobeMechanism::Classic && config.per_process && probes >= 200)
      std::fprintf(stderr,
                   "memtrack: note: %lu classic perf uprobes were attached for the processes one by one, each "
                   "costing ~60 ms to remove on this kernel; --global-probes attaches them once for the whole run\n",
                   static_cast<unsigned long>(probes));
    uint64_t lost = 0;
    for (const auto& [name, value] : trailer.counters)  // saturating, as report's sum
      if ((name.ends_with("_lost") || name.ends_with("_dropped")) && __builtin_add_overflow(lost, value, &lost))
        lost = UINT64_MAX;
    std::fprintf(stderr, "memtrack: %lu events written to %s (%lu lost; tasks held by %s)\n",
                 static_cast<unsigned long>(writer.stats().events), writer.file_path().c_str(),
                 static_cast<unsigned long>(lost), ptrace_hold ? "ptrace" : "SIGSTOP");
    if (uint64_t implausible = trailer.counters["interposer_counters_implausible"] +
                               trailer.counters["interposer_stack_counters_implausible"])
      std::fprintf(stderr,
                   "memtrack: warning: %lu counter(s) in the memory memtrack shares with the command's processes "
                   "had values no recording reaches (written over?): left out of the trailer (counters "
                   "interposer_*counters_implausible)\n",
                   static_cast<unsigned long>(implausible));
  }
  // The command's status is memtrack's; without a command, a failed write is.
  // With --pid, an incomplete artifact is memtrack's failure: 125, as in
  // src/cli/exit_status.h (README, "Exit statuses").
  return options.attach_pid && !write_error.empty() ? 125 : exit_code;
}

}  // namespace

int record(const RecordOptions& options) {
  if (options.attach_pid && kill(options.attach_pid, 0) != 0) {
    const std::string pid = std::to_string(options.attach_pid);
    throw std::runtime_error(errno == EPERM ? "not permitted to attach to process " + pid +
                                                  " (another user's): run memtrack as root"
                                            : "no process " + pid);
  }
  std::string output = options.output.empty() ? default_output(options) : options.output;
  return run_guarded(output, [&](GuardianLink& guardian) { return record_guarded(options, output, guardian); });
}

}  // namespace memtrack
