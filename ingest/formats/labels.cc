#include "ingest/formats/labels.h"

#include <algorithm>
#include <iterator>

namespace faultline {

LabelFilter::LabelFilter(const StreamRules& rules) {
  auto add = [this](std::string_view name) {
    if (name.empty()) {
      return;  // no label has an empty name
    }
    if (by_length_.size() <= name.size()) {
      by_length_.resize(name.size() + 1);
    }
    by_length_[name.size()].emplace_back(name);
  };
  for (const auto* names : {&rules.node_labels, &rules.pod_labels}) {
    std::for_each(names->begin(), names->end(), add);
  }
  for (const auto& kv : rules.kernel_labels) {
    add(kv.first);
  }
  std::for_each(std::begin(kJobLabels), std::end(kJobLabels), add);
}

bool LabelFilter::keeps(std::string_view name) const {
  if (name.size() >= by_length_.size()) {
    return false;
  }
  const auto& names = by_length_[name.size()];
  // The first byte turns most names away without a call to memcmp.
  return std::any_of(names.begin(), names.end(),
                     [&](const std::string& n) { return n.front() == name.front() && n == name; });
}

void classify(const StreamRules& rules, const RecordBatch& batch, LogRecord* rec) {
  const auto begin = batch.labels.begin() + rec->labels_begin;
  const auto end = batch.labels.begin() + rec->labels_end;
  auto find = [&](std::string_view name) {
    return std::find_if(begin, end, [&](const Label& l) { return l.name == name; });
  };
  if (rec->node.empty()) {
    for (const std::string& name : rules.node_labels) {
      const auto it = find(name);
      if (it != end && !it->value.empty()) {
        rec->node = it->value;
        break;
      }
    }
  }
  const bool pod =
      std::any_of(rules.pod_labels.begin(), rules.pod_labels.end(), [&](const auto& n) {
        const auto it = find(n);
        return it != end && !it->value.empty();
      });
  if (pod) {
    rec->stream = StreamKind::kPod;
    return;
  }
  const bool kernel =
      std::any_of(rules.kernel_labels.begin(), rules.kernel_labels.end(), [&](const auto& kv) {
        const auto it = find(kv.first);
        return it != end && it->value == kv.second;
      });
  rec->stream = kernel ? StreamKind::kKernel : StreamKind::kOther;
}

}  // namespace faultline
