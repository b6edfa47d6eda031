// A small program to try memtrack on: a parser-like workload with short-lived
// temporaries, a growing buffer, a worker thread, a forked child, and a leak.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

std::map<std::string, int> count_words(const std::string& text) {
  std::map<std::string, int> counts;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    std::string word = text.substr(start, end - start);  // a temporary per word
    ++counts[word];
    start = end + 1;
  }
  return counts;
}

void grow_buffer() {
  char* buffer = nullptr;
  size_t size = 0;
  for (int i = 0; i < 20; ++i) {
    size = size ? size * 2 : 64;
    buffer = static_cast<char*>(std::realloc(buffer, size));
    std::memset(buffer, i, size);
  }
  std::free(buffer);
}

void* leak_some() {
  void* forgotten = std::malloc(4096);  // never freed: shows up as a leak
  std::memset(forgotten, 1, 4096);
  return forgotten;
}

}  // namespace

int main() {
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "the quick brown fox jumps over the lazy dog ";
  auto counts = count_words(text);

  std::thread worker([] {
    std::vector<std::unique_ptr<int[]>> blocks;
    for (int i = 0; i < 1000; ++i) blocks.emplace_back(new int[i % 64 + 1]);
  });
  grow_buffer();
  worker.join();

  pid_t child = fork();
  if (child == 0) {
    std::vector<std::string> lines(500, std::string(100, 'x'));
    _exit(lines.size() == 500 ? 0 : 1);
  }
  waitpid(child, nullptr, 0);

  volatile void* leaked = leak_some();
  (void)leaked;
  return counts["fox"] == 2000 ? 0 : 1;
}
