// Owns the loaded BPF skeleton: configuration, the process-tree programs, the
// allocator probe links, and the kernel's loss counters.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

struct memtrack_bpf;
struct bpf_link;

namespace memtrack {

struct BpfConfig {
  uint64_t event_ring_bytes = 64ull << 20;
  uint64_t process_ring_bytes = 2ull << 20;
  bool empty_probes = false;  // benchmark floor: probes attached but do nothing
};

struct UprobeSpec {
  std::string path;
  uint64_t offset = 0;
  uint64_t cookie = 0;
  bool is_free = false;     // entry-only free-like function
  bool is_return = false;   // the return probe of an allocation function
};

class BpfSession {
 public:
  // Loads and verifies the programs; throws std::runtime_error with libbpf's reason.
  explicit BpfSession(const BpfConfig& config);
  ~BpfSession();  // detaches every probe in parallel (each detach waits for RCU)
  BpfSession(const BpfSession&) = delete;
  BpfSession& operator=(const BpfSession&) = delete;

  void track_process(pid_t pid, pid_t parent);
  // A file whose allocators are probed (or which has none): its mappings no
  // longer stop the mapping task.
  void mark_file_known(uint64_t kernel_dev, uint64_t ino);
  // Attaches one uprobe; returns false and sets `error` on failure.
  bool attach_uprobe(const UprobeSpec& spec, std::string* error);
  size_t probe_count() const;

  int event_ring_fd() const;
  int process_ring_fd() const;
  uint64_t pause_generation() const;
  // Resumes every producer the kernel stopped for back-pressure; returns how many.
  size_t resume_paused();

  // Sums of the per-CPU kernel counters, by artifact counter name.
  std::map<std::string, uint64_t> counters() const;
  // Detaches every allocator probe now (in parallel), so teardown is fast.
  void detach_all();

 private:
  memtrack_bpf* skel_ = nullptr;
  std::vector<bpf_link*> process_links_;
  mutable std::mutex probes_mutex_;
  std::vector<bpf_link*> probe_links_;
};

}  // namespace memtrack
