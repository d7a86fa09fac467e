// The engine every mode shares: batches in, matcher, per-node correlator, decisions to the sinks.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/decision.h"
#include "core/record.h"
#include "matcher/bank.h"
#include "matcher/correlator.h"
#include "matcher/matcher.h"

namespace faultline {

class Pipeline {
 public:
  Pipeline(std::shared_ptr<const Bank> bank, Taint taint, std::vector<DecisionSink*> sinks);

  // Live: matches the batch and correlates its hits in arrival order (each node's stream is in
  // event-time order on the wire). Decisions reach the sinks before this returns.
  void process(const RecordBatch& batch);

  // Replay: matches the batch and keeps its hits; nothing is decided until finishReplay().
  void collect(const RecordBatch& batch);
  // Replay: sorts the kept hits by event time (ties: node, line, input order) and correlates
  // them, so the outcome does not depend on the order of the input files or lines.
  void finishReplay();

  // Flushes every sink.
  void flush();

  const MatcherStats& matcherStats() const { return matcher_.stats(); }
  uint64_t decisions() const { return decisions_; }

 private:
  void correlate(const std::vector<Hit>& hits);

  Matcher matcher_;
  Correlator correlator_;
  std::vector<DecisionSink*> sinks_;
  std::vector<Hit> hits_;
  std::vector<Decision> out_;
  uint64_t decisions_ = 0;
};

}  // namespace faultline
