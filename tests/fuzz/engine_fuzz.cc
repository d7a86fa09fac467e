// Fuzzes the engine on untrusted lines: any sequence of log lines, live (batch by batch, with and
// without a max_lag) and in replay, with the embedded bank. Each input line is one record: byte 0
// picks the node (of 4), byte 1 the step of event time from the record before (signed, in units of
// 10 s: up to 21 min either way, so that bursts, windows, repeats and quiet timers all come into
// play), byte 2 the stream kind, the rest the log line. Aborts if a node's decisions do not
// alternate taint, untaint, taint, ... (the real ones and those in dry run apart, with some
// rules in dry run, as when one is tried out) or a decision names a node that sent nothing.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/pipeline.h"
#include "core/time.h"
#include "matcher/bank.h"

namespace {

using faultline::Decision;

class Alternation : public faultline::DecisionSink {
 public:
  void write(const Decision& d) override {
    if (d.node.size() != 1 || d.node[0] < 'a' || d.node[0] > 'd') {
      std::abort();
    }
    if (d.action == Decision::Action::kSuspect) {  // changes nothing on the node
      return;
    }
    bool& tainted = tainted_[d.node + (d.dry_run ? " dry run" : "")];
    if ((d.action == Decision::Action::kTaint) == tainted ||
        d.action == Decision::Action::kSuppressed) {
      std::abort();
    }
    tainted = !tainted;
  }

 private:
  std::map<std::string, bool> tainted_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto bank = faultline::loadBank(faultline::embeddedRuleFiles());
  if (size > 1 << 14) {
    return 0;
  }
  constexpr size_t kBatch = 8;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<faultline::RecordBatch> batches(1);
  int64_t time_ns = 1'741'000'000 * faultline::kNanosPerSecond;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    end = end == std::string_view::npos ? text.size() : end;
    const std::string_view rec = text.substr(start, end - start);
    start = end + 1;
    if (rec.size() < 3) {
      continue;
    }
    time_ns += static_cast<int8_t>(rec[1]) * 10 * faultline::kNanosPerSecond;
    faultline::RecordBatch& batch = batches.back();
    const std::string node(1, static_cast<char>('a' + static_cast<uint8_t>(rec[0]) % 4));
    const auto kind =
        static_cast<faultline::StreamKind>(static_cast<uint8_t>(rec[2]) % faultline::kStreamKinds);
    // A pod record names one of two jobs (or none): job runs, for the Neuron hang's suspects.
    const auto job =
        static_cast<uint32_t>(static_cast<uint8_t>(rec[2]) / faultline::kStreamKinds % 3);
    const bool labelled = kind == faultline::StreamKind::kPod && job < 2;
    batch.labels = {{"job-name", "j0"}, {"job-name", "j1"}};
    batch.records.push_back({time_ns, batch.copy(node), batch.copy(rec.substr(3)),
                             labelled ? job : 0, labelled ? job + 1 : 0, kind});
    if (batch.records.size() == kBatch) {
      batches.emplace_back();
    }
  }
  Alternation live_sink;
  faultline::Pipeline live(bank, faultline::Taint{}, {&live_sink});
  Alternation lagged_sink;
  faultline::Pipeline lagged(bank, faultline::Taint{}, {&lagged_sink}, 1,
                             300 * faultline::kNanosPerSecond);
  // Rules that suppress, follow, recover and are recovered, in dry run.
  Alternation dry_sink;
  faultline::Pipeline dry(bank, faultline::Taint{}, {&dry_sink}, 1,
                          300 * faultline::kNanosPerSecond, {},
                          {"xid-fatal", "node-boot", "cper-fatal", "ib-port-down-lasting"});
  Alternation replay_sink;
  faultline::Pipeline replay(bank, faultline::Taint{}, {&replay_sink});
  for (const faultline::RecordBatch& batch : batches) {
    live.process(batch);
    lagged.process(batch);
    dry.process(batch);
    replay.collect(batch, 0);
  }
  replay.finishReplay();
  return 0;
}
