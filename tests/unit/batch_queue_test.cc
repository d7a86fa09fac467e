#include "core/batch_queue.h"

#include <chrono>
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
  for (uint64_t want = 0; want < 3; ++want) {
    std::optional<BatchQueue::Item> item = queue.pop();
    ASSERT_TRUE(item);
    EXPECT_EQ(item->seq, want);
    EXPECT_EQ(item->batch.records[0].line, want == 0 ? "a" : want == 1 ? "b" : "c");
  }
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

}  // namespace
}  // namespace faultline
