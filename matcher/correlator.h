// Per-node correlation over event time: turns signature hits into decisions by the bank's rules.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/decision.h"
#include "matcher/bank.h"
#include "matcher/matcher.h"

namespace faultline {

// Semantics, per rule and per (node, rule, entity) key, where the entity is the rule's `entity`
// fields of the hit (e.g. the GPU's PCI address):
//   - a hit counts only if every `where` field has one of the listed values;
//   - a counted hit opens a dedup window of `dedup_ns`: further hits of the key inside it are
//     ignored (a flood of one line counts once);
//   - fatal rules decide on the first counted hit; warning rules when `count` counted hits fall
//     within `window_ns`; info rules never decide;
//   - a node gets one taint decision; later hits do not repeat it.
// Hits must arrive in event-time order per node (replay sorts them; live streams are ordered).
class Correlator {
 public:
  Correlator(std::shared_ptr<const Bank> bank, Taint taint);

  // Appends the decisions `hit` completes to `out`.
  void observe(const Hit& hit, std::vector<Decision>* out);

  size_t nodes() const { return nodes_.size(); }

 private:
  struct Counter {
    int64_t last_counted_ns = INT64_MIN;
    std::deque<int64_t> times;      // counted hits inside the window
    std::deque<Evidence> evidence;  // the same hits, as evidence (at most `count`)
  };
  struct NodeState {
    bool tainted = false;
    std::unordered_map<std::string, Counter> counters;  // key: rule index + entity
  };

  std::shared_ptr<const Bank> bank_;
  Taint taint_;
  std::vector<std::vector<uint32_t>> rules_by_signature_;
  std::unordered_map<std::string, NodeState> nodes_;
};

}  // namespace faultline
