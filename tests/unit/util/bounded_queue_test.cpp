// BoundedQueue (src/util/bounded_queue.h): order, blocking on both ends,
// the capacity counted in item costs, close and shutdown, and many
// producers against one consumer.
#include "util/bounded_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace memtrack {
namespace {

using namespace std::chrono_literals;

// Long enough for a thread that could proceed to do so on a loaded machine;
// only the negative checks (still blocked) wait this long.
constexpr auto kStillBlocked = 100ms;

TEST(BoundedQueue, PopsInPushOrderWithUrgentItemsFirst) {
  BoundedQueue<int> queue(10);
  using P = BoundedQueue<int>::Priority;
  ASSERT_TRUE(queue.push(1));
  ASSERT_TRUE(queue.push(2));
  ASSERT_TRUE(queue.push(10, 1, P::Urgent));
  ASSERT_TRUE(queue.push(11, 1, P::Urgent));
  ASSERT_TRUE(queue.push(3));
  std::vector<int> popped;
  for (int i = 0; i < 5; ++i) popped.push_back(*queue.pop());
  EXPECT_EQ(popped, (std::vector<int>{10, 11, 1, 2, 3}));
}

TEST(BoundedQueue, PopBlocksUntilAnItemComes) {
  BoundedQueue<int> queue(1);
  auto popped = std::async(std::launch::async, [&] { return queue.pop(); });
  EXPECT_EQ(popped.wait_for(kStillBlocked), std::future_status::timeout);
  ASSERT_TRUE(queue.push(7));
  EXPECT_EQ(popped.get(), 7);
}

TEST(BoundedQueue, PushBlocksWhileTheCostWouldExceedTheCapacity) {
  BoundedQueue<std::string> queue(100);
  ASSERT_TRUE(queue.push("a", 60));
  auto pushed = std::async(std::launch::async, [&] { return queue.push("b", 50); });
  EXPECT_EQ(pushed.wait_for(kStillBlocked), std::future_status::timeout);
  EXPECT_EQ(queue.queued_cost(), 60u);
  EXPECT_EQ(queue.pop(), "a");
  EXPECT_TRUE(pushed.get());
  EXPECT_EQ(queue.queued_cost(), 50u);
}

TEST(BoundedQueue, AnItemLargerThanTheCapacityIsTakenWhenTheQueueIsEmpty) {
  BoundedQueue<int> queue(10);
  ASSERT_TRUE(queue.push(1, 5));
  auto pushed = std::async(std::launch::async, [&] { return queue.push(2, 1000); });
  EXPECT_EQ(pushed.wait_for(kStillBlocked), std::future_status::timeout);
  EXPECT_EQ(queue.pop(), 1);
  EXPECT_TRUE(pushed.get());
  EXPECT_EQ(queue.queued_cost(), 1000u);
  // Nothing else fits until it is gone.
  auto next = std::async(std::launch::async, [&] { return queue.push(3, 1); });
  EXPECT_EQ(next.wait_for(kStillBlocked), std::future_status::timeout);
  EXPECT_EQ(queue.pop(), 2);
  EXPECT_TRUE(next.get());
}

TEST(BoundedQueue, CloseRefusesPushesAndLetsConsumersDrain) {
  BoundedQueue<int> queue(2);
  ASSERT_TRUE(queue.push(1));
  ASSERT_TRUE(queue.push(2));
  // A producer blocked on a full queue is released by close(), refused.
  auto blocked = std::async(std::launch::async, [&] { return queue.push(3); });
  EXPECT_EQ(blocked.wait_for(kStillBlocked), std::future_status::timeout);
  queue.close();
  EXPECT_FALSE(blocked.get());
  EXPECT_FALSE(queue.push(4));
  EXPECT_EQ(queue.pop(), 1);
  EXPECT_EQ(queue.pop(), 2);
  EXPECT_EQ(queue.pop(), std::nullopt);
}

TEST(BoundedQueue, CloseWakesABlockedConsumer) {
  BoundedQueue<int> queue(1);
  auto popped = std::async(std::launch::async, [&] { return queue.pop(); });
  EXPECT_EQ(popped.wait_for(kStillBlocked), std::future_status::timeout);
  queue.close();
  EXPECT_EQ(popped.get(), std::nullopt);
}

TEST(BoundedQueue, ShutdownTakesTheBacklogBack) {
  BoundedQueue<int> queue(10);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(queue.push(i));
  EXPECT_EQ(queue.pop(), 0);
  queue.task_done();
  std::deque<int> left = queue.shutdown();
  EXPECT_EQ(left, (std::deque<int>{1, 2}));
  EXPECT_EQ(queue.pop(), std::nullopt);
  EXPECT_FALSE(queue.push(9));
  EXPECT_EQ(queue.queued_cost(), 0u);
  queue.wait_idle();  // nothing unfinished: returns at once
}

TEST(BoundedQueue, WaitIdleWaitsForTheItemInHand) {
  BoundedQueue<int> queue(4);
  ASSERT_TRUE(queue.push(1));
  auto idle = std::async(std::launch::async, [&] { queue.wait_idle(); });
  EXPECT_EQ(idle.wait_for(kStillBlocked), std::future_status::timeout);
  ASSERT_EQ(queue.pop(), 1);  // popped but not handled yet
  EXPECT_EQ(idle.wait_for(kStillBlocked), std::future_status::timeout);
  queue.task_done();
  idle.get();
}

// Every item of every producer arrives exactly once and, per producer, in
// order, while the queue is small enough that producers block constantly.
TEST(BoundedQueue, ManyProducersOneConsumer) {
  constexpr int kProducers = 8;
  constexpr int kItemsEach = 20000;
  BoundedQueue<std::pair<int, int>> queue(16);
  std::atomic<size_t> most_queued{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p)
    producers.emplace_back([&, p] {
      for (int i = 0; i < kItemsEach; ++i) ASSERT_TRUE(queue.push({p, i}, 1 + i % 3));
    });
  std::map<int, int> next_of;
  auto consumer = std::async(std::launch::async, [&] {
    size_t received = 0;
    while (auto item = queue.pop()) {
      size_t queued = queue.queued_cost();
      if (queued > most_queued) most_queued = queued;
      auto [producer, index] = *item;
      EXPECT_EQ(index, next_of[producer]) << "producer " << producer;
      next_of[producer] = index + 1;
      ++received;
      queue.task_done();
    }
    return received;
  });
  for (std::thread& t : producers) t.join();
  queue.wait_idle();
  queue.close();
  EXPECT_EQ(consumer.get(), size_t{kProducers} * kItemsEach);
  for (int p = 0; p < kProducers; ++p) EXPECT_EQ(next_of[p], kItemsEach);
  EXPECT_LE(most_queued.load(), 16u);
}

}  // namespace
}  // namespace memtrack
