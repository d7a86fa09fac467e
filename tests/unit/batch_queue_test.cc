#include "core/batch_queue.h"

#include <chrono>
#include <future>
#include <mutex>
#include <stop_token>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace faultline {
namespace {

TEST(BatchQueue, PopNumbersItemsInQueueOrder) {
  BatchQueue queue(1 << 20);
  for (int i = 0; i < 3; ++i) {
    BatchQueue::Item item;
    item.batch.records.emplace_back().line = i == 0 ? "a" : i == 1 ? "b" : "c";
    ASSERT_TRUE(queue.tryPush(item));
  }
  for (uint64_t want = 0; want < 3; ++want) {  // pop and tryPop share one numbering
    std::optional<BatchQueue::Item> item = want == 1 ? queue.tryPop() : queue.pop();
    ASSERT_TRUE(item);
    EXPECT_EQ(item->seq, want);
    EXPECT_EQ(item->batch.records[0].line, want == 0 ? "a" : want == 1 ? "b" : "c");
  }
  EXPECT_FALSE(queue.tryPop());  // empty: no wait
}

// stalled() is how long the queue has held work with none done: from the first batch taken into
// an empty queue, then from each done(); a batch pushed while others are held does not restart
// it, else a steady stream into a wedged pipeline would never look stalled.
TEST(BatchQueue, StalledCountsFromTheLastBatchDoneWhileWorkIsHeld) {
  using Clock = BatchQueue::Clock;
  BatchQueue queue(1 << 20);
  const auto push = [&] {
    BatchQueue::Item item;
    item.batch.records.emplace_back().line = "a";
    item.bytes = 1;
    ASSERT_TRUE(queue.tryPush(item));
  };
  const auto later = Clock::now() + std::chrono::hours(1);
  EXPECT_EQ(queue.stalled(later), Clock::duration::zero());  // holds nothing
  const auto before_first = Clock::now();
  push();
  const auto after_first = Clock::now();
  EXPECT_LE(queue.stalled(later), later - before_first);
  EXPECT_GE(queue.stalled(later), later - after_first);
  push();  // while the first is held: no progress
  EXPECT_GE(queue.stalled(later), later - after_first);
  std::optional<BatchQueue::Item> item = queue.pop();
  ASSERT_TRUE(item);
  EXPECT_GE(queue.stalled(later), later - after_first);  // popped, in process, not done
  const auto before_done = Clock::now();
  queue.done(*item);
  EXPECT_LE(queue.stalled(later), later - before_done);  // one done: counted from there
  item = queue.pop();
  ASSERT_TRUE(item);
  queue.done(*item);
  EXPECT_EQ(queue.stalled(later), Clock::duration::zero());  // drained
}

// A later item's callback, given first, waits for the earlier one: the order is the numbers',
// not the threads'.
TEST(InOrder, RunsCallbacksInSequenceWhateverTheThreads) {
  InOrder in_order;
  std::mutex mu;
  std::vector<int> ran;
  auto record = [&](int seq) {
    std::lock_guard lock(mu);
    ran.push_back(seq);
  };
  std::thread late([&] { in_order.run(2, [&] { record(2); }); });
  std::thread middle([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    in_order.run(1, [&] { record(1); });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(60));  // both wait for seq 0
  {
    std::lock_guard lock(mu);
    EXPECT_TRUE(ran.empty());
  }
  in_order.run(0, [&] { record(0); });
  late.join();
  middle.join();
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2}));
}

// tryRun runs only in turn, and a turn it takes lets run() callers waiting for the next one go.
TEST(InOrder, TryRunRunsOnlyInTurn) {
  InOrder in_order;
  std::vector<int> ran;
  EXPECT_FALSE(in_order.tryRun(1, [&] { ran.push_back(1); }));
  std::thread next([&] { in_order.run(1, [&] { ran.push_back(1); }); });
  EXPECT_TRUE(in_order.tryRun(0, [&] { ran.push_back(0); }));
  next.join();
  EXPECT_FALSE(in_order.tryRun(1, [&] { ran.push_back(-1); }));  // each seq runs once
  EXPECT_TRUE(in_order.tryRun(2, [&] { ran.push_back(2); }));
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2}));
}

// A worker asking out of turn is answered while another worker's turn runs, not after it: the
// asker goes on matching. (Before, tryRun waited for the lock the running turn held.)
TEST(InOrder, TryRunAnswersWhileAnotherTurnRuns) {
  InOrder in_order;
  std::promise<void> entered;
  std::promise<void> release;
  bool released = false;
  std::thread turn([&] {
    in_order.run(0, [&] {
      entered.set_value();
      // Generous: only a tryRun that blocks until this turn ends lets it time out.
      released =
          release.get_future().wait_for(std::chrono::seconds(30)) == std::future_status::ready;
    });
  });
  entered.get_future().wait();
  EXPECT_FALSE(in_order.tryRun(1, [] {}));
  release.set_value();
  turn.join();
  EXPECT_TRUE(released);
  EXPECT_TRUE(in_order.tryRun(1, [] {}));
}

}  // namespace
}  // namespace faultline
