#include "record/probes/probe_attacher.h"

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "record/intake/shm_events.h"
#include "record/probes/allocator_symbols.h"
#include "record/process/proc_fs.h"
#include "record/process/sanitizer_runtime.h"
#include "util/proc_text.h"
#include "wire/allocators.h"
#include "wire/probe_cookie.h"

namespace memtrack {

namespace {

bool same_file(const std::string& path, uint64_t dev, uint64_t ino) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && kernel_dev_of(st.st_dev) == dev && st.st_ino == ino;
}

// A path that opens the file mapped by `m`: its name when that still names
// the same file, else the mapping itself (deleted, replaced, or in another
// mount namespace).
std::string path_of_mapping(pid_t pid, const MapEntry& m) {
  if (!m.path.empty() && m.path[0] == '/' && same_file(m.path, m.kernel_dev(), m.ino)) return m.path;
  char name[96];
  std::snprintf(name, sizeof(name), "/proc/%d/map_files/%lx-%lx", pid, static_cast<unsigned long>(m.start),
                static_cast<unsigned long>(m.end));
  return name;
}

// A site the interposer takes: every name at its address is one
// src/interpose/ defines (whichever name a call uses, it passes a wrapper).
// Attached to running processes (`glibc_only`), it takes glibc's functions
// in libc (interpose.c, got_names), whatever other names they have too.
bool taken_by_interposer(const ProbeSite& site, const std::string& path, bool glibc_only) {
#define MT_NAME(name, cookie) #name,
  static const std::set<std::string> kTaken = {MT_INTERPOSED_LIBC(MT_NAME) MT_INTERPOSED_OTHERS(MT_NAME)};
  static const std::set<std::string> kGlibc = {MT_INTERPOSED_LIBC(MT_NAME)};
#undef MT_NAME
  if (glibc_only) {
    std::string file = path.substr(path.rfind('/') + 1);
    return file.starts_with("libc.so") &&
           (kGlibc.count(site.symbol) ||
            std::any_of(site.aliases.begin(), site.aliases.end(), [](const std::string& a) { return kGlibc.count(a); }));
  }
  return kTaken.count(site.symbol) &&
         std::all_of(site.aliases.begin(), site.aliases.end(), [](const std::string& a) { return kTaken.count(a); });
}

}  // namespace

ProbeAttacher::ProbeAttacher(BpfSession& session, Wiring wiring)
    : session_(session),
      learner_(wiring.learner),
      after_probe_(std::move(wiring.after_probe)),
      requests_([this](Request& r) { handle(r); }) {
  interposer_takes_glibc_only_ = wiring.interposer_takes_glibc_only;
  if (wiring.interposer) use_interposer(wiring.interposer, wiring.interposer_library);
}

ProbeAttacher::~ProbeAttacher() {
  // Never leave a task stopped behind.
  for (const auto& r : requests_.stop())
    if (r.kind != Request::kExited) session_.resume_task(r.pid);
}

void ProbeAttacher::submit(pid_t pid, bool renew) { requests_.push({pid, renew ? Request::kRenew : Request::kProbe}); }

void ProbeAttacher::process_exited(pid_t pid) { requests_.push({pid, Request::kExited}); }

void ProbeAttacher::use_interposer(InterposerChannel* channel, const std::string& library) {
  struct stat st;
  if (stat(library.c_str(), &st) != 0) throw std::runtime_error("cannot find the interposer " + library);
  interposer_ready_offset_ = interposer_ready_offset(library);
  interposer_file_ = {kernel_dev_of(st.st_dev), st.st_ino};
  interposer_library_ = library;
  interposer_ = channel;
  std::string error;
  interposer_ready_probed_ = session_.attach_interposer_ready(library, interposer_ready_offset_, &error);
  if (!interposer_ready_probed_)
    warn("cannot probe memtrack_interposer_ready in " + library + " (" + error + "): every process is recorded by uprobes");
}

void ProbeAttacher::submit_interposed(pid_t pid) { requests_.push({pid, Request::kInterposed}); }

void ProbeAttacher::prepare_interposer(pid_t pid) {
  // A forked child runs its parent's interposer, already ready.
  if (session_.is_interposed(pid)) return;
  interposer_->set_decision(pid, interposer_ready_probed_);
  if (!interposer_ready_probed_) {
    std::lock_guard lock(mutex_);
    ++interposer_probe_failures_;
  }
}

