// A bench-only signature bank of N kernel patterns, as a rule file for loadBank(). The first ones
// are the real bank's kernel signatures; the rest are per-code variants a production bank grows
// into when severity and action are set per code (as the 20- to 300-pattern banks of the RE2::Set
// and Vectorscan measurements behind faultline's per-core goals did): one
// signature per Xid code (1-160), per SXid code, per NCCL collective and per mlx5 device,
// interleaved so that every size mixes families.
#pragma once

#include <string>
#include <vector>

#include "matcher/bank.h"

namespace faultline {

struct BenchPattern {
  std::string pattern;  // RE2 syntax
  std::string example;  // a line it matches
};

// The real bank's kernel signatures with a one-line example.
inline std::vector<BenchPattern> realKernelPatterns() {
  std::vector<BenchPattern> out;
  const std::shared_ptr<const Bank> real = loadBank(embeddedRuleFiles());
  for (const Signature& sig : real->signatures) {
    if (sig.appliesTo(StreamKind::kKernel) &&
        sig.match_examples.front().line.find('\n') == std::string::npos) {
      out.push_back({sig.pattern, sig.match_examples.front().line});
    }
  }
  return out;
}

inline std::vector<BenchPattern> benchPatterns(size_t n) {
  std::vector<BenchPattern> out = realKernelPatterns();
  std::vector<std::vector<BenchPattern>> families(4);
  const std::string pci = R"((?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}))";
  for (int code = 1; code <= 160; ++code) {
    const std::string c = std::to_string(code);
    families[0].push_back({R"(NVRM: Xid \((?:PCI:)?)" + pci + R"((?:\.[0-7])?[^)]*\): )" + c +
                               R"(, (?:pid=(?P<pid>[^,]*), name=(?P<name>[^,]*), )?(?P<detail>.*))",
                           "NVRM: Xid (PCI:0000:3b:00): " + c + ", pid=1, name=x, detail"});
  }
  for (int base : {10000, 11000, 12000}) {
    for (int i = 1; i <= 30; ++i) {
      const std::string c = std::to_string(base + i);
      families[1].push_back(
          {R"(nvidia-nvswitch(?P<switch>\d+): SXid \(PCI:)" + pci + R"((?:\.[0-7])?\): )" + c +
               R"(, (?P<severity>Fatal|Non-fatal), Link (?P<link>\d+))",
           "nvidia-nvswitch2: SXid (PCI:0000:06:00.0): " + c + ", Non-fatal, Link 3 x"});
    }
  }
  for (const char* op : {"ALLREDUCE",
                         "ALLGATHER",
                         "REDUCE_SCATTER",
                         "BROADCAST",
                         "REDUCE",
                         "SEND",
                         "RECV",
                         "_ALLGATHER_BASE",
                         "_REDUCE_SCATTER_BASE",
                         "ALLTOALL",
                         "ALLTOALL_BASE",
                         "BARRIER",
                         "GATHER",
                         "SCATTER",
                         "COALESCED",
                         "ALLREDUCE_COALESCED",
                         "ALLGATHER_COALESCED",
                         "RECVANYSOURCE",
                         "GATHER_OBJECT",
                         "UNKNOWN"}) {
    const std::string o = op;
    families[2].push_back(
        {R"(Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=)" +
             o + R"(\b)",
         "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=" + o +
             ", NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600004 milliseconds"});
  }
  for (int dev = 0; dev < 16; ++dev) {
    const std::string d = std::to_string(dev);
    families[3].push_back({R"(mlx5_core (?P<pci>[0-9a-fA-F:.]+) mlx5_)" + d +
                               R"(: Port: (?P<port>\d+) Link (?P<state>DOWN|INIT|ARMED))",
                           "mlx5_core 0000:0c:00.0 mlx5_" + d + ": Port: 1 Link DOWN"});
  }
  for (size_t i = 0; out.size() < n; ++i) {
    bool any = false;
    for (auto& f : families) {
      if (i < f.size() && out.size() < n) {
        out.push_back(f[i]);
        any = true;
      }
    }
    if (!any) {
      break;
    }
  }
  out.resize(std::min(n, out.size()));
  return out;
}

// Patterns [first, size) as a rule file of signatures named bench-<index> (no rules).
inline RuleFile benchSignatures(const std::vector<BenchPattern>& pats, size_t first) {
  auto quote = [](const std::string& s) {
    std::string q = "'";
    for (char c : s) {
      q += c == '\'' ? std::string("''") : std::string(1, c);
    }
    return q + "'";
  };
  std::string yaml = "signatures:\n";
  for (size_t i = first; i < pats.size(); ++i) {
    yaml += "  - id: bench-" + std::to_string(i) + "\n    streams: [kernel]\n    severity: info\n" +
            "    pattern: " + quote(pats[i].pattern) + "\n    examples: {match: [" +
            quote(pats[i].example) + "]}\n";
  }
  return {"bench.yaml", yaml};
}

// The N patterns as one rule file (signatures only, no rules: the matcher needs no more).
inline std::vector<RuleFile> benchBank(size_t n) {
  return {benchSignatures(benchPatterns(n), 0)};
}

// The real bank (its rule files, rules included) grown to N kernel patterns by the per-code
// variants, as a production bank grows: for `faultline replay --rules`.
inline std::vector<RuleFile> grownBank(size_t n) {
  std::vector<RuleFile> files = embeddedRuleFiles();
  files.push_back(benchSignatures(benchPatterns(n), realKernelPatterns().size()));
  return files;
}

}  // namespace faultline
