#include "record/event_order.h"

#include <algorithm>
#include <iterator>

namespace memtrack {

void EventOrder::add(Event&& event) { pending_.push_back(std::move(event)); }

void EventOrder::add_run(std::vector<Event>&& run) {
  for (Event& e : run) add(std::move(e));
}

void EventOrder::take(uint64_t watermark, bool everything, std::vector<Event>& batch) {
  if (pending_.empty()) return;
  auto by_time = [](const Event& a, const Event& b) { return a.timestamp < b.timestamp; };
  std::stable_sort(pending_.begin() + sorted_, pending_.end(), by_time);
  std::inplace_merge(pending_.begin(), pending_.begin() + sorted_, pending_.end(), by_time);
  auto cut = everything ? pending_.end()
                        : std::upper_bound(pending_.begin(), pending_.end(), watermark,
                                           [](uint64_t w, const Event& e) { return w < e.timestamp; });
  batch.insert(batch.end(), std::make_move_iterator(pending_.begin()), std::make_move_iterator(cut));
  pending_.erase(pending_.begin(), cut);
  sorted_ = pending_.size();
}

}  // namespace memtrack
