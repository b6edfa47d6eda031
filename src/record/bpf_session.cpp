#include "record/bpf_session.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "memtrack.skel.h"
#include "wire.h"

namespace memtrack {

namespace {

std::runtime_error bpf_error(const std::string& what, int err) {
  return std::runtime_error(what + ": " + std::strerror(err < 0 ? -err : err));
}

// Closing a uprobe link waits for RCU grace periods (~130 ms here); closing
// them concurrently lets the grace periods overlap.
void destroy_links_in_parallel(std::vector<bpf_link*>& links) {
  if (links.empty()) return;
  size_t threads = std::min<size_t>(links.size(), 64);
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (size_t i = 0; i < threads; ++i) {
    workers.emplace_back([&] {
      for (size_t j; (j = next.fetch_add(1)) < links.size();) bpf_link__destroy(links[j]);
    });
  }
  for (auto& w : workers) w.join();
  links.clear();
}

}  // namespace

BpfSession::BpfSession(const BpfConfig& config) {
  skel_ = memtrack_bpf__open();
  if (!skel_) throw bpf_error("cannot open the BPF programs", errno);
  skel_->rodata->empty_probes = config.empty_probes ? 1 : 0;
  // Wake the poller when a batch has accumulated, pause producers at 3/4 full.
  skel_->rodata->wakeup_bytes = std::min<uint64_t>(256 * 1024, config.event_ring_bytes / 8);
  skel_->rodata->pause_bytes = config.event_ring_bytes - config.event_ring_bytes / 4;
  bpf_map__set_max_entries(skel_->maps.events, config.event_ring_bytes);
  bpf_map__set_max_entries(skel_->maps.process_events, config.process_ring_bytes);
  if (int err = memtrack_bpf__load(skel_)) {
    memtrack_bpf__destroy(skel_);
    skel_ = nullptr;
    throw bpf_error("cannot load the BPF programs (memtrack needs root or CAP_BPF+CAP_PERFMON)", err);
  }
  for (bpf_program* prog : {skel_->progs.on_fork, skel_->progs.on_exec, skel_->progs.on_exit,
                            skel_->progs.on_syscall_exit}) {
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
}

BpfSession::~BpfSession() {
  detach_all();
  for (bpf_link* l : process_links_) bpf_link__destroy(l);
  memtrack_bpf__destroy(skel_);
}

void BpfSession::track_process(pid_t pid, pid_t parent) {
  uint32_t key = pid, value = parent;
  if (bpf_map__update_elem(skel_->maps.tracked_pids, &key, sizeof(key), &value, sizeof(value), BPF_ANY))
    throw bpf_error("cannot track pid " + std::to_string(pid), errno);
}

void BpfSession::mark_file_known(uint64_t kernel_dev, uint64_t ino) {
  struct {
    uint64_t dev, ino;
  } key{kernel_dev, ino};
  uint8_t one = 1;
  if (bpf_map__update_elem(skel_->maps.known_files, &key, sizeof(key), &one, sizeof(one), BPF_ANY))
    throw bpf_error("cannot record a probed file", errno);
}

bool BpfSession::attach_uprobe(const UprobeSpec& spec, std::string* error) {
  LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = spec.cookie, .retprobe = spec.is_return);
  bpf_program* prog = spec.is_free     ? skel_->progs.free_enter
                      : spec.is_return ? skel_->progs.alloc_exit
                                       : skel_->progs.alloc_enter;
  bpf_link* link = bpf_program__attach_uprobe_opts(prog, -1, spec.path.c_str(), spec.offset, &opts);
  if (!link) {
    *error = std::strerror(errno);
    return false;
  }
  std::lock_guard lock(probes_mutex_);
  probe_links_.push_back(link);
  return true;
}

size_t BpfSession::probe_count() const {
  std::lock_guard lock(probes_mutex_);
  return probe_links_.size();
}

int BpfSession::event_ring_fd() const { return bpf_map__fd(skel_->maps.events); }
int BpfSession::process_ring_fd() const { return bpf_map__fd(skel_->maps.process_events); }

uint64_t BpfSession::pause_generation() const {
  return __atomic_load_n(&skel_->bss->pause_generation, __ATOMIC_ACQUIRE);
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
    kill(static_cast<pid_t>(pid), SIGCONT);
  }
  return pids.size();
}

std::map<std::string, uint64_t> BpfSession::counters() const {
  int ncpus = libbpf_num_possible_cpus();
  std::vector<mt_kernel_counters> per_cpu(std::max(ncpus, 1));
  uint32_t zero = 0;
  mt_kernel_counters sum{};
  if (bpf_map_lookup_elem(bpf_map__fd(skel_->maps.counters), &zero, per_cpu.data()) == 0) {
    for (const auto& c : per_cpu) {
      sum.events_lost += c.events_lost;
      sum.process_events_lost += c.process_events_lost;
      sum.attach_requests_lost += c.attach_requests_lost;
      sum.pauses += c.pauses;
      sum.nested_skipped += c.nested_skipped;
    }
  }
  return {
      {"kernel_events_lost", sum.events_lost},
      {"kernel_process_events_lost", sum.process_events_lost},
      {"attach_requests_lost", sum.attach_requests_lost},
      {"backpressure_pauses", sum.pauses},
      {"nested_calls_folded", sum.nested_skipped},
  };
}

void BpfSession::detach_all() {
  std::vector<bpf_link*> links;
  {
    std::lock_guard lock(probes_mutex_);
    links.swap(probe_links_);
  }
  destroy_links_in_parallel(links);
}

}  // namespace memtrack
