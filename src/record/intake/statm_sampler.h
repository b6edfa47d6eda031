// The fallback for kernels that refuse the rss_stat hook: samples each
// tracked process's /proc/PID/statm and turns changes into Rss records
// (file and anon members only: statm does not tell shmem or swap apart).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "format/event.h"

namespace memtrack {

class StatmSampler {
 public:
  using Pids = std::function<std::vector<pid_t>()>;
  using Sink = std::function<void(std::vector<Event>&&)>;
  StatmSampler(Pids pids, Sink sink, uint64_t period_ns = 10'000'000);
  ~StatmSampler();
  void stop();
  std::map<std::string, uint64_t> counters() const;

  // One sample of `pid` at `now_ns`: the Rss records of the members that
  // changed since its previous sample (all of them the first time).
  std::vector<Event> sample(pid_t pid, uint64_t now_ns);

 private:
  void run();

  Pids pids_;
  Sink sink_;
  uint64_t period_ns_;
  std::map<std::pair<pid_t, int32_t>, uint64_t> last_;
  std::atomic<uint64_t> samples_{0};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace memtrack
