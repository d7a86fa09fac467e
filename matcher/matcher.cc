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

std::vector<uint32_t> Matcher::matchLine(std::string_view line, StreamKind kind) {
  std::vector<uint32_t> out;
  const CompiledSet& cs = bank_->sets[static_cast<size_t>(kind)];
  if (!cs.set) {
    return out;
  }
  RE2::Set::ErrorInfo info{};
  ids_.clear();
  const bool any = cs.set->Match(line, &ids_, &info);
  if (!any && info.kind != RE2::Set::kNoError) {
    // The DFA ran out of memory (or the set is inconsistent): a false here does not mean "no
    // match", so fall back to each pattern on its own.
    ++stats_.set_errors;
    for (uint32_t sig : cs.signature) {
      if (RE2::PartialMatch(line, *bank_->signatures[sig].re)) {
        out.push_back(sig);
      }
    }
    return out;
  }
  for (int id : ids_) {
    out.push_back(cs.signature[static_cast<size_t>(id)]);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void Matcher::match(const RecordBatch& batch, std::vector<Hit>* hits) {
  std::array<re2::StringPiece, kMaxGroups + 1> groups;
  for (const LogRecord& rec : batch.records) {
    ++stats_.lines;
    stats_.bytes += rec.line.size();
    ++seq_;
    if (!bank_->sets[static_cast<size_t>(rec.stream)].set) {
      continue;
    }
    for (uint32_t sig_index : matchLine(rec.line, rec.stream)) {
      const Signature& sig = bank_->signatures[sig_index];
      const int n = std::min(static_cast<int>(sig.fields.size()), kMaxGroups) + 1;
      if (!sig.re->Match(rec.line, 0, rec.line.size(), RE2::UNANCHORED, groups.data(), n)) {
        continue;  // the Set and the single pattern disagree only on pathological input
      }
      Hit& hit = hits->emplace_back();
      hit.time_ns = rec.time_ns;
      hit.node = rec.node;
      hit.signature = sig_index;
      hit.stream = rec.stream;
      hit.line = rec.line;
      hit.seq = seq_;
      for (int g = 1; g < n; ++g) {
        const std::string& name = sig.fields[static_cast<size_t>(g - 1)];
        if (!name.empty() && groups[static_cast<size_t>(g)].data() != nullptr) {
          hit.fields.emplace_back(name, std::string(groups[static_cast<size_t>(g)]));
        }
      }
      ++stats_.hits;
    }
  }
}

}  // namespace faultline
