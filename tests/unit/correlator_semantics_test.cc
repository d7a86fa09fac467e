// Correlation semantics on a small bank written here: tables, alias, joins, attach and suppress,
// flaps, cluster-wide events, corroboration and the node lifecycle (taint, recover, untaint).
#include <gtest/gtest.h>

#include "core/time.h"
#include "matcher/bank.h"
#include "matcher/correlator.h"

namespace faultline {
namespace {

constexpr const char* kBank = R"(
signatures:
  - id: xid
    streams: [kernel]
    severity: warning
    pattern: 'Xid (?P<pci>\S+) (?P<code>\d+)'
    examples: {match: ['Xid 0000:01:00 79']}
  - id: uuid
    streams: [kernel]
    severity: info
    pattern: 'GPU at (?P<pci>\S+) (?P<uuid>GPU-\S+)'
    examples: {match: ['GPU at 0000:01:00 GPU-1']}
  - id: reset
    streams: [kernel]
    severity: info
    pattern: 'reset (?P<uuid>GPU-\S+) (?P<success>true|false)'
    examples: {match: ['reset GPU-1 true']}
  - id: port
    streams: [kernel]
    severity: info
    pattern: 'port (?P<port>\d+) (?P<state>DOWN|ACTIVE)'
    examples: {match: ['port 1 DOWN']}
  - id: head
    streams: [kernel]
    severity: info
    pattern: 'head (?P<pci>\S+)'
    examples: {match: ['head 0000:01:00']}
  - id: tail
    streams: [kernel]
    severity: fatal
    pattern: 'tail'
    examples: {match: ['tail']}
  - id: nccl
    streams: [pod]
    severity: info
    pattern: 'nccl timeout'
    examples: {match: ['nccl timeout']}
  - id: hang
    streams: [kernel]
    severity: info
    pattern: 'HANG_ON_COLLECTIVES'
    examples: {match: ['NEURON_HW_ERR=HANG_ON_COLLECTIVES']}
tables:
  - id: catalog
    signature: xid
    key: [code]
    columns: [class]
    rows: [[79, fatal], [45, sympathetic], [13, application]]
rules:
  - id: xid-fatal
    signature: xid
    severity: fatal
    where: {class: [fatal]}
    entity: [pci]
    recovery: {by: [reset-ok], stable: 10m}
  - id: xid-sympathetic
    signature: xid
    severity: info
    where: {class: [sympathetic]}
    entity: [pci]
    attach_to: {rules: [xid-fatal], within: 60s}
  - id: xid-app
    signature: xid
    severity: warning
    where: {class: [application]}
    entity: [pci]
    count: 2
    window: 1h
    burst: 1m
    recovery: {quiet: 2h}
  - id: uuid
    signature: uuid
    severity: info
    alias: {from: uuid, to: pci}
  - id: reset-ok
    signature: reset
    severity: info
    where: {success: ['true']}
    entity: [pci]
  - id: flap
    signature: port
    severity: warning
    entity: [port]
    flap: {field: state, down: [DOWN], up: [ACTIVE], within: 10m}
    count: 2
    window: 1h
  - id: port-down
    signature: port
    severity: info
    where: {state: [DOWN]}
  - id: head
    signature: head
    severity: info
  - id: tail
    signature: tail
    severity: fatal
    entity: [pci]
    joins: {rule: head, within: 5s}
    suppressed_by: {rules: [xid-fatal], within: 5m}
  - id: hang
    signature: hang
    severity: info
    suspects_peers: {within: 10m}
  - id: nccl
    signature: nccl
    severity: warning
    count: 2
    window: 24h
    dedup: 30m
    cluster: {nodes: 3, within: 10m}
    corroborated_by: {rules: [port-down], within: 10m}
)";

// A correlator over `bank`, fed line by line as the matcher sees them; its decisions as
// "node action rule".
class Feeder {
 public:
  explicit Feeder(std::shared_ptr<const Bank> bank,
                  const std::vector<std::string>& dry_run_rules = {})
      : bank_(std::move(bank)), c_(bank_, Taint{}, 0, dry_run_rules) {}

  // Feeds `line` on `node` at `sec` seconds, as the hit of the one signature it matches.
  void feed(const std::string& node, int64_t sec, const std::string& line,
            StreamKind kind = StreamKind::kKernel) {
    feedNs(node, sec * kNanosPerSecond, line, kind);
  }
  void feedNs(const std::string& node, int64_t time_ns, const std::string& line,
              StreamKind kind = StreamKind::kKernel) {
    Matcher m(bank_);
    RecordBatch batch;
    batch.records.push_back({time_ns, node, line, 0, 0, kind});
    std::vector<Hit> hits;
    m.match(batch, &hits);
    ASSERT_EQ(hits.size(), 1U) << line;
    c_.observe(hits[0], &out_);
  }
  std::vector<std::string> decisions() const {
    std::vector<std::string> v;
    for (const Decision& d : out_) {
      v.push_back(d.node + " " + std::string(actionName(d.action)) + " " + d.rule +
                  (d.dry_run ? " (dry run)" : ""));
    }
    return v;
  }

