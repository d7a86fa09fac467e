// Unit test helpers: the embedded signature bank, loaded once; a sink that keeps every decision.
#pragma once

#include <memory>
#include <vector>

#include "core/decision.h"
#include "matcher/bank.h"

namespace faultline {

// The bank compiled into the binary (rules/), loaded on first use and shared by every test.
inline std::shared_ptr<const Bank> shippedBank() {
  static const std::shared_ptr<const Bank> bank = loadBank(embeddedRuleFiles());
  return bank;
}

// A DecisionSink that keeps every decision written to it, in order.
class CollectingSink : public DecisionSink {
 public:
  void write(const Decision& d) override { got.push_back(d); }
  std::vector<Decision> got;
};

}  // namespace faultline
