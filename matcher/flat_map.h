// The correlator's per-node state: a hash map from string keys (node names, rule + entity keys)
// kept in two flat arrays, so that a lookup touches one index slot and one entry instead of a
// node chain, and a hit never builds a std::string to look up.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace faultline {

// Entries are dense, in insertion order until an erase moves the last entry into the hole. The
// index is open addressing with linear probing over a power-of-two table at most half full; a slot
// holds an entry's position + 1 (0: empty). Erase shifts the probe run back, so there are no
// tombstones. Any insert or erase may move entries: pointers and references into the map do not
// survive one.
template <class V>
class FlatMap {
 public:
  using Entry = std::pair<std::string, V>;

  // The value stored for `key`, or nullptr.
  V* find(std::string_view key) { return const_cast<V*>(std::as_const(*this).find(key)); }
  const V* find(std::string_view key) const {
    if (entries_.empty()) {
      return nullptr;
    }
    const uint32_t slot = index_[probe(key, hashOf(key))];
    return slot == 0 ? nullptr : &entries_[slot - 1].second;
  }
  bool contains(std::string_view key) const { return find(key) != nullptr; }

  // The value stored for `key`, value-initialized first if absent.
  V& operator[](std::string_view key) {
    if (2 * (entries_.size() + 1) > index_.size()) {
      grow();
    }
    const size_t hash = hashOf(key);
    uint32_t& slot = index_[probe(key, hash)];
    if (slot == 0) {
      entries_.emplace_back(std::string(key), V{});
      hashes_.push_back(hash);
      slot = static_cast<uint32_t>(entries_.size());
    }
    return entries_[slot - 1].second;
  }

  // Removes `key`; returns whether it was there.
  bool erase(std::string_view key) {
    if (entries_.empty()) {
      return false;
    }
    size_t hole = probe(key, hashOf(key));
    const uint32_t pos = index_[hole];
    if (pos == 0) {
      return false;
    }
    // Backward shift: pull later members of the probe run into the hole when their home slot
    // does not lie cyclically in (hole, i].
    const size_t mask = index_.size() - 1;
    index_[hole] = 0;
    for (size_t i = (hole + 1) & mask; index_[i] != 0; i = (i + 1) & mask) {
      const size_t home = hashes_[index_[i] - 1] & mask;
      if (((i - home) & mask) >= ((i - hole) & mask)) {
        index_[hole] = index_[i];
        index_[i] = 0;
        hole = i;
      }
    }
    // Move the last entry into the erased one's place and repoint its slot.
    const size_t last = entries_.size();
    if (pos != last) {
      size_t i = hashes_[last - 1] & mask;
      while (index_[i] != last) {
        i = (i + 1) & mask;
      }
      index_[i] = pos;
      entries_[pos - 1] = std::move(entries_[last - 1]);
      hashes_[pos - 1] = hashes_[last - 1];
    }
    entries_.pop_back();
    hashes_.pop_back();
    return true;
  }

  void clear() {
    entries_.clear();
    hashes_.clear();
    std::fill(index_.begin(), index_.end(), 0);
  }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  auto begin() { return entries_.begin(); }
  auto end() { return entries_.end(); }
  auto begin() const { return entries_.begin(); }
  auto end() const { return entries_.end(); }

 private:
  static size_t hashOf(std::string_view key) { return std::hash<std::string_view>{}(key); }

  // The slot holding `key`, or the empty slot where it would go.
  size_t probe(std::string_view key, size_t hash) const {
    const size_t mask = index_.size() - 1;
    size_t i = hash & mask;
    while (index_[i] != 0 &&
           (hashes_[index_[i] - 1] != hash || entries_[index_[i] - 1].first != key)) {
      i = (i + 1) & mask;
    }
    return i;
  }

  void grow() {
    index_.assign(index_.empty() ? 8 : 2 * index_.size(), 0);
    const size_t mask = index_.size() - 1;
    for (size_t e = 0; e < entries_.size(); ++e) {
      size_t i = hashes_[e] & mask;
      while (index_[i] != 0) {
        i = (i + 1) & mask;
      }
      index_[i] = static_cast<uint32_t>(e + 1);
    }
  }

  std::vector<Entry> entries_;
  std::vector<size_t> hashes_;  // hashes_[e]: the hash of entries_[e].first
  std::vector<uint32_t> index_;
};

}  // namespace faultline
