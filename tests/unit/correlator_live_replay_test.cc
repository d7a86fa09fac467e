// Replay gives the decisions live ingestion would have given (README, "Replay"), over seeded
// random kernel logs of a few nodes: IB ports going down and up (flaps, lasting DOWNs), Xid 31
// (repeated), Xid 79, reboots. Live takes one record per batch, each node's records in its own
// time order, the nodes interleaved with each lagging by up to 5 minutes (under max_lag, as the
// service allows); replay takes them all, sorted. Both then get a line on every node three days
// later, past every window and timer of the bank. The decisions must match in node, action,
// rule and event time. Pod lines of cluster rules are left out: live closes their windows
// max_lag later, and a node's taint decided meanwhile can differ (README, "The live service").
#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "core/pipeline.h"
#include "core/time.h"
#include "matcher/bank.h"
#include "tests/unit/helpers.h"

namespace faultline {
namespace {

constexpr int64_t kS = kNanosPerSecond;
constexpr int64_t kT = 1'739'509'200 * kS;  // 2025-02-14T05:00:00Z
constexpr int64_t kMaxLag = 600 * kS;

class Collect : public DecisionSink {
 public:
  void write(const Decision& d) override {
    got.push_back(d.node + " " + std::string(actionName(d.action)) + " " + d.rule + " " +
                  formatRfc3339(d.time_ns));
  }
  std::vector<std::string> got;
};

struct Line {
  int64_t time_ns;
  std::string node;
  std::string text;
  int64_t arrival_ns;  // live: when it reaches the service (its time plus its node's lag)
};

RecordBatch batchOf(const Line& l) {
  RecordBatch b;
  b.records.push_back({l.time_ns, b.copy(l.node), b.copy(l.text), 0, 0, StreamKind::kKernel});
  return b;
}

// One node's random log over about an hour and a half.
void nodeLog(std::mt19937& rng, const std::string& node, std::vector<Line>* out) {
  const auto pick = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  int64_t t = kT + pick(600) * kS;
  const uint32_t events = pick(8);
  for (uint32_t i = 0; i < events; ++i) {
    const std::string port = std::to_string(1 + pick(2));
    std::string text;
    switch (pick(4)) {
      case 0:
      case 1:
        text = "mlx5_core 0000:ab:00.0 mlx5_5: Port: " + port + " Link " +
               (pick(2) == 0 ? "DOWN" : "ACTIVE");
        break;
      case 2:
        text =
            "NVRM: Xid (PCI:0000:63:00): 31, pid=1234, name=python3, Ch 00000008, "
            "intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f_12340000.";
        break;
      default:
        text = pick(4) == 0 ? "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"
                            : "[    0.000000] Kernel command line: BOOT_IMAGE=/boot/vmlinuz ro";
        break;
    }
    out->push_back({t, node, text, 0});
    t += pick(900) * kS;
  }
  out->push_back({t + 10 * kS, node, "systemd[1]: Started session 1.", 0});
}

std::vector<std::string> decisions(const std::vector<Line>& lines, bool replay) {
  Collect sink;
  Pipeline p(shippedBank(), Taint{}, {&sink}, 1, replay ? 0 : kMaxLag);
  uint32_t input = 0;
  for (const Line& l : lines) {
    replay ? p.collect(batchOf(l), input++) : p.process(batchOf(l));
  }
  if (replay) {
    p.finishReplay();
  }
  std::sort(sink.got.begin(), sink.got.end());
  return sink.got;
}

TEST(LiveReplay, RandomKernelLogsDecideAlike) {
  int differ = 0;
  for (uint32_t seed = 0; seed < 2000; ++seed) {
    std::mt19937 rng(seed);
    std::vector<Line> lines;
    const uint32_t nodes = 2 + rng() % 4;
    for (uint32_t n = 0; n < nodes; ++n) {
      const size_t first = lines.size();
      nodeLog(rng, "gpu-" + std::to_string(n), &lines);
      const int64_t lag = static_cast<int64_t>(rng() % 300) * kS;  // under max_lag
      for (size_t i = first; i < lines.size(); ++i) {
        lines[i].arrival_ns = lines[i].time_ns + lag;
      }
    }
    std::stable_sort(lines.begin(), lines.end(),
                     [](const Line& a, const Line& b) { return a.arrival_ns < b.arrival_ns; });
    int64_t end = 0;
    for (const Line& l : lines) {
      end = std::max(end, l.time_ns + int64_t{3} * 86400 * kS);
    }
    for (uint32_t n = 0; n < nodes; ++n) {
      lines.push_back({end, "gpu-" + std::to_string(n), "systemd[1]: Started session 2.", end});
    }
    const std::vector<std::string> live = decisions(lines, false);
    const std::vector<std::string> replayed = decisions(lines, true);
    if (live != replayed && ++differ <= 3) {
      std::string log;
      for (const Line& l : lines) {
        log += formatRfc3339(l.time_ns) + " " + l.node + " " + l.text + "\n";
      }
      ADD_FAILURE() << "seed " << seed << ":\n"
                    << log << "live: " << ::testing::PrintToString(live)
                    << "\nreplay: " << ::testing::PrintToString(replayed);
    }
  }
  EXPECT_EQ(differ, 0);
}

}  // namespace
}  // namespace faultline
