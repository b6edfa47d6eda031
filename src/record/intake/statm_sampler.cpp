#include "record/intake/statm_sampler.h"

#include <unistd.h>

#include <fstream>

#include "util/monotonic_clock.h"

namespace memtrack {

StatmSampler::StatmSampler(Pids pids, Sink sink, uint64_t period_ns)
    : pids_(std::move(pids)), sink_(std::move(sink)), period_ns_(period_ns), thread_([this] { run(); }) {}

StatmSampler::~StatmSampler() { stop(); }

void StatmSampler::stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

std::vector<Event> StatmSampler::sample(pid_t pid, uint64_t now_ns) {
  std::ifstream statm("/proc/" + std::to_string(pid) + "/statm");
  uint64_t size = 0, resident = 0, shared = 0;
  std::vector<Event> out;
  if (!(statm >> size >> resident >> shared)) return out;  // gone
  ++samples_;
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  // statm's "shared" is RssFile + RssShmem; the rest of the resident set is anonymous.
  const std::pair<RssMember, uint64_t> members[] = {{RssMember::File, shared * page},
                                                    {RssMember::Anon, (resident - std::min(resident, shared)) * page}};
  for (auto [member, bytes] : members) {
    auto [it, fresh] = last_.try_emplace({pid, static_cast<int32_t>(member)}, bytes);
    if (!fresh && it->second == bytes) continue;
    it->second = bytes;
    Event e;
    e.type = EventType::Rss;
    e.pid = e.tid = pid;
    e.timestamp = now_ns;
    e.member = static_cast<int32_t>(member);
    e.size = bytes;
    out.push_back(e);
  }
  return out;
}

void StatmSampler::run() {
  while (!stopping_) {
    std::vector<Event> batch;
    for (pid_t pid : pids_()) {
      std::vector<Event> records = sample(pid, monotonic_ns());
      batch.insert(batch.end(), records.begin(), records.end());
    }
    if (!batch.empty()) sink_(std::move(batch));
    timespec pause{0, static_cast<long>(period_ns_)};
    nanosleep(&pause, nullptr);
  }
}

std::map<std::string, uint64_t> StatmSampler::counters() const { return {{"statm_samples", samples_.load()}}; }

}  // namespace memtrack
