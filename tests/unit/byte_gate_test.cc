#include "ingest/push/byte_gate.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace faultline {
namespace {

TEST(ByteGate, AdmitsAtMostItsBytesAtOnceAndAnOversizedItemAlone) {
  constexpr size_t kMax = 100;
  ByteGate gate(kMax);
  std::mutex mu;
  size_t in = 0;       // bytes admitted now
  size_t holders = 0;  // items admitted now
  size_t most_holders = 0;
  bool over = false;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 200; ++i) {
        const size_t bytes = i % 50 == 0 ? kMax + 20 : 1 + rng() % 60;
        const ByteGate::Admission admitted = gate.admit(bytes);
        {
          std::lock_guard lock(mu);
          in += bytes;
          ++holders;
          most_holders = std::max(most_holders, holders);
          over = over || (in > kMax && holders > 1);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        {
          std::lock_guard lock(mu);
          in -= bytes;
          --holders;
        }
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  EXPECT_FALSE(over);
  EXPECT_GT(most_holders, 1u);  // small items did go through side by side
}

TEST(ByteGate, AdmitsInTheOrderCalledSoALargeItemIsNotStarved) {
  ByteGate gate(10);
  std::optional<ByteGate::Admission> held(gate.admit(4));
  std::atomic<int> order{0};
  int large_at = -1;
  int small_at = -1;
  std::thread large([&] {
    const ByteGate::Admission a = gate.admit(7);  // does not fit beside the 4 held: waits
    large_at = order++;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // `large` is waiting by now
  std::thread small([&] {
    // Would fit beside the 4 held, but `large` called first (and 7 + 5 > 10).
    const ByteGate::Admission a = gate.admit(5);
    small_at = order++;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(order.load(), 0);  // neither got in while the 4 are held
  held.reset();
  large.join();
  small.join();
  EXPECT_EQ(large_at, 0);
  EXPECT_EQ(small_at, 1);
}

}  // namespace
}  // namespace faultline
