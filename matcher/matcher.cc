#include "matcher/matcher.h"

#include <algorithm>
#include <array>

namespace faultline {
namespace {

constexpr int kMaxGroups = 32;

}  // namespace

std::string_view Hit::field(std::string_view name) const {
  for (const auto& [k, v] : fields) {
    if (k == name) {
      return v;
    }
  }
  return {};
}

void Matcher::matchSet(std::string_view line, const CompiledSet& cs) {
  sigs_.clear();
  if (!cs.set) {
    return;
  }
  const std::vector<uint32_t>& index = cs.signature;
  RE2::Set::ErrorInfo info{};
  ids_.clear();
  const bool any = cs.set->Match(line, &ids_, &info);
  if (!any && info.kind != RE2::Set::kNoError) {
    // The DFA ran out of memory (or the set is inconsistent): a false here does not mean "no
    // match", so fall back to each pattern on its own.
    ++stats_.set_errors;
    for (uint32_t sig : index) {
      if (RE2::PartialMatch(line, *bank_->signatures[sig].re)) {
        sigs_.push_back(sig);
      }
    }
    return;
  }
  for (int id : ids_) {
    sigs_.push_back(index[static_cast<size_t>(id)]);
  }
  std::sort(sigs_.begin(), sigs_.end());
}

std::vector<uint32_t> Matcher::matchLine(std::string_view line, StreamKind kind) {
  matchSet(line, bank_->sets[static_cast<size_t>(kind)]);
  return sigs_;
}

bool Matcher::extract(std::string_view line, const Signature& sig, Fields* fields) {
  std::array<re2::StringPiece, kMaxGroups + 1> groups;
  const int n = std::min(static_cast<int>(sig.fields.size()), kMaxGroups) + 1;
  if (!sig.re->Match(line, 0, line.size(), RE2::UNANCHORED, groups.data(), n)) {
    return false;  // the Set and the single pattern disagree only on pathological input
  }
  fields->clear();
  for (int g = 1; g < n; ++g) {
    const std::string& name = sig.fields[static_cast<size_t>(g - 1)];
    if (!name.empty() && groups[static_cast<size_t>(g)].data() != nullptr) {
      fields->emplace_back(name, std::string(groups[static_cast<size_t>(g)]));
    }
  }
  return true;
}

void Matcher::match(const RecordBatch& batch, std::vector<Hit>* hits) {
  Fields fields;
  for (const LogRecord& rec : batch.records) {
    ++stats_.lines;
    stats_.bytes += rec.line.size();
    ++seq_;
    const CompiledSet& cs = bank_->sets[static_cast<size_t>(rec.stream)];
    if (!cs.set) {
      continue;
    }
    auto emit = [&](uint32_t sig, const Fields& f) {
      Hit& hit = hits->emplace_back();
      hit.time_ns = rec.time_ns;
      hit.node = rec.node;
      hit.signature = sig;
      hit.stream = rec.stream;
      hit.line = rec.line;
      hit.seq = seq_;
      hit.fields = f;
      ++stats_.hits;
    };
    if (last_valid_ && rec.stream == last_stream_ && rec.line == last_line_) {
      ++stats_.repeats;
      for (const auto& [sig, f] : last_hits_) {
        emit(sig, f);
      }
      continue;
    }
    matchSet(rec.line, cs);
    if (sigs_.empty()) {
      continue;  // the common case
    }
    last_valid_ = true;
    last_stream_ = rec.stream;
    last_line_.assign(rec.line);
    last_hits_.clear();
    for (uint32_t sig : sigs_) {
      if (!extract(rec.line, bank_->signatures[sig], &fields)) {
        continue;
      }
      emit(sig, fields);
      last_hits_.emplace_back(sig, fields);
    }
  }
}

}  // namespace faultline
