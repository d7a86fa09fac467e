// The engine every mode shares: batches in, matcher, per-node correlator, decisions to the sinks.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/decision.h"
#include "core/record.h"
#include "core/time.h"
#include "ingest/formats/labels.h"
#include "matcher/bank.h"
#include "matcher/correlator.h"
#include "matcher/flat_map.h"
#include "matcher/matcher.h"

namespace faultline {

// What Pipeline::match finds in one batch, for Pipeline::correlate. Views point into the batch,
// which must outlive the correlate() call.
struct BatchMatch {
  // A run of one stream's pod records labelled with a job (kJobLabels): `node` ran a pod of
  // `job` from first_ns to last_ns (event time, ns since the epoch).
  struct JobRun {
    std::string_view job;
    std::string_view node;
    int64_t first_ns = 0;
    int64_t last_ns = 0;
  };
  std::vector<Hit> hits;
  std::vector<JobRun> runs;
  int64_t newest_ns = INT64_MIN;  // the batch's latest record time; INT64_MIN if empty
  // Live: records whose time was beyond the service's clock plus kMaxAheadNs (Pipeline::match).
  uint64_t ahead = 0;
  // Each node of the batch with its latest kernel or host record time and its latest pod record
  // time (Correlator::heard; INT64_MIN: none), if the pipeline has a max_lag; node_slot maps a
  // node to its place in `nodes`, plus one.
  struct NodeTimes {
    std::string_view node;
    int64_t newest_ns = INT64_MIN;
    int64_t pod_ns = INT64_MIN;
  };
  std::vector<NodeTimes> nodes;
  FlatMap<uint32_t> node_slot;
};

// Record times are taken within [kEarliestNs, kLatestNs] (Pipeline::match): 40 years inside the
// int64 range (1717-09-12 to 2222-04-21), so that a time plus or minus any of the bank's durations
// (at most 3650d each) cannot overflow. A stamp near INT64_MAX (a Loki entry past 2262, a forged
// nanosecond string) made a cluster window's end wrap, and replay looped for ever.
inline constexpr int64_t kFortyYearsNs = int64_t{4} * 3650 * 86400 * kNanosPerSecond;
inline constexpr int64_t kEarliestNs = INT64_MIN + kFortyYearsNs;
inline constexpr int64_t kLatestNs = INT64_MAX - kFortyYearsNs;

class Pipeline {
 public:
  // `matchers`: how many threads may call match() at once, each with its own Matcher. max_lag_ns:
  // live, how far one node's log may lag behind the others' (Correlator); replay leaves it 0.
  // clock: live, the service's clock (ns since the epoch), which bounds record times in match();
  // replay, whose inputs are history, leaves it empty. dry_run_rules: the ids of the rules in dry
  // run (Correlator; it throws std::runtime_error for an id not in the bank).
  Pipeline(const std::shared_ptr<const Bank>& bank, Taint taint, std::vector<DecisionSink*> sinks,
           size_t matchers = 1, int64_t max_lag_ns = 0, std::function<int64_t()> clock = {},
           const std::vector<std::string>& dry_run_rules = {});

  // Adds a sink before the first batch (serve's taint sink, whose hooks call this pipeline).
  void addSink(DecisionSink* sink) { sinks_.push_back(sink); }

  // Live, one thread: match(0, batch) and correlate().
  void process(const RecordBatch& batch);
  // Live, several threads: worker `worker` (< matchers()) reads the batch with its own Matcher,
  // without a lock, replacing *out with what it found. Distinct workers may run at once. Every
  // per-record pass is here, so that correlate() costs per hit and per job run, not per record.
  // With a clock, a record time later than clock() + kMaxAheadNs (a node whose clock runs ahead,
  // or a line whose shipper took its time from the text) is taken as that bound, and counted in
  // out->ahead: else one such record would move event time on for every node, and every other
  // node would be silent, its timers due at once (Correlator::advance).
  void match(size_t worker, const RecordBatch& batch, BatchMatch* out);
  // Live, one batch at a time, in arrival order (each node's stream is in event-time order on the
  // wire): records the batch's job runs, correlates its hits, moves each node's time to its newest
  // record and event time to the batch's newest. Decisions reach the sinks before this returns. The
  // hits are moved into the correlator: only their time, signature, stream, seq and repeats stay.
  void correlate(BatchMatch& matched);
  // Live: `node` carries faultline's taint of rule `rule`, decided at time_ns (ns since the epoch)
  // by an earlier process or another leader (TaintSink::Hooks::on_restored), as seen after this
  // pipeline's first `seen` decisions (Correlator::restore). Any thread: queued, and restored in
  // the correlator by the next correlate(), before its batch's hits; one it does not restore is
  // logged with the reason. A time beyond the bounds of match() is taken as the nearest bound.
  void restoreTaint(std::string node, std::string rule, int64_t time_ns, uint64_t seen = 0);
  // Live: `node` no longer carries faultline's taint, as seen after this pipeline's first `seen`
  // decisions (TaintSink::Hooks::on_lifted). Queued as restoreTaint(), then Correlator::lift.
  void liftTaint(std::string node, uint64_t seen);

