#include "matcher/correlator.h"

#include <algorithm>

namespace faultline {
namespace {

bool ruleApplies(const Rule& rule, const Hit& hit) {
  return std::all_of(rule.where.begin(), rule.where.end(), [&](const auto& cond) {
    const std::string_view v = hit.field(cond.first);
    return std::find(cond.second.begin(), cond.second.end(), v) != cond.second.end();
  });
}

std::string counterKey(uint32_t rule_index, const Rule& rule, const Hit& hit) {
  std::string key = std::to_string(rule_index);
  for (const std::string& f : rule.entity) {
    key += '\x1f';
    key += hit.field(f);
  }
  return key;
}

}  // namespace

Correlator::Correlator(std::shared_ptr<const Bank> bank, Taint taint)
    : bank_(std::move(bank)), taint_(std::move(taint)) {
  rules_by_signature_.resize(bank_->signatures.size());
  for (uint32_t i = 0; i < bank_->rules.size(); ++i) {
    rules_by_signature_[bank_->rules[i].signature].push_back(i);
  }
}

void Correlator::observe(const Hit& hit, std::vector<Decision>* out) {
  const std::vector<uint32_t>& rules = rules_by_signature_[hit.signature];
  if (rules.empty()) {
    return;
  }
  NodeState& node = nodes_[hit.node];
  if (node.tainted) {
    return;
  }
  for (uint32_t ri : rules) {
    const Rule& rule = bank_->rules[ri];
    if (rule.severity == Severity::kInfo || !ruleApplies(rule, hit)) {
      continue;
    }
    Counter& c = node.counters[counterKey(ri, rule, hit)];
    if (c.last_counted_ns != INT64_MIN && hit.time_ns - c.last_counted_ns < rule.dedup_ns) {
      continue;
    }
    c.last_counted_ns = hit.time_ns;
    c.times.push_back(hit.time_ns);
    c.evidence.push_back({hit.time_ns, bank_->signatures[hit.signature].id, hit.line, hit.fields});
    while (!c.times.empty() && rule.count > 1 && hit.time_ns - c.times.front() > rule.window_ns) {
      c.times.pop_front();
    }
    while (c.evidence.size() > c.times.size()) {
      c.evidence.pop_front();
    }
    if (static_cast<int>(c.times.size()) < rule.count) {
      continue;
    }
    Decision& d = out->emplace_back();
    d.time_ns = hit.time_ns;
    d.node = hit.node;
    d.action = Decision::Action::kTaint;
    d.taint = taint_;
    d.rule = rule.id;
    d.evidence.assign(c.evidence.begin(), c.evidence.end());
    node.tainted = true;
    node.counters.clear();  // state for a tainted node is no longer needed
    return;
  }
}

}  // namespace faultline
