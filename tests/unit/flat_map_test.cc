#include "matcher/flat_map.h"

#include <map>
#include <random>
#include <string>

#include <gtest/gtest.h>

namespace faultline {
namespace {

TEST(FlatMap, FindsInsertsAndErases) {
  FlatMap<int> m;
  EXPECT_EQ(m.find("gpu-1"), nullptr);
  EXPECT_FALSE(m.erase("gpu-1"));
  m["gpu-1"] = 1;
  m["gpu-2"] = 2;
  EXPECT_EQ(m["gpu-1"], 1);  // an existing key is not reset
  ASSERT_NE(m.find("gpu-2"), nullptr);
  EXPECT_EQ(*m.find("gpu-2"), 2);
  EXPECT_EQ(m.size(), 2U);
  EXPECT_TRUE(m.erase("gpu-1"));
  EXPECT_FALSE(m.contains("gpu-1"));
  EXPECT_EQ(*m.find("gpu-2"), 2);  // the moved last entry is still found
  m.clear();
  EXPECT_TRUE(m.empty());
  EXPECT_FALSE(m.contains("gpu-2"));
  m["gpu-3"] = 3;
  EXPECT_EQ(*m.find("gpu-3"), 3);
}

// Random inserts and erases over few keys (long probe runs, erases inside them) agree with
// std::map at every step.
TEST(FlatMap, AgreesWithStdMapUnderRandomInsertsAndErases) {
  std::mt19937 rng(7);
  FlatMap<int> m;
  std::map<std::string, int> want;
  for (int step = 0; step < 20000; ++step) {
    const std::string key = "node-" + std::to_string(rng() % 300);
    if (rng() % 3 == 0) {
      EXPECT_EQ(m.erase(key), want.erase(key) == 1) << key;
    } else {
      m[key] = step;
      want[key] = step;
    }
    ASSERT_EQ(m.size(), want.size());
    const std::string probe = "node-" + std::to_string(rng() % 300);
    const int* got = m.find(probe);
    const auto it = want.find(probe);
    ASSERT_EQ(got != nullptr, it != want.end()) << probe << " at step " << step;
    if (got != nullptr) {
      EXPECT_EQ(*got, it->second);
    }
  }
  std::map<std::string, int> seen(m.begin(), m.end());
  EXPECT_EQ(seen, want);
}

}  // namespace
}  // namespace faultline
