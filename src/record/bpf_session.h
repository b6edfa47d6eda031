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
  // Attach one classic perf uprobe per site instead of one uprobe_multi link
  // per file and program (the fallback for kernels before 6.6).
  bool classic_uprobes = false;
};

// One allocator entry point of a file to probe.
struct ProbePoint {
  uint64_t offset = 0;  // file offset of the probed instruction
  uint64_t cookie = 0;  // MT_COOKIE: the function's argument layout
  bool is_free = false; // entry-only free-like function; else entry + return
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
  // Attaches the probes of one file (return probes before entry probes, so
  // no call is seen entering without its return). Returns the number of
  // probes attached; on failure also sets `error`.
  size_t attach_probes(const std::string& path, const std::vector<ProbePoint>& points, std::string* error);
  bool uses_uprobe_multi() const { return !classic_uprobes_; }

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
  bool attach_classic(const std::string& path, const ProbePoint& point, bool is_return, std::string* error);
  bool attach_multi(const std::string& path, const std::vector<ProbePoint>& points, bool frees, bool returns,
                    std::string* error);

  memtrack_bpf* skel_ = nullptr;
  bool classic_uprobes_ = false;
  std::vector<bpf_link*> process_links_;
  std::mutex probes_mutex_;
  std::vector<int> probe_link_fds_;  // uprobe_multi links or classic perf events
};

}  // namespace memtrack
