// Event time across nodes and held hits: a node whose log lags behind the others', lines of one
// second in replay, held hits that count, flap recoveries, and what the correlator keeps.
#include <algorithm>
#include <functional>
#include <tuple>

#include <gtest/gtest.h>

#include "core/pipeline.h"
#include "core/time.h"
#include "matcher/bank.h"
#include "matcher/correlator.h"
#include "tests/unit/helpers.h"

namespace faultline {
namespace {

constexpr int64_t kMin = 60 * kNanosPerSecond;
constexpr int64_t kHour = 60 * kMin;
// 2025-02-14T05:00:00Z
constexpr int64_t kT = 1'739'509'200 * kNanosPerSecond;
constexpr const char* kDown = "mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link DOWN";
constexpr const char* kActive = "mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE";
// An Xid 48 (xid-fatal) and a node's boot (node-boot, a recovery signal of most GPU rules).
constexpr const char* kXid48 =
    "NVRM: Xid (PCI:0000:a1:00): 48, pid=2222, name=python3, An uncorrectable double bit error "
    "(DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.";
constexpr const char* kBoot =
    "Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) "
    "12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 "
    "(2024-02-01)";
// A driver load (nvidia-driver-load: recovers xid-fatal, not the rules only a boot recovers).
constexpr const char* kDriverLoad =
    "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.144.03  Mon Dec 30 17:44:08 UTC 2024";
// A PyTorch watchdog timeout (pytorch-nccl-watchdog-timeout: a cluster rule of distinct jobs).
constexpr const char* kWatchdog =
    "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, "
    "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.";

// A fatal CPER record (cper-fatal: suppressed by a boot within 5m, recovered by one).
constexpr const char* kCperFatal = "[Hardware Error]: event severity: fatal";
// A pod's NCCL remote error (nccl-remote-error: acts only when a kernel line corroborates it).
constexpr const char* kNcclRemote =
    "torch.distributed.DistBackendError: NCCL error in: "
    "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1347, remote process exited or there "
    "was a network error, NCCL version 2.18.5";

class Collect : public DecisionSink {
 public:
  void write(const Decision& d) override {
    got.push_back(d.node + " " + std::string(actionName(d.action)) + " " + d.rule);
    reasons.push_back(d.reason);
    times.push_back(d.time_ns);
    (d.dry_run ? dry : real).push_back(got.back());
  }
  std::vector<std::string> got;
  std::vector<std::string> real;  // those not in dry run
  std::vector<std::string> dry;   // those in dry run
  std::vector<std::string> reasons;
  std::vector<int64_t> times;
};

// One record per batch, as a push of one line; `job` labels a pod's record with its job.
RecordBatch one(int64_t time_ns, const std::string& node, const std::string& line,
                StreamKind kind = StreamKind::kKernel, const std::string& job = "") {
  RecordBatch b;
  if (!job.empty()) {
    b.labels.push_back({"job_name", b.copy(job)});
  }
  b.records.push_back(
      {time_ns, b.copy(node), b.copy(line), 0, static_cast<uint32_t>(b.labels.size()), kind});
  return b;
}

struct Line {
  int64_t time_ns;
  std::string node;
  std::string text;
  StreamKind kind = StreamKind::kKernel;
  std::string job{};  // a default: clang warns of a positional initializer that leaves it out
};

// `lines` as replay takes them: sorted by time, lines of one time in the order given.
std::vector<Line> inTimeOrder(std::vector<Line> lines) {
  std::stable_sort(lines.begin(), lines.end(),
                   [](const Line& a, const Line& b) { return a.time_ns < b.time_ns; });
  return lines;
}

// A live pipeline over `bank` with max_lag_ns (and dry_run_rules), fed `lines` in order, one per
// batch: its decisions go to `sink`.
void decide(int64_t max_lag_ns, const std::vector<Line>& lines, Collect* sink,
            std::function<int64_t()> clock = {},
            const std::shared_ptr<const Bank>& bank = shippedBank(),
            const std::vector<std::string>& dry_run_rules = {}) {
  Pipeline p(bank, Taint{}, {sink}, 1, max_lag_ns, std::move(clock), dry_run_rules);
  for (const Line& l : lines) {
    p.process(one(l.time_ns, l.node, l.text, l.kind, l.job));
  }
}

// The decisions of decide().
std::vector<std::string> live(int64_t max_lag_ns, const std::vector<Line>& lines,
                              std::function<int64_t()> clock = {}) {
  Collect sink;
  decide(max_lag_ns, lines, &sink, std::move(clock));
  return sink.got;
}

// gpu-2's DOWN, then gpu-3's log ten minutes ahead, then gpu-2's own ACTIVE a minute after its
// DOWN: the port came back within ib-port-down-lasting's five minutes.
std::vector<std::string> laggingNode(int64_t max_lag_ns) {
  return live(max_lag_ns, {{kT, "gpu-2", kDown},
                           {kT + 10 * kMin, "gpu-3", "systemd[1]: Started session 7."},
                           {kT + kMin, "gpu-2", kActive},
                           {kT + 11 * kMin, "gpu-2", "systemd[1]: Started session 8."}});
}

TEST(CorrelatorTime, ANodeLaggingLessThanMaxLagIsDecidedByItsOwnLog) {
  EXPECT_EQ(laggingNode(15 * kMin), std::vector<std::string>{});
  // Without a max_lag (replay's setting, whose hits are sorted) gpu-3's time decides gpu-2.
  EXPECT_EQ(laggingNode(0), std::vector<std::string>{"gpu-2 taint ib-port-down-lasting"});
}

// gpu-2 sends a backlog (its agent restarted) while gpu-3 is 30 minutes ahead: however far behind,
// a node that keeps sending is decided by its own log.
std::vector<std::string> backlog(int64_t max_lag_ns) {
  return live(max_lag_ns, {{kT + 30 * kMin, "gpu-3", "systemd[1]: Started session 7."},
                           {kT, "gpu-2", kDown},
                           {kT + 31 * kMin, "gpu-3", "systemd[1]: Started session 8."},
                           {kT + kMin, "gpu-2", kActive},
                           {kT + 2 * kMin, "gpu-2", "systemd[1]: Started session 9."}});
}

TEST(CorrelatorTime, ABackloggedNodeIsDecidedByItsOwnLog) {
  EXPECT_EQ(backlog(5 * kMin), std::vector<std::string>{});
  EXPECT_EQ(backlog(0), std::vector<std::string>{"gpu-2 taint ib-port-down-lasting"});
}

TEST(CorrelatorTime, ANodeItsOwnLogPassesIsDecidedAtOnce) {
  // Six minutes on, gpu-2 is not silent (max_lag 10m): its own record decides its DOWN lasting.
  EXPECT_EQ(live(10 * kMin, {{kT, "gpu-2", kDown},
                             {kT + 6 * kMin, "gpu-2", "systemd[1]: Started session 7."}}),
            std::vector<std::string>{"gpu-2 taint ib-port-down-lasting"});
}

TEST(CorrelatorTime, ASilentNodeIsDecidedOnceTheOthersAreMaxLagAhead) {
  Collect sink;
  Pipeline p(shippedBank(), Taint{}, {&sink}, 1, 10 * kMin);
  p.process(one(kT, "gpu-2", kDown));  // and nothing more from gpu-2
  p.process(one(kT + 6 * kMin, "gpu-3", "systemd[1]: Started session 7."));
  EXPECT_EQ(sink.got, std::vector<std::string>{});  // gpu-2 heard at kT: silent from kT+10m
  p.process(one(kT + 11 * kMin, "gpu-3", "systemd[1]: Started session 8."));
  EXPECT_EQ(sink.got, std::vector<std::string>{"gpu-2 taint ib-port-down-lasting"});
}

// gpu-2's DOWN, then one batch (a Kafka batch over two partitions, gpu-3's read ahead) with
// gpu-2's next record four minutes on and gpu-3's Xid ten minutes on, then gpu-2's ACTIVE: gpu-2
// sent records all along, lagging six minutes (under max_lag), and its port came back within
// five. Cut into one record per batch, or replayed, that taints nothing; the batch must not
// either.
TEST(CorrelatorTime, ANodeOfTheBatchIsNotSilentAtAnotherNodesHitInIt) {
  for (const bool split : {true, false}) {
    Collect sink;
    Pipeline p(shippedBank(), Taint{}, {&sink}, 1, 10 * kMin);
    p.process(one(kT, "gpu-2", kDown));
    const std::vector<Line> batch{{kT + 4 * kMin, "gpu-2", "systemd[1]: Started session 7."},
                                  {kT + 10 * kMin + 2 * kNanosPerSecond, "gpu-3",
                                   "NVRM: Xid (PCI:0000:63:00): 31, pid=1234, name=python3"}};
    RecordBatch b;
    for (const Line& l : batch) {
      if (split) {
        p.process(one(l.time_ns, l.node, l.text));
      } else {
        b.records.push_back({l.time_ns, b.copy(l.node), b.copy(l.text), 0, 0, StreamKind::kKernel});
      }
    }
    if (!split) {
      p.process(b);
    }
    p.process(one(kT + 4 * kMin + 30 * kNanosPerSecond, "gpu-2", kActive));
    p.process(one(kT + 11 * kMin, "gpu-2", "systemd[1]: Started session 8."));
    EXPECT_EQ(sink.got, std::vector<std::string>{}) << (split ? "one per batch" : "one batch");
  }
}

// Four nodes' NCCL timeouts within ten minutes are a job's event (nccl-pytorch.yaml), twice; the
// fourth node's line arrives after the others' logs passed the window's end.
std::vector<std::string> laggingClusterNode(int64_t max_lag_ns) {
  const std::string line = kWatchdog;
  std::vector<Line> lines;
  // Two events, of two jobs: counted, two distinct jobs would taint each node.
  for (int64_t day = 0; day < 2; ++day) {
    const int64_t t0 = kT + day * 12 * kHour;
    const std::string job = day == 0 ? "train-a" : "train-b";
    for (const char* node : {"n1", "n2", "n3"}) {
      lines.push_back({t0, node, line, StreamKind::kPod, job});
    }
    lines.push_back({t0 + 12 * kMin, "n1", "step 1", StreamKind::kPod, job});
    lines.push_back({t0 + kMin, "n4", line, StreamKind::kPod, job});
    lines.push_back({t0 + 20 * kMin, "n1", "step 2", StreamKind::kPod, job});
  }
  return live(max_lag_ns, lines);
}

TEST(CorrelatorTime, ClusterWindowsWaitMaxLagForALaggingNode) {
  EXPECT_EQ(laggingClusterNode(5 * kMin), std::vector<std::string>{});
  // Closed on the others' time, the window holds three nodes: no job's event, each counts.
  EXPECT_EQ(laggingClusterNode(0).size(), 4U);
}

// The same, with another job's timeout on a fifth node arriving between the others and the
// lagging node's: the lagging hit still joins its own job's window (held hits are kept in time
// order, not arrival order), and the other job's lone node is no part of it.
TEST(CorrelatorTime, ALaggingClusterHitJoinsItsJobsWindowWhateverArrivedBetween) {
  const std::string line = kWatchdog;
  std::vector<Line> lines;
  for (int64_t day = 0; day < 2; ++day) {
    const int64_t t0 = kT + day * 12 * kHour;
    const std::string job = day == 0 ? "train-a" : "train-b";
    for (const char* node : {"n1", "n2", "n3"}) {
      lines.push_back({t0, node, line, StreamKind::kPod, job});
    }
    lines.push_back({t0 + 3 * kMin, "n5", line, StreamKind::kPod, job + "-other"});
    lines.push_back({t0 + kMin, "n4", line, StreamKind::kPod, job});
    lines.push_back({t0 + 20 * kMin, "n1", "step 2", StreamKind::kPod, job});
  }
  // n5's two jobs are its own, each one node: counted, and two of them taint n5.
  EXPECT_EQ(live(5 * kMin, lines),
            std::vector<std::string>{"n5 taint pytorch-nccl-watchdog-timeout"});
}

// Four nodes each running jobs of their own, hung in the same minutes twice: nodes are counted
// per job, so the four are no job's event and each is implicated by its own two jobs.
TEST(CorrelatorTime, UnrelatedJobsInTheSameMinutesAreNoJobsEvent) {
  const std::string line = kWatchdog;
  std::vector<Line> lines;
  for (int64_t episode = 0; episode < 2; ++episode) {
    for (int n = 0; n < 4; ++n) {
      const std::string node = "solo-" + std::to_string(n);
      lines.push_back({kT + episode * 2 * kHour + n * kMin, node, line, StreamKind::kPod,
                       node + "-job-" + std::to_string(episode)});
    }
  }
  lines.push_back({kT + 3 * kHour, "solo-0", "step 2", StreamKind::kPod, "solo-0-job-1"});
  std::vector<std::string> got = live(5 * kMin, lines);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"solo-0 taint pytorch-nccl-watchdog-timeout",
                                           "solo-1 taint pytorch-nccl-watchdog-timeout",
                                           "solo-2 taint pytorch-nccl-watchdog-timeout",
                                           "solo-3 taint pytorch-nccl-watchdog-timeout"}));
}

// A whole node behind (its agent restarted: a backlog 30 minutes behind gpu-3): between its DOWN
// and its ACTIVE a minute later only its pods' backlog arrives while gpu-3 moves on 12 minutes.
// Its pods' lines keep it heard: it is decided by its own log, as in replay.
TEST(CorrelatorTime, ABackloggedNodesPodLinesKeepItHeard) {
  for (const int64_t max_lag : {5 * kMin, 10 * kMin}) {
    std::vector<Line> lines = {{kT + 30 * kMin, "gpu-3", "systemd[1]: Started session 7."},
                               {kT, "gpu-2", kDown}};
    for (int s = 1; s <= 12; ++s) {
      lines.push_back({kT + s * 5 * kNanosPerSecond, "gpu-2", "step", StreamKind::kPod});
      lines.push_back({kT + 30 * kMin + s * kMin, "gpu-3", "systemd[1]: Started session 8."});
    }
    lines.push_back({kT + kMin, "gpu-2", kActive});
    lines.push_back({kT + 2 * kMin, "gpu-2", "systemd[1]: Started session 9."});
    EXPECT_EQ(live(max_lag, lines), std::vector<std::string>{}) << "max_lag " << max_lag / kMin;
  }
}

// gpu-1 is tainted by a corroborated watchdog timeout; its pods' stream then lags 15 minutes
// behind the others (more than max_lag), its kernel quiet. Job train-b's timeout two minutes
// before the quiet day ends holds the fault, live as in replay: the pods keep the node heard.
TEST(CorrelatorTime, APodRulesQuietDayWithItsPodsLaggingIsReplays) {
  std::vector<Line> lines{{kT, "gpu-1", kWatchdog, StreamKind::kPod, "train-a"},
                          {kT + 2 * kMin, "gpu-1", kDown},
                          {kT + 3 * kMin, "gpu-1", kActive}};
  for (int m = 0; m <= 40; ++m) {
    const int64_t now = kT + 23 * kHour + 40 * kMin + m * kMin;
    lines.push_back({now, "gpu-9", "systemd[1]: Started session 7."});
    const int64_t pod = now - 15 * kMin;
    if (pod >= kT + 24 * kHour - 2 * kMin && pod < kT + 24 * kHour - kMin) {
      lines.push_back(
          {kT + 24 * kHour - 2 * kMin, "gpu-1", kWatchdog, StreamKind::kPod, "train-b"});
    }
    lines.push_back({pod, "gpu-1", "step 10 loss 0.1", StreamKind::kPod});
  }
  const std::vector<Line> sorted = inTimeOrder(lines);
  const std::vector<std::string> replay = live(0, sorted);
  EXPECT_EQ(replay, std::vector<std::string>{"gpu-1 taint pytorch-nccl-watchdog-timeout"});
  EXPECT_EQ(live(10 * kMin, lines), replay);
}

