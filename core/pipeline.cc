#include "core/pipeline.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <functional>
#include <iterator>
#include <numeric>
#include <string_view>
#include <utility>

#include <spdlog/spdlog.h>

#include "core/time.h"

namespace faultline {
namespace {

// Hit::seq in replay: the input's number above this bit, the hit's place below (2^40 records).
constexpr unsigned kInputShift = 40;

// Appends the batch's job runs to *runs. Records of one stream share their labels: the job is
// looked up once per run of a stream's records, and the run's earliest and latest times (at most
// limit_ns: Pipeline::match) bound it; a record more than gap_ns (ns) from the run starts another
// (a node that left a job and came back ran none of it in between).
void jobRuns(const RecordBatch& batch, int64_t limit_ns, int64_t gap_ns,
             std::vector<BatchMatch::JobRun>* runs) {
  const LogRecord* run = nullptr;
  BatchMatch::JobRun cur;
  auto flush = [&] {
    if (run != nullptr && !cur.job.empty()) {
      runs->push_back(cur);
    }
  };
  for (const LogRecord& rec : batch.records) {
    if (rec.stream != StreamKind::kPod || rec.labels_begin == rec.labels_end) {
      continue;
    }
    const int64_t t = std::clamp(rec.time_ns, kEarliestNs, limit_ns);
    if (run != nullptr && run->labels_begin == rec.labels_begin &&
        run->labels_end == rec.labels_end && run->node == rec.node && cur.first_ns - gap_ns <= t &&
        t <= cur.last_ns + gap_ns) {
      cur.first_ns = std::min(cur.first_ns, t);
      cur.last_ns = std::max(cur.last_ns, t);
      continue;
    }
    flush();
    run = &rec;
    cur = {batch.job(rec), rec.node, t, t};
  }
  flush();
}

}  // namespace

Pipeline::Pipeline(const std::shared_ptr<const Bank>& bank, Taint taint,
                   std::vector<DecisionSink*> sinks, size_t matchers, int64_t max_lag_ns,
                   std::function<int64_t()> clock, const std::vector<std::string>& dry_run_rules)
    : clock_(std::move(clock)),
      correlator_(bank, std::move(taint), max_lag_ns, dry_run_rules),
      sinks_(std::move(sinks)) {
  matchers_.reserve(std::max<size_t>(matchers, 1));
  for (size_t i = 0; i < std::max<size_t>(matchers, 1); ++i) {
    matchers_.emplace_back(bank);
  }
}

void Pipeline::noteMembers(const std::vector<BatchMatch::JobRun>& runs) {
  for (const BatchMatch::JobRun& r : runs) {
    correlator_.member(r.job, r.node, r.first_ns, r.last_ns);
  }
}

void Pipeline::process(const RecordBatch& batch) {
  match(0, batch, &matched_);
  correlate(matched_);
}

void Pipeline::match(size_t worker, const RecordBatch& batch, BatchMatch* out) {
  out->hits.clear();
  out->runs.clear();
  matchers_[worker].match(batch, &out->hits);
  const int64_t limit_ns = clock_ ? std::min(clock_() + kMaxAheadNs, kLatestNs) : kLatestNs;
  for (Hit& h : out->hits) {
    h.time_ns = std::clamp(h.time_ns, kEarliestNs, limit_ns);
  }
  // Read-only correlator settings: no lock needed beside a running correlate().
  if (correlator_.jobRunGapNs() > 0) {
    jobRuns(batch, limit_ns, correlator_.jobRunGapNs(), &out->runs);
  }
  const bool hears = correlator_.hearsNodes();
  out->newest_ns = INT64_MIN;
  out->ahead = 0;
  out->nodes.clear();
  out->node_slot.clear();
  size_t slot = 0;  // the previous record's node's: records come in runs of one node
  for (const LogRecord& rec : batch.records) {
    const int64_t t = std::clamp(rec.time_ns, kEarliestNs, limit_ns);
    out->ahead += rec.time_ns > limit_ns ? 1 : 0;
    out->newest_ns = std::max(out->newest_ns, t);
    if (!hears) {
      continue;
    }
    if (out->nodes.empty() || out->nodes[slot].node != rec.node) {
      uint32_t& found = out->node_slot[rec.node];
      if (found == 0) {
        out->nodes.push_back({rec.node});
        found = static_cast<uint32_t>(out->nodes.size());
      }
      slot = found - 1;
    }
    int64_t& newest =
        rec.stream == StreamKind::kPod ? out->nodes[slot].pod_ns : out->nodes[slot].newest_ns;
    newest = std::max(newest, t);
  }
}

void Pipeline::correlate(BatchMatch& matched) {
  restoreTaints();
  noteMembers(matched.runs);
  // The batch's records came together: one node's must not be found silent at another's hit.
  for (const BatchMatch::NodeTimes& n : matched.nodes) {
    correlator_.arrived(n.node, matched.newest_ns, n.newest_ns, n.pod_ns);
  }
  for (Hit& hit : matched.hits) {
    correlateHit(hit);
  }
  // After the hits: a node's later records must not decide a timer that one of its hits cancels.
  for (const BatchMatch::NodeTimes& n : matched.nodes) {
    correlator_.heard(n.node, n.newest_ns, n.pod_ns);
  }
  out_.clear();
  correlator_.advance(matched.newest_ns, &out_);  // quiet and recovery timers move with log time
  emit(out_);
  correlator_nodes_.store(correlator_.nodes(), std::memory_order_relaxed);
  const std::lock_guard lock(stats_mu_);
  correlator_stats_ = correlator_.stats();
}

void Pipeline::restoreTaint(std::string node, std::string rule, int64_t time_ns, uint64_t seen) {
  const std::lock_guard lock(restore_mu_);
  restored_.push_back({std::move(node), std::move(rule), time_ns, seen});
  restore_pending_.store(true, std::memory_order_release);
}

void Pipeline::liftTaint(std::string node, uint64_t seen) {
  const std::lock_guard lock(restore_mu_);
  restored_.push_back({std::move(node), "", 0, seen});
  restore_pending_.store(true, std::memory_order_release);
}

void Pipeline::restoreTaints() {
  if (!restore_pending_.load(std::memory_order_acquire)) {
    return;  // the turn of every batch: no lock
  }
  std::vector<Restored> restored;
  {
    const std::lock_guard lock(restore_mu_);
    restored.swap(restored_);
    restore_pending_.store(false, std::memory_order_relaxed);
  }
  // As match() bounds record times: an annotation's time may be anything, and the quiet timer
  // adds to it. Quiet periods count from now (Correlator::restore).
  const int64_t now_ns = clock_ ? std::min(clock_(), kLatestNs) : INT64_MIN;
  const int64_t limit_ns = clock_ ? std::min(now_ns + kMaxAheadNs, kLatestNs) : kLatestNs;
  for (const Restored& r : restored) {
    if (r.rule.empty()) {
      const std::string why = correlator_.lift(r.node, r.seen);
      if (why.empty()) {
        spdlog::info(
            "node {}: carries no faultline taint (lifted by another leader or by hand, or "
            "refused): forgotten, its next fault is decided again",
            r.node);
      }
      continue;  // "not tainted here" is the rule, not news
    }
    const std::string why = correlator_.restore(
        r.node, r.rule, std::clamp(r.time_ns, kEarliestNs, limit_ns), now_ns, r.seen);
    if (why.empty()) {
      spdlog::info("node {}: taint of rule {} (decided {}) restored from before this start", r.node,
                   r.rule, formatRfc3339(r.time_ns));
    } else {
      spdlog::warn("node {}: taint of rule {} from before this start not restored: {}", r.node,
                   r.rule, why);
    }
  }
}

void Pipeline::collect(const RecordBatch& batch, uint32_t input) {
  match(0, batch, &matched_);
  max_time_ns_ = std::max(max_time_ns_, matched_.newest_ns);
  noteMembers(matched_.runs);
  const size_t first = hits_.size();
  for (Hit& hit : matched_.hits) {
    hit.seq = (uint64_t{input} << kInputShift) | (hit.seq & ((uint64_t{1} << kInputShift) - 1));
    hits_.push_back(std::move(hit));
  }
  keep(first);
}

void Pipeline::absorb(Pipeline& other) {
  max_time_ns_ = std::max(max_time_ns_, other.max_time_ns_);
  correlator_.absorbMembers(other.correlator_);
  const size_t first = hits_.size();
  std::move(other.hits_.begin(), other.hits_.end(), std::back_inserter(hits_));
  other.hits_.clear();
  other.kept_.clear();
  keep(first);
}

void Pipeline::keep(size_t first) {
  size_t out = first;
  std::string key;
  for (size_t i = first; i < hits_.size(); ++i) {
    Hit& h = hits_[i];
    // A state line is kept: the correlator takes none for a repeat (Signature::state).
    if (!bank().signatures[h.signature].state) {
      key = h.node;
      key += '\x1f';
      key += std::to_string(h.signature);
      key += '\x1f';
      key += std::to_string(secondOf(h.time_ns));
      key += '\x1f';
      key += h.field(kJobField);  // two jobs' lines in one second are two events
      key += '\x1f';
      const size_t line_hash = std::hash<std::string_view>{}(h.line);
      std::array<char, 20> digits{};  // size_t's: the key needs no allocation of its own
      char* end = std::to_chars(digits.data(), digits.data() + digits.size(), line_hash).ptr;
      key.append(digits.data(), end);
      // Lines of one hash that differ are both kept (the last indexed): the correlator tells
      // repeats itself, this only saves their memory.
      const size_t* kept = kept_.find(key);
      if (kept != nullptr && hits_[*kept].line == h.line) {
        const Hit& k = hits_[*kept];
        if (h.time_ns < k.time_ns || (h.time_ns == k.time_ns && h.seq < k.seq)) {
          hits_[*kept] = std::move(h);  // the earliest, whatever the input order
        }
        continue;
      }
      kept_[key] = out;
    }
    if (out != i) {
      hits_[out] = std::move(h);
    }
    ++out;
  }
  hits_.resize(out);
}

void Pipeline::newestFirst(uint32_t input) {
  if (newest_first_.size() <= input) {
    newest_first_.resize(size_t{input} + 1);
  }
  newest_first_[input] = true;
}

void Pipeline::finishReplay() {
  // Their indices are sorted, not the hits: stable_sort's buffer would hold a copy of them all.
  std::vector<size_t> order(hits_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [this](size_t ia, size_t ib) {
    const Hit& a = hits_[ia];
    const Hit& b = hits_[ib];
    if (a.time_ns != b.time_ns) {
      return a.time_ns < b.time_ns;
    }
    if (a.node != b.node) {
      return a.node < b.node;
    }
    // Input by name, then place: a DOWN before the ACTIVE of its second, also where a newest-first
    // export lists the ACTIVE first.
    const uint64_t input = a.seq >> kInputShift;
    if (input == b.seq >> kInputShift && input < newest_first_.size() && newest_first_[input]) {
      return a.seq > b.seq;
    }
    return a.seq < b.seq;
  });
  for (const size_t i : order) {
    correlateHit(hits_[i]);
  }
  hits_.clear();
  kept_.clear();
  out_.clear();
  correlator_.advance(max_time_ns_, &out_);
  correlator_.finish(&out_);
  emit(out_);
  flush();
}

void Pipeline::correlateHit(Hit& hit) {
  out_.clear();
  correlator_.observe(std::move(hit), &out_);
  emit(out_);
}

void Pipeline::emit(const std::vector<Decision>& decisions) {
  for (const Decision& d : decisions) {
    ++decisions_;
    for (DecisionSink* sink : sinks_) {
      sink->write(d);
    }
  }
}

void Pipeline::flush() {
  for (DecisionSink* sink : sinks_) {
    sink->flush();
  }
}

}  // namespace faultline
