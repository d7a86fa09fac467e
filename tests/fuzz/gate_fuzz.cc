// Differential fuzzing of the literal gate against the RE2::Set it guards, on the real bank: a
// line the Set matches must pass the gate, with the static gate and with one tuned on a sample;
// the batch scan must agree with the one-line scan, and Teddy (where it runs) with Wu-Manber.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "matcher/bank.h"
#include "matcher/literal_gate.h"

namespace {

struct Kind {
  const RE2::Set* set = nullptr;
  std::vector<faultline::LiteralGate> gates;     // static, then tuned on each sample
  std::vector<faultline::LiteralGate> portable;  // the same, Wu-Manber
};

std::vector<Kind> build() {
  static const std::shared_ptr<const faultline::Bank> bank =
      faultline::loadBank(faultline::embeddedRuleFiles());
  const std::vector<std::string> samples = {
      "", "mlx5_core 0000:ab:00.0: E-Switch\nnvidia-nvswitch0: open\nata1: SATA link down\n",
      "NVRM: Xid (PCI:0000:44:00): 79, x\nNCCL WARN Call to ibv_modify_qp failed\n"};
  std::vector<Kind> kinds;
  for (int kind = 0; kind < faultline::kStreamKinds; ++kind) {
    const faultline::CompiledSet& cs = bank->sets[static_cast<size_t>(kind)];
    if (!cs.set) {
      continue;
    }
    const std::vector<std::string> patterns =
        bank->patterns(static_cast<faultline::StreamKind>(kind));
    Kind k;
    k.set = cs.set.get();
    for (const std::string& s : samples) {
      k.gates.emplace_back(patterns, s);
      k.portable.emplace_back(patterns, s, faultline::LiteralGate::Scan::kPortable);
    }
    kinds.push_back(std::move(k));
  }
  return kinds;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<Kind> kinds = build();
  const std::string text(reinterpret_cast<const char*>(data), size);
  // The input as one line, and split at '\n' as a batch for the two-line scan.
  std::vector<std::string_view> lines;
  for (size_t p = 0; p <= text.size();) {
    const size_t nl = std::min(text.find('\n', p), text.size());
    lines.push_back(std::string_view(text).substr(p, nl - p));
    p = nl + 1;
  }
  std::vector<int> ids;
  for (const Kind& k : kinds) {
    for (size_t gi = 0; gi < k.gates.size(); ++gi) {
      const faultline::LiteralGate& g = k.gates[gi];
      const faultline::LiteralGate& p = k.portable[gi];
      if ((k.set->Match(text, &ids) && !g.mayMatch(text)) || g.mayMatch(text) != p.mayMatch(text)) {
        std::abort();  // the gate ruled out a line the Set matches, or its scans disagree
      }
      std::vector<uint8_t> may(lines.size());
      g.mayMatch(lines.data(), lines.size(), may.data());
      for (size_t i = 0; i < lines.size(); ++i) {
        if (may[i] != (g.mayMatch(lines[i]) ? 1 : 0) || may[i] != (p.mayMatch(lines[i]) ? 1 : 0) ||
            (k.set->Match(lines[i], &ids) && may[i] == 0)) {
          std::abort();
        }
      }
    }
  }
  return 0;
}
