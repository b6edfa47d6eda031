#include "record/intake/event_order.h"

#include <algorithm>
#include <iterator>

namespace memtrack {

namespace {

bool by_time(const Event& a, const Event& b) { return a.timestamp < b.timestamp; }

// Spare runs kept for reuse: about one per thread recording at once.
constexpr size_t kMaxSpares = 16;

}  // namespace

void EventOrder::add(Event&& event) { loose_.push_back(std::move(event)); }

void EventOrder::add_run(std::vector<Event>&& run) {
  close_loose();
  if (run.empty()) return;
  if (!std::is_sorted(run.begin(), run.end(), by_time)) std::stable_sort(run.begin(), run.end(), by_time);
  runs_.push_back({std::move(run), 0});
}

std::vector<Event> EventOrder::spare_run() {
  if (spares_.empty()) return {};
  std::vector<Event> run = std::move(spares_.back());
  spares_.pop_back();
  return run;
}

void EventOrder::close_loose() {
  if (loose_.empty()) return;
  std::vector<Event> run = spare_run();
  std::swap(run, loose_);
  add_run(std::move(run));
}

void EventOrder::take(uint64_t watermark, bool everything, std::vector<Event>& batch) {
  close_loose();
  const uint64_t limit = everything ? UINT64_MAX : watermark;
  size_t count = 0;
  heap_.clear();
  for (size_t i = 0; i < runs_.size(); ++i) {
    const Run& run = runs_[i];
    auto end = std::upper_bound(run.events.begin() + static_cast<ptrdiff_t>(run.next), run.events.end(), limit,
                                [](uint64_t t, const Event& e) { return t < e.timestamp; });
    size_t taken = static_cast<size_t>(end - run.events.begin()) - run.next;
    count += taken;
    if (taken) heap_.push_back(i);
  }
  // One run taken whole (a single-threaded program's drain): its storage
  // becomes the batch, and the batch's the run's, nothing moves.
  if (heap_.size() == 1 && batch.empty() && runs_[heap_[0]].next == 0 &&
      count == runs_[heap_[0]].events.size()) {
    Run& run = runs_[heap_[0]];
    batch.swap(run.events);
    run.events.clear();
    run.next = 0;
    heap_.clear();
  } else {
    batch.reserve(batch.size() + count);
  }
  // A max-heap whose top is the run with the earliest next event (the
  // earlier run on a tie).
  auto later = [this](size_t a, size_t b) {
    const Event& x = runs_[a].events[runs_[a].next];
    const Event& y = runs_[b].events[runs_[b].next];
    return x.timestamp != y.timestamp ? x.timestamp > y.timestamp : a > b;
  };
  std::make_heap(heap_.begin(), heap_.end(), later);
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const size_t index = heap_.back();
    heap_.pop_back();
    Run& run = runs_[index];
    // Take from this run up to the next run's first event: a stretch of one
    // thread's events moves at once.
    uint64_t bound = limit;  // every run in the heap starts at or before it
    bool bound_inclusive = true;
    if (!heap_.empty()) {
      const size_t other = heap_.front();
      bound = runs_[other].events[runs_[other].next].timestamp;
      bound_inclusive = index < other;
    }
    const size_t size = run.events.size();
    size_t i = run.next;
    do {
      batch.push_back(std::move(run.events[i++]));
    } while (i < size && (run.events[i].timestamp < bound || (bound_inclusive && run.events[i].timestamp == bound)));
    run.next = i;
    if (i < size && run.events[i].timestamp <= limit) {
      heap_.push_back(index);
      std::push_heap(heap_.begin(), heap_.end(), later);
    }
  }
  // Finished runs give their storage to the next ones.
  std::erase_if(runs_, [this](Run& run) {
    if (run.next < run.events.size()) return false;
    if (spares_.size() < kMaxSpares) {
      run.events.clear();
      spares_.push_back(std::move(run.events));
    }
    return true;
  });
}

}  // namespace memtrack
