// EventOrder (src/record/intake/event_order.h): batches in time order up to the
// watermark, ties in the order added, runs and loose events merged.
#include "record/intake/event_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

namespace memtrack {
namespace {

Event at(uint64_t timestamp, int32_t tag) {
  Event e;
  e.timestamp = timestamp;
  e.tid = tag;  // which event it is
  return e;
}

std::vector<std::pair<uint64_t, int32_t>> keys(const std::vector<Event>& events) {
  std::vector<std::pair<uint64_t, int32_t>> out;
  for (const Event& e : events) out.emplace_back(e.timestamp, e.tid);
  return out;
}

TEST(EventOrder, LooseEventsComeOutInTimeOrderUpToTheWatermark) {
  EventOrder order;
  for (uint64_t t : {50, 10, 40, 20, 30}) order.add(at(t, static_cast<int32_t>(t)));
  std::vector<Event> batch;
  order.take(30, false, batch);
  EXPECT_EQ(keys(batch), (std::vector<std::pair<uint64_t, int32_t>>{{10, 10}, {20, 20}, {30, 30}}));
  EXPECT_FALSE(order.empty());
  order.add(at(35, 35));
  batch.clear();
  order.take(0, true, batch);
  EXPECT_EQ(keys(batch), (std::vector<std::pair<uint64_t, int32_t>>{{35, 35}, {40, 40}, {50, 50}}));
  EXPECT_TRUE(order.empty());
}

TEST(EventOrder, TiesKeepTheOrderAdded) {
  // A Fork and the first event of its process, a Stack and the allocation
  // naming it: same timestamp, the first added comes first, also across takes.
  EventOrder order;
  order.add(at(20, 1));
  order.add(at(10, 2));
  std::vector<Event> batch;
  order.take(10, false, batch);
  order.add(at(20, 3));
  std::vector<Event> run;
  run.push_back(at(20, 4));
  run.push_back(at(21, 5));
  order.add_run(std::move(run));
  order.add(at(20, 6));
  order.take(0, true, batch);
  EXPECT_EQ(keys(batch), (std::vector<std::pair<uint64_t, int32_t>>{{10, 2}, {20, 1}, {20, 3}, {20, 4}, {20, 6}, {21, 5}}));
}

TEST(EventOrder, ARunTakenWholeHandsOverItsStorage) {
  // A single-threaded program's drain: nothing moves, the batch's storage
  // serves the next run.
  EventOrder order;
  std::vector<Event> run = {at(10, 1), at(20, 2), at(20, 3)};
  const Event* storage = run.data();
  order.add_run(std::move(run));
  std::vector<Event> batch;
  batch.reserve(64);
  const Event* batch_storage = batch.data();
  order.take(20, false, batch);
  EXPECT_EQ(keys(batch), (std::vector<std::pair<uint64_t, int32_t>>{{10, 1}, {20, 2}, {20, 3}}));
  EXPECT_EQ(batch.data(), storage);
  EXPECT_TRUE(order.empty());
  std::vector<Event> spare = order.spare_run();
  EXPECT_EQ(spare.data(), batch_storage);
  EXPECT_TRUE(spare.empty());
  // Taken in part, or into a batch holding events, it is merged as before.
  order.add_run({at(30, 4), at(40, 5)});
  order.take(30, false, batch);
  order.take(40, false, batch);
  EXPECT_EQ(keys(batch), (std::vector<std::pair<uint64_t, int32_t>>{{10, 1}, {20, 2}, {20, 3}, {30, 4}, {40, 5}}));
}

TEST(EventOrder, RunsAndLooseEventsMergeLikeOneStableSort) {
  std::mt19937_64 rng(3);
  EventOrder order;
  std::vector<Event> expected, got;
  int32_t tag = 0;
  uint64_t watermark = 0;
  for (int round = 0; round < 50; ++round) {
    std::vector<Event> added;  // in the order added
    for (int part = 0; part < 6; ++part) {
      if (rng() % 2) {
        for (int i = rng() % 20; i > 0; --i) {
          added.push_back(at(watermark + rng() % 300, tag++));
          order.add(Event(added.back()));
        }
      } else {
        std::vector<Event> run;
        uint64_t t = watermark + rng() % 100;
        for (int i = rng() % 200; i > 0; --i) {
          run.push_back(at(t += rng() % 4, tag++));
          added.push_back(run.back());
        }
        order.add_run(std::move(run));
      }
    }
    expected.insert(expected.end(), added.begin(), added.end());
    watermark += 100;
    order.take(watermark, round == 49, got);
  }
  EXPECT_TRUE(order.empty());
  std::stable_sort(expected.begin(), expected.end(),
                   [](const Event& a, const Event& b) { return a.timestamp < b.timestamp; });
  EXPECT_EQ(keys(got), keys(expected));
}

TEST(EventOrder, ARunOutOfOrderIsSortedNotTrusted) {
  // A producer's chunk is not trusted to be in order.
  EventOrder order;
  std::vector<Event> run;
  for (uint64_t t : {30, 10, 20}) run.push_back(at(t, static_cast<int32_t>(t)));
  order.add_run(std::move(run));
  std::vector<Event> batch;
  order.take(0, true, batch);
  EXPECT_EQ(keys(batch), (std::vector<std::pair<uint64_t, int32_t>>{{10, 10}, {20, 20}, {30, 30}}));
}

}  // namespace
}  // namespace memtrack