void ProbeAttacher::leave_to_interposer(pid_t pid) {
  std::set<FileId> files;
  {
    std::lock_guard lock(mutex_);
    auto it = probed_for_.find(pid);
    if (it != probed_for_.end()) files = it->second;
  }
  for (const FileId& id : files) {
    std::lock_guard files_lock(files_mutex_);
    auto file = files_.find(id);
    if (file == files_.end() || file->second.points.empty()) continue;
    bool all_taken = std::all_of(file->second.points.begin(), file->second.points.end(),
                                 [](const ProbePoint& p) { return (p.cookie & MT_COOKIE_INTERPOSED) != 0; });
    // A file with entry points of its own keeps its probes; the kernel
    // leaves the taken ones alone.
    if (all_taken) session_.detach_file(pid, file->second.path);
  }
}

void ProbeAttacher::keep_runtime_first(pid_t pid) {
  std::string exe = "/proc/" + std::to_string(pid) + "/exe";
  struct stat st;
  if (stat(exe.c_str(), &st) != 0) return;
  FileId id{kernel_dev_of(st.st_dev), st.st_ino};
  std::string runtime;
  {
    std::lock_guard lock(mutex_);
    auto it = runtime_first_.find(id);
    if (it != runtime_first_.end()) runtime = it->second;
  }
  if (!runtime_first_.count(id)) {
    try {
      runtime = runtime_that_must_come_first(exe);
    } catch (const std::exception&) {
      // Not ELF (a script's interpreter is what runs): nothing to keep first.
    }
    std::lock_guard lock(mutex_);
    runtime_first_[id] = runtime;
  }
  if (runtime.empty()) return;
  {
    std::lock_guard lock(mutex_);
    if (runtime_kept_first_.count(pid)) return;  // a later mapping of the same image
  }
  // Only at its exec, before the loader has mapped the interposer.
  for (const auto& m : read_maps(pid))
    if (FileId{m.kernel_dev(), m.ino} == interposer_file_) return;
  std::string error;
  std::string name = read_proc_text("/proc/" + std::to_string(pid) + "/comm").value_or("?");
  if (!name.empty() && name.back() == '\n') name.pop_back();
  if (remove_from_ld_preload(pid, interposer_library_, &error)) {
    std::lock_guard lock(mutex_);
    ++runtime_first_processes_;
    runtime_kept_first_.insert(pid);
    warnings_.push_back("pid " + std::to_string(pid) + " (" + name + ") needs " + runtime +
                        " first in its library list: recorded by uprobes, without the interposer");
  } else {
    warn("pid " + std::to_string(pid) + " (" + name + ") needs " + runtime + " first, but the interposer could "
         "not be taken out of its LD_PRELOAD (" + error + "): it may refuse to run");
  }
}

void ProbeAttacher::drain() { requests_.drain(); }

void ProbeAttacher::handle(const Request& request) {
  try {
    if (request.kind == Request::kExited) {
      forget_process(request.pid);
    } else if (request.kind == Request::kInterposed) {
      leave_to_interposer(request.pid);
    } else {
      // Old and new probes must not both fire: the old go first.
      if (request.kind == Request::kRenew) forget_process(request.pid, true);
      if (interposer_) keep_runtime_first(request.pid);
      // The request was made after the mapping (or fork) completed, so
      // /proc/PID/maps already shows it; the task waits stopped meanwhile.
      probe_process(request.pid);
      if (after_probe_) after_probe_(request.pid);
    }
  } catch (const std::exception& e) {
    warn("cannot probe pid " + std::to_string(request.pid) + ": " + e.what());
  }
  // Whatever happened, the task must not stay stopped.
  if (request.kind == Request::kProbe || request.kind == Request::kRenew) session_.resume_task(request.pid);
  std::lock_guard lock(mutex_);
  ++requests_handled_;
}

