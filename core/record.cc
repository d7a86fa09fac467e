#include "core/record.h"

#include "core/decision.h"

namespace faultline {

std::string_view streamKindName(StreamKind kind) {
  switch (kind) {
    case StreamKind::kKernel:
      return "kernel";
    case StreamKind::kPod:
      return "pod";
    case StreamKind::kOther:
      break;
  }
  return "other";
}

std::string_view actionName(Decision::Action action) {
  switch (action) {
    case Decision::Action::kUntaint:
      return "untaint";
    case Decision::Action::kSuppressed:
      return "suppressed";
    case Decision::Action::kSuspect:
      return "suspect";
    case Decision::Action::kTaint:
      break;
  }
  return "taint";
}

bool parseStreamKind(std::string_view name, StreamKind* kind) {
  if (name == "kernel") {
    *kind = StreamKind::kKernel;
  } else if (name == "pod") {
    *kind = StreamKind::kPod;
  } else if (name == "other") {
    *kind = StreamKind::kOther;
  } else {
    return false;
  }
  return true;
}

std::string_view RecordBatch::copy(std::string_view bytes) {
  if (bytes.empty()) {
    return {};
  }
  if (bytes.size() > kChunkBytes / 4) {
    arena_.emplace_front(bytes);  // large: its own chunk, in front so the open chunk stays last
    arena_bytes_ += arena_.front().capacity();
    return arena_.front();
  }
  if (arena_.empty() || arena_.back().capacity() - arena_.back().size() < bytes.size()) {
    arena_.emplace_back().reserve(kChunkBytes);
    arena_bytes_ += arena_.back().capacity();
  }
  std::string& chunk = arena_.back();
  const size_t at = chunk.size();
  chunk.append(bytes);
  return {chunk.data() + at, bytes.size()};
}

std::string_view RecordBatch::label(const LogRecord& rec, std::string_view name) const {
  for (uint32_t i = rec.labels_begin; i < rec.labels_end; ++i) {
    if (labels[i].name == name) {
      return labels[i].value;
    }
  }
  return {};
}

std::string_view RecordBatch::job(const LogRecord& rec) const {
  for (std::string_view name : kJobLabels) {
    if (const std::string_view value = label(rec, name); !value.empty()) {
      return value;
    }
  }
  return {};
}

size_t RecordBatch::memoryBytes() const {
  return arena_bytes_ + held_bytes_ + records.capacity() * sizeof(LogRecord) +
         labels.capacity() * sizeof(Label);
}

void RecordBatch::clear() {
  records.clear();
  labels.clear();
  arena_.clear();
  arena_bytes_ = 0;
  held_.clear();
  held_bytes_ = 0;
}

}  // namespace faultline