  std::shared_ptr<const Bank> bank_;
  Correlator c_;
  std::vector<Decision> out_;
};

class CorrelatorSemantics : public ::testing::Test, public Feeder {
 protected:
  CorrelatorSemantics() : Feeder(loadBank({{"t.yaml", kBank}})) {}
};

TEST_F(CorrelatorSemantics, TableAddsCatalogFieldsThatRulesTest) {
  feed("n1", 100, "Xid 0000:01:00 45");
  EXPECT_TRUE(out_.empty());
  feed("n1", 200, "Xid 0000:01:00 79");
  ASSERT_EQ(decisions(), std::vector<std::string>{"n1 taint xid-fatal"});
  bool has_class = false;
  for (const auto& [k, v] : out_[0].evidence[0].fields) {
    has_class |= k == "class" && v == "fatal";
  }
  EXPECT_TRUE(has_class);
}

TEST_F(CorrelatorSemantics, SympatheticHitsAttachToTheirCauseAndNeverAct) {
  feed("n1", 100, "Xid 0000:01:00 79");
  for (int i = 0; i < 100; ++i) {
    feed("n1", 101 + i / 2, "Xid 0000:01:00 45");  // each second's line printed twice
  }
  feed("n2", 101, "Xid 0000:02:00 45");  // no cause on n2: recorded, never acting alone
  EXPECT_EQ(decisions(), std::vector<std::string>{"n1 taint xid-fatal"});
  EXPECT_EQ(c_.stats().attached, 50U);
  EXPECT_EQ(c_.stats().repeats, 50U);  // the second of each pair changes nothing
}

TEST_F(CorrelatorSemantics, GpuResetOfTheAliasedUuidRecoversAfterStablePeriod) {
  feed("n1", 10, "GPU at 0000:01:00 GPU-1");
  feed("n1", 20, "GPU at 0000:02:00 GPU-2");
  feed("n1", 100, "Xid 0000:01:00 79");
  feed("n1", 500, "reset GPU-2 true");  // another GPU: nothing
  feed("n1", 600, "reset GPU-1 false");
  EXPECT_EQ(c_.state("n1"), Correlator::NodeState::kTainted);
  feed("n1", 700, "reset GPU-1 true");
  EXPECT_EQ(c_.state("n1"), Correlator::NodeState::kRecovering);
  c_.advance(700 * kNanosPerSecond + 600 * kNanosPerSecond + 1, &out_);
  EXPECT_EQ(decisions(), (std::vector<std::string>{"n1 taint xid-fatal", "n1 untaint xid-fatal"}));
  EXPECT_EQ(out_.back().evidence.at(0).line, "reset GPU-1 true");
  EXPECT_FALSE(out_.back().reason.empty());
  EXPECT_EQ(c_.state("n1"), Correlator::NodeState::kHealthy);
}

// A node with two faulty GPUs is recovering only once both are: one reset leaves it tainted.
TEST_F(CorrelatorSemantics, NodeRecoversOnlyWhenEveryFaultDoes) {
  feed("n1", 10, "GPU at 0000:01:00 GPU-1");
  feed("n1", 20, "GPU at 0000:02:00 GPU-2");
  feed("n1", 100, "Xid 0000:01:00 79");
  feed("n1", 110, "Xid 0000:02:00 79");
  feed("n1", 700, "reset GPU-1 true");
  EXPECT_EQ(c_.state("n1"), Correlator::NodeState::kTainted);
  c_.advance((700 + 600) * kNanosPerSecond + 1, &out_);
  EXPECT_EQ(decisions(), std::vector<std::string>{"n1 taint xid-fatal"});
  EXPECT_EQ(c_.state("n1"), Correlator::NodeState::kTainted);
  feed("n1", 1400, "reset GPU-2 true");
  EXPECT_EQ(c_.state("n1"), Correlator::NodeState::kRecovering);
  c_.advance((1400 + 600) * kNanosPerSecond + 1, &out_);
  EXPECT_EQ(decisions(), (std::vector<std::string>{"n1 taint xid-fatal", "n1 untaint xid-fatal"}));
  EXPECT_EQ(out_.back().reason,
            "recovered by reset-ok: xid-fatal pci=0000:02:00 stable since the recovery signal");
}

// The stable period runs from the first recovery signal; the untaint, when it ends, shows that
// signal, not a later one that came while it ran.
TEST_F(CorrelatorSemantics, UntaintShowsTheSignalTheStablePeriodRanFrom) {
  feed("n1", 10, "GPU at 0000:01:00 GPU-1");
  feed("n1", 100, "Xid 0000:01:00 79");
  feed("n1", 700, "reset GPU-1 true");
  feed("n1", 1200, "reset GPU-1 true");  // a second reset while the first one's period runs
  c_.advance((700 + 600) * kNanosPerSecond + 1, &out_);
  ASSERT_EQ(decisions(), (std::vector<std::string>{"n1 taint xid-fatal", "n1 untaint xid-fatal"}));
  EXPECT_EQ(out_.back().time_ns, (700 + 600) * kNanosPerSecond);
  EXPECT_EQ(out_.back().evidence.at(0).time_ns, 700 * kNanosPerSecond);
}

TEST_F(CorrelatorSemantics, NewHitDuringStablePeriodCancelsRecovery) {
  feed("n1", 10, "GPU at 0000:01:00 GPU-1");
  feed("n1", 100, "Xid 0000:01:00 79");
  feed("n1", 700, "reset GPU-1 true");
  feed("n1", 800, "Xid 0000:01:00 79");
  c_.advance(5000 * kNanosPerSecond, &out_);
  EXPECT_EQ(decisions(), std::vector<std::string>{"n1 taint xid-fatal"});
}

// The untaint of one GPU's fault forgets none of the hits another GPU counted meanwhile: its
// count still reaches the rule's threshold within the window.
TEST_F(CorrelatorSemantics, UntaintKeepsTheCountsOfOtherGpus) {
  feed("n1", 10, "GPU at 0000:01:00 GPU-1");
  feed("n1", 100, "Xid 0000:01:00 79");
  feed("n1", 200, "Xid 0000:02:00 13");  // xid-app's first count on another GPU
  feed("n1", 700, "reset GPU-1 true");
  c_.advance((700 + 600) * kNanosPerSecond + 1, &out_);
  ASSERT_EQ(decisions(), (std::vector<std::string>{"n1 taint xid-fatal", "n1 untaint xid-fatal"}));
  feed("n1", 1400, "Xid 0000:02:00 13");  // its second, within xid-app's hour
  EXPECT_EQ(decisions(), (std::vector<std::string>{"n1 taint xid-fatal", "n1 untaint xid-fatal",
                                                   "n1 taint xid-app"}));
}

TEST_F(CorrelatorSemantics, BurstCountsOnceAndQuietPeriodUntaints) {
  for (int i = 0; i < 50; ++i) {
    feed("n1", 100 + i, "Xid 0000:01:00 13");  // one crash: a burst
  }
  EXPECT_EQ(c_.state("n1"), Correlator::NodeState::kSuspect);
  EXPECT_TRUE(out_.empty());
  feed("n1", 1000, "Xid 0000:01:00 13");
  ASSERT_EQ(decisions(), std::vector<std::string>{"n1 taint xid-app"});
  c_.advance(1000 * kNanosPerSecond + 2 * 3600 * kNanosPerSecond + 1, &out_);
  EXPECT_EQ(decisions(), (std::vector<std::string>{"n1 taint xid-app", "n1 untaint xid-app"}));
}

TEST_F(CorrelatorSemantics, EachHitOfAnActiveFaultMovesItsQuietPeriod) {
  feed("n1", 100, "Xid 0000:01:00 13");
  feed("n1", 1000, "Xid 0000:01:00 13");
  ASSERT_EQ(decisions(), std::vector<std::string>{"n1 taint xid-app"});
  feed("n1", 5000, "Xid 0000:01:00 13");  // the fault goes on: quiet until 5000 s + 2 h
  c_.advance((1000 + 2 * 3600 + 1) * kNanosPerSecond, &out_);
  EXPECT_EQ(decisions(), std::vector<std::string>{"n1 taint xid-app"});
  feed("n1", 9000, "Xid 0000:01:00 13");  // and again, moving the timer it moved before
  c_.advance((5000 + 2 * 3600 + 1) * kNanosPerSecond, &out_);
  EXPECT_EQ(decisions(), std::vector<std::string>{"n1 taint xid-app"});
  c_.advance((9000 + 2 * 3600 + 1) * kNanosPerSecond, &out_);
  EXPECT_EQ(decisions(), (std::vector<std::string>{"n1 taint xid-app", "n1 untaint xid-app"}));
}

// A taint an earlier process decided (restored after a restart, at the taint sink's first LIST)
// is lifted as that process would have lifted it: by the rule's recovery signal, on any GPU, after
// its stable period, or by the rule's quiet period from the decision's time. Nothing else is
// restored: a rule not in the bank, a node tainted already, a rule in dry run.
// A node this process decided is not restored: a LIST taken before the sink handled an untaint
// decided here still shows the taint, and restored, the node's next fault decided nothing.
TEST_F(CorrelatorSemantics, NoRestoreOfANodeThisProcessDecided) {
  feed("n1", 10, "GPU at 0000:01:00 GPU-1");
  feed("n1", 100, "Xid 0000:01:00 79");
  feed("n1", 700, "reset GPU-1 true");
  c_.advance((700 + 600) * kNanosPerSecond + 1, &out_);
  ASSERT_EQ(decisions(), (std::vector<std::string>{"n1 taint xid-fatal", "n1 untaint xid-fatal"}));
  EXPECT_NE(c_.restore("n1", "xid-fatal", 100 * kNanosPerSecond), "");
  feed("n1", 5000, "Xid 0000:01:00 79");  // a new incident
  EXPECT_EQ(decisions(), (std::vector<std::string>{"n1 taint xid-fatal", "n1 untaint xid-fatal",
                                                   "n1 taint xid-fatal"}));
}

// In a new leadership term another leader may have changed a node this process decided: the
// taint sink's LIST, taken after the first `seen` decisions were handled, is then believed. A
// taint lifted there is forgotten (the node's next fault taints it again); one set there is
// restored. A node decided after the `seen`-th decision is left alone.
TEST_F(CorrelatorSemantics, ANewTermBelievesTheListAboutNodesDecidedBefore) {
  feed("n1", 10, "GPU at 0000:01:00 GPU-1");
  feed("n1", 100, "Xid 0000:01:00 79");
  ASSERT_EQ(decisions(), std::vector<std::string>{"n1 taint xid-fatal"});
  EXPECT_NE(c_.lift("n1", 0), "");  // the LIST predates the taint
  EXPECT_EQ(c_.lift("n1", 1), "");  // another leader lifted it
  EXPECT_EQ(c_.state("n1"), Correlator::NodeState::kHealthy);
  EXPECT_NE(c_.lift("n1", 1), "");        // not tainted here
  feed("n1", 5000, "Xid 0000:01:00 79");  // a new incident
  ASSERT_EQ(decisions(), (std::vector<std::string>{"n1 taint xid-fatal", "n1 taint xid-fatal"}));
  feed("n1", 5600, "reset GPU-1 true");
  c_.advance((5600 + 600) * kNanosPerSecond + 1, &out_);
  ASSERT_EQ(decisions(), (std::vector<std::string>{"n1 taint xid-fatal", "n1 taint xid-fatal",
                                                   "n1 untaint xid-fatal"}));
  // Untainted here (the 3rd decision), tainted since by another leader.
  EXPECT_NE(c_.restore("n1", "xid-fatal", 6000 * kNanosPerSecond, INT64_MIN, 2), "");
  EXPECT_EQ(c_.restore("n1", "xid-fatal", 6000 * kNanosPerSecond, INT64_MIN, 3), "");
  EXPECT_EQ(c_.state("n1"), Correlator::NodeState::kTainted);
}

TEST_F(CorrelatorSemantics, RestoredTaintIsLiftedByItsRulesRecovery) {
  EXPECT_EQ(c_.restore("n1", "xid-fatal", 100 * kNanosPerSecond), "");
  EXPECT_EQ(c_.state("n1"), Correlator::NodeState::kTainted);
  EXPECT_NE(c_.restore("n1", "xid-app", 100 * kNanosPerSecond), "");  // tainted already
  EXPECT_NE(c_.restore("n2", "xid-gone", 100 * kNanosPerSecond), "");
  EXPECT_EQ(c_.state("n2"), Correlator::NodeState::kHealthy);
  EXPECT_EQ(c_.restore("n3", "xid-app", 100 * kNanosPerSecond), "");
  feed("n1", 150, "GPU at 0000:01:00 GPU-1");
  feed("n2", 150, "GPU at 0000:01:00 GPU-1");
  feed("n1", 700, "reset GPU-1 true");
  feed("n2", 700, "reset GPU-1 true");
  EXPECT_EQ(c_.state("n1"), Correlator::NodeState::kRecovering);
  c_.advance((700 + 600) * kNanosPerSecond + 1, &out_);
  ASSERT_EQ(decisions(), std::vector<std::string>{"n1 untaint xid-fatal"});
  EXPECT_EQ(out_[0].evidence.at(0).line, "reset GPU-1 true");
  // The restored fault names no GPU: the reason says none, not an empty "pci=".
  EXPECT_EQ(out_[0].reason, "recovered by reset-ok: xid-fatal stable since the recovery signal");
  EXPECT_EQ(c_.state("n1"), Correlator::NodeState::kHealthy);
  c_.advance((100 + 2 * 3600) * kNanosPerSecond + 1, &out_);  // n3's quiet period
  EXPECT_EQ(decisions(), (std::vector<std::string>{"n1 untaint xid-fatal", "n3 untaint xid-app"}));
  EXPECT_EQ(out_[1].reason, "quiet: no xid-app hit for the quiet period");

  // Restored at 3 h, the quiet period counts from then: the earlier process may have seen hits
  // since the decision (at 100 s), which this one did not.
  EXPECT_EQ(c_.restore("n4", "xid-app", 100 * kNanosPerSecond, 3 * 3600 * kNanosPerSecond), "");
  c_.advance((3 * 3600 + 1) * kNanosPerSecond, &out_);
  EXPECT_EQ(decisions().size(), 2u);
  c_.advance((5 * 3600 + 1) * kNanosPerSecond, &out_);
  EXPECT_EQ(decisions().back(), "n4 untaint xid-app");

  Feeder dry(bank_, {"xid-fatal"});
  EXPECT_NE(dry.c_.restore("n1", "xid-fatal", 100 * kNanosPerSecond), "");
  EXPECT_EQ(dry.c_.state("n1"), Correlator::NodeState::kHealthy);
}

// A restored fault names no GPU, so its rule's recovery signal on any GPU clears it; a hit of the
// rule on any GPU after the restart holds it likewise (the fault may be that GPU's, going on):
// its quiet period counts from that hit, not from the restart.
TEST_F(CorrelatorSemantics, HitOfItsRuleOnAnyGpuHoldsARestoredFault) {
  EXPECT_EQ(c_.restore("n1", "xid-app", 100 * kNanosPerSecond), "");
  feed("n1", 3600, "Xid 0000:01:00 13");  // one hit, below xid-app's count: no fault of its own
  c_.advance((100 + 2 * 3600) * kNanosPerSecond + 1, &out_);
  EXPECT_TRUE(out_.empty()) << decisions().at(0);
  EXPECT_EQ(c_.state("n1"), Correlator::NodeState::kTainted);
  c_.advance((3600 + 2 * 3600) * kNanosPerSecond + 1, &out_);
  EXPECT_EQ(decisions(), std::vector<std::string>{"n1 untaint xid-app"});
}

TEST_F(CorrelatorSemantics, FlapIsDownThenUpOnOnePort) {
  feed("n1", 100, "port 1 DOWN");
  feed("n1", 110, "port 2 ACTIVE");  // another port: no flap
  feed("n1", 200, "port 1 DOWN");
  feed("n1", 210, "port 1 ACTIVE");  // one flap (the second DOWN restarted it)
  EXPECT_TRUE(out_.empty());
  feed("n1", 300, "port 1 DOWN");
  feed("n1", 2000, "port 1 ACTIVE");  // too late to pair with the DOWN
  EXPECT_TRUE(out_.empty());
  feed("n1", 2100, "port 1 DOWN");
  feed("n1", 2110, "port 1 ACTIVE");
  EXPECT_EQ(decisions(), std::vector<std::string>{"n1 taint flap"});
  EXPECT_EQ(out_[0].evidence.size(), 2U);
}

TEST_F(CorrelatorSemantics, TailJoinsHeadAndAnXidOfTheSameGpuSuppressesIt) {
  feed("n1", 100, "head 0000:01:00");
  feed("n1", 101, "tail");
  ASSERT_EQ(decisions(), std::vector<std::string>{"n1 taint tail"});
  EXPECT_EQ(out_[0].evidence[0].fields.back(),
            (std::pair<std::string, std::string>{"pci", "0000:01:00"}));
  EXPECT_EQ(out_[0].reason, "a fatal hit on pci=0000:01:00");
  // A tail without its head names no GPU, and its reason names none.
  feed("n3", 100, "tail");
  ASSERT_EQ(decisions().back(), "n3 taint tail");
  EXPECT_EQ(out_.back().reason, "a fatal hit");
  out_.clear();
  feed("n2", 100, "Xid 0000:01:00 79");
  feed("n2", 110, "head 0000:01:00");
  feed("n2", 111, "tail");
  EXPECT_EQ(c_.stats().suppressed, 1U);
}

TEST_F(CorrelatorSemantics, ClusterWideEventImplicatesNoNode) {
  for (int64_t sec : {100, 10000}) {  // two jobs, each on four nodes
    for (const char* n : {"a", "b", "c", "d"}) {
      feed(n, sec, "nccl timeout", StreamKind::kPod);
    }
  }
  c_.finish(&out_);
  EXPECT_TRUE(out_.empty());
  EXPECT_EQ(c_.stats().job_events, 2U);
}

TEST_F(CorrelatorSemantics, PodEvidenceTaintsWhenCorroboratedOrRepeated) {
  feed("a", 100, "nccl timeout", StreamKind::kPod);
  feed("a", 200, "port 1 DOWN");  // after the pod line, within the window
  feed("b", 100, "nccl timeout", StreamKind::kPod);
  feed("b", 10000, "nccl timeout", StreamKind::kPod);  // a second episode
  feed("c", 100, "nccl timeout", StreamKind::kPod);    // one episode: suspect only
  c_.finish(&out_);
  auto d = decisions();
  std::sort(d.begin(), d.end());
  EXPECT_EQ(d, (std::vector<std::string>{"a taint nccl", "b taint nccl"}));
}

TEST_F(CorrelatorSemantics, KernelEvidenceAfterThePodLineDecidesAtOnce) {
  feed("a", 100, "nccl timeout", StreamKind::kPod);
  feed("a", 200, "port 1 DOWN");  // the cluster window of the pod line has not ended
  ASSERT_EQ(decisions(), std::vector<std::string>{"a taint nccl"});
  EXPECT_EQ(out_[0].time_ns, 200 * kNanosPerSecond);
}

// The pod lines come after the kernel evidence: each is held for its cluster window, then
// corroborated; on a job event (three nodes) only the node with kernel evidence is tainted.
TEST_F(CorrelatorSemantics, KernelEvidenceBeforeThePodLineDecidesWhenTheWindowEnds) {
  feed("a", 100, "port 1 DOWN");
  for (const char* n : {"a", "b", "c"}) {
    feed(n, 200, "nccl timeout", StreamKind::kPod);
  }
  feed("a", 300, "nccl timeout", StreamKind::kPod);  // the fault exists: nothing new
  EXPECT_TRUE(out_.empty());
  c_.finish(&out_);
  ASSERT_EQ(decisions(), std::vector<std::string>{"a taint nccl"});
  EXPECT_EQ(out_[0].time_ns, 200 * kNanosPerSecond);
  ASSERT_EQ(out_[0].evidence.size(), 2U);
  EXPECT_EQ(out_[0].evidence[1].line, "port 1 DOWN");
  EXPECT_EQ(c_.stats().job_events, 1U);
}

// Every rank of a hung collective reports the hang but the one whose hardware failed: once the
// window from the first report has passed, the nodes running the job that did not report it are
// suspect.
TEST_F(CorrelatorSemantics, AHangMakesSuspectTheNodesOfItsJobThatDidNotReportIt) {
  const int64_t t = 1000 * kNanosPerSecond;
  for (const char* node : {"a", "b", "e"}) {  // a, b and e run job-a's pods
    c_.member("job-a", node, t - 300 * kNanosPerSecond, t + 120 * kNanosPerSecond);
  }
  c_.member("job-b", "c", t, t);  // c runs another job
  const int64_t two_hours = 7200 * kNanosPerSecond;
  c_.member("job-a", "d", t - two_hours, t - two_hours);  // d left job-a two hours before
  feed("a", 1000, "NEURON_HW_ERR=HANG_ON_COLLECTIVES");
  feed("e", 1100, "NEURON_HW_ERR=HANG_ON_COLLECTIVES");
  c_.advance(t + 600 * kNanosPerSecond - 1, &out_);
  EXPECT_TRUE(out_.empty());  // the window's last nanosecond: it has not passed
  feed("e", 1590, "NEURON_HW_ERR=HANG_ON_COLLECTIVES");
  c_.advance(t + 600 * kNanosPerSecond, &out_);
  ASSERT_EQ(decisions(), std::vector<std::string>{"b suspect hang"});
  EXPECT_EQ(out_[0].time_ns, t + 600 * kNanosPerSecond);
  EXPECT_EQ(out_[0].reason,
            "ran job job-a, of which 2 other node(s) reported a hang within 10m (first: a); this "
            "one did not");
  ASSERT_EQ(out_[0].evidence.size(), 1U);
  EXPECT_EQ(out_[0].evidence[0].line, "NEURON_HW_ERR=HANG_ON_COLLECTIVES");
  EXPECT_EQ(out_[0].evidence[0].time_ns, t);
  EXPECT_EQ(c_.state("b"), Correlator::NodeState::kHealthy);  // nothing changes on the node

  // Each of its nodes reported the next hang: none is suspect (the fault is not one of theirs).
  out_.clear();
  for (const char* node : {"a", "b", "e"}) {
    c_.member("job-a", node, t + 3600 * kNanosPerSecond, t + 3600 * kNanosPerSecond);
  }
  feed("b", 4600, "NEURON_HW_ERR=HANG_ON_COLLECTIVES");
  feed("a", 4601, "NEURON_HW_ERR=HANG_ON_COLLECTIVES");
  feed("e", 4602, "NEURON_HW_ERR=HANG_ON_COLLECTIVES");
  c_.finish(&out_);
  EXPECT_TRUE(out_.empty()) << decisions()[0];
}

// A flood of distinct reports (each NeuronCore's, every second) waits as one per node and second:
// the earliest of each, by time and then line, whichever came first; the first report's evidence.
TEST_F(CorrelatorSemantics, AHangsReportsWaitAsOnePerNodeAndSecond) {
  const int64_t t = 1000 * kNanosPerSecond;
  for (const char* node : {"a", "b", "e"}) {
    c_.member("job-a", node, t - 300 * kNanosPerSecond, t);
  }
  for (int64_t sec = 0; sec < 30; ++sec) {
    for (int nc = 127; nc >= 0; --nc) {  // the earliest line comes last
      const std::string line = "NEURON_HW_ERR=HANG_ON_COLLECTIVES nc-id=" + std::to_string(nc);
      feedNs("a", t + sec * kNanosPerSecond + 5'000'000, line);
      feedNs("e", t + sec * kNanosPerSecond + 7'000'000 + nc, line);
    }
  }
  EXPECT_EQ(c_.waitingReports(), 60U);  // 2 nodes x 30 seconds, not 7,680
  c_.finish(&out_);
  ASSERT_EQ(decisions(), std::vector<std::string>{"b suspect hang"});
  ASSERT_EQ(out_[0].evidence.size(), 1U);
  EXPECT_EQ(out_[0].evidence[0].line, "NEURON_HW_ERR=HANG_ON_COLLECTIVES nc-id=0");
  EXPECT_EQ(out_[0].evidence[0].time_ns, t + 5'000'000);
  EXPECT_EQ(c_.waitingReports(), 0U);
}

// A node's reports of one second fall all inside a hang's window or all outside: b's at 1600.2 s
// and its repeat at 1600.8 s make it a reporter of the hang from second 1600. A review's case:
// windows to the nanosecond from the first report (1000.3 s to 1600.3 s, then from a's 1600.5 s)
// took b's first report for the old hang and dropped its repeat, and named b.
TEST_F(CorrelatorSemantics, ANodesReportsOfOneSecondAreAllInAHangOrAllOut) {
  const int64_t s = kNanosPerSecond;
  const int64_t ms = 1'000'000;
  for (const char* node : {"a", "b", "c", "d"}) {
    c_.member("job-a", node, 400 * s, 2300 * s);
  }
  const std::string hang = "NEURON_HW_ERR=HANG_ON_COLLECTIVES";
  feedNs("c", 1000 * s + 300 * ms, hang);  // the first hang, to 1600 s: every node reports
  feedNs("a", 1000 * s + 400 * ms, hang);
  feedNs("b", 1000 * s + 500 * ms, hang);
  feedNs("d", 1000 * s + 600 * ms, hang);
  feedNs("b", 1600 * s + 200 * ms, hang);  // the second hang, from 1600 s
  feedNs("a", 1600 * s + 500 * ms, hang);  // its first, by node name
  feedNs("b", 1600 * s + 800 * ms, hang);  // a repeat
  feedNs("d", 1601 * s, hang);
  c_.finish(&out_);
  EXPECT_EQ(decisions(), std::vector<std::string>{"c suspect hang"});
}

// Who is named: not for one node's report, nor where those not waiting outnumber the reporters;
// not a node that joined the job after the hang began.
TEST_F(CorrelatorSemantics, AHangNamesNoneOnOneReportOrAMinority) {
  const int64_t t = 8000 * kNanosPerSecond;
  for (const char* node : {"a", "b", "e", "f", "g"}) {
    c_.member("job-a", node, t, t + 2000 * kNanosPerSecond);
  }
  feed("e", 8100, "NEURON_HW_ERR=HANG_ON_COLLECTIVES");  // one report
  c_.advance(t + 1000 * kNanosPerSecond, &out_);
  EXPECT_TRUE(out_.empty()) << decisions()[0];
  feed("e", 9100, "NEURON_HW_ERR=HANG_ON_COLLECTIVES");  // two of five
  feed("b", 9101, "NEURON_HW_ERR=HANG_ON_COLLECTIVES");
  c_.advance(t + 2000 * kNanosPerSecond, &out_);
  EXPECT_TRUE(out_.empty()) << decisions()[0];
  feed("e", 10100, "NEURON_HW_ERR=HANG_ON_COLLECTIVES");  // three of five
  feed("b", 10101, "NEURON_HW_ERR=HANG_ON_COLLECTIVES");
  c_.member("job-a", "h", t + 2200 * kNanosPerSecond, t + 2200 * kNanosPerSecond);  // joins after
  feed("f", 10102, "NEURON_HW_ERR=HANG_ON_COLLECTIVES");
  c_.finish(&out_);
  EXPECT_EQ(decisions(), (std::vector<std::string>{"a suspect hang", "g suspect hang"}));
}

// A hang reported in dry run decides its suspects in dry run; a report read after another but
// stamped before it (a lagging node) is the first: the window and the evidence are its.
TEST(CorrelatorDryRun, AHangInDryRunDecidesItsSuspectsInDryRun) {
  Feeder f(loadBank({{"t.yaml", kBank}}), {"hang"});
  const int64_t t = 1000 * kNanosPerSecond;
  for (const char* node : {"a", "b", "c"}) {
    f.c_.member("job-a", node, t - 100 * kNanosPerSecond, t);
  }
  f.feed("a", 1000, "NEURON_HW_ERR=HANG_ON_COLLECTIVES");
  f.feed("c", 990, "NEURON_HW_ERR=HANG_ON_COLLECTIVES");
  f.c_.finish(&f.out_);
  ASSERT_EQ(f.decisions(), std::vector<std::string>{"b suspect hang (dry run)"});
  EXPECT_EQ(f.out_[0].time_ns, 1590 * kNanosPerSecond);
  EXPECT_EQ(f.out_[0].evidence[0].time_ns, 990 * kNanosPerSecond);
  EXPECT_EQ(f.out_[0].reason,
            "ran job job-a, of which 2 other node(s) reported a hang within 10m (first: c); this "
            "one did not");
}

TEST(CorrelatorDryRun, RulesInDryRunTaintAndUntaintApart) {
  Feeder f(loadBank({{"t.yaml", kBank}}), {"xid-app"});
  f.feed("n1", 10, "GPU at 0000:01:00 GPU-1");
  f.feed("n1", 100, "Xid 0000:01:00 13");
  f.feed("n1", 1000, "Xid 0000:01:00 13");  // xid-app's second count: its fault, in dry run
  f.feed("n1", 1100, "Xid 0000:01:00 79");
  EXPECT_EQ(f.decisions(),
            (std::vector<std::string>{"n1 taint xid-app (dry run)", "n1 taint xid-fatal"}));
  EXPECT_EQ(f.c_.state("n1"), Correlator::NodeState::kTainted);
  f.feed("n1", 1800, "reset GPU-1 true");
  f.c_.advance((1800 + 600) * kNanosPerSecond + 1, &f.out_);       // xid-fatal's stable period
  f.c_.advance((1000 + 2 * 3600) * kNanosPerSecond + 1, &f.out_);  // xid-app's quiet period
  EXPECT_EQ(f.decisions(),
            (std::vector<std::string>{"n1 taint xid-app (dry run)", "n1 taint xid-fatal",
                                      "n1 untaint xid-fatal", "n1 untaint xid-app (dry run)"}));
  EXPECT_EQ(f.c_.state("n1"), Correlator::NodeState::kHealthy);
  EXPECT_THROW(Correlator(f.bank_, Taint{}, 0, {"xid-ap"}), std::runtime_error);
}

// A rule with both a recovery signal and a quiet period clears by whichever comes first: a
// signal late in the quiet period does not put off the quiet period's end to its stable's.
TEST(CorrelatorRecovery, ASignalDoesNotPutOffTheQuietPeriod) {
  const auto bank = loadBank({{"q.yaml", R"(
signatures:
  - id: xid
    streams: [kernel]
    severity: warning
    pattern: 'Xid (?P<pci>\S+) (?P<code>\d+)'
    examples: {match: ['Xid 0000:01:00 94']}
  - id: reset
    streams: [kernel]
    severity: info
    pattern: 'reset (?P<pci>\S+)'
    examples: {match: ['reset 0000:01:00']}
rules:
  - id: xid-94
    signature: xid
    severity: warning
    entity: [pci]
    count: 2
    window: 1h
    recovery: {by: [reset-ok], stable: 1h, quiet: 2h}
  - id: reset-ok
    signature: reset
    severity: info
    entity: [pci]
)"}});
  Feeder f(bank);
  f.feed("n1", 100, "Xid 0000:01:00 94");
  f.feed("n1", 200, "Xid 0000:01:00 94");
  ASSERT_EQ(f.decisions(), std::vector<std::string>{"n1 taint xid-94"});
  f.feed("n1", 200 + 2 * 3600 - 600, "reset 0000:01:00");  // its stable period ends 50 min after
  f.c_.advance((200 + 2 * 3600) * kNanosPerSecond + 1, &f.out_);  // the quiet period's end
  ASSERT_EQ(f.decisions(), (std::vector<std::string>{"n1 taint xid-94", "n1 untaint xid-94"}));
  EXPECT_EQ(f.out_.back().time_ns, (200 + 2 * 3600) * kNanosPerSecond);
  EXPECT_EQ(f.out_.back().reason, "quiet: no xid-94 hit pci=0000:01:00 for the quiet period");
}

// A pod rule's fault corroborated by a kernel line is quiet from the rule's own last hit, not from
// the kernel line's: `quiet` is a time without a hit of the rule.
TEST(CorrelatorRecovery, QuietCountsFromTheRulesOwnHitNotTheCorroboratingLine) {
  const auto bank = loadBank({{"q.yaml", R"(
signatures:
  - id: port
    streams: [kernel]
    severity: info
    pattern: 'port (?P<port>\d+) (?P<state>DOWN|ACTIVE)'
    examples: {match: ['port 1 DOWN']}
  - id: nccl
    streams: [pod]
    severity: info
    pattern: 'nccl timeout'
    examples: {match: ['nccl timeout']}
rules:
  - id: port-down
    signature: port
    severity: info
    where: {state: [DOWN]}
  - id: nccl
    signature: nccl
    severity: warning
    count: 2
    window: 24h
    corroborated_by: {rules: [port-down], within: 10m}
    recovery: {quiet: 1h}
)"}});
  for (const bool kernel_first : {true, false}) {
    SCOPED_TRACE(kernel_first ? "kernel line first" : "pod line first");
    Feeder f(bank);
    const int64_t kernel = kernel_first ? 100 : 500;
    if (kernel_first) {
      f.feed("n1", kernel, "port 1 DOWN");
    }
    f.feed("n1", 300, "nccl timeout", StreamKind::kPod);
    if (!kernel_first) {
      f.feed("n1", kernel, "port 1 DOWN");
    }
    ASSERT_EQ(f.decisions(), std::vector<std::string>{"n1 taint nccl"});
    // An hour after the kernel line before the pod line, nothing; an hour after the pod line, the
    // untaint (an hour after a kernel line after it would be later).
    f.c_.advance((kernel_first ? kernel + 3600 + 1 : 300 + 3600 - 1) * kNanosPerSecond, &f.out_);
    ASSERT_EQ(f.decisions(), std::vector<std::string>{"n1 taint nccl"});
    f.c_.advance((300 + 3600 + 1) * kNanosPerSecond, &f.out_);
    ASSERT_EQ(f.decisions(), (std::vector<std::string>{"n1 taint nccl", "n1 untaint nccl"}));
    EXPECT_EQ(f.out_.back().time_ns, (300 + 3600) * kNanosPerSecond);
  }
}

// A follower that names none of the held rule's entity fields (a node's shutdown) ends every hit
// of that rule the node holds, as one of the entity ends that entity's: a planned reboot takes
// every port down. Not a hit stamped after it; and read after a hit stamped before it, it ends
// that one too, and the fault that hit made if its time had passed (live, one node's lines spread
// over partitions).
TEST(CorrelatorFollowers, AFollowerWithoutTheEntityEndsEveryHeldHitOfTheNode) {
  const auto bank = loadBank({{"f.yaml", R"(
signatures:
  - id: port
    streams: [kernel]
    severity: info
    pattern: 'port (?P<port>\d+) (?P<state>DOWN|ACTIVE)'
    examples: {match: ['port 1 DOWN']}
  - id: shutdown
    streams: [kernel]
    severity: info
    pattern: 'Syncing filesystems'
    examples: {match: ['Syncing filesystems']}
rules:
  - id: port-active
    signature: port
    severity: info
    where: {state: [ACTIVE]}
    entity: [port]
  - id: shutdown
    signature: shutdown
    severity: info
  - id: port-down-lasting
    signature: port
    severity: fatal
    where: {state: [DOWN]}
    entity: [port]
    unless_followed_by: {rules: [port-active, shutdown], within: 5m}
)"}});
  Feeder f(bank);
  f.feed("a", 100, "port 1 DOWN");
  f.feed("a", 110, "port 2 DOWN");
  f.feed("a", 200, "Syncing filesystems");
  f.feed("a", 250, "port 3 DOWN");  // after the shutdown: its own
  f.feed("b", 200, "Syncing filesystems");
  f.feed("b", 150, "port 1 DOWN");  // stamped before the shutdown, read after it
  f.c_.advance(1000 * kNanosPerSecond, &f.out_);
  ASSERT_EQ(f.decisions(), std::vector<std::string>{"a taint port-down-lasting"});
  EXPECT_EQ(f.out_[0].evidence.at(0).line, "port 3 DOWN");
  EXPECT_EQ(f.out_[0].reason, "a fatal hit with no port-active or shutdown within 5m on port=3");
  // Read after the held hit's time passed (its fault decided), though stamped within it: replay
  // made no fault, so none stays. A follower that recovers the rule would start its recovery.
  f.feed("c", 1000, "port 1 DOWN");
  f.feed("c", 1400, "port 9 ACTIVE");  // another port's: the DOWN lasted 5 minutes
  f.feed("c", 1100, "Syncing filesystems");
  ASSERT_EQ(f.decisions(),
            (std::vector<std::string>{"a taint port-down-lasting", "c taint port-down-lasting",
                                      "c untaint port-down-lasting"}));
  EXPECT_EQ(f.out_[2].time_ns, 1300 * kNanosPerSecond);
  EXPECT_EQ(f.out_[2].reason, "ended by shutdown 100s after its hit, read late");
}

// A recovery signal's rule in dry run (a new signal tried out) lifts no real rule's taint: its
// hits recover only the faults of rules in dry run, as they corroborate only those.
TEST(CorrelatorDryRun, ARecoverySignalInDryRunLiftsNoRealTaint) {
  Feeder f(loadBank({{"t.yaml", kBank}}), {"reset-ok"});
  f.feed("n1", 10, "GPU at 0000:01:00 GPU-1");
  f.feed("n1", 100, "Xid 0000:01:00 79");
  f.feed("n1", 700, "reset GPU-1 true");
  f.c_.advance((700 + 600) * kNanosPerSecond + 1, &f.out_);
  EXPECT_EQ(f.decisions(), std::vector<std::string>{"n1 taint xid-fatal"});
  EXPECT_EQ(f.c_.state("n1"), Correlator::NodeState::kTainted);
}

// A decision in dry run changes nothing on the node: a LIST that predates it still shows the
// node's real taint as it is, which is restored (and lifted when the node recovers) or forgotten.
TEST(CorrelatorDryRun, ADecisionInDryRunDoesNotBlockRestoreOrLift) {
  Feeder f(loadBank({{"t.yaml", kBank}}), {"xid-app"});
  f.feed("n1", 10, "GPU at 0000:01:00 GPU-1");
  f.feed("n1", 100, "Xid 0000:01:00 13");
  f.feed("n1", 1000, "Xid 0000:01:00 13");
  ASSERT_EQ(f.decisions(), std::vector<std::string>{"n1 taint xid-app (dry run)"});
  EXPECT_EQ(f.c_.restore("n1", "xid-fatal", 50 * kNanosPerSecond, INT64_MIN, 0), "");
  f.feed("n1", 1800, "reset GPU-1 true");
  f.c_.advance((1800 + 600) * kNanosPerSecond + 1, &f.out_);
  EXPECT_EQ(f.decisions(),
            (std::vector<std::string>{"n1 taint xid-app (dry run)", "n1 untaint xid-fatal"}));

  Feeder g(loadBank({{"t.yaml", kBank}}), {"xid-app"});
  g.feed("n1", 10, "GPU at 0000:01:00 GPU-1");
  g.feed("n1", 100, "Xid 0000:01:00 79");
  g.feed("n1", 200, "Xid 0000:01:00 13");
  g.feed("n1", 1000, "Xid 0000:01:00 13");
  ASSERT_EQ(g.decisions(),
            (std::vector<std::string>{"n1 taint xid-fatal", "n1 taint xid-app (dry run)"}));
  EXPECT_EQ(g.c_.lift("n1", 1), "");  // another leader lifted the real taint
  g.feed("n1", 5000, "Xid 0000:01:00 79");
  EXPECT_EQ(g.decisions().back(), "n1 taint xid-fatal");
}

// Rules of one signature that test different fields, and one rule that tests two, as the SXid
// rules do: each condition reads its own field of the hit (an absent field reads as '').
TEST(CorrelatorWhere, EachConditionTestsItsOwnField) {
  const auto bank = loadBank({{"w.yaml", R"(
signatures:
  - id: sxid
    streams: [kernel]
    severity: info
    pattern: 'SXid (?P<severity>Fatal|Nonfatal)(?: (?P<decode>[A-Z_]+))?'
    examples: {match: ['SXid Fatal RESET_GPU', 'SXid Nonfatal']}
rules:
  - id: sxid-reset
    signature: sxid
    severity: fatal
    where: {severity: [Fatal], decode: [RESET_GPU, '']}
  - id: sxid-ignore
    signature: sxid
    severity: fatal
    where: {decode: [IGNORE]}
)"}});
  Feeder f(bank);
  const std::vector<std::pair<std::string, std::string>> lines = {{"n1", "SXid Fatal RESET_GPU"},
                                                                  {"n2", "SXid Fatal"},
                                                                  {"n3", "SXid Nonfatal IGNORE"},
                                                                  {"n4", "SXid Nonfatal RESET_GPU"},
                                                                  {"n5", "SXid Fatal INVESTIGATE"}};
  int64_t sec = 100;
  for (const auto& [node, line] : lines) {
    f.feed(node, ++sec, line);
  }
  EXPECT_EQ(f.decisions(), (std::vector<std::string>{"n1 taint sxid-reset", "n2 taint sxid-reset",
                                                     "n3 taint sxid-ignore"}));
}

// More rules on one signature than one 64-bit word of where_pass_ holds: each rule's condition
// still selects its own code, across the word boundary, and a rule without a condition (the
// last, in the second word) takes any code, including one no rule lists.
TEST(CorrelatorWhere, RulesBeyondSixtyFourOnOneSignature) {
  std::string yaml = R"(
signatures:
  - id: code
    streams: [kernel]
    severity: info
    pattern: 'Code (?P<code>\d+)'
    examples: {match: ['Code 1']}
rules:
)";
  for (int k = 0; k < 70; ++k) {
    yaml += "  - {id: c" + std::to_string(k) +
            ", signature: code, severity: fatal, where: {code: ['" + std::to_string(k) + "']}}\n";
  }
  yaml += "  - {id: any, signature: code, severity: fatal}\n";
  const auto bank = loadBank({{"w.yaml", yaml}});
  ASSERT_EQ(bank->rules.size(), 71U);
  Feeder f(bank);
  int64_t sec = 100;
  for (const int code : {0, 63, 64, 69, 99}) {
    f.feed("n" + std::to_string(code), ++sec, "Code " + std::to_string(code));
  }
  // A node's first fault taints it; the rule named is the first of its rules to fault.
  EXPECT_EQ(f.decisions(),
            (std::vector<std::string>{"n0 taint c0", "n63 taint c63", "n64 taint c64",
                                      "n69 taint c69", "n99 taint any"}));
}

TEST(CorrelatorBank, RejectsUnknownRuleReferencesAndQuietOnFatal) {
  const std::string bad = std::string(kBank) + R"(
  - id: r2
    signature: xid
    severity: info
    attach_to: {rules: [nope], within: 1m}
  - id: r3
    signature: xid
    severity: fatal
    recovery: {quiet: 1h}
  - id: r4
    signature: xid
    severity: fatal
    suspects_peers: {within: 10m}
)";
  try {
    loadBank({{"b.yaml", bad}});
    FAIL();
  } catch (const BankError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rule r2: attach_to: unknown rule 'nope'"), std::string::npos) << what;
    EXPECT_NE(what.find("rule r3: a fatal fault needs repair"), std::string::npos) << what;
    EXPECT_NE(what.find("rule r4: a suspects_peers rule never acts on its own node"),
              std::string::npos)
        << what;
  }
}

// A bank for corroboration: kernel rules `k` and `kinfo` that corroborate the pod rules `p` (info)
// and `q` (warning, deduplicated), and the rules that drop hits (attach_to, suppressed_by).
constexpr const char* kCorroborationBank = R"(
signatures:
  - {id: cause, streams: [kernel], severity: info, pattern: 'CAUSE', examples: {match: [CAUSE]}}
  - {id: big, streams: [kernel], severity: fatal, pattern: 'BIGFAULT', examples: {match: [BIGFAULT]}}
  - {id: boot, streams: [kernel], severity: info, pattern: 'BOOTED', examples: {match: [BOOTED]}}
  - {id: k, streams: [kernel], severity: warning, pattern: 'KDOWN', examples: {match: [KDOWN]}}
  - {id: kinfo, streams: [kernel], severity: info, pattern: 'KINFO', examples: {match: [KINFO]}}
  - {id: p, streams: [pod], severity: info, pattern: 'PODERR', examples: {match: [PODERR]}}
  - {id: q, streams: [pod], severity: warning, pattern: 'QERR', examples: {match: [QERR]}}
rules:
  - {id: cause, signature: cause, severity: info}
  - {id: big, signature: big, severity: fatal, recovery: {by: [boot]}}
  - {id: boot, signature: boot, severity: info}
  - id: k
    signature: k
    severity: warning
    count: 2
    window: 1h
    attach_to: {rules: [cause], within: 1m}
    suppressed_by: {rules: [big], within: 1h}
  - {id: kinfo, signature: kinfo, severity: info, suppressed_by: {rules: [big], within: 1h}}
  - id: p
    signature: p
    severity: info
    attach_to: {rules: [cause], within: 1m}
    corroborated_by: {rules: [k, kinfo], within: 10m}
    recovery: {quiet: 24h}
  - id: q
    signature: q
    severity: warning
    count: 2
    window: 24h
    dedup: 30m
    corroborated_by: {rules: [k], within: 10m}
    recovery: {quiet: 24h}
)";

class Corroboration : public ::testing::Test, public Feeder {
 protected:
  Corroboration() : Feeder(loadBank({{"c.yaml", kCorroborationBank}})) {}
};

// A pod hit attached to a cause never counts, so no kernel hit corroborates it, whether the kernel
// hit comes before the pod line (a) or after it (b); unattached, it is corroborated (c).
TEST_F(Corroboration, AnAttachedPodHitIsCorroboratedByNoKernelHit) {
  feed("a", 50, "KDOWN");
  feed("a", 100, "CAUSE");
  feed("a", 110, "PODERR", StreamKind::kPod);
  feed("b", 100, "CAUSE");
  feed("b", 110, "PODERR", StreamKind::kPod);
  feed("b", 200, "KDOWN");
  feed("c", 110, "PODERR", StreamKind::kPod);
  feed("c", 200, "KDOWN");
  EXPECT_EQ(decisions(), std::vector<std::string>{"c taint p"});
  EXPECT_EQ(c_.stats().attached, 2U);
}

// A pod hit inside its rule's dedup window counts once with the hit it repeats: a kernel hit
// within `within` of the repeat only, before it (a) or after it (b), corroborates nothing. Within
// `within` of the counted hit (c), it does: rule q does taint.
TEST_F(Corroboration, ADeduplicatedPodHitIsCorroboratedByNoKernelHit) {
  feed("a", 0, "QERR", StreamKind::kPod);
  feed("a", 660, "KDOWN");  // 11 minutes after the counted hit
  feed("a", 900, "QERR", StreamKind::kPod);
  feed("b", 0, "QERR", StreamKind::kPod);
  feed("b", 300, "QERR", StreamKind::kPod);
  feed("b", 840, "KDOWN");  // 14 minutes after the counted hit
  feed("c", 0, "QERR", StreamKind::kPod);
  feed("c", 300, "QERR", StreamKind::kPod);
  feed("c", 540, "KDOWN");  // 9 minutes after the counted hit
  EXPECT_EQ(decisions(), std::vector<std::string>{"c taint q"});
}

// A kernel hit that suppressed_by dropped (a) or attach_to attached to its cause (b) is part of
// another incident: it corroborates no pod hit, before or after it, or the pod rule's fault
// (quiet: 24h) holds the node's taint after the incident's own fault has cleared.
TEST_F(Corroboration, ADroppedKernelHitCorroboratesNothing) {
  for (const char* n : {"a1", "a2", "a3"}) {
    feed(n, 100, "BIGFAULT");
  }
  feed("a1", 150, "KDOWN");
  feed("a1", 200, "PODERR", StreamKind::kPod);
  feed("a2", 120, "PODERR", StreamKind::kPod);
  feed("a2", 150, "KDOWN");
  feed("a3", 150, "KINFO");  // an info rule's hit, suppressed as any rule's is
  feed("a3", 200, "PODERR", StreamKind::kPod);
  for (const char* n : {"a1", "a2", "a3"}) {
    feed(n, 400, "BOOTED");
  }
  feed("b1", 100, "CAUSE");
  feed("b1", 110, "KDOWN");
  feed("b1", 200, "QERR", StreamKind::kPod);
  feed("b2", 100, "CAUSE");
  feed("b2", 105, "QERR", StreamKind::kPod);
  feed("b2", 110, "KDOWN");
  EXPECT_EQ(decisions(),
            (std::vector<std::string>{"a1 taint big", "a2 taint big", "a3 taint big",
                                      "a1 untaint big", "a2 untaint big", "a3 untaint big"}));
}

// Hits attached to another incident, however many, do not hide the node's own kernel line
// before them: it still corroborates.
TEST_F(Corroboration, DroppedKernelHitsDoNotHideAnEarlierOne) {
  feed("a", 100, "KDOWN");
  feed("a", 200, "CAUSE");
  for (int sec = 201; sec <= 210; ++sec) {
    feed("a", sec, "KDOWN");  // attached to CAUSE
  }
  feed("a", 300, "PODERR", StreamKind::kPod);
  EXPECT_EQ(decisions(), std::vector<std::string>{"a taint p"});
  EXPECT_EQ(c_.stats().attached, 10U);
}

// A kernel rule in dry run (tried out, or stopped after false taints) taints no node for real,
// through the pod rules it corroborates neither, whichever line comes first; the other kernel
// rule still corroborates them.
TEST(CorroborationDryRun, ARuleInDryRunCorroboratesNoRealRule) {
  Feeder f(loadBank({{"c.yaml", kCorroborationBank}}), {"k"});
  f.feed("a", 100, "PODERR", StreamKind::kPod);
  f.feed("a", 200, "KDOWN");
  f.feed("b", 100, "KDOWN");
  f.feed("b", 200, "PODERR", StreamKind::kPod);
  f.feed("c", 100, "KINFO");
  f.feed("c", 200, "PODERR", StreamKind::kPod);
  EXPECT_EQ(f.decisions(), std::vector<std::string>{"c taint p"});
}

}  // namespace
}  // namespace faultline