// gpu-a's port goes DOWN and its kernel says nothing more; gpu-b logs once a minute for six hours.
// gpu-a's pods (or, with `chatty` kOther, a host service of its) log once a minute too, stamped
// pod_lag before the newest time (their shipper reads local time as UTC), or at one time an hour
// before the DOWN (`fixed`: a pod choosing its stamps). `active`: gpu-a's ACTIVE a minute after
// its DOWN, arriving seven minutes late.
std::vector<Line> quietKernelLoggingPods(int64_t pod_lag_ns, bool fixed, bool active,
                                         StreamKind chatty = StreamKind::kPod) {
  std::vector<Line> lines = {{kT, "gpu-a", kDown}};
  for (int m = 1; m <= 6 * 60; ++m) {
    const int64_t now = kT + m * kMin;
    lines.push_back({now, "gpu-b", "systemd[1]: Started session 7."});
    lines.push_back({fixed ? kT - kHour : now - pod_lag_ns, "gpu-a", "step", chatty});
    if (active && m == 8) {
      lines.push_back({kT + kMin, "gpu-a", kActive});
    }
  }
  return lines;
}

// Live with max_lag 10m: the decisions, and the newest time read when the first came (INT64_MIN:
// none came).
std::pair<std::vector<std::string>, int64_t> decidedWhen(const std::vector<Line>& lines) {
  Collect sink;
  Pipeline p(shippedBank(), Taint{}, {&sink}, 1, 10 * kMin);
  int64_t newest = INT64_MIN;
  int64_t when = INT64_MIN;
  for (const Line& l : lines) {
    newest = std::max(newest, l.time_ns);
    p.process(one(l.time_ns, l.node, l.text, l.kind, l.job));
    if (when == INT64_MIN && !sink.got.empty()) {
      when = newest;
    }
  }
  return {sink.got, when};
}

// Pods stamped long before their node's kernel say nothing of its stream: the DOWN lasts once
// the kernel is silent for max_lag and its timer max_lag behind the newest time, live as in replay.
// They kept the node heard: with a fixed stamp the DOWN was never decided, an hour behind it was
// decided an hour late. So do a host service's records (its syslog read with local time as UTC).
TEST(CorrelatorTime, PodsStampedLongBeforeTheKernelKeepNoQuietNodeHeard) {
  const std::vector<std::string> want = {"gpu-a taint ib-port-down-lasting"};
  for (const StreamKind chatty : {StreamKind::kPod, StreamKind::kOther}) {
    for (const auto& [pod_lag, fixed] :
         std::vector<std::pair<int64_t, bool>>{{kHour, false}, {2 * kHour, false}, {0, true}}) {
      const std::string what = std::string(streamKindName(chatty)) + " " +
                               std::to_string(pod_lag / kMin) + " min behind, fixed " +
                               std::to_string(fixed);
      const auto [got, when] = decidedWhen(quietKernelLoggingPods(pod_lag, fixed, false, chatty));
      EXPECT_EQ(got, want) << what;
      // The DOWN's timer (5m) max_lag behind the newest time: a kernel lagging less is heard.
      EXPECT_EQ(when, kT + 16 * kMin) << what;
      const std::vector<Line> sorted =
          inTimeOrder(quietKernelLoggingPods(pod_lag, fixed, false, chatty));
      EXPECT_EQ(live(0, sorted), want) << what;
    }
  }
}

// gpu-a's kernel runs five minutes behind the others (under max_lag), quiet between its lines: a
// port DOWN, its ACTIVE 20 minutes on, DOWN and ACTIVE again 28 minutes later; its pods log
// stamped an hour back. The port's recovery is decided as in replay: the second DOWN, five
// minutes late, holds the fault before its stable timer falls due. Decided on the kernel's
// silence at the newest time, the timer fell due before the DOWN came.
TEST(CorrelatorTime, AQuietKernelLaggingLessThanMaxLagIsHeardOutForItsTimers) {
  const std::vector<Line> kernel = {{kT, "gpu-a", kDown},
                                    {kT + 20 * kMin, "gpu-a", kActive},
                                    {kT + 48 * kMin, "gpu-a", kDown},
                                    {kT + 49 * kMin, "gpu-a", kActive}};
  std::vector<Line> lines;
  size_t k = 0;
  for (int m = 0; m <= 3 * 60; ++m) {
    const int64_t now = kT + m * kMin;
    lines.push_back({now, "gpu-b", "systemd[1]: Started session 7."});
    for (; k < kernel.size() && kernel[k].time_ns + 5 * kMin <= now; ++k) {
      lines.push_back(kernel[k]);
    }
    lines.push_back({now - kHour, "gpu-a", "step", StreamKind::kPod});
  }
  const std::vector<Line> sorted = inTimeOrder(lines);
  Collect replay;
  decide(0, sorted, &replay);
  EXPECT_EQ(replay.got, (std::vector<std::string>{"gpu-a taint ib-port-down-lasting",
                                                  "gpu-a untaint ib-port-down-lasting"}));
  Collect sink;
  decide(10 * kMin, lines, &sink);
  EXPECT_EQ(sink.got, replay.got);
  EXPECT_EQ(sink.times, replay.times);
}

