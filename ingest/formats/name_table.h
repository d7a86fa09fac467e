// A few dozen names (label names, JSON field paths) with a value each, looked up by string_view
// for every field of every record a decoder reads: a bucket by length, then the first byte, then
// the whole name. Most of a record's fields are not among the names and stop at the first or
// second test, where hashing would read each of them whole.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace faultline {

template <typename V>
class NameTable {
 public:
  // The value of `name`, value-initialized if `name` was absent. The reference stays valid until
  // the next insertion of a name of the same length.
  V& operator[](std::string_view name) {
    if (by_length_.size() <= name.size()) {
      by_length_.resize(name.size() + 1);
    }
    auto& bucket = by_length_[name.size()];
    for (auto& [n, v] : bucket) {
      if (n == name) {
        return v;
      }
    }
    return bucket.emplace_back(std::string(name), V()).second;
  }

  // The value of `name`, or null if absent.
  const V* find(std::string_view name) const {
    if (name.size() >= by_length_.size()) {
      return nullptr;
    }
    for (const auto& [n, v] : by_length_[name.size()]) {
      if ((name.empty() || n[0] == name[0]) && n == name) {  // the first byte spares a memcmp
        return &v;
      }
    }
    return nullptr;
  }

 private:
  std::vector<std::vector<std::pair<std::string, V>>> by_length_;  // [n]: the names of n bytes
};

}  // namespace faultline