  // Replay: matches the batch of input number `input` and keeps its hits; nothing is decided
  // until finishReplay(). Inputs are numbered in the order of their names, so that hits of one
  // node at one time are taken in that order, and in the input's own order within one input.
  // Memory stays bounded under a flood: identical hits (node, signature, pod job, line without
  // its timestamp envelope) in one second of event time are kept once (the earliest), as the
  // correlator would take the others for repeats anyway (Correlator), live as in replay; a state
  // signature's (Signature::state) are all kept, as the correlator takes none for a repeat (the
  // matcher still folds a line printed many times in a row: Hit::repeats).
  void collect(const RecordBatch& batch, uint32_t input);
  // Replay: takes the hits `other` collected (from other files, on another thread), as if this
  // pipeline had collected them; `other` is left empty. Results do not depend on which pipeline
  // collected which file.
  void absorb(Pipeline& other);
  // Replay: input number `input` lists its records newest first (ArchiveSource::newestFirst):
  // its hits of one node at one time are taken in the reverse of their place in it, the order
  // they were logged in. Call before finishReplay().
  void newestFirst(uint32_t input);
  // Replay: sorts the kept hits by event time (ties: node, input, place in the input, reversed
  // for an input newestFirst() names) and correlates them, so the outcome does not depend on the
  // order of the input files, nor on that of a newest-first export.
  void finishReplay();

  // Flushes every sink.
  void flush();

  size_t matchers() const { return matchers_.size(); }
  // A worker's matcher; read it on that worker's thread, or once no worker runs.
  const MatcherStats& matcherStats(size_t worker = 0) const { return matchers_[worker].stats(); }
  const Bank& bank() const { return matchers_[0].bank(); }
  uint64_t decisions() const { return decisions_; }
  const Correlator& correlator() const { return correlator_; }
  // Nodes the correlator keeps state for (Correlator::forgetAfterNs), as of the last correlate();
  // any thread may read it.
  size_t correlatorNodes() const { return correlator_nodes_.load(std::memory_order_relaxed); }
  // The correlator's counts (Correlator::Stats) as of the last correlate(); any thread may read
  // them.
  Correlator::Stats correlatorStats() const {
    const std::lock_guard lock(stats_mu_);
    return correlator_stats_;
  }

 private:
  // Drops hits_[first..] whose (node, signature, second, job, line) is already kept, but for a
  // state signature's (see collect()).
  void keep(size_t first);
  // Records the job runs with the correlator.
  void noteMembers(const std::vector<BatchMatch::JobRun>& runs);
  // Correlates one hit, moved into the correlator, and emits what it decides.
  void correlateHit(Hit& hit);
  // Restores the taints restoreTaint() queued.
  void restoreTaints();
  void emit(const std::vector<Decision>& decisions);

  std::vector<Matcher> matchers_;  // replay uses the first
  std::function<int64_t()> clock_;
  Correlator correlator_;
  std::vector<DecisionSink*> sinks_;
  BatchMatch matched_;  // process() and collect(): the current batch's
  // collect(): every batch's hits kept so far. A deque, so that growing it never holds the old
  // and the new array at once (a flood of distinct hits: each about 120 bytes).
  std::deque<Hit> hits_;
  // collect(): (node, signature, second, job, the line's hash) -> index into hits_ of the hit
  // kept for them. A hash, not the line: a flood of distinct lines kept each one twice.
  FlatMap<size_t> kept_;
  int64_t max_time_ns_ = INT64_MIN;  // newest record time seen by collect(), for timers
  std::vector<bool> newest_first_;   // by input number: newestFirst()
  std::vector<Decision> out_;
  uint64_t decisions_ = 0;
  std::atomic<size_t> correlator_nodes_ = 0;
  mutable std::mutex stats_mu_;  // one lock per correlate(), none per hit
  Correlator::Stats correlator_stats_;
  struct Restored {
    std::string node;
    std::string rule;  // "": lifted (liftTaint())
    int64_t time_ns = 0;
    uint64_t seen = 0;
  };
  std::mutex restore_mu_;                      // restoreTaint() runs on the taint sink's thread
  std::vector<Restored> restored_;             // queued by restoreTaint()
  std::atomic<bool> restore_pending_ = false;  // restored_ is not empty
};

}  // namespace faultline