// A bank's kernel rule held unless a pod line follows it (an Xid 13 the application's own error
// explains): with the node's pods five or eight minutes behind the newest time (under max_lag),
// the Xid waits for them, live as in replay. Taken for a timer no pod line bears on, it was
// decided on the node's kernel silence, and the node tainted until the pod line came. Pods
// stamped at one time an hour back do not hold it for ever: it is decided as in replay.
TEST(CorrelatorTime, AKernelRuleAPodLineFollowsWaitsForItsPods) {
  const auto bank = loadBank({{"r.yaml", R"(
signatures:
  - id: xid
    streams: [kernel]
    severity: warning
    pattern: 'Xid (?P<pci>\S+) (?P<code>\d+)'
    examples: {match: ['Xid 0000:01:00 13']}
  - id: app
    streams: [pod]
    severity: info
    pattern: 'illegal memory access'
    examples: {match: ['CUDA error: an illegal memory access was encountered']}
rules:
  - id: xid-13
    signature: xid
    severity: fatal
    unless_followed_by: {rules: [app-fault], within: 2m}
  - id: app-fault
    signature: app
    severity: info
)"}});
  for (const int64_t pod_lag : {5 * kMin, 8 * kMin, int64_t{0}}) {
    std::vector<Line> lines = {{kT, "gpu-a", "Xid 0000:01:00 13"}};
    for (int m = 1; m <= 60; ++m) {
      const int64_t now = kT + m * kMin;
      lines.push_back({now, "gpu-b", "systemd[1]: Started session 7."});
      const int64_t pod = pod_lag == 0 ? kT - kHour : now - pod_lag;
      lines.push_back(
          {pod, "gpu-a",
           pod == kT + kMin ? "CUDA error: an illegal memory access was encountered" : "step",
           StreamKind::kPod});
    }
    const std::vector<Line> sorted = inTimeOrder(lines);
    for (const int64_t max_lag : {int64_t{0}, 10 * kMin}) {
      Collect sink;
      decide(max_lag, max_lag == 0 ? sorted : lines, &sink, {}, bank);
      EXPECT_EQ(sink.got, pod_lag == 0 ? std::vector<std::string>{"gpu-a taint xid-13"}
                                       : std::vector<std::string>{})
          << "pods " << pod_lag / kMin << " min behind (0: fixed), max_lag " << max_lag / kMin;
    }
  }
}

// Pods lagging the kernel less than max_lag keep the node heard: its ACTIVE, seven minutes late,
// still recovers the port, as in replay; without it the DOWN is decided by the pods' time.
TEST(CorrelatorTime, PodsLaggingTheKernelLessThanMaxLagKeepTheNodeHeard) {
  EXPECT_EQ(decidedWhen(quietKernelLoggingPods(5 * kMin, false, true)).first,
            std::vector<std::string>{});
  const auto [got, when] = decidedWhen(quietKernelLoggingPods(5 * kMin, false, false));
  EXPECT_EQ(got, std::vector<std::string>{"gpu-a taint ib-port-down-lasting"});
  EXPECT_EQ(when, kT + 21 * kMin);  // its pods' time max_lag past the DOWN's five minutes
}

// A job's watchdog timeout; its cluster window closes with the others' log half an hour on; then a
// dozen of another pod's timeouts (no job) stamped three hours back; then the node's IB port flap
// 20 s after the first, its kernel stream half an hour behind: the flap corroborates the job's
// line, live as in replay. The stale lines took the eight places a rule's newest hits have on a
// node, by arrival, and the flap found nothing.
TEST(CorrelatorTime, StaleHitsPushNoNewerOneOutOfANodesHistory) {
  std::vector<Line> lines = {{kT, "gpu-w", kWatchdog, StreamKind::kPod, "train-a"}};
  for (int m = 1; m <= 60; ++m) {
    lines.push_back({kT + m * kMin, "gpu-z", "systemd[1]: Started session 7."});
    if (m == 30) {
      for (int s = 0; s < 12; ++s) {
        lines.push_back(
            {kT - 3 * kHour + s * kNanosPerSecond, "gpu-w", kWatchdog, StreamKind::kPod});
      }
      lines.push_back({kT + 20 * kNanosPerSecond, "gpu-w", kDown});
      lines.push_back({kT + 25 * kNanosPerSecond, "gpu-w", kActive});
    }
  }
  const std::vector<Line> sorted = inTimeOrder(lines);
  const std::vector<std::string> want = {"gpu-w taint pytorch-nccl-watchdog-timeout"};
  EXPECT_EQ(live(0, sorted), want);
  EXPECT_EQ(live(10 * kMin, lines), want);
}

// A pod line and the kernel line that corroborates it read out of time order (the pod's stream
// ahead of the kernel's, or behind it): the taint names the rule replay names, at replay's time.
// Live named the pod rule at the kernel line's stamp though the pod line came later (1, 3), and
// took a kernel line stamped after the pod line over one before it (2); of two pod lines stamped
// after the kernel line, the earliest names the taint (4).
TEST(CorrelatorTime, ACorroborationReadOutOfOrderIsReplays) {
  const std::string xid94 =
      "NVRM: Xid (PCI:0000:9b:00): 94, pid=1234, name=python3, Contained ECC error";
  const std::string xid74 =
      "NVRM: Xid (PCI:0000:d8:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error "
      "detected on link 14(0x100000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)";
  const std::string ibv =
      "machine1:196207:196244 [0] misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with "
      "error Invalid argument";
  const std::string completion =
      "worker-0:3468:3905 [4] NCCL WARN NET/IB: Got completion from peer 10.216.210.236<54862> "
      "with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) reqSize=1048576 vendor_err=129 "
      "req_type=Send hca mlx5_0";
  struct Case {
    std::vector<Line> lines;
    std::string want;  // replay's one decision
    int64_t at_ns;
  };
  const std::vector<Case> cases = {
      {{{kT + kMin, "gpu-1", kNcclRemote, StreamKind::kPod}, {kT, "gpu-1", xid94}},
       "gpu-1 taint nccl-remote-error",
       kT + kMin},
      {{{kT, "gpu-1", xid94},
        {kT + 8 * kMin, "gpu-1", xid94},
        {kT + 5 * kMin, "gpu-1", kNcclRemote, StreamKind::kPod}},
       "gpu-1 taint nccl-remote-error",
       kT + 5 * kMin},
      {{{kT + 2 * kMin, "gpu-1", kNcclRemote, StreamKind::kPod}, {kT, "gpu-1", xid74}},
       "gpu-1 taint xid-74-nvlink",
       kT},
      {{{kT + 6 * kMin, "gpu-1", ibv, StreamKind::kPod},
        {kT + 7 * kMin, "gpu-1", completion, StreamKind::kPod},
        {kT, "gpu-1", xid94}},
       "gpu-1 taint nccl-ibv-call-failed",
       kT + 6 * kMin}};
  for (size_t c = 0; c < cases.size(); ++c) {
    const std::vector<Line> sorted = inTimeOrder(cases[c].lines);
    for (const bool replay : {true, false}) {
      Collect sink;
      decide(replay ? 0 : 10 * kMin, replay ? sorted : cases[c].lines, &sink);
      EXPECT_EQ(sink.got, std::vector<std::string>{cases[c].want})
          << "case " << c + 1 << (replay ? " replay" : " live");
      EXPECT_EQ(sink.times, std::vector<int64_t>{cases[c].at_ns})
          << "case " << c + 1 << (replay ? " replay" : " live");
    }
  }
}

// n1's pods run five minutes behind its kernel: its Xid 94 is read before its job-a and job-b
// watchdog timeouts, which it corroborates. Job b's timeout on four nodes in one minute is a
// job's event: it counts for no node, n1's as replay holds it included (n2, with job c's two hours
// before, is not tainted). A corroboration that took n1's job-a line at once let its job-b line
// join that fault instead of job b's window, which then held three nodes, each counted.
TEST(CorrelatorTime, ACorroboratedNodesLaterHitStillJoinsItsJobsEvent) {
  std::vector<Line> lines = {{kT - 2 * kHour, "n2", kWatchdog, StreamKind::kPod, "job-c"},
                             {kT + 5 * kMin, "n1",
                              "NVRM: Xid (PCI:0000:9b:00): 94, pid=1234, name=python3, Contained "
                              "ECC error"},
                             {kT, "n1", kWatchdog, StreamKind::kPod, "job-a"}};
  for (const char* node : {"n1", "n2", "n3", "n4"}) {
    lines.push_back({kT + 2 * kMin, node, kWatchdog, StreamKind::kPod, "job-b"});
  }
  for (int m = 1; m <= 60; ++m) {
    lines.push_back({kT + 5 * kMin + m * kMin, "gpu-z", "systemd[1]: Started session 7."});
  }
  const std::vector<Line> sorted = inTimeOrder(lines);
  const std::vector<std::string> want = {"n1 taint pytorch-nccl-watchdog-timeout"};
  EXPECT_EQ(live(0, sorted), want);
  EXPECT_EQ(live(10 * kMin, lines), want);
}

// A watchdog timeout (a cluster rule's, held for its job's window) read before an Xid 94 stamped a
// minute before it: replay, reading the Xid first, holds the timeout and faults it at the next
// Xid 94 (3 min), or when the window closes. Faulted at once, it also took n1's later job-b line
// from job b's window, which then held three nodes, each counted: n2 (with job c's two hours
// before) was tainted.
TEST(CorrelatorTime, APodHitStampedAfterItsCorroboratorWaitsInItsWindow) {
  const std::string xid94 =
      "NVRM: Xid (PCI:0000:9b:00): 94, pid=1234, name=python3, Contained ECC error";
  std::vector<Line> one_node = {{kT + kMin, "gpu-1", kWatchdog, StreamKind::kPod, "train-a"},
                                {kT, "gpu-1", xid94},
                                {kT + 3 * kMin, "gpu-1", xid94}};
  std::vector<Line> job_event = {{kT - 2 * kHour, "n2", kWatchdog, StreamKind::kPod, "job-c"},
                                 {kT + kMin, "n1", kWatchdog, StreamKind::kPod, "job-a"},
                                 {kT, "n1", xid94}};
  for (const char* node : {"n1", "n2", "n3", "n4"}) {
    job_event.push_back({kT + 3 * kMin, node, kWatchdog, StreamKind::kPod, "job-b"});
  }
  for (int m = 1; m <= 60; ++m) {
    one_node.push_back({kT + 3 * kMin + m * kMin, "gpu-z", "systemd[1]: Started session 7."});
    job_event.push_back({kT + 3 * kMin + m * kMin, "gpu-z", "systemd[1]: Started session 7."});
  }
  for (const bool replay : {true, false}) {
    Collect sink;
    decide(replay ? 0 : 10 * kMin, replay ? inTimeOrder(one_node) : one_node, &sink);
    EXPECT_EQ(sink.got, std::vector<std::string>{"gpu-1 taint pytorch-nccl-watchdog-timeout"})
        << replay;
    EXPECT_EQ(sink.times, std::vector<int64_t>{kT + 3 * kMin}) << replay;
  }
  const std::vector<std::string> want = {"n1 taint pytorch-nccl-watchdog-timeout"};
  EXPECT_EQ(live(0, inTimeOrder(job_event)), want);
  EXPECT_EQ(live(10 * kMin, job_event), want);
}

// A bank's pod rule suppressed within five minutes of a kernel cause and corroborated by another
// kernel line: its line two minutes after the cause is suppressed (the cause read after it), the
// one six minutes after is not. The corroborating line at four minutes, read last, faults the
// later one, as replay does; the suppressed one, the newest before it, hid it.
TEST(CorrelatorTime, ASuppressedPodHitHidesNoLaterOneFromCorroboration) {
  const auto bank = loadBank({{"r.yaml", R"(
signatures:
  - id: kx
    streams: [kernel]
    severity: info
    pattern: 'KX (?P<n>\d+)'
    examples: {match: ['KX 1']}
  - id: kc
    streams: [kernel]
    severity: info
    pattern: 'CAUSE'
    examples: {match: ['CAUSE']}
  - id: pe
    streams: [pod]
    severity: info
    pattern: 'PODERR'
    examples: {match: ['PODERR']}
rules:
  - id: k-ev
    signature: kx
    severity: info
  - id: cause
    signature: kc
    severity: info
  - id: pod-err
    signature: pe
    severity: info
    suppressed_by: {rules: [cause], within: 5m}
    corroborated_by: {rules: [k-ev], within: 10m}
    recovery: {quiet: 24h}
)"}});
  std::vector<Line> lines = {{kT + 2 * kMin, "gpu-1", "PODERR", StreamKind::kPod},
                             {kT + 6 * kMin, "gpu-1", "PODERR", StreamKind::kPod},
                             {kT, "gpu-1", "CAUSE"},
                             {kT + 4 * kMin, "gpu-1", "KX 1"}};
  for (int m = 1; m <= 30; ++m) {
    lines.push_back({kT + 6 * kMin + m * kMin, "gpu-z", "systemd[1]: Started session 7."});
  }
  const std::vector<Line> sorted = inTimeOrder(lines);
  for (const bool replay : {true, false}) {
    Collect sink;
    decide(replay ? 0 : 10 * kMin, replay ? sorted : lines, &sink, {}, bank);
    EXPECT_EQ(sink.got, std::vector<std::string>{"gpu-1 taint pod-err"}) << replay;
    EXPECT_EQ(sink.times, std::vector<int64_t>{kT + 6 * kMin}) << replay;
  }
}

// A pod's line stamped 30 s after its node's IB port flap, read before the flap's lines (the pod
// stream ahead of the kernel's): the flap corroborates it, live as in replay, whether the pod has
// a job or none, and for an info rule (nccl-remote-error) too. The flap looked only for pod hits
// stamped before it.
TEST(CorrelatorTime, AKernelLineCorroboratesAPodHitStampedAfterItButReadFirst) {
  for (const auto& [line, job, rule] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {kWatchdog, "train-a", "pytorch-nccl-watchdog-timeout"},
           {kWatchdog, "", "pytorch-nccl-watchdog-timeout"},
           {kNcclRemote, "train-a", "nccl-remote-error"}}) {
    std::vector<Line> lines = {{kT + 30 * kNanosPerSecond, "gpu-w", line, StreamKind::kPod, job},
                               {kT, "gpu-w", kDown},
                               {kT + 20 * kNanosPerSecond, "gpu-w", kActive}};
    for (int m = 1; m <= 60; ++m) {
      lines.push_back({kT + m * kMin, "gpu-z", "systemd[1]: Started session 7."});
    }
    const std::vector<Line> sorted = inTimeOrder(lines);
    const std::vector<std::string> want = {"gpu-w taint " + rule};
    EXPECT_EQ(live(0, sorted), want) << "replay, job '" << job << "'";
    EXPECT_EQ(live(5 * kMin, lines), want) << "live, job '" << job << "'";
  }
}

// Pods without a job label count for no node, and act only when a kernel line of the node
// corroborates them. One such pod's watchdog timeout 15 minutes before another's was taken for a
// repeat of it (one 30-minute dedup for all jobless pods), so the second, which an IB port flap
// 20 s later corroborates, was dropped, and the first was too far from the flap.
TEST(CorrelatorTime, AJoblessPodsHitIsNoRepeatOfAnothers) {
  for (const bool pod_first : {true, false}) {
    for (const bool noisy : {false, true}) {
      std::vector<Line> lines;
      if (noisy) {
        lines.push_back({kT - 15 * kMin, "gpu-w", kWatchdog, StreamKind::kPod, ""});
      }
      const Line victim{kT, "gpu-w", kWatchdog, StreamKind::kPod, ""};
      const std::vector<Line> flap = {{kT + 20 * kNanosPerSecond, "gpu-w", kDown},
                                      {kT + 40 * kNanosPerSecond, "gpu-w", kActive}};
      if (pod_first) {
        lines.push_back(victim);
      }
      lines.insert(lines.end(), flap.begin(), flap.end());
      if (!pod_first) {
        lines.push_back(victim);
      }
      for (int m = 1; m <= 60; ++m) {  // an hour of another node's log: held windows close
        lines.push_back({kT + m * kMin, "gpu-z", "systemd[1]: Started session 7."});
      }
      EXPECT_EQ(live(5 * kMin, lines),
                std::vector<std::string>{"gpu-w taint pytorch-nccl-watchdog-timeout"})
          << "pod first " << pod_first << ", noisy " << noisy;
    }
  }
}

// A job's first rank fails at once, its peers' watchdogs fire around ten minutes later: n2 to n5
// are four nodes of one job within two minutes, a job's event however the first hit placed the
// window, twice. Only n1, alone in every ten minutes around its own hits, is implicated, by its
// two jobs.
TEST(CorrelatorTime, FourNodesWithinTheWindowAreAJobsEventWhereverItStarts) {
  const std::string line = kWatchdog;
  std::vector<Line> lines;
  for (int64_t episode = 0; episode < 2; ++episode) {
    const int64_t t0 = kT + episode * 3 * kHour;
    const std::string job = episode == 0 ? "train-a" : "train-b";
    lines.push_back({t0, "n1", line, StreamKind::kPod, job});
    for (const char* node : {"n2", "n3"}) {
      lines.push_back({t0 + 9 * kMin, node, line, StreamKind::kPod, job});
    }
    for (const char* node : {"n4", "n5"}) {
      lines.push_back({t0 + 11 * kMin, node, line, StreamKind::kPod, job});
    }
  }
  lines.push_back({kT + 8 * kHour, "n1", "step 2", StreamKind::kPod, "train-b"});
  const std::vector<std::string> want{"n1 taint pytorch-nccl-watchdog-timeout"};
  EXPECT_EQ(live(5 * kMin, lines), want);
  Collect sink;
  Pipeline p(shippedBank(), Taint{}, {&sink});
  for (const Line& l : lines) {
    p.collect(one(l.time_ns, l.node, l.text, l.kind, l.job), 0);
  }
  p.finishReplay();
  EXPECT_EQ(sink.got, want);
}

// A JobSet's pods carry their child Job's job-name beside the JobSet's name: eight one-pod child
// Jobs hanging together are one job's event (the broadest job label names the job), twice.
TEST(CorrelatorTime, AJobSetsChildJobsAreOneJob) {
  const std::string line = kWatchdog;
  Collect sink;
  Pipeline p(shippedBank(), Taint{}, {&sink}, 1, 5 * kMin);
  for (const std::string run : {"llama", "llama2"}) {
    const int64_t t0 = run == "llama" ? kT : kT + 3 * kHour;
    for (int i = 0; i < 8; ++i) {
      RecordBatch b;
      b.labels.push_back({"job-name", b.copy(run + "-workers-" + std::to_string(i))});
      b.labels.push_back({"jobset.sigs.k8s.io/jobset-name", b.copy(run)});
      b.records.push_back({t0 + i * kNanosPerSecond, b.copy("n" + std::to_string(i)), b.copy(line),
                           0, 2, StreamKind::kPod});
      p.process(b);
    }
  }
  p.process(one(kT + 4 * kHour, "n0", "step 2", StreamKind::kPod, "llama2-workers-0"));
  EXPECT_EQ(sink.got, std::vector<std::string>{});
  EXPECT_EQ(p.correlatorStats().job_events, 2u);
}

// An info rule that acted through corroboration holds its fault while its hits go on: its quiet
// period counts from the last one, as any rule's.
TEST(CorrelatorTime, ACorroboratedInfoRulesHitsHoldItsFault) {
  const std::string ib =
      "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer "
      "10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv)";
  Collect sink;
  Pipeline p(shippedBank(), Taint{}, {&sink}, 1, 5 * kMin);
  p.process(one(kT, "gpu-1", kDown));
  p.process(one(kT + 10 * kNanosPerSecond, "gpu-1", kActive));
  for (int64_t h = 0; h <= 30; ++h) {
    p.process(one(kT + kMin + h * kHour, "gpu-1", ib, StreamKind::kPod, "train-a"));
  }
  EXPECT_EQ(sink.got, std::vector<std::string>{"gpu-1 taint nccl-ib-completion-error"});
}

// A stamp near INT64_MAX (a forged nanosecond string) is taken within the range where a window's
// end cannot overflow: replay ends (it looped for ever in flushHeld).
TEST(CorrelatorTime, AStampNearTheEndOfTimeEndsReplay) {
  Collect sink;
  Pipeline p(shippedBank(), Taint{}, {&sink});
  RecordBatch b;
  b.labels.push_back({"job_name", b.copy("j1")});
  b.records.push_back({INT64_MAX - 800, b.copy("n1"), b.copy(kWatchdog), 0, 1, StreamKind::kPod});
  b.records.push_back({INT64_MIN + 5, b.copy("n2"), b.copy(kDown), 0, 0, StreamKind::kKernel});
  p.collect(b, 0);
  p.finishReplay();
  EXPECT_EQ(sink.got, std::vector<std::string>{"n2 taint ib-port-down-lasting"});
}

// A job's event decides nothing, so the pipeline counts it where /metrics can show it
// (faultline_correlator_job_events_total).
TEST(CorrelatorTime, AJobsEventIsCounted) {
  const std::string line = kWatchdog;
  Collect sink;
  Pipeline p(shippedBank(), Taint{}, {&sink}, 1, 5 * kMin);
  for (const char* node : {"n1", "n2", "n3", "n4"}) {
    p.process(one(kT, node, line, StreamKind::kPod, "train-a"));
  }
  EXPECT_EQ(p.correlatorStats().job_events, 0u);  // held until the window and max_lag pass
  p.process(one(kT + 20 * kMin, "n1", "step 2", StreamKind::kPod, "train-a"));
  EXPECT_EQ(p.correlatorStats().job_events, 1u);
  EXPECT_EQ(sink.got, std::vector<std::string>{});
}

// A line a node repeats within its second is one event, and /metrics counts the repeats
// (faultline_correlator_repeats_total) however the lines were batched: the matcher folds a repeat
// in one batch into its hit's repeats, the correlator takes one in a later batch.
TEST(CorrelatorTime, RepeatsAreCountedInOneBatchAsInSeveral) {
  for (const bool one_batch : {true, false}) {
    Collect sink;
    Pipeline p(shippedBank(), Taint{}, {&sink}, 1, 5 * kMin);
    RecordBatch b;
    for (int i = 0; i < 3; ++i) {
      if (one_batch) {
        b.records.push_back({kT + i, b.copy("n1"), b.copy(kXid48), 0, 0, StreamKind::kKernel});
      } else {
        p.process(one(kT + i, "n1", kXid48));
      }
    }
    if (one_batch) {
      p.process(b);
    }
    EXPECT_EQ(p.correlatorStats().repeats, 2u) << (one_batch ? "one batch" : "three batches");
  }
}

// Two jobs' timeouts on one node in one second are two events: the second job is not a repeat
// of the first, live (one batch, either order) as in replay.
TEST(CorrelatorTime, TwoJobsLinesInOneSecondAreTwoEvents) {
  const std::string line = kWatchdog;
  for (const bool b_first : {false, true}) {
    Collect sink;
    Pipeline p(shippedBank(), Taint{}, {&sink}, 1, 5 * kMin);
    RecordBatch batch;
    for (const char* job : b_first ? std::vector<const char*>{"job-b", "job-a"}
                                   : std::vector<const char*>{"job-a", "job-b"}) {
      const auto first = static_cast<uint32_t>(batch.labels.size());
      batch.labels.push_back({"job_name", batch.copy(job)});
      batch.records.push_back({kT + 200'000'000, batch.copy("n1"), batch.copy(line), first,
                               first + 1, StreamKind::kPod});
    }
    p.process(batch);
    p.process(one(kT + 30 * kMin, "n1", "step 2", StreamKind::kPod, "job-a"));
    EXPECT_EQ(sink.got, std::vector<std::string>{"n1 taint pytorch-nccl-watchdog-timeout"})
        << b_first;

    Collect replayed;
    Pipeline r(shippedBank(), Taint{}, {&replayed});
    r.collect(batch, 0);
    r.finishReplay();
    EXPECT_EQ(replayed.got, std::vector<std::string>{"n1 taint pytorch-nccl-watchdog-timeout"})
        << b_first;
  }
}

// A hit stamped before the key's newest (one push whose later-stamped stream came first) is no
// burst of a rule without `burst`: the order of streams in a request must not decide.
TEST(CorrelatorTime, AnEarlierHitAfterALaterOneIsNoBurst) {
  const std::string line = kWatchdog;
  Collect sink;
  Pipeline p(shippedBank(), Taint{}, {&sink}, 1, 5 * kMin);
  RecordBatch batch;
  for (const auto& [job, at] : {std::pair<const char*, int64_t>{"job-b", kT + 1'500'000'000},
                                std::pair<const char*, int64_t>{"job-a", kT + 800'000'000}}) {
    const auto first = static_cast<uint32_t>(batch.labels.size());
    batch.labels.push_back({"job_name", batch.copy(job)});
    batch.records.push_back(
        {at, batch.copy("n1"), batch.copy(line), first, first + 1, StreamKind::kPod});
  }
  p.process(batch);
  p.process(one(kT + 30 * kMin, "n1", "step 2", StreamKind::kPod, "job-a"));
  EXPECT_EQ(sink.got, std::vector<std::string>{"n1 taint pytorch-nccl-watchdog-timeout"});
}

// Replay sees only hits: a node without one for over a week may have logged all along, so replay
// forgets no node. Here the UUID -> PCI alias of day 0 still names the GPU that a reset on day 8
// recovers (forgotten, the taint stayed for good).
TEST(CorrelatorTime, ReplayForgetsNoNodeItsHitsLeaveQuiet) {
  Collect sink;
  Pipeline p(shippedBank(), Taint{}, {&sink});
  RecordBatch b;
  const int64_t day = 24 * kHour;
  for (const auto& [time_ns, line] : std::vector<std::pair<int64_t, std::string>>{
           {kT, "NVRM: GPU at PCI:0000:a1:00: GPU-979426f2-893a-7cbb-c4cf-81472f89a462"},
           {kT + 8 * day, "NVRM: Xid (PCI:0000:a1:00): 48, pid=1, name=python3, DBE (0x1)"},
           {kT + 8 * day + 5 * kMin,
            "GPU reset executed: GPU-979426f2-893a-7cbb-c4cf-81472f89a462, success: true"},
           {kT + 8 * day + 20 * kMin, "systemd[1]: Started session 7."}}) {
    b.records.push_back({time_ns, "gpu-a", b.copy(line), 0, 0, StreamKind::kKernel});
  }
  // Another node's hit on day 7.5: the event time that would have forgotten gpu-a.
  b.records.push_back(
      {kT + 7 * day + 12 * kHour, "gpu-b", b.copy(kDown), 0, 0, StreamKind::kKernel});
  b.records.push_back(
      {kT + 7 * day + 12 * kHour + kMin, "gpu-b", b.copy(kActive), 0, 0, StreamKind::kKernel});
  p.collect(b, 0);
  p.finishReplay();
  EXPECT_EQ(sink.got,
            (std::vector<std::string>{"gpu-a taint xid-fatal", "gpu-a untaint xid-fatal"}));
}

// A taint says why its rule acted, in the bank's words: the operator reading the decision log or
// the node's Event sees the count and window, the lasting state, or the corroborating line.
TEST(CorrelatorTime, ATaintSaysWhyItsRuleActed) {
  class Reasons : public DecisionSink {
   public:
    void write(const Decision& d) override { got.push_back(d.rule + ": " + d.reason); }
    std::vector<std::string> got;
  };
  Reasons sink;
  Pipeline p(shippedBank(), Taint{}, {&sink});
  p.process(one(kT, "gpu-1", "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"));
  for (int i = 0; i < 3; ++i) {
    p.process(one(kT + i * kHour, "gpu-2",
                  "NVRM: Xid (PCI:0000:63:00): 31, name=python3, MMU Fault: ENGINE GR_HOST0 "
                  "HUBCLIENT_ESC0 FAULT_PDE"));
  }
  p.process(one(kT, "gpu-3", kDown));
  p.process(one(kT + 6 * kMin, "gpu-3", "systemd[1]: Started session 7."));
  const int64_t t4 = kT + 2 * kHour;  // after gpu-3's time: its DOWN is no late arrival
  p.process(one(t4, "gpu-4", kDown));
  p.process(one(t4 + 10 * kNanosPerSecond, "gpu-4", kActive));
  p.process(one(t4 + kMin, "gpu-4",
                "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion "
                "from peer 10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 "
                "(Recv)",
                StreamKind::kPod, "train-a"));
  EXPECT_EQ(sink.got,
            (std::vector<std::string>{
                "xid-fatal: a fatal hit on pci=0000:44:00",
                "xid-31-repeated: 3 hits within 1d on pci=0000:63:00",
                "ib-port-down-lasting: a fatal hit with no ib-port-active or node-shutdown or "
                "node-boot within 5m on pci=0000:ab:00.0, device=mlx5_5, port=1",
                "nccl-ib-completion-error: corroborated by infiniband-port-state within 10m"}));
}

TEST(CorrelatorTime, ReplayTakesOneSecondsLinesInTheirInputOrder) {
  // A DOWN and the ACTIVE after it in one second of a syslog archive (no sub-second times): the
  // port was down for less than a second. "Link ACTIVE" sorts before "Link DOWN" as text.
  Collect sink;
  Pipeline p(shippedBank(), Taint{}, {&sink});
  RecordBatch b;
  for (const auto& [time_ns, line] : std::vector<std::pair<int64_t, std::string>>{
           {kT, kDown}, {kT, kActive}, {kT + 10 * kMin, "systemd[1]: Started session 7."}}) {
    b.records.push_back({time_ns, "gpu-1", b.copy(line), 0, 0, StreamKind::kKernel});
  }
  p.collect(b, 0);
  p.finishReplay();
  EXPECT_EQ(sink.got, std::vector<std::string>{});
}

TEST(CorrelatorTime, AFlapFaultRecoversWhenThePortStaysUp) {
  // Three DOWN-ACTIVE flaps of one port in an hour taint (ib-port-flap); ACTIVE and no DOWN for
  // 30 minutes lift it. The ACTIVE that completes the third flap is the recovery signal.
  Collect sink;
  Pipeline p(shippedBank(), Taint{}, {&sink});
  for (int64_t i = 0; i < 3; ++i) {
    p.process(one(kT + i * 10 * kMin, "gpu-1", kDown));
    p.process(one(kT + i * 10 * kMin + 5 * kNanosPerSecond, "gpu-1", kActive));
  }
  ASSERT_EQ(sink.got, std::vector<std::string>{"gpu-1 taint ib-port-flap"});
  p.process(one(kT + 51 * kMin, "gpu-1", "systemd[1]: Started session 7."));
  EXPECT_EQ(sink.got,
            (std::vector<std::string>{"gpu-1 taint ib-port-flap", "gpu-1 untaint ib-port-flap"}));
}

constexpr const char* kBank = R"(
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
  - id: ok
    streams: [pod]
    severity: info
    pattern: 'all good'
    examples: {match: ['all good']}
rules:
  - id: flap
    signature: port
    severity: warning
    entity: [port]
    flap: {field: state, down: [DOWN], up: [ACTIVE], within: 10m}
    count: 2
    window: 1h
    recovery: {quiet: 2h}
  - id: port-down
    signature: port
    severity: info
    where: {state: [DOWN]}
  - id: down-lasting
    signature: port
    severity: warning
    where: {state: [DOWN]}
    entity: [port]
    count: 3
    window: 1h
    unless_followed_by: {rules: [up], within: 5m}
  - id: up
    signature: port
    severity: info
    where: {state: [ACTIVE]}
    entity: [port]
  - id: nccl
    signature: nccl
    severity: warning
    count: 2
    window: 1h
    corroborated_by: {rules: [port-down], within: 10m}
    unless_followed_by: {rules: [ok], within: 2h}
    recovery: {quiet: 1h}
  - id: ok
    signature: ok
    severity: info
)";

class Held : public ::testing::Test {
 protected:
  Held() : bank_(loadBank({{"t.yaml", kBank}})), pipeline_(bank_, Taint{}, {&sink_}) {}
  void feed(int64_t time_ns, const std::string& line, StreamKind kind = StreamKind::kKernel) {
    pipeline_.process(one(time_ns, "n1", line, kind));
  }
  std::shared_ptr<const Bank> bank_;
  Collect sink_;
  Pipeline pipeline_;
};

TEST_F(Held, AHitCorroboratedWhileHeldIsDecidedOnce) {
  feed(kT, "nccl timeout", StreamKind::kPod);  // held for 2 h
  feed(kT + kMin, "port 9 DOWN");              // corroborates it: a fault now
  ASSERT_EQ(sink_.got, std::vector<std::string>{"n1 taint nccl"});
  for (int64_t h = 1; h <= 4; ++h) {  // past the hold and the quiet hour: cleared once, no crash
    feed(kT + h * kHour, "port 8 ACTIVE");
  }
  EXPECT_EQ(sink_.got, (std::vector<std::string>{"n1 taint nccl", "n1 untaint nccl"}));
}

TEST_F(Held, AHeldHitCountsTowardItsRulesCount) {
  feed(kT, "port 1 DOWN");
  feed(kT + 10 * kMin, "port 2 ACTIVE");  // past the hold: one counted hit of three
  EXPECT_EQ(sink_.got, std::vector<std::string>{});
  feed(kT + 20 * kMin, "port 1 DOWN");
  feed(kT + 40 * kMin, "port 1 DOWN");
  feed(kT + 50 * kMin, "port 2 ACTIVE");
  EXPECT_EQ(sink_.got, std::vector<std::string>{"n1 taint down-lasting"});
}

TEST_F(Held, AFlapDuringItsFaultMovesTheQuietTimer) {
  for (int64_t i = 0; i < 3; ++i) {  // the third flap comes during the fault
    feed(kT + i * kMin, "port 1 DOWN");
    feed(kT + i * kMin + kNanosPerSecond, "port 1 ACTIVE");
  }
  ASSERT_EQ(sink_.got, std::vector<std::string>{"n1 taint flap"});
  feed(kT + 10 * kHour, "port 2 ACTIVE");
  EXPECT_EQ(sink_.got, (std::vector<std::string>{"n1 taint flap", "n1 untaint flap"}));
}

TEST(CorrelatorTime, AFlapFaultRecoversWhateverTheRuleOrder) {
  // The recovery rule listed before the flap rule: the ACTIVE that completes the second flap
  // still starts the recovery of the fault it completes.
  const auto bank = loadBank({{"t.yaml", R"(
signatures:
  - id: port
    streams: [kernel]
    severity: info
    pattern: 'port (?P<port>\d+) (?P<state>DOWN|ACTIVE)'
    examples: {match: ['port 1 DOWN']}
rules:
  - id: up
    signature: port
    severity: info
    where: {state: [ACTIVE]}
    entity: [port]
  - id: flap
    signature: port
    severity: warning
    entity: [port]
    flap: {field: state, down: [DOWN], up: [ACTIVE], within: 10m}
    count: 2
    window: 1h
    recovery: {by: [up], stable: 30m}
)"}});
  Collect sink;
  Pipeline p(bank, Taint{}, {&sink});
  for (int64_t i = 0; i < 2; ++i) {
    p.process(one(kT + i * kMin, "n1", "port 1 DOWN"));
    p.process(one(kT + i * kMin + kNanosPerSecond, "n1", "port 1 ACTIVE"));
  }
  ASSERT_EQ(sink.got, std::vector<std::string>{"n1 taint flap"});
  p.process(one(kT + 32 * kMin, "n1", "port 2 DOWN"));
  EXPECT_EQ(sink.got, (std::vector<std::string>{"n1 taint flap", "n1 untaint flap"}));
}

TEST(Bank, RefusesDurationsPastTenYearsAndHeldClusterHits) {
  const std::string bad = std::string(kBank) + R"(  - id: long
    signature: nccl
    severity: warning
    count: 2
    window: 100000d
  - id: held-cluster
    signature: nccl
    severity: warning
    count: 2
    window: 1h
    cluster: {nodes: 3, within: 10m}
    unless_followed_by: {rules: [ok], within: 5m}
)";
  try {
    loadBank({{"b.yaml", bad}});
    FAIL();
  } catch (const BankError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("b.yaml:59: rule long: window is not a duration"), std::string::npos)
        << what;
    EXPECT_NE(what.find("rule held-cluster: cluster and unless_followed_by do not combine"),
              std::string::npos)
        << what;
  }
}

TEST(CorrelatorTime, JobRunsAreKeptOnlyForSuspectsPeersAndOnlyForItsWindow) {
  RecordBatch pods;
  pods.labels = {{"batch.kubernetes.io/job-name", "train-0"},
                 {"batch.kubernetes.io/job-name", "train-1"}};
  pods.records.push_back({kT, "n1", "step 1", 0, 1, StreamKind::kPod});
  pods.records.push_back({kT, "n2", "step 1", 1, 2, StreamKind::kPod});
  Pipeline without(loadBank({{"t.yaml", kBank}}), Taint{}, {});
  without.process(pods);
  EXPECT_EQ(without.correlator().jobRuns(), 0U);
  Pipeline with(shippedBank(), Taint{}, {});  // neuron.yaml's HANG_ON_COLLECTIVES suspects peers
  with.process(pods);
  EXPECT_EQ(with.correlator().jobRuns(), 2U);
  with.process(one(kT + 9 * kMin, "n3", "systemd[1]: Started session 7."));
  EXPECT_EQ(with.correlator().jobRuns(), 2U);
  with.process(one(kT + 60 * kMin, "n3", "systemd[1]: Started session 8."));
  with.process(one(kT + 61 * kMin, "n3", "systemd[1]: Started session 9."));
  EXPECT_EQ(with.correlator().jobRuns(), 0U);
}

// A job's pod lines split into runs at gaps over the suspects_peers window (10m): a node that
// logged for the job, went quiet and came back runs two.
TEST(CorrelatorTime, AJobRunEndsAtAGapLongerThanTheWindow) {
  RecordBatch pods;
  pods.labels = {{"batch.kubernetes.io/job-name", "train"}};
  for (const int64_t at : {kT, kT + 5 * kMin, kT + 16 * kMin}) {
    pods.records.push_back({at, "n1", "step", 0, 1, StreamKind::kPod});
  }
  Pipeline p(shippedBank(), Taint{}, {});
  p.process(pods);
  EXPECT_EQ(p.correlator().jobRuns(), 2U);
  p.process(one(kT + 10 * kMin, "n1", "step", StreamKind::kPod, "train"));  // joins the two
  EXPECT_EQ(p.correlator().jobRuns(), 1U);
}

// A Neuron hang's suspects, live (max_lag 5m, lines in the order given, one per batch) and in
// replay, which take the same: the node that ran the job (a pod line of it within 10 minutes
// before the first report) and did not report the hang.
TEST(CorrelatorTime, AHangsSuspectsAreReplays) {
  const std::string hang = "NEURON_HW_ERR=HANG_ON_COLLECTIVES instance-id=i-1 nd-id=0 nc-id=0";
  const std::string hang_nc1 = "NEURON_HW_ERR=HANG_ON_COLLECTIVES instance-id=i-1 nd-id=0 nc-id=1";
  const auto s = [](int64_t sec) { return kT + sec * kNanosPerSecond; };
  const auto ms = [](int64_t msec) { return kT + msec * 1'000'000; };
  const auto hang_nc = [&](int nc) { return hang.substr(0, hang.size() - 1) + std::to_string(nc); };
  auto pods = [&](int64_t sec, std::initializer_list<const char*> nodes, const char* job) {
    std::vector<Line> lines;
    for (const char* node : nodes) {
      lines.push_back({s(sec), node, "step", StreamKind::kPod, job});
    }
    return lines;
  };
  auto join = [](std::initializer_list<std::vector<Line>> parts) {
    std::vector<Line> all;
    for (const auto& part : parts) {
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  };
  struct Case {
    const char* name;
    std::vector<Line> lines;
    std::vector<std::string> want;  // "node at-second (first: reporter) nc<evidence's nc-id>"
  };
  // A job of a, b, x and z from 400 s to 2800 s, its pods logging every 300 s; every node reports
  // a hang at 1000 s; then `then` (lines of 1600 s to 2800 s, in time order but within a second).
  auto all_report = [&](const std::vector<Line>& then) {
    std::vector<Line> lines;
    for (int64_t sec = 400; sec <= 1000; sec += 300) {
      const std::vector<Line> p = pods(sec, {"a", "b", "x", "z"}, "train");
      lines.insert(lines.end(), p.begin(), p.end());
    }
    int64_t at = ms(1000'500);
    for (const char* node : {"a", "b", "x", "z"}) {
      lines.push_back({at, node, hang});
      at += 100'000'000;
    }
    auto it = then.begin();
    for (int64_t sec = 1300; sec <= 2800; sec += 300) {
      for (; it != then.end() && it->time_ns < s(sec); ++it) {
        lines.push_back(*it);
      }
      const std::vector<Line> p = pods(sec, {"a", "b", "x", "z"}, "train");
      lines.insert(lines.end(), p.begin(), p.end());
    }
    lines.insert(lines.end(), it, then.end());
    lines.push_back({s(4000), "s", "x"});
    return lines;
  };
  const std::vector<Case> cases = {
      {"a lagging report counts, a report after the window starts another hang",
       join({pods(900, {"a", "b", "c", "s"}, "train"),
             pods(1000, {"a", "b", "c", "s"}, "train"),
             {{s(1000), "a", hang}, {s(1001), "c", hang}},
             pods(1200, {"a", "b", "c", "s"}, "train"),
             {{s(1601), "a", hang_nc1}, {s(1360), "b", hang}, {s(2400), "s", "x"}}}),
       {"s 1600 (first: a) nc0"}},
      {"a node whose pods were quiet for the window before is none of the hang's",
       join({pods(100, {"a", "b", "c", "d"}, "train"),
             pods(1000, {"c", "d", "e"}, "train"),
             {{s(1000), "c", hang}, {s(1001), "d", hang}, {s(1002), "a", hang}},
             pods(1010, {"a", "b"}, "train"),
             {{s(2000), "s", "x"}}}),
       {"e 1600 (first: c) nc0"}},
      {"reports of one time: the first by node name and line, whichever is read first",
       join({pods(900, {"a", "b", "c", "s"}, "train"),
             {{s(1000), "b", hang}},
             {{s(1000), "a", hang_nc1}},
             {{s(1000), "a", hang}},
             {{s(2400), "s", "x"}}}),
       {"c 1600 (first: a) nc0", "s 1600 (first: a) nc0"}},
      {"a node that left the job and came back after the hang ran none of it",
       join({pods(100, {"s"}, "train"),
             pods(900, {"a", "b", "c", "d"}, "train"),
             {{s(1000), "a", hang}, {s(1001), "b", hang}, {s(1002), "c", hang}},
             {{s(1950), "z", "x"}},
             pods(2500, {"s"}, "train"),
             {{s(4000), "z", "x"}}}),
       {"d 1600 (first: a) nc0"}},
      {"a job its nodes start after the report is none of its hang",
       join({pods(900, {"a", "b", "d"}, "x"),
             {{s(1000), "a", hang}, {s(1001), "b", hang}},
             pods(1300, {"a", "c"}, "y"),
             {{s(4000), "z", "x"}}}),
       {"d 1600 (first: a) nc0"}},
      {"a reporter whose pods were quiet between the first report and its own is one",
       join({pods(900, {"a", "b", "c", "d", "s"}, "train"),
             pods(960, {"a", "b", "c", "d", "s"}, "train"),
             {{s(1000), "a", hang}, {s(1001), "c", hang}, {s(1002), "d", hang}},
             {{s(1580), "b", hang}},
             {{s(2400), "z", "x"}}}),
       {"s 1600 (first: a) nc0"}},
      {"a node that moved on to another job is none of the old one's",
       join({pods(1500, {"n1", "n2", "n3", "n4", "n5", "n6"}, "x"),
             pods(2000, {"n1", "n2", "n3", "n4", "n5", "n6"}, "x"),
             pods(2060, {"n1", "n2", "n3", "n4"}, "y"),
             pods(2300, {"n1", "n2", "n3", "n4"}, "y"),
             {{s(2400), "n1", hang}, {s(2401), "n2", hang}, {s(2402), "n3", hang}},
             {{s(4000), "z", "x"}}}),
       {"n4 3000 (first: n1) nc0"}},
      // A review's cases: windows to the nanosecond from the first report (1000.5 s to 1600.5 s)
      // made x's report at 1600.6 s start the next hang, which x's of 1600.9 s (kept as the
      // latest of its second) did once x's of 1600.6 s was dropped; and read out of order, the
      // repeat dropped was another.
      {"a node's reports of one second are all in a window or all out",
       all_report({{ms(1600'300), "x", hang_nc(1)},
                   {ms(1600'600), "x", hang_nc(2)},
                   {ms(1600'900), "x", hang_nc(3)},
                   {s(1700), "a", hang},
                   {ms(2200'700), "b", hang}}),
       {"b 2200 (first: x) nc1", "z 2200 (first: x) nc1"}},
      {"a node's reports of one second are one, whichever of them is read first",
       all_report({{ms(1600'900), "x", hang_nc(1)},
                   {ms(1600'300), "x", hang_nc(1)},
                   {ms(1600'600), "x", hang_nc(1)},
                   {s(1700), "a", hang},
                   {ms(2200'700), "b", hang}}),
       {"b 2200 (first: x) nc1", "z 2200 (first: x) nc1"}},
      {"a report in the window's last second is in it, one in the next second is not",
       all_report({{ms(1600'300), "x", hang_nc(1)},
                   {ms(1600'600), "x", hang_nc(2)},
                   {ms(1600'900), "x", hang_nc(3)},
                   {ms(2199'900), "a", hang},
                   {ms(2200'700), "b", hang},
                   {s(2201), "a", hang},
                   {s(2202), "x", hang}}),
       {"b 2200 (first: x) nc1", "z 2200 (first: x) nc1", "z 2800 (first: b) nc0"}},
      // A review's case: asked by the end of the first report's second (1000.999 s), n ran other
      // (its pod line of 1000.5 s) in live, but train in replay, where its pod line of 1600.1 s,
      // after the window but less than the window after its run's end (1000.2 s), joined the run
      // across the time asked; live had decided before reading it. Asked at the window's start,
      // n ran train, before that line and after.
      {"a pod line after the window changes nothing of the hang",
       join({pods(900, {"a", "b", "c", "n"}, "train"),
             {{ms(1000'100), "a", hang},
              {ms(1000'200), "b", hang},
              {ms(1000'200), "n", "step", StreamKind::kPod, "train"},
              {ms(1000'300), "c", hang},
              {ms(1000'500), "n", "step", StreamKind::kPod, "other"},
              {s(1900), "z", "x"},
              {ms(1600'100), "n", "step", StreamKind::kPod, "train"}}}),
       {"n 1600 (first: a) nc0"}},
      {"a node that joins after the hang began is not named",
       join({pods(900, {"a", "b", "c", "d"}, "train"),
             {{s(1000), "a", hang}, {s(1001), "b", hang}, {s(1002), "c", hang}},
             pods(1200, {"e"}, "train"),
             {{s(4000), "z", "x"}}}),
       {"d 1600 (first: a) nc0"}},
  };
  struct Suspects : DecisionSink {
    void write(const Decision& d) override {
      ASSERT_EQ(d.action, Decision::Action::kSuspect);
      const std::string& reason = d.reason;
      got.push_back(d.node + " " + std::to_string((d.time_ns - kT) / kNanosPerSecond) + " " +
                    reason.substr(reason.find("(first: ")));
      got.back().resize(got.back().find(')') + 1);
      got.back() += " nc" + d.evidence.at(0).line.substr(d.evidence.at(0).line.size() - 1);
    }
    std::vector<std::string> got;
  };
  for (const Case& c : cases) {
    Suspects live;
    {
      Pipeline p(shippedBank(), Taint{}, {&live}, 1, 5 * kMin);
      for (const Line& l : c.lines) {
        p.process(one(l.time_ns, l.node, l.text, l.kind, l.job));
      }
    }
    Suspects replay;
    {
      Pipeline p(shippedBank(), Taint{}, {&replay});
      for (const Line& l : c.lines) {
        p.collect(one(l.time_ns, l.node, l.text, l.kind, l.job), 0);
      }
      p.finishReplay();
    }
    EXPECT_EQ(replay.got, c.want) << c.name;
    EXPECT_EQ(live.got, c.want) << c.name;
  }
}

// A review's case: two suspects_peers rules, of 10 and 30 minutes. A job's runs on a node were
// joined across gaps up to the longest window, so n's train pod line of 1650 s, after the short
// rule's window [1000 s, 1600 s), joined its line of 350 s into a run across 1000 s in replay
// (n named by the short rule, whose lookback from 1000 s does not reach 350 s), where live had
// decided before reading it. Runs join across gaps up to the shortest window: n ran train at
// 1000 s for the long rule only, live as in replay.
TEST(CorrelatorTime, AHangOfTheShorterOfTwoWindowsIsReplays) {
  std::vector<RuleFile> files = embeddedRuleFiles();
  files.push_back({"long.yaml", R"(rules:
  - id: hang-30m
    signature: neuron-hw-error
    severity: info
    where: {type: [HANG_ON_COLLECTIVES]}
    suspects_peers: {within: 30m}
)"});
  const std::shared_ptr<const Bank> bank = loadBank(files);
  const std::string hang = "NEURON_HW_ERR=HANG_ON_COLLECTIVES instance-id=i-1 nd-id=0 nc-id=0";
  const auto s = [](int64_t sec) { return kT + sec * kNanosPerSecond; };
  const std::vector<Line> lines = {{s(350), "n", "step", StreamKind::kPod, "train"},
                                   {s(900), "a", "step", StreamKind::kPod, "train"},
                                   {s(900), "b", "step", StreamKind::kPod, "train"},
                                   {s(900), "c", "step", StreamKind::kPod, "train"},
                                   {s(1000), "a", hang},
                                   {s(1001), "b", hang},
                                   {s(1002), "c", hang},
                                   {s(1900), "z", "systemd[1]: Started session 7."},
                                   {s(1650), "n", "step", StreamKind::kPod, "train"},
                                   {s(4000), "z", "systemd[1]: Started session 8."}};
  const auto decide = [&](bool in_replay) {
    Collect sink;
    Pipeline p(bank, Taint{}, {&sink}, 1, in_replay ? 0 : 5 * kMin);
    for (const Line& l : lines) {
      if (in_replay) {
        p.collect(one(l.time_ns, l.node, l.text, l.kind, l.job), 0);
      } else {
        p.process(one(l.time_ns, l.node, l.text, l.kind, l.job));
      }
    }
    if (in_replay) {
      p.finishReplay();
    }
    return sink.got;
  };
  const std::vector<std::string> want = {"n suspect hang-30m"};
  EXPECT_EQ(decide(true), want);
  EXPECT_EQ(decide(false), want);
}

// Windows still open at the end of input: replay decides them by their end, as live does once
// the newest time has passed them. The hang reported from -30 s ends its window before gpu-2's
// nccl-error windows (its jobs train-b from 0 s and train-c from 10 s, held for their other
// nodes): the second job's error taints gpu-2 when its window closes.
TEST(CorrelatorTime, ReplaysEndDecidesOpenWindowsInLivesOrder) {
  const auto s = [](int64_t sec) { return kT + sec * kNanosPerSecond; };
  const std::string hang = "NEURON_HW_ERR=HANG_ON_COLLECTIVES instance-id=i-1 nd-id=0 nc-id=0";
  const char* nccl_system =
      "torch.distributed.DistBackendError: NCCL error in: "
      "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1333, unhandled system error (run "
      "with NCCL_DEBUG=INFO for details), NCCL version 2.18.1";
  const std::vector<Line> lines = {{s(-60), "trn-a", "step", StreamKind::kPod, "llama"},
                                   {s(-60), "trn-b", "step", StreamKind::kPod, "llama"},
                                   {s(-60), "trn-c", "step", StreamKind::kPod, "llama"},
                                   {s(-30), "trn-a", hang},
                                   {s(-29), "trn-b", hang},
                                   {s(0), "gpu-2", nccl_system, StreamKind::kPod, "train-b"},
                                   {s(10), "gpu-2", nccl_system, StreamKind::kPod, "train-c"}};
  std::vector<Line> then_more = lines;  // a line an hour later: advance() takes every window
  then_more.push_back({s(3600), "z", "systemd[1]: Started session 7."});
  const auto replay = [](const std::vector<Line>& input) {
    Collect sink;
    Pipeline p(shippedBank(), Taint{}, {&sink});
    for (const Line& l : input) {
      p.collect(one(l.time_ns, l.node, l.text, l.kind, l.job), 0);
    }
    p.finishReplay();
    return sink.got;
  };
  const std::vector<std::string> want = {"trn-c suspect neuron-hang-on-collectives",
                                         "gpu-2 taint nccl-error"};
  EXPECT_EQ(replay(lines), want);
  EXPECT_EQ(replay(then_more), want);
  EXPECT_EQ(live(5 * kMin, then_more), want);
}

TEST(CorrelatorTime, ANodeSilentForForgetAfterIsForgottenUnlessItHoldsAFault) {
  constexpr int64_t kDay = 24 * kHour;
  Pipeline p(shippedBank(), Taint{}, {}, 1, 10 * kMin);
  // The shipped bank's longest duration is under a week: nodes are forgotten after a week.
  ASSERT_EQ(p.correlator().forgetAfterNs(), Correlator::kForgetAfterNs);
  const char* xid13 =
      "NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp "
      "Exception on (GPC 7, TPC 7, SM 0): Illegal Instruction Parameter";
  const char* xid79 = "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus";
  p.process(one(kT, "counted", xid13));  // a warning rule's counter holds it
  p.process(
      one(kT, "aliased", "NVRM: GPU at PCI:0000:a1:00: GPU-979426f2-893a-7cbb-c4cf-81472f89a462"));
  p.process(one(kT, "tainted", xid79));
  p.process(one(kT, "heard", xid13));
  ASSERT_EQ(p.correlator().nodes(), 4U);
  for (int64_t day = 1; day <= 8; ++day) {  // "heard" keeps sending lines that hit nothing
    p.process(one(kT + day * kDay, "heard", "systemd[1]: Started session 7."));
    EXPECT_EQ(p.correlator().nodes(), day <= 7 ? 4U : 2U) << "day " << day;
  }
  EXPECT_EQ(p.correlator().state("tainted"), Correlator::NodeState::kTainted);
  // A forgotten node starts afresh: its next fault taints it as it would any node.
  Collect sink;
  Pipeline q(shippedBank(), Taint{}, {&sink}, 1, 10 * kMin);
  q.process(one(kT, "gpu-1", xid13));
  q.process(one(kT + 8 * kDay, "gpu-2", "systemd[1]: Started session 7."));
  EXPECT_EQ(q.correlator().nodes(), 0U);
  q.process(one(kT + 8 * kDay + kMin, "gpu-1", xid79));
  EXPECT_EQ(sink.got, std::vector<std::string>{"gpu-1 taint xid-fatal"});
}

TEST(CorrelatorTime, NodesAreForgottenOnlyAfterTheBanksLongestDuration) {
  const std::string bank = std::string(kBank) + R"(  - id: long
    signature: nccl
    severity: warning
    count: 2
    window: 10d
)";
  Pipeline p(loadBank({{"t.yaml", bank}}), Taint{}, {}, 1, 10 * kMin);
  EXPECT_EQ(p.correlator().forgetAfterNs(), 240 * kHour + 10 * kMin);
  p.process(one(kT, "n1", "nccl timeout", StreamKind::kPod));  // counted by `long` for 10 days
  p.process(one(kT + 192 * kHour, "n2", "step 1", StreamKind::kPod));
  EXPECT_EQ(p.correlator().nodes(), 1U);  // a week on, still inside its window
  p.process(one(kT + 241 * kHour, "n2", "step 2", StreamKind::kPod));
  EXPECT_EQ(p.correlator().nodes(), 0U);
}

// One pod line stamped in 2255 (its shipper took the time from the line's text) while gpu-2's
// port is down for 30 s: live, its time is taken as a minute past the service's clock, so gpu-3's
// log is not 230 years ahead of gpu-2's and gpu-2 is not silent, its DOWN not decided lasting.
std::vector<std::string> farFuture(int64_t max_lag_ns, std::function<int64_t()> clock) {
  return live(max_lag_ns,
              {{kT, "gpu-2", kDown},
               {9'000'000'000 * kNanosPerSecond, "gpu-3", "step 10 loss 0.1", StreamKind::kPod},
               {kT + 30 * kNanosPerSecond, "gpu-2", kActive}},
              std::move(clock));
}

TEST(CorrelatorTime, ARecordFarAheadOfTheClockIsTakenAsAMinuteAhead) {
  const auto clock = [] { return kT + 30 * kNanosPerSecond; };
  EXPECT_EQ(farFuture(10 * kMin, clock), std::vector<std::string>{});
  EXPECT_EQ(farFuture(0, clock), std::vector<std::string>{});
  // Without the clock (replay's setting) the line's own time decides.
  EXPECT_EQ(farFuture(10 * kMin, {}), std::vector<std::string>{"gpu-2 taint ib-port-down-lasting"});

  Pipeline p(shippedBank(), Taint{}, {}, 1, 10 * kMin, clock);
  BatchMatch m;
  RecordBatch b = one(kT, "gpu-2", kDown);
  b.records.push_back({kT + kMaxAheadNs + 31 * kNanosPerSecond, b.copy("gpu-3"),
                       b.copy("mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link DOWN"), 0, 0,
                       StreamKind::kKernel});
  p.match(0, b, &m);
  EXPECT_EQ(m.ahead, 1u);
  EXPECT_EQ(m.newest_ns, kT + 30 * kNanosPerSecond + kMaxAheadNs);
  ASSERT_EQ(m.hits.size(), 2u);
  EXPECT_EQ(m.hits[1].time_ns, kT + 30 * kNanosPerSecond + kMaxAheadNs);
}

// Every rank of a hung job prints its own watchdog timeout line: the first counts and the others
// are repeats inside its dedup. A kernel line of the node after them still corroborates the
// counted one at once, however many repeats came between.
TEST(CorrelatorTime, RepeatsOfACountedPodHitDoNotHideItFromAKernelLine) {
  Collect sink;
  Pipeline p(shippedBank(), Taint{}, {&sink});
  for (int rank = 0; rank < 8; ++rank) {
    std::string line = kWatchdog;
    line.replace(line.find("Rank 0"), 6, "Rank " + std::to_string(rank));
    p.process(one(kT, "gpu-1", line, StreamKind::kPod, "train-a"));
  }
  p.process(one(kT + kNanosPerSecond, "gpu-1", kWatchdog, StreamKind::kPod, "train-a"));
  p.process(one(kT + 2 * kMin, "gpu-1", kDown));
  EXPECT_EQ(sink.got, std::vector<std::string>{"gpu-1 taint pytorch-nccl-watchdog-timeout"});
}

// A fault's quiet period runs from its newest hit. A hit stamped before that one (another pod's
// stream of the node arriving minutes later, or a pod's line stamped in the past by a shipper
// that takes the time from the text) came earlier in event time, and must not bring the period's
// end forward: replay, which sorts the hits, does not. gpu-1's newest hit is at kT + 20h: its
// taint holds until a day after, `late` arriving before or after that hit.
std::vector<std::string> quietAfter(const Line& late, bool late_first) {
  const Line newest{kT + 20 * kHour, "gpu-1", kWatchdog, StreamKind::kPod, "train-a"};
  return live(10 * kMin,
              {{kT, "gpu-1", kWatchdog, StreamKind::kPod, "train-a"},
               {kT + 2 * kMin, "gpu-1", kDown},  // corroborates it: tainted
               {kT + 3 * kMin, "gpu-1", kActive},
               late_first ? late : newest,
               late_first ? newest : late,
               {kT + 44 * kHour - 2 * kMin, "gpu-1", "systemd[1]: Started session 7."}},
              [] { return kT + 72 * kHour; });
}

TEST(CorrelatorTime, AnEarlierStampedHitDoesNotShortenItsFaultsQuietPeriod) {
  const std::vector<std::string> tainted{"gpu-1 taint pytorch-nccl-watchdog-timeout"};
  // Five minutes late (within max_lag), and stamped with Go's zero time (taken as 1717).
  for (const int64_t t : {kT + 20 * kHour - 5 * kMin, INT64_MIN}) {
    const Line late{t, "gpu-1", kWatchdog, StreamKind::kPod, "train-b"};
    EXPECT_EQ(quietAfter(late, true), tainted) << formatRfc3339(t);
    EXPECT_EQ(quietAfter(late, false), tainted) << formatRfc3339(t);
  }
}

// A rule's `window` spans its counted hits, whichever arrives first. gpu-1 ran job train-a's hung
// collective at kT (counted once its cluster window closed); train-b's timeout, stamped `late_ns`,
// arrives after it (another pod's stream, a backlog). Replay, sorting the hits, counts two jobs
// within 1d only if that stamp is within a day of kT.
std::vector<std::string> secondJobAt(int64_t late_ns) {
  return live(10 * kMin,
              {{kT, "gpu-1", kWatchdog, StreamKind::kPod, "train-a"},
               {kT + 25 * kMin, "gpu-1", "systemd[1]: Started session 7."},
               {late_ns, "gpu-1", kWatchdog, StreamKind::kPod, "train-b"},
               {kT + 30 * kMin, "gpu-1", "systemd[1]: Started session 8."}},
              [] { return kT + 30 * kMin; });
}

TEST(CorrelatorTime, AHitArrivingAfterALaterOneCountsOnlyWithinItsWindow) {
  EXPECT_EQ(secondJobAt(kT - 2 * kHour),
            std::vector<std::string>{"gpu-1 taint pytorch-nccl-watchdog-timeout"});
  EXPECT_EQ(secondJobAt(kT - 72 * kHour), std::vector<std::string>{});
  EXPECT_EQ(secondJobAt(INT64_MIN), std::vector<std::string>{});  // Go's zero time: 1717
}

// Go's zero time (year 1, taken as 1717) on a line of job train-a's pod: train-a's timeout two
// hours on is a new episode all the same, which the node's port going down corroborates. The
// 1717 stamp is further from kT than int64 nanoseconds hold: subtracted, it wrapped, and the
// later episode was taken as inside train-a's dedup, a repeat that nothing corroborates.
std::vector<std::string> episodeAfter(bool zero_time) {
  std::vector<Line> lines{{kT, "gpu-1", kWatchdog, StreamKind::kPod, "train-a"},
                          {kT + 2 * kHour, "gpu-1", kWatchdog, StreamKind::kPod, "train-a"},
                          {kT + 2 * kHour + kMin, "gpu-1", kDown},
                          {kT + 2 * kHour + 2 * kMin, "gpu-1", kActive}};
  if (zero_time) {
    lines.insert(lines.begin() + 1, {INT64_MIN, "gpu-1", kWatchdog, StreamKind::kPod, "train-a"});
  }
  return live(10 * kMin, lines, [] { return kT + 3 * kHour; });
}

TEST(CorrelatorTime, APodLineStampedInYearOneHidesNoLaterEpisode) {
  const std::vector<std::string> want{"gpu-1 taint pytorch-nccl-watchdog-timeout"};
  EXPECT_EQ(episodeAfter(false), want);
  EXPECT_EQ(episodeAfter(true), want);
}

// A kernel line stamped with year 1 (taken as 1717, as a shipper that fails to parse a time may
// write it) then the GPU's Xid 63 at kT and two hours on: two separate rows within a day, which
// xid-63-repeated taints for. The 1717 line is over 300 years before kT, no burst of it:
// subtracted, the difference wrapped and the Xid at kT was taken as inside its minute.
TEST(CorrelatorTime, AKernelLineStampedInYearOneMakesNoBurstOfALaterHit) {
  constexpr const char* kXid63 =
      "NVRM: Xid (PCI:0000:3b:00): 63, pid=1234, name=python3, Row Remapper: New row marked for "
      "remapping, reset gpu to activate.";
  const std::vector<Line> lines{
      {INT64_MIN, "gpu-1", kXid63}, {kT, "gpu-1", kXid63}, {kT + 2 * kHour, "gpu-1", kXid63}};
  EXPECT_EQ(live(10 * kMin, lines, [] { return kT + 3 * kHour; }),
            std::vector<std::string>{"gpu-1 taint xid-63-repeated"});
}

// Live, a hit more than max_lag behind the newest time is counted as late: its node may have been
// found silent meanwhile, so an operator sees where live may differ from replay. gpu-1's Xid 63
// at kT + 5m comes after gpu-3's line at kT + 30m (25 minutes behind, late); its next at
// kT + 25m (5 minutes behind) is not late.
TEST(CorrelatorTime, HitsMoreThanMaxLagBehindTheNewestTimeAreCountedLate) {
  constexpr const char* kXid63 =
      "NVRM: Xid (PCI:0000:3b:00): 63, pid=1234, name=python3, Row Remapper: New row marked for "
      "remapping, reset gpu to activate.";
  Collect sink;
  Pipeline p(shippedBank(), Taint{}, {&sink}, 1, 10 * kMin, [] { return kT + kHour; });
  p.process(one(kT, "gpu-1", kXid63));
  p.process(one(kT + 30 * kMin, "gpu-3", "systemd[1]: Started session 7."));
  EXPECT_EQ(p.correlatorStats().late, 0U);
  p.process(one(kT + 5 * kMin, "gpu-1", kXid63));
  EXPECT_EQ(p.correlatorStats().late, 1U);
  p.process(one(kT + 25 * kMin, "gpu-1", kXid63));
  EXPECT_EQ(p.correlatorStats().late, 1U);
  // Replay (max_lag 0) sorts its hits: none is late.
  Pipeline replay(shippedBank(), Taint{}, {&sink});
  replay.process(one(kT + 30 * kMin, "gpu-3", "systemd[1]: Started session 7."));
  replay.process(one(kT, "gpu-1", kXid63));
  EXPECT_EQ(replay.correlatorStats().late, 0U);
}

// gpu-2's port goes down at kT and is ACTIVE again at kT + 4m50s, within ib-port-down-lasting's
// five minutes; a line of one of its pods stamped kT + 5m10s (its stream a little ahead of the
// kernel's, or a minute ahead of the clock as a shipper took it from the text) arrives first.
// The pod's line must not decide the kernel's port DOWN lasting: replay, in time order, does not.
TEST(CorrelatorTime, APodLineAheadOfItsNodesKernelLogDecidesNoKernelTimer) {
  const std::vector<Line> lines{
      {kT, "gpu-2", kDown},
      {kT + 5 * kMin + 10 * kNanosPerSecond, "gpu-2", "step 10 loss 0.1", StreamKind::kPod},
      {kT + 4 * kMin + 50 * kNanosPerSecond, "gpu-2", kActive},
      {kT + 6 * kMin, "gpu-2", "systemd[1]: Started session 7."}};
  EXPECT_EQ(live(10 * kMin, lines, [] { return kT + 4 * kMin + 10 * kNanosPerSecond; }),
            std::vector<std::string>{});
}

// A pod rule's quiet timer falls due by its pods' time, which holds it: gpu-1's watchdog taint
// (corroborated by its port DOWN) has been quiet for a day at kT + 24h, and the kernel says nothing
// more. Job train-c's timeout five minutes after that day is a new episode: replay lifts the taint
// at kT + 24h and the lone job does not taint again. Live must not take the new timeout for the old
// fault's hit, which would hold the taint for another day.
TEST(CorrelatorTime, APodRulesQuietPeriodEndsByItsPodsTime) {
  const std::vector<Line> lines{
      {kT, "gpu-1", kWatchdog, StreamKind::kPod, "train-a"},
      {kT + 2 * kMin, "gpu-1", kDown},
      {kT + 3 * kMin, "gpu-1", kActive},
      {kT + 24 * kHour + 5 * kMin, "gpu-1", kWatchdog, StreamKind::kPod, "train-c"},
      {kT + 24 * kHour + 6 * kMin, "gpu-1", "step 10 loss 0.1", StreamKind::kPod}};
  const std::vector<std::string> lifted{"gpu-1 taint pytorch-nccl-watchdog-timeout",
                                        "gpu-1 untaint pytorch-nccl-watchdog-timeout"};
  const auto clock = [] { return kT + 72 * kHour; };
  EXPECT_EQ(live(0, lines, clock), lifted);  // as replay, in time order
  EXPECT_EQ(live(10 * kMin, lines, clock), lifted);
}

// Xid 48 on gpu-1 at kT taints it (xid-fatal); the node boots at kT + 5m, which starts its 10
// minutes of recovery; a second Xid 48, stamped `late_ns`, arrives after the boot (one node's
// kernel lines spread over partitions, read within max_skew of each other). Replay takes that Xid
// first: stamped more than a minute before the boot (recover()'s guard), the boot still starts
// the recovery; within the minute, the boot recovers nothing. Live must decide the same: the late
// Xid cancelled a recovery under way, and xid-fatal, which has no quiet period, then held the
// taint until the next boot.
std::vector<std::string> xidAfterTheBoot(int64_t max_lag_ns, int64_t late_ns) {
  std::vector<Line> lines{{kT, "gpu-1", kXid48},
                          {kT + 5 * kMin, "gpu-1", kBoot},
                          {late_ns, "gpu-1", kXid48},
                          {kT + 20 * kMin, "gpu-1", "systemd[1]: Started session 7."}};
  return live(max_lag_ns, max_lag_ns == 0 ? inTimeOrder(lines) : lines);  // replay: in time order
}

TEST(CorrelatorTime, AHitStampedBeforeARecoverySignalLeavesTheRecoveryAsReplayWould) {
  const std::vector<std::string> recovered{"gpu-1 taint xid-fatal", "gpu-1 untaint xid-fatal"};
  const std::vector<std::string> held{"gpu-1 taint xid-fatal"};
  EXPECT_EQ(xidAfterTheBoot(0, kT + 3 * kMin + 30 * kNanosPerSecond), recovered);
  EXPECT_EQ(xidAfterTheBoot(10 * kMin, kT + 3 * kMin + 30 * kNanosPerSecond), recovered);
  EXPECT_EQ(xidAfterTheBoot(0, kT + 4 * kMin + 30 * kNanosPerSecond), held);
  EXPECT_EQ(xidAfterTheBoot(10 * kMin, kT + 4 * kMin + 30 * kNanosPerSecond), held);
  // Stamped after the boot (a new Xid of the booted GPU) it cancels the recovery either way.
  EXPECT_EQ(xidAfterTheBoot(0, kT + 6 * kMin), held);
  EXPECT_EQ(xidAfterTheBoot(10 * kMin, kT + 6 * kMin), held);
}

// Three Xid 94 on gpu-1 a minute apart taint it (xid-94-repeated: 3 within 1h, recovered by a
// boot at once, no `stable`); the node boots at kT + 10m. `late` Xid 94 lines, stamped before the
// boot, arrive after it (one node's kernel lines spread over partitions). Replay takes them first:
// they hold the fault, and the boot clears it unless one is stamped within a minute of it.
std::vector<std::string> xid94AfterTheBoot(int64_t max_lag_ns, const std::vector<int64_t>& late) {
  constexpr const char* kXid94 =
      "NVRM: Xid (PCI:0000:9b:00): 94, pid=1234, name=python3, Contained ECC error";
  std::vector<Line> lines{{kT, "gpu-1", kXid94},
                          {kT + kMin, "gpu-1", kXid94},
                          {kT + 2 * kMin, "gpu-1", kXid94},
                          {kT + 10 * kMin, "gpu-1", kBoot}};
  for (int64_t at : late) {
    lines.push_back({at, "gpu-1", kXid94});
  }
  lines.push_back({kT + 20 * kMin, "gpu-1", "systemd[1]: Started session 7."});
  return live(max_lag_ns, max_lag_ns == 0 ? inTimeOrder(lines) : lines);  // replay: in time order
}

TEST(CorrelatorTime, HitsStampedBeforeTheSignalThatClearedTheirFaultCountForNothing) {
  const std::vector<std::string> recovered{"gpu-1 taint xid-94-repeated",
                                           "gpu-1 untaint xid-94-repeated"};
  // Three, enough for a new fault had they counted.
  const std::vector<int64_t> late{kT + 5 * kMin, kT + 6 * kMin, kT + 7 * kMin};
  EXPECT_EQ(xid94AfterTheBoot(0, late), recovered);
  EXPECT_EQ(xid94AfterTheBoot(10 * kMin, late), recovered);
  // Stamped after the boot, they are a new episode either way.
  const std::vector<int64_t> after{kT + 11 * kMin, kT + 12 * kMin, kT + 13 * kMin};
  const std::vector<std::string> again{"gpu-1 taint xid-94-repeated",
                                       "gpu-1 untaint xid-94-repeated",
                                       "gpu-1 taint xid-94-repeated"};
  EXPECT_EQ(xid94AfterTheBoot(0, after), again);
  EXPECT_EQ(xid94AfterTheBoot(10 * kMin, after), again);
}

// So with a recovery's `stable` period over: xid-fatal's Xid 48 at kT, the boot at kT + 5m, its
// 10 minutes over at kT + 20m, and then an Xid 48 stamped `late_ns` arrives, over 15 minutes
// behind (max_lag 30m).
TEST(CorrelatorTime, AFatalHitStampedBeforeTheBootArrivingAfterTheRecoveryCountsForNothing) {
  auto decide = [](int64_t late_ns) {
    return live(30 * kMin, {{kT, "gpu-1", kXid48},
                            {kT + 5 * kMin, "gpu-1", kBoot},
                            {kT + 20 * kMin, "gpu-1", "systemd[1]: Started session 7."},
                            {late_ns, "gpu-1", kXid48}});
  };
  const std::vector<std::string> recovered{"gpu-1 taint xid-fatal", "gpu-1 untaint xid-fatal"};
  EXPECT_EQ(decide(kT + 3 * kMin), recovered);
  EXPECT_EQ(decide(kT + 4 * kMin + 30 * kNanosPerSecond),
            (std::vector<std::string>{"gpu-1 taint xid-fatal", "gpu-1 untaint xid-fatal",
                                      "gpu-1 taint xid-fatal"}));
}

TEST(CorrelatorTime, AHitWithinAMinuteBeforeTheSignalThatClearedItsFaultTaintsAgain) {
  const std::vector<int64_t> late{kT + 9 * kMin + 30 * kNanosPerSecond};
  // Replay: the boot came too soon after a hit to recover anything.
  EXPECT_EQ(xid94AfterTheBoot(0, late), std::vector<std::string>{"gpu-1 taint xid-94-repeated"});
  // Live lifted the taint at the boot, before the hit came: it ends where replay does.
  EXPECT_EQ(
      xid94AfterTheBoot(10 * kMin, late),
      (std::vector<std::string>{"gpu-1 taint xid-94-repeated", "gpu-1 untaint xid-94-repeated",
                                "gpu-1 taint xid-94-repeated"}));
  // And says why.
  Collect sink;
  Pipeline p(shippedBank(), Taint{}, {&sink}, 1, 10 * kMin);
  p.process(one(kT, "gpu-1", kXid48));
  p.process(one(kT + 5 * kMin, "gpu-1", kBoot));
  p.process(one(kT + 20 * kMin, "gpu-1", "systemd[1]: Started session 7."));
  p.process(one(kT + 4 * kMin + 30 * kNanosPerSecond, "gpu-1", kXid48));
  ASSERT_EQ(sink.reasons.size(), 3U);
  EXPECT_EQ(sink.reasons[2], "node-boot 30s after a hit recovers nothing on pci=0000:a1:00");
}

// One node's (gpu-1) kernel lines live (max_lag 10m), in the order given, as when a collector
// spreads them over partitions, and in replay, in time order.
struct Both {
  std::vector<std::string> live;
  std::vector<std::string> replay;
};
Both liveAndReplay(const std::vector<Line>& lines) {
  return {live(10 * kMin, lines), live(0, inTimeOrder(lines))};
}

// ib-port-down-lasting holds a port's DOWN for 5 minutes; its ACTIVE within them ends it.
TEST(CorrelatorTime, APortUpThatCameBeforeItsDownEndsItAsInReplay) {
  const Both up_first = liveAndReplay(
      {{kT + kMin, "gpu-1", kActive}, {kT, "gpu-1", kDown}, {kT + 7 * kMin, "gpu-1", "x"}});
  EXPECT_EQ(up_first.live, std::vector<std::string>{});
  EXPECT_EQ(up_first.replay, std::vector<std::string>{});
  // Stamped with the DOWN and logged before it, the ACTIVE is the state the port left.
  const Both same_stamp =
      liveAndReplay({{kT, "gpu-1", kActive}, {kT, "gpu-1", kDown}, {kT + 7 * kMin, "gpu-1", "x"}});
  const std::vector<std::string> tainted{"gpu-1 taint ib-port-down-lasting"};
  EXPECT_EQ(same_stamp.live, tainted);
  EXPECT_EQ(same_stamp.replay, tainted);
}

TEST(CorrelatorTime, APortUpStampedBeforeItsDownDoesNotEndIt) {
  const Both got = liveAndReplay(
      {{kT, "gpu-1", kDown}, {kT - kMin, "gpu-1", kActive}, {kT + 7 * kMin, "gpu-1", "x"}});
  const std::vector<std::string> tainted{"gpu-1 taint ib-port-down-lasting"};
  EXPECT_EQ(got.live, tainted);
  EXPECT_EQ(got.replay, tainted);
}

// A port's state lines within one second: the DOWN after an ACTIVE after a DOWN is the port's
// state, not a repeat of the first DOWN, and so is the ACTIVE after a DOWN after an ACTIVE.
TEST(CorrelatorTime, APortStateLineAfterAnotherStateInItsSecondIsNoRepeat) {
  constexpr int64_t kMs = 1'000'000;
  const std::vector<Line> down{{kT, "gpu-1", kDown},
                               {kT + 2 * kMs, "gpu-1", kActive},
                               {kT + 3 * kMs, "gpu-1", kDown},
                               {kT + 10 * kMin, "gpu-1", "x"}};
  for (const int64_t max_lag_ns : {10 * kMin, int64_t{0}}) {
    EXPECT_EQ(live(max_lag_ns, down), std::vector<std::string>{"gpu-1 taint ib-port-down-lasting"})
        << max_lag_ns;
  }
  const std::vector<Line> up{{kT, "gpu-1", kActive},
                             {kT + 2 * kMs, "gpu-1", kDown},
                             {kT + 3 * kMs, "gpu-1", kActive},
                             {kT + 10 * kMin, "gpu-1", "x"}};
  for (const int64_t max_lag_ns : {10 * kMin, int64_t{0}}) {
    EXPECT_EQ(live(max_lag_ns, up), std::vector<std::string>{}) << max_lag_ns;
  }
  // A state line printed twice in a row is still one event: the matcher folds the second.
  RecordBatch twice = one(kT, "gpu-1", kDown);
  twice.records.push_back(twice.records[0]);
  twice.records[1].time_ns += kMs;
  Pipeline p(shippedBank(), Taint{}, {});
  p.process(twice);
  EXPECT_EQ(p.correlatorStats().repeats, 1U);
  // Replay keeps such a line (Pipeline::collect).
  auto replayed = [](const std::vector<Line>& lines) {
    Collect sink;
    Pipeline p(shippedBank(), Taint{}, {&sink});
    for (const Line& l : lines) {
      p.collect(one(l.time_ns, l.node, l.text), 0);
    }
    p.finishReplay();
    return sink.got;
  };
  EXPECT_EQ(replayed(down), std::vector<std::string>{"gpu-1 taint ib-port-down-lasting"});
  EXPECT_EQ(replayed(up), std::vector<std::string>{});
}

// ib-port-down-lasting taints at kT + 5m; ACTIVE at kT + 8m starts its 30 stable minutes; the port
// goes DOWN at kT + 20m and ACTIVE a second later, and that ACTIVE comes first. Replay: the DOWN
// ends the recovery, and the ACTIVE after it starts it again.
TEST(CorrelatorTime, AHitThatEndsARecoveryLeavesTheSignalStampedAfterItToStartItAgain) {
  const Both got = liveAndReplay({{kT, "gpu-1", kDown},
                                  {kT + 8 * kMin, "gpu-1", kActive},
                                  {kT + 20 * kMin + kNanosPerSecond, "gpu-1", kActive},
                                  {kT + 20 * kMin, "gpu-1", kDown},
                                  {kT + 60 * kMin, "gpu-1", "x"}});
  const std::vector<std::string> recovered{"gpu-1 taint ib-port-down-lasting",
                                           "gpu-1 untaint ib-port-down-lasting"};
  EXPECT_EQ(got.live, recovered);
  EXPECT_EQ(got.replay, recovered);
}

// A fatal CPER record stamped a minute after a boot, read before it: cper-fatal's suppressed_by
// (node-boot within 5m) takes it for the firmware's record of the crash the reboot was for.
// Replay decides nothing; live taints when it comes and lifts the taint when the boot does.
TEST(CorrelatorTime, ABootReadAfterTheRecordItSuppressesLiftsItsTaint) {
  const std::vector<Line> lines{
      {kT + kMin, "gpu-1", kCperFatal}, {kT, "gpu-1", kBoot}, {kT + 30 * kMin, "gpu-1", "x"}};
  Collect sink;
  decide(10 * kMin, lines, &sink);
  ASSERT_EQ(sink.got,
            (std::vector<std::string>{"gpu-1 taint cper-fatal", "gpu-1 untaint cper-fatal"}));
  EXPECT_EQ(sink.reasons[1], "cper-fatal suppressed by node-boot 1m before it");
  EXPECT_EQ(sink.times[1], kT);
  EXPECT_EQ(live(0, inTimeOrder(lines)), std::vector<std::string>{});
}

// The same, and another record two minutes later: the boot, though its suppression lifted the
// node's only taint, is still the node's recent history, and suppresses that record too. (The
// node healthy again forgot its recent hits, the boot with them, and was tainted for good.)
TEST(CorrelatorTime, ABootReadAfterTheRecordItSuppressesSuppressesTheNextOne) {
  const Both got = liveAndReplay({{kT + kMin, "gpu-1", kCperFatal},
                                  {kT, "gpu-1", kBoot},
                                  {kT + 3 * kMin, "gpu-1", kCperFatal},
                                  {kT + 30 * kMin, "gpu-1", "x"}});
  EXPECT_EQ(got.live,
            (std::vector<std::string>{"gpu-1 taint cper-fatal", "gpu-1 untaint cper-fatal"}));
  EXPECT_EQ(got.replay, std::vector<std::string>{});
}

// A port's DOWN decided lasting before the shutdown a minute after it was read: the shutdown ends
// the fault (replay never made it), and the DOWN still corroborates a pod's NCCL error seven
// minutes after it, as in replay. (The node healthy again forgot the DOWN with its other recent
// hits.)
TEST(CorrelatorTime, APortDownEndedByAShutdownReadLateStillCorroborates) {
  const Both got =
      liveAndReplay({{kT, "gpu-1", kDown},
                     {kT + 6 * kMin, "gpu-1", "systemd[1]: Started session 7."},
                     {kT + kMin, "gpu-1", "reboot: Restarting system"},
                     {kT + 7 * kMin, "gpu-1", kNcclRemote, StreamKind::kPod, "train-a"},
                     {kT + 30 * kMin, "gpu-1", "x"}});
  EXPECT_EQ(got.live, (std::vector<std::string>{"gpu-1 taint ib-port-down-lasting",
                                                "gpu-1 untaint ib-port-down-lasting",
                                                "gpu-1 taint nccl-remote-error"}));
  EXPECT_EQ(got.replay, std::vector<std::string>{"gpu-1 taint nccl-remote-error"});
}

// A fatal CPER record 20 minutes after a boot taints; the node reboots, and the CPER record of
// that crash, stamped a millisecond after the new boot, is read before it. Replay suppresses the
// record, and the boot recovers the fault (10 stable minutes); live, the record held the fault
// past the boot, which recovered nothing: the node stayed tainted. Its hits after the boot, within
// the boot's 5 minutes, now hold the fault no more once the boot comes.
TEST(CorrelatorTime, ABootReadAfterTheRecordItSuppressesStillRecoversAnEarlierFault) {
  const int64_t ms = 1'000'000;
  for (const int records : {1, 2}) {
    std::vector<Line> lines = {{kT, "gpu-1", kBoot}, {kT + 20 * kMin, "gpu-1", kCperFatal}};
    for (int r = 1; r <= records; ++r) {
      lines.push_back({kT + 40 * kMin + r * ms, "gpu-1", kCperFatal});
    }
    lines.push_back({kT + 40 * kMin, "gpu-1", kBoot});
    lines.push_back({kT + 90 * kMin, "gpu-1", "x"});
    const Both got = liveAndReplay(lines);
    const std::vector<std::string> want = {"gpu-1 taint cper-fatal", "gpu-1 untaint cper-fatal"};
    EXPECT_EQ(got.live, want) << records << " records";
    EXPECT_EQ(got.replay, want) << records << " records";
  }
}

// A node healthy again in replay, where live still held a fault a line read later retracts,
// forgets the recent hits replay forgot there. Port aa's DOWN, decided lasting, still stands when
// port ab recovers (36m); the shutdown that ends aa's DOWN is read after. Replay was healthy at
// 36m, and aa's DOWN corroborates no pod's NCCL error after it. An Xid 48's fault recovers (12m)
// while a CPER record holds the node; the boot that suppresses that record is read after. Replay,
// healthy at 12m, forgot the boot, and the next record taints. (Live kept every recent hit.)
TEST(CorrelatorTime, ARetractionForgetsTheHitsReplayForgotAtAnEarlierRecovery) {
  const Both ports =
      liveAndReplay({{kT, "gpu-1", kDown},
                     {kT + 6 * kMin, "gpu-1", kActive},
                     {kT + 31 * kMin, "gpu-1", "mlx5_core 0000:aa:00.0 mlx5_4: Port: 1 Link DOWN"},
                     {kT + 37 * kMin, "gpu-1", "x"},
                     {kT + 33 * kMin, "gpu-1", "reboot: Restarting system"},
                     {kT + 38 * kMin, "gpu-1", kNcclRemote, StreamKind::kPod, "train-a"},
                     {kT + 90 * kMin, "gpu-1", "x"}});
  const std::vector<std::string> recovered = {"gpu-1 taint ib-port-down-lasting",
                                              "gpu-1 untaint ib-port-down-lasting"};
  EXPECT_EQ(ports.live, recovered);
  EXPECT_EQ(ports.replay, recovered);
  const Both cper = liveAndReplay({{kT, "gpu-1", kXid48},
                                   {kT + 2 * kMin, "gpu-1", kDriverLoad},
                                   {kT + 11 * kMin, "gpu-1", kCperFatal},
                                   {kT + 13 * kMin, "gpu-1", "x"},
                                   {kT + 10 * kMin, "gpu-1", kBoot},
                                   {kT + 14 * kMin, "gpu-1", kCperFatal},
                                   {kT + 60 * kMin, "gpu-1", "x"}});
  EXPECT_EQ(cper.live,
            (std::vector<std::string>{"gpu-1 taint xid-fatal", "gpu-1 untaint cper-fatal",
                                      "gpu-1 taint cper-fatal"}));
  EXPECT_EQ(cper.replay,
            (std::vector<std::string>{"gpu-1 taint xid-fatal", "gpu-1 untaint xid-fatal",
                                      "gpu-1 taint cper-fatal"}));
}

// More of the same. Two recoveries that the retracted fault alone held off, read out of time order
// (GPU a1's reset at 30m before a2's at 28m): replay forgot at the later, 30m, and port ac's DOWN
// at 29m corroborates no NCCL error after. A fault formed after such a recovery (12m) still
// standing when the retraction comes (a port DOWN at 12m30s): replay forgot at 12m, and the CPER
// record at 14m taints. A recovery that clears the node's last fault (a1's reset at 30m) read
// after a port flap stamped after it (31m): replay had not read the flap when it forgot, and the
// flap corroborates a pod's NCCL error at 33m.
TEST(CorrelatorTime, ARecoveryForgetsTheHitsReplayForgotWhateverTheOrderRead) {
  const std::string uuid1 = "GPU-979426f2-893a-7cbb-c4cf-81472f89a462";
  const std::string uuid2 = "GPU-11111111-2222-3333-4444-555555555555";
  auto xid94 = [](const char* pci) {
    return std::string("NVRM: Xid (PCI:") + pci +
           "): 94, pid=1234, name=python3, Contained ECC error";
  };
  const std::string down_ac = "mlx5_core 0000:ac:00.0 mlx5_6: Port: 1 Link DOWN";
  const std::string active_ac = "mlx5_core 0000:ac:00.0 mlx5_6: Port: 1 Link ACTIVE";
  std::vector<Line> two = {
      {kT, "gpu-1", "NVRM: GPU at PCI:0000:a1:00: " + uuid1},
      {kT + kNanosPerSecond, "gpu-1", "NVRM: GPU at PCI:0000:a2:00: " + uuid2}};
  for (int m = 1; m <= 3; ++m) {
    two.push_back({kT + m * kMin, "gpu-1", xid94("0000:a1:00")});
  }
  for (int m = 4; m <= 6; ++m) {
    two.push_back({kT + m * kMin, "gpu-1", xid94("0000:a2:00")});
  }
  std::vector<Line> last = two;
  last.erase(last.begin() + 1);
  last.erase(last.end() - 3, last.end());
  two.insert(two.end(),
             {{kT + 20 * kMin, "gpu-1", "mlx5_core 0000:aa:00.0 mlx5_4: Port: 1 Link DOWN"},
              {kT + 26 * kMin, "gpu-1", "x"},
              {kT + 29 * kMin, "gpu-1", down_ac},
              {kT + 29 * kMin + 30 * kNanosPerSecond, "gpu-1", active_ac},
              {kT + 30 * kMin, "gpu-1", "GPU reset executed: " + uuid1 + ", success: true"},
              {kT + 28 * kMin, "gpu-1", "GPU reset executed: " + uuid2 + ", success: true"},
              {kT + 23 * kMin, "gpu-1", "reboot: Restarting system"},
              {kT + 32 * kMin, "gpu-1", kNcclRemote, StreamKind::kPod, "train-a"},
              {kT + 90 * kMin, "gpu-1", "x"}});
  const Both out_of_order = liveAndReplay(two);
  EXPECT_EQ(out_of_order.live, (std::vector<std::string>{"gpu-1 taint xid-94-repeated",
                                                         "gpu-1 untaint ib-port-down-lasting"}));
  EXPECT_EQ(out_of_order.replay, (std::vector<std::string>{"gpu-1 taint xid-94-repeated",
                                                           "gpu-1 untaint xid-94-repeated"}));
  const Both formed_after = liveAndReplay({{kT, "gpu-1", kXid48},
                                           {kT + 2 * kMin, "gpu-1", kDriverLoad},
                                           {kT + 11 * kMin, "gpu-1", kCperFatal},
                                           {kT + 12 * kMin + 30 * kNanosPerSecond, "gpu-1", kDown},
                                           {kT + 18 * kMin, "gpu-1", "x"},
                                           {kT + 10 * kMin, "gpu-1", kBoot},
                                           {kT + 14 * kMin, "gpu-1", kCperFatal},
                                           {kT + 20 * kMin, "gpu-1", kActive},
                                           {kT + 60 * kMin, "gpu-1", "x"},
                                           {kT + 120 * kMin, "gpu-1", "x"}});
  // Live keeps the taint, as replay ends; the rule named differs (live lifts nothing).
  EXPECT_EQ(formed_after.live, std::vector<std::string>{"gpu-1 taint xid-fatal"});
  EXPECT_EQ(formed_after.replay,
            (std::vector<std::string>{"gpu-1 taint xid-fatal", "gpu-1 untaint xid-fatal",
                                      "gpu-1 taint cper-fatal"}));
  last.insert(last.end(),
              {{kT + 31 * kMin, "gpu-1", down_ac},
               {kT + 31 * kMin + 30 * kNanosPerSecond, "gpu-1", active_ac},
               {kT + 30 * kMin, "gpu-1", "GPU reset executed: " + uuid1 + ", success: true"},
               {kT + 33 * kMin, "gpu-1", kNcclRemote, StreamKind::kPod, "train-a"},
               {kT + 90 * kMin, "gpu-1", "x"}});
  const Both read_first = liveAndReplay(last);
  const std::vector<std::string> corroborated = {"gpu-1 taint xid-94-repeated",
                                                 "gpu-1 untaint xid-94-repeated",
                                                 "gpu-1 taint nccl-remote-error"};
  EXPECT_EQ(read_first.live, corroborated);
  EXPECT_EQ(read_first.replay, corroborated);
}

// The real decisions of `lines` in time order, with `dry` in dry run (replay, or live with
// max_lag_ns).
std::vector<std::string> realDecisions(const std::vector<Line>& lines, const std::string& dry,
                                       int64_t max_lag_ns = 0) {
  Collect sink;
  decide(max_lag_ns, inTimeOrder(lines), &sink, {}, shippedBank(), {dry});
  return sink.real;
}

// A rule in dry run changes no real decision: the real ones are those of the lines without its
// own. A node forgot its recent hits when its faults of either kind had cleared: a CPER fault in
// dry run standing when a real Xid's cleared kept a port DOWN that corroborated a pod's NCCL
// error; an Xid's fault in dry run clearing after a CPER record's boot forgot the boot, and the
// next record tainted. And a rule in dry run's hits suppressed a real rule's (the fallen off the
// bus line after an Xid in dry run), ended its held DOWN (a shutdown in dry run), and attached
// its port flaps to a boot.
TEST(CorrelatorTime, ARuleInDryRunChangesNoRealDecision) {
  struct Case {
    std::string dry;         // the rule in dry run
    std::vector<Line> own;   // its lines
    std::vector<Line> rest;  // the others
    std::vector<std::string> want;
  };
  std::vector<Line> flaps;
  for (int m = 1; m <= 3; ++m) {
    flaps.push_back({kT + m * kMin, "gpu-1", kDown});
    flaps.push_back({kT + m * kMin + 10 * kNanosPerSecond, "gpu-1", kActive});
  }
  flaps.push_back({kT + 60 * kMin, "gpu-1", "x"});
  // An Xid 79, the "fallen off the bus" line it suppresses (one incident, which a boot ends), and
  // the GPU's reset, which does not.
  const std::string uuid = "GPU-979426f2-893a-7cbb-c4cf-81472f89a462";
  const std::vector<Line> off = {
      {kT - kMin, "gpu-1", "NVRM: GPU at PCI:0000:a1:00: " + uuid},
      {kT, "gpu-1", "NVRM: Xid (PCI:0000:a1:00): 79, pid=1, GPU has fallen off the bus."},
      {kT + 2 * kMin, "gpu-1", "NVRM: GPU 0000:a1:00.0: GPU has fallen off the bus."},
      {kT + 5 * kMin, "gpu-1", "GPU reset executed: " + uuid + ", success: true"},
      {kT + 60 * kMin, "gpu-1", "x"}};
  const std::vector<std::string> lifted = {"gpu-1 taint xid-fatal"};
  // The same, its multi-line report's tail instead, which names no GPU of its own.
  std::vector<Line> tail = off;
  tail[2] = {kT + kMin, "gpu-1", "NVRM: fallen off the bus and is not responding to commands."};
  const std::vector<Case> cases = {
      {"cper-fatal",
       {{kT + kMin, "gpu-1", kCperFatal}},
       {{kT, "gpu-1", kXid48},
        {kT + 2 * kMin, "gpu-1", kDriverLoad},
        {kT + 5 * kMin, "gpu-1", kDown},
        {kT + 6 * kMin, "gpu-1", kActive},
        {kT + 13 * kMin, "gpu-1", kNcclRemote, StreamKind::kPod, "a"},
        {kT + 60 * kMin, "gpu-1", "x"}},
       {"gpu-1 taint xid-fatal", "gpu-1 untaint xid-fatal"}},
      {"xid-fatal",
       {{kT, "gpu-1", kXid48}, {kT + 2 * kMin, "gpu-1", kDriverLoad}},
       {{kT + 10 * kMin, "gpu-1", kBoot},
        {kT + 11 * kMin, "gpu-1", kCperFatal},
        {kT + 14 * kMin, "gpu-1", kCperFatal},
        {kT + 60 * kMin, "gpu-1", "x"}},
       {}},
      {"xid-fatal",
       {{kT, "gpu-1",
         "NVRM: Xid (PCI:0000:44:00): 48, pid=1, name=python3, An uncorrectable "
         "double bit error (DBE) has been detected on GPU in the framebuffer"}},
       {{kT + kNanosPerSecond, "gpu-1", "NVRM: GPU 0000:44:00.0: GPU has fallen off the bus."},
        {kT + 60 * kMin, "gpu-1", "x"}},
       {"gpu-1 taint gpu-fallen-off-bus"}},
      {"node-shutdown",
       {{kT + kMin, "gpu-1", "reboot: Restarting system"}},
       {{kT, "gpu-1", kDown}, {kT + 60 * kMin, "gpu-1", "x"}},
       {"gpu-1 taint ib-port-down-lasting"}},
      {"node-boot",
       {{kT, "gpu-1", kBoot}},
       flaps,
       {"gpu-1 taint ib-port-flap", "gpu-1 untaint ib-port-flap"}},
      {"nvidia-driver-load", {{kT + 90 * kNanosPerSecond, "gpu-1", kDriverLoad}}, off, lifted},
      {"node-boot", {{kT + 90 * kNanosPerSecond, "gpu-1", kBoot}}, off, lifted},
      {"gpu-fallen-off-bus-head",
       {{kT + kMin - kNanosPerSecond, "gpu-1", "NVRM: The NVIDIA GPU 0000:a1:00.0"}},
       tail,
       {"gpu-1 taint xid-fatal"}},
  };
  for (const Case& c : cases) {
    std::vector<Line> all = c.rest;
    all.insert(all.end(), c.own.begin(), c.own.end());
    EXPECT_EQ(realDecisions(all, c.dry), c.want) << c.dry << " in dry run";
    EXPECT_EQ(realDecisions(c.rest, c.dry), c.want) << "without " << c.dry << "'s lines";
    // Live (the first case's pod line is corroborated before the Xid's recovery falls due by
    // the kernel's time, where replay has forgotten the DOWN: README, "Streams do not arrive in
    // one time order").
    EXPECT_EQ(realDecisions(all, c.dry, 10 * kMin), realDecisions(c.rest, c.dry, 10 * kMin))
        << c.dry << " in dry run, live";
  }
}

// A rule in dry run decides as it would for real: its node forgets its recent hits when all its
// faults have cleared. A CPER record's second boot (9m) suppresses no record 3 minutes after it
// once the first boot's recovery (stable 10m) has cleared the fault: the node forgot it. And a
// real Xid's fault clearing (12m) while the CPER fault stands forgets nothing for it: the boot
// (10m) still suppresses the record at 13m, and the CPER fault recovers. (The first kept the boot
// and missed the taint; the second forgot it and never lifted the taint.)
TEST(CorrelatorTime, ARuleInDryRunDecidesAsItWouldForReal) {
  const std::vector<Line> alone = {{kT, "gpu-1", kCperFatal},
                                   {kT + kMin, "gpu-1", kBoot},
                                   {kT + 9 * kMin, "gpu-1", kBoot},
                                   {kT + 12 * kMin, "gpu-1", kCperFatal},
                                   {kT + 60 * kMin, "gpu-1", "x"}};
  Collect dry;
  decide(0, alone, &dry, {}, shippedBank(), {"cper-fatal"});
  const std::vector<std::string> real = live(0, alone);
  EXPECT_EQ(real, (std::vector<std::string>{"gpu-1 taint cper-fatal", "gpu-1 untaint cper-fatal",
                                            "gpu-1 taint cper-fatal"}));
  EXPECT_EQ(dry.dry, real);
  Collect beside;
  decide(0,
         {{kT, "gpu-1", kXid48},
          {kT + kMin, "gpu-1", kCperFatal},
          {kT + 2 * kMin, "gpu-1", kDriverLoad},
          {kT + 10 * kMin, "gpu-1", kBoot},
          {kT + 13 * kMin, "gpu-1", kCperFatal},
          {kT + 60 * kMin, "gpu-1", "x"}},
         &beside, {}, shippedBank(), {"cper-fatal"});
  EXPECT_EQ(beside.dry,
            (std::vector<std::string>{"gpu-1 taint cper-fatal", "gpu-1 untaint cper-fatal"}));
  EXPECT_EQ(beside.real,
            (std::vector<std::string>{"gpu-1 taint xid-fatal", "gpu-1 untaint xid-fatal"}));
}

// An alias rule (GPU UUID to PCI address) serves every rule's entities: it cannot be in dry run
// beside real rules. With every rule (kubernetes.dry_run), it can.
TEST(CorrelatorTime, AnAliasRuleCannotBeInDryRun) {
  Collect sink;
  try {
    Pipeline p(shippedBank(), Taint{}, {&sink}, 1, 0, {}, {"gpu-uuid"});
    ADD_FAILURE() << "gpu-uuid in dry run was taken";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'gpu-uuid' maps aliases"), std::string::npos) << e.what();
  }
  std::vector<std::string> all;
  for (const Rule& r : shippedBank()->rules) {
    all.push_back(r.id);
  }
  Pipeline p(shippedBank(), Taint{}, {&sink}, 1, 0, {}, all);
  p.process(one(kT, "gpu-1", kXid48));
  EXPECT_EQ(sink.dry, std::vector<std::string>{"gpu-1 taint xid-fatal"});
}

// The per-line "fallen off the bus" read before an Xid 79 on its GPU stamped a second before it:
// replay takes it for that Xid's incident (suppressed_by xid-reboot-required). Live tainted with
// the line's own rule; the Xid takes its fault over, and a boot lifts the taint as in replay. An
// Xid 48 before the line is no incident of its own: only a boot lifts the line's fault, in both.
TEST(CorrelatorTime, AnXidReadAfterTheLineItSuppressesTakesItsFaultOver) {
  constexpr const char* kOffTheBus = "NVRM: GPU 0000:a1:00.0: GPU has fallen off the bus.";
  const Both got = liveAndReplay(
      {{kT + kNanosPerSecond, "gpu-1", kOffTheBus},
       {kT, "gpu-1", "NVRM: Xid (PCI:0000:a1:00): 79, pid=1, GPU has fallen off the bus."},
       {kT + 5 * kMin, "gpu-1", kBoot},
       {kT + 30 * kMin, "gpu-1", "x"}});
  EXPECT_EQ(got.live, (std::vector<std::string>{"gpu-1 taint gpu-fallen-off-bus",
                                                "gpu-1 untaint xid-reboot-required"}));
  EXPECT_EQ(got.replay, (std::vector<std::string>{"gpu-1 taint xid-fatal",
                                                  "gpu-1 untaint xid-reboot-required"}));
  const Both after48 = liveAndReplay({{kT + kNanosPerSecond, "gpu-1", kOffTheBus},
                                      {kT, "gpu-1", kXid48},
                                      {kT + 5 * kMin, "gpu-1", kDriverLoad},
                                      {kT + 30 * kMin, "gpu-1", "x"}});
  EXPECT_EQ(after48.live, std::vector<std::string>{"gpu-1 taint gpu-fallen-off-bus"});
  EXPECT_EQ(after48.replay, std::vector<std::string>{"gpu-1 taint xid-fatal"});
}

// Two DOWNs of one port, the later read first: replay holds the earlier one, and the port's 5
// minutes run from it.
TEST(CorrelatorTime, AnEarlierPortDownReadWhileALaterIsHeldIsHeldInItsPlace) {
  const std::vector<Line> lines{
      {kT + 2 * kMin, "gpu-1", kDown}, {kT, "gpu-1", kDown}, {kT + 10 * kMin, "gpu-1", "x"}};
  for (const int64_t max_lag_ns : {10 * kMin, int64_t{0}}) {
    Collect sink;  // replay (max_lag 0): in time order
    decide(max_lag_ns, max_lag_ns == 0 ? inTimeOrder(lines) : lines, &sink);
    ASSERT_EQ(sink.got, std::vector<std::string>{"gpu-1 taint ib-port-down-lasting"}) << max_lag_ns;
    EXPECT_EQ(sink.times[0], kT + 5 * kMin) << max_lag_ns;
  }
}

// Replay: the DOWN at kT is held, the ACTIVE at kT + 1m ends it, and the DOWN at kT + 2m is held
// and lasts. Live read that second DOWN while the first was held, and the ACTIVE after both.
TEST(CorrelatorTime, APortDownReadWhileAnotherIsHeldIsHeldOnceAnUpBetweenEndsThatOne) {
  const Both got = liveAndReplay({{kT, "gpu-1", kDown},
                                  {kT + 2 * kMin, "gpu-1", kDown},
                                  {kT + kMin, "gpu-1", kActive},
                                  {kT + 10 * kMin, "gpu-1", "x"}});
  const std::vector<std::string> tainted{"gpu-1 taint ib-port-down-lasting"};
  EXPECT_EQ(got.live, tainted);
  EXPECT_EQ(got.replay, tainted);
  // An ACTIVE after the second DOWN, read before the one between, ends both, live as in replay.
  const Both ended = liveAndReplay({{kT, "gpu-1", kDown},
                                    {kT + 2 * kMin, "gpu-1", kDown},
                                    {kT + 3 * kMin, "gpu-1", kActive},
                                    {kT + kMin, "gpu-1", kActive},
                                    {kT + 10 * kMin, "gpu-1", "x"}});
  EXPECT_EQ(ended.live, std::vector<std::string>{});
  EXPECT_EQ(ended.replay, std::vector<std::string>{});
}

// The boot came first, the Xid 48 it follows by five minutes after it: xid-fatal's 10 stable
// minutes run from the boot.
TEST(CorrelatorTime, ABootThatCameBeforeTheXidItFollowsRecoversItAsInReplay) {
  const Both got = liveAndReplay(
      {{kT + 5 * kMin, "gpu-1", kBoot}, {kT, "gpu-1", kXid48}, {kT + 20 * kMin, "gpu-1", "x"}});
  const std::vector<std::string> recovered{"gpu-1 taint xid-fatal", "gpu-1 untaint xid-fatal"};
  EXPECT_EQ(got.live, recovered);
  EXPECT_EQ(got.replay, recovered);
}

// A port's DOWN lasts (taint at kT + 5m); down again at kT + 10m, with an ACTIVE a second before
// that arrives after it. Replay takes the ACTIVE first, and the DOWN ends its 30 stable minutes.
TEST(CorrelatorTime, APortUpStampedBeforeTheFaultsNewestDownRecoversNothing) {
  const Both got = liveAndReplay({{kT, "gpu-1", kDown},
                                  {kT + 6 * kMin, "gpu-1", "x"},
                                  {kT + 10 * kMin, "gpu-1", kDown},
                                  {kT + 10 * kMin - kNanosPerSecond, "gpu-1", kActive},
                                  {kT + 50 * kMin, "gpu-1", "x"}});
  const std::vector<std::string> tainted{"gpu-1 taint ib-port-down-lasting"};
  EXPECT_EQ(got.live, tainted);
  EXPECT_EQ(got.replay, tainted);
}

// Xid 48 at kT; a driver load at kT + 6m is read before a boot at kT + 5m. xid-fatal's 10 stable
// minutes run from the boot, live as in replay, and the untaint names it.
TEST(CorrelatorTime, TheStablePeriodRunsFromTheEarliestSignalWhicheverCameFirst) {
  const std::vector<Line> lines{{kT, "gpu-1", kXid48},
                                {kT + 6 * kMin, "gpu-1", kDriverLoad},
                                {kT + 5 * kMin, "gpu-1", kBoot},
                                {kT + 20 * kMin, "gpu-1", "x"}};
  for (const int64_t max_lag_ns : {10 * kMin, int64_t{0}}) {
    Collect sink;  // replay (max_lag 0): in time order
    decide(max_lag_ns, max_lag_ns == 0 ? inTimeOrder(lines) : lines, &sink);
    ASSERT_EQ(sink.got,
              (std::vector<std::string>{"gpu-1 taint xid-fatal", "gpu-1 untaint xid-fatal"}))
        << max_lag_ns;
    EXPECT_EQ(sink.times[1], kT + 15 * kMin) << max_lag_ns;
    EXPECT_EQ(sink.reasons[1].rfind("recovered by node-boot", 0), 0U) << sink.reasons[1];
  }
}

}  // namespace
}  // namespace faultline
