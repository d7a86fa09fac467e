#include "ingest/formats/labels.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

namespace faultline {
namespace {

// Whether `name` is one of `names` (a list of label names).
template <typename Names>
bool named(const Names& names, std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

}  // namespace

LabelFilter::LabelFilter(const StreamRules& rules) {
  auto add = [this](std::string_view name) {
    if (!name.empty()) {  // no attribute or field with an empty name is a label
      names_[name];       // kept, false unless a pod label
    }
  };
  for (const auto* names : {&rules.node_labels, &rules.facility_labels, &rules.transport_labels}) {
    std::for_each(names->begin(), names->end(), add);
  }
  for (const auto& kv : rules.kernel_labels) {
    add(kv.first);
  }
  std::for_each(std::begin(kJobLabels), std::end(kJobLabels), add);
  for (const std::string& name : rules.pod_labels) {
    if (!name.empty()) {
      names_[name] = true;
    }
  }
}

std::string_view nodeOf(const StreamRules& rules, const Label* begin, const Label* end) {
  for (const std::string& name : rules.node_labels) {
    const Label* it = std::find_if(begin, end, [&](const Label& l) { return l.name == name; });
    if (it != end && !it->value.empty()) {
      return it->value;
    }
  }
  return {};
}

bool fromProcess(const StreamRules& rules, const RecordBatch& batch, const LogRecord& rec) {
  const Label* begin = batch.labels.data() + rec.labels_begin;
  const Label* end = batch.labels.data() + rec.labels_end;
  return std::any_of(begin, end, [&](const Label& l) {
    return !l.value.empty() && ((l.value != "0" && named(rules.facility_labels, l.name)) ||
                                (l.value != "kernel" && named(rules.transport_labels, l.name)));
  });
}

namespace {

// classify(), with kernel labels read only among [rec->labels_begin, marks_end).
void classifyMarked(const StreamRules& rules, const RecordBatch& batch, LogRecord* rec,
                    uint32_t marks_end) {
  const Label* begin = batch.labels.data() + rec->labels_begin;
  const Label* end = batch.labels.data() + rec->labels_end;
  const Label* marks = batch.labels.data() + marks_end;
  auto find = [&](std::string_view name) {
    return std::find_if(begin, marks, [&](const Label& l) { return l.name == name; });
  };
  if (rec->node.empty()) {
    rec->node = nodeOf(rules, begin, end);
  }
  // Every label of a pod name counts, not only the first: a pod's own fields can come first in
  // a merged record (Fluent Bit's Merge_Log) and must not mask the shipper's.
  const bool pod = std::any_of(begin, end, [&](const Label& l) {
    return !l.value.empty() && named(rules.pod_labels, l.name);
  });
  if (pod) {
    rec->stream = StreamKind::kPod;
    return;
  }
  const bool kernel =
      std::any_of(rules.kernel_labels.begin(), rules.kernel_labels.end(), [&](const auto& kv) {
        const auto it = find(kv.first);
        return it != marks && it->value == kv.second;
      });
  rec->stream =
      kernel && !fromProcess(rules, batch, *rec) ? StreamKind::kKernel : StreamKind::kOther;
}

}  // namespace

void classify(const StreamRules& rules, const RecordBatch& batch, LogRecord* rec) {
  classifyMarked(rules, batch, rec, rec->labels_end);
}

void classifyShipped(const StreamRules& rules, uint32_t shipper_labels, uint32_t marking_labels,
                     RecordBatch* batch, LogRecord* rec) {
  std::vector<Label>& labels = batch->labels;
  const auto begin = labels.begin() + rec->labels_begin;
  const auto own = begin + shipper_labels;  // erasing after it keeps both valid
  // A pod's metadata map among the record's own labels (Fluent Bit's OTLP output) is a shipper's
  // too: the pod's own keys merged beside it (Merge_Log) must not name its node or job either.
  if (std::any_of(
          begin, own,
          [&](const Label& l) { return !l.value.empty() && named(rules.pod_labels, l.name); }) ||
      std::any_of(own, labels.end(), [&](const Label& l) {
        return l.value == kNotAString && named(rules.pod_labels, l.name);
      })) {
    labels.erase(std::remove_if(own, labels.end(),
                                [&](const Label& l) {
                                  return named(rules.node_labels, l.name) ||
                                         named(kJobLabels, l.name);
                                }),
                 labels.end());
    rec->labels_end = static_cast<uint32_t>(labels.size());
  }
  rec->node = nodeOf(rules, labels.data() + rec->labels_begin,
                     labels.data() + rec->labels_begin + shipper_labels);
  classifyMarked(rules, *batch, rec, rec->labels_begin + marking_labels);
}

}  // namespace faultline
