// The interposer (src/interpose/interpose.c) in a process of its own, without
// BPF: the test stands in for the recorder (InterposerChannel's shared file,
// the pid's decision byte) and reads what the interposer wrote there.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <string>
#include <vector>

#include "record/intake/event_order.h"
#include "record/intake/shm_events.h"

extern char** environ;

namespace memtrack {
namespace {

struct InterposedRun {
  int status = -1;
  std::string out;
  std::vector<Event> events;  // in time order
};

// The recorder's side while the program runs: `channel` to drain (with
// `order`), the program's stdin and stdout.
struct Recorder {
  InterposerChannel& channel;
  EventOrder& order;
  int in, out;
  std::string said;  // stdout so far
  void drain() { channel.drain(order); }
  // Drains until the program has said `line`.
  bool drain_until_said(const std::string& line) {
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
         said.find(line) == std::string::npos && std::chrono::steady_clock::now() < until;) {
      drain();
      pollfd p{out, POLLIN, 0};
      char buffer[256];
      if (poll(&p, 1, 1) > 0) {
        ssize_t got = read(out, buffer, sizeof(buffer));
        if (got <= 0) return false;
        said.append(buffer, size_t(got));
      }
    }
    return said.find(line) != std::string::npos;
  }
  uint64_t counter(const std::string& name) const { return channel.counters().at(name); }
};

// Runs `program` with the interposer loaded and allowed to record (and
// `extra` in its environment); `during` acts as the recorder while it runs
// (nothing is drained before it exits without one).
InterposedRun run_interposed(const std::string& program, const std::vector<std::string>& extra,
                             const std::function<void(Recorder&)>& during = {}) {
  InterposerChannel channel(INTERPOSER, static_cast<uid_t>(-1));
  std::vector<std::string> environment;
  for (char** e = environ; *e; ++e) environment.emplace_back(*e);
  environment = channel.environment_for_command(environment);
  environment.insert(environment.end(), extra.begin(), extra.end());
  std::vector<char*> envp, argv = {const_cast<char*>(program.c_str()), nullptr};
  for (std::string& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);
  int in[2], out[2];
  EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
  EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
  InterposedRun run;
  pid_t pid = fork();
  if (pid == 0) {
    // What the attacher writes while the process is stopped at the
    // interposer's mapping (the shared file is mapped in this copy too).
    channel.set_decision(getpid(), true);
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  EventOrder order;
  Recorder recorder{channel, order, in[1], out[0], {}};
  if (during) during(recorder);
  run.out = recorder.said;
  char buffer[256];
  for (ssize_t got; (got = read(out[0], buffer, sizeof(buffer))) > 0;) run.out.append(buffer, size_t(got));
  close(out[0]);
  close(in[1]);
  waitpid(pid, &run.status, 0);
  channel.drain(order);
  order.take(0, true, run.events);
  return run;
}

// A free is recorded at its entry, as the kernel's probe records it: once
// the block is back in the allocator, another thread's malloc may get it,
// and that malloc must come after the free. The interposer stamped the free
// after the real one returned: the other thread's malloc of the same block
// came first, so the block looked allocated twice and then freed while it
// was live.
TEST(Interposer, AFreeComesBeforeAnotherThreadsMallocOfItsBlock) {
  InterposedRun run = run_interposed(FX_FREE_ORDER, {"GLIBC_TUNABLES=glibc.malloc.arena_max=1:glibc.malloc.tcache_count=0"});
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.status << " " << run.out;
  void *freed = nullptr, *taken = nullptr;
  ASSERT_EQ(std::sscanf(run.out.c_str(), "freed %p taken %p", &freed, &taken), 2) << run.out;
  ASSERT_EQ(freed, taken) << "the other thread's malloc did not get the freed block: nothing tested";
  const uint64_t block = reinterpret_cast<uintptr_t>(freed);
  ptrdiff_t free_at = -1, malloc_at = -1;
  for (size_t i = 0; i < run.events.size(); ++i) {
    const Event& e = run.events[i];
    if (e.addr != block) continue;
    // The main thread's first free of the block (it frees it again at the
    // end), the other thread's malloc of the same size.
    if (e.type == EventType::Free && e.pid == e.tid && free_at < 0) free_at = ptrdiff_t(i);
    if (e.type == EventType::Malloc && e.pid != e.tid && e.size == 4000) malloc_at = ptrdiff_t(i);
  }
  ASSERT_GE(free_at, 0) << "the free was not recorded (" << run.events.size() << " events)";
  ASSERT_GE(malloc_at, 0) << "the other thread's malloc was not recorded";
  EXPECT_LT(free_at, malloc_at);
  EXPECT_LT(run.events[size_t(free_at)].timestamp, run.events[size_t(malloc_at)].timestamp);
}

// A free leaves errno as it was (glibc's does; POSIX asks it), also when
// its thread waits for the recorder to drain its full chunk: the futex wait
// returned ETIMEDOUT or EAGAIN there, and a program that freed its buffers
// before reporting a failure (`free(path); return -errno;`) reported that.
TEST(Interposer, AFreeThatWaitsForRoomLeavesErrnoAlone) {
  InterposedRun run = run_interposed(FX_ERRNO_FULL, {}, [](Recorder& recorder) {
    ASSERT_TRUE(recorder.drain_until_said("allocated")) << recorder.said;
    recorder.drain();  // the chunk empty: its frees fill it
    // The mallocs may have waited too.
    const uint64_t before = recorder.counter("interposer_full_waits");
    ASSERT_EQ(write(recorder.in, "g", 1), 1);
    for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
         recorder.counter("interposer_full_waits") == before && std::chrono::steady_clock::now() < until;)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_GT(recorder.counter("interposer_full_waits"), before) << "no free waited: nothing tested";
    // Longer than a wait's futex timeout (100 ms): the wait returned from it.
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    recorder.drain_until_said("errno changed");
  });
  ASSERT_TRUE(WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0) << run.status << " " << run.out;
  EXPECT_NE(run.out.find("errno changed by 0 frees"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace memtrack
