#include "core/pipeline.h"

#include <algorithm>

namespace faultline {

Pipeline::Pipeline(std::shared_ptr<const Bank> bank, Taint taint, std::vector<DecisionSink*> sinks)
    : matcher_(bank), correlator_(bank, std::move(taint)), sinks_(std::move(sinks)) {}

void Pipeline::process(const RecordBatch& batch) {
  hits_.clear();
  matcher_.match(batch, &hits_);
  correlate(hits_);
  hits_.clear();
}

void Pipeline::collect(const RecordBatch& batch) {
  matcher_.match(batch, &hits_);
}

void Pipeline::finishReplay() {
  std::stable_sort(hits_.begin(), hits_.end(), [](const Hit& a, const Hit& b) {
    if (a.time_ns != b.time_ns) {
      return a.time_ns < b.time_ns;
    }
    if (a.node != b.node) {
      return a.node < b.node;
    }
    if (a.line != b.line) {
      return a.line < b.line;  // so that the order of input files does not matter
    }
    return a.seq < b.seq;
  });
  correlate(hits_);
  hits_.clear();
  flush();
}

void Pipeline::correlate(const std::vector<Hit>& hits) {
  for (const Hit& hit : hits) {
    out_.clear();
    correlator_.observe(hit, &out_);
    for (const Decision& d : out_) {
      ++decisions_;
      for (DecisionSink* sink : sinks_) {
        sink->write(d);
      }
    }
  }
}

void Pipeline::flush() {
  for (DecisionSink* sink : sinks_) {
    sink->flush();
  }
}

}  // namespace faultline