void ProbeAttacher::probe_process(pid_t pid) {
  if (learner_) learner_->refresh_modules(pid);
  pid_t owner = session_.per_process() ? pid : 0;
  bool first_probe = false;
  {
    std::lock_guard lock(mutex_);
    auto it = probed_for_.find(owner);
    first_probe = it == probed_for_.end() || it->second.empty();
  }
  for (const auto& m : read_maps(pid)) {
    if (!m.executable() || m.ino == 0) continue;
    FileId id{m.kernel_dev(), m.ino};
    if (interposer_ && id == interposer_file_) {
      // Never marked known: each image's mapping of it stops the process here.
      bool first = false;
      {
        std::lock_guard lock(mutex_);
        first = probed_for_[owner].insert(id).second;
      }
      if (first) prepare_interposer(pid);
      continue;
    }
    {
      // Claimed in the same critical section as the check: two threads
      // probing the same process (or, globally, the same file) must not
      // both attach it (every free would then be recorded twice).
      std::lock_guard lock(mutex_);
      if (probed_for_[0].count(id) || !probed_for_[owner].insert(id).second) continue;
    }
    const FileProbes& probes = file_probes(id, path_of_mapping(pid, m));
    // A file without allocators needs no probes in any process.
    pid_t known_for = probes.points.empty() ? 0 : owner;
    if (known_for != owner) {
      std::lock_guard lock(mutex_);
      probed_for_[owner].erase(id);
      probed_for_[known_for].insert(id);
    }
    std::vector<ProbePoint> points = probes.points;
    if (interposer_ && !points.empty() && session_.is_interposed(pid)) {
      if (first_probe) {
        // A forked child runs its parent's interposer, ready: no probe on
        // what it takes.
        std::erase_if(points, [](const ProbePoint& p) { return (p.cookie & MT_COOKIE_INTERPOSED) != 0; });
      } else {
        // Loaded after the interposer looked its names up (dlopen): its
        // entry points are not the ones the wrappers reach.
        for (ProbePoint& p : points) p.cookie &= ~MT_COOKIE_INTERPOSED;
      }
    }
    if (!points.empty()) {
      std::string error;
      size_t attached = session_.attach_probes(probes.path, points, owner, &error);
      size_t wanted = 0;
      for (const auto& p : points) wanted += p.entry_only ? 1 : 2;
      std::lock_guard lock(mutex_);
      probes_attached_ += attached;
      if (attached < wanted) {
        probe_attach_failures_ += wanted - attached;
        warnings_.push_back("cannot attach " + std::to_string(wanted - attached) + " probe(s) in " +
                            probes.path + ": " + error);
      }
    }
    session_.mark_file_known(known_for, id.first, id.second);
  }
}

const ProbeAttacher::FileProbes& ProbeAttacher::file_probes(const FileId& id, const std::string& path) {
  std::lock_guard files_lock(files_mutex_);
  auto it = files_.find(id);
  if (it != files_.end()) return it->second;
  FileProbes probes{path, {}};
  try {
    for (const auto& site : find_probe_sites(path)) {
      uint64_t cookie = site.cookie | site.runtime_free_bits;
      if (interposer_ && taken_by_interposer(site, path, interposer_takes_glibc_only_)) cookie |= MT_COOKIE_INTERPOSED;
      probes.points.push_back({site.probe_offset, cookie, !site.needs_return});
    }
  } catch (const std::exception& e) {
    warn(std::string("cannot inspect ") + path + ": " + e.what());
  }
  if (!probes.points.empty()) {
    std::lock_guard lock(mutex_);
    ++files_with_allocators_;
  }
  return files_.emplace(id, std::move(probes)).first->second;
}

void ProbeAttacher::forget_process(pid_t pid, bool now) {
  if (learner_) learner_->forget(pid);
  {
    std::lock_guard lock(mutex_);
    runtime_kept_first_.erase(pid);
  }
  if (!session_.per_process() || pid == 0) return;
  session_.detach_process(pid, now);
  std::set<FileId> files;
  {
    std::lock_guard lock(mutex_);
    auto it = probed_for_.find(pid);
    if (it == probed_for_.end()) return;
    files.swap(it->second);
    probed_for_.erase(it);
  }
  for (const auto& [dev, ino] : files) session_.forget_file(pid, dev, ino);
}

void ProbeAttacher::warn(std::string message) {
  std::lock_guard lock(mutex_);
  warnings_.push_back(std::move(message));
}

std::map<std::string, uint64_t> ProbeAttacher::counters() const {
  std::lock_guard files_lock(files_mutex_);
  std::lock_guard lock(mutex_);
  return {
      {"files_inspected", files_.size()},
      {"files_with_allocators", files_with_allocators_},
      {"probes_attached", probes_attached_},
      {"probe_attach_failures", probe_attach_failures_},
      {"attach_requests_handled", requests_handled_},
      {"interposer_probe_failures", interposer_probe_failures_},
      {"runtime_first_processes", runtime_first_processes_},
  };
}

std::vector<std::string> ProbeAttacher::warnings() const {
  std::lock_guard lock(mutex_);
  return warnings_;
}

}  // namespace memtrack
