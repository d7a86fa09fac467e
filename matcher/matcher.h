// Matches record batches against the bank: one RE2::Set pass per line for its stream kind, then
// the single signature's RE2 only on a hit, to extract the named fields.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/record.h"
#include "matcher/bank.h"

namespace faultline {

// A line that matched a signature. Owns its bytes: it outlives the batch it came from.
struct Hit {
  int64_t time_ns = 0;  // event time of the line, ns since the epoch
  std::string node;
  uint32_t signature = 0;  // index into Bank::signatures
  StreamKind stream = StreamKind::kOther;
  std::string line;
  std::vector<std::pair<std::string, std::string>> fields;  // named captures that participated
  uint64_t seq = 0;  // arrival order, so that sorting by event time stays deterministic

  std::string_view field(std::string_view name) const;
};

struct MatcherStats {
  uint64_t lines = 0;
  uint64_t bytes = 0;
  uint64_t hits = 0;
  uint64_t set_errors = 0;  // RE2::Set DFA out of memory: the line was matched pattern by pattern
  uint64_t repeats = 0;     // matching lines equal to the previous one: its hits were reused
};

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Bank> bank) : bank_(std::move(bank)) {}

  // Appends one Hit per (record, signature) that matches, in record order. Records of a stream
  // kind no signature applies to cost nothing beyond the lookup. Allocates only for hits.
  void match(const RecordBatch& batch, std::vector<Hit>* hits);

  // Matches a single line as stream kind `kind`; returns the signature indexes that match, in
  // increasing order.
  std::vector<uint32_t> matchLine(std::string_view line, StreamKind kind);

  const MatcherStats& stats() const { return stats_; }
  const Bank& bank() const { return *bank_; }

 private:
  using Fields = std::vector<std::pair<std::string, std::string>>;

  // Sets sigs_ to the signatures of `cs` that match `line`, in increasing order.
  void matchSet(std::string_view line, const CompiledSet& cs);
  // Runs the signature's own RE2 for its named captures; false if it does not match after all.
  bool extract(std::string_view line, const Signature& sig, Fields* fields);

  std::shared_ptr<const Bank> bank_;
  MatcherStats stats_;
  std::vector<int> ids_;        // reused across lines: no allocation per line
  std::vector<uint32_t> sigs_;  // likewise
  uint64_t seq_ = 0;
  // The last line that hit and its hits: a node repeating one line in a storm pays for the Set
  // and the captures once.
  std::string last_line_;
  StreamKind last_stream_ = StreamKind::kOther;
  bool last_valid_ = false;
  std::vector<std::pair<uint32_t, Fields>> last_hits_;
};

}  // namespace faultline
