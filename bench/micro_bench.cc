// Micro-benchmarks of the hot paths: the matcher with the embedded bank (quiet and storm inputs)
// and with the bench bank of 20/100/300 patterns (bench_bank.h), the memchr line split of the same
// bytes (the floor to compare with), the correlator under a flood of one line, and the dmesg /
// syslog / journal-json line parsers. Compare rates within one run: the machines are shared.
//
// Background lines are generated from a seeded std::mt19937 out of templates shaped like the
// kernel lines of the leptonai/gpud test captures (Apache-2.0, /work/shared/corpora/gpud), with
// varying numbers, PCI addresses, interface names and PIDs. Any generated line that some signature
// matches is drawn again, so only the fault lines below match. Fault lines are real ones.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/bench_bank.h"
#include "core/decision.h"
#include "core/record.h"
#include "ingest/formats/formats.h"
#include "matcher/bank.h"
#include "matcher/correlator.h"
#include "matcher/matcher.h"

namespace faultline {
namespace {

// Real fault lines (messages only, as the matcher sees them).
const char* const kFaultLines[] = {
    // https://github.com/leptonai/gpud components/accelerator/nvidia/xid/testdata
    "NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of waiting "
    "for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4).",
    // https://github.com/leptonai/gpud components/memory/testdata/dmesg.decode.iso.log
    "NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception "
    "on (GPC 9, TPC 1, SM 1): Out Of Range Address",
    // https://github.com/NVIDIA/NVSentinel/issues/155
    "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus",
    // https://github.com/leptonai/gpud/pull/1174
    "NVRM: Xid (PCI:0000:9b:00): 94, pid=1234, name=python3, Contained ECC error",
};
constexpr int kFaults = sizeof(kFaultLines) / sizeof(kFaultLines[0]);

class LineGen {
 public:
  explicit LineGen(uint32_t seed) : rng_(seed) {}

  // One benign kernel message.
  std::string next() {
    char b[256];
    switch (num(0, 13)) {
      case 0:
        std::snprintf(b, sizeof b, "IPv6: ADDRCONF(NETDEV_CHANGE): cali%s: link becomes ready",
                      hex(11).c_str());
        break;
      case 1:
        std::snprintf(b, sizeof b, "nvidia-nvswitch%d: open (major=510)", num(0, 7));
        break;
      case 2:
        std::snprintf(b, sizeof b,
                      "mlx5_core %s: E-Switch: Total vports %d, per vport: max uc(128) max "
                      "mc(2048)",
                      pci().c_str(), num(2, 16));
        break;
      case 3:
        std::snprintf(b, sizeof b, "mlx5_core %s: Port module event: module %d, Cable %s",
                      pci().c_str(), num(0, 7), num(0, 1) ? "plugged" : "unplugged");
        break;
      case 4:
        std::snprintf(b, sizeof b, "ata%d: SATA link down (SStatus 0 SControl 300)", num(1, 8));
        break;
      case 5:
        std::snprintf(b, sizeof b,
                      "usb %d-%d.%d: New USB device found, idVendor=%s, idProduct=%s, "
                      "bcdDevice= 1.00",
                      num(1, 4), num(1, 4), num(1, 4), hex(4).c_str(), hex(4).c_str());
        break;
      case 6:
        std::snprintf(b, sizeof b,
                      "audit: type=1400 audit(%d.%03d:%d): apparmor=\"STATUS\" "
                      "operation=\"profile_replace\" profile=\"unconfined\" "
                      "name=\"snap.lxd.hook.install\" pid=%d comm=\"apparmor_parser\"",
                      num(1700000000, 1750000000), num(0, 999), num(1, 9999), num(1000, 4000000));
        break;
      case 7:
        std::snprintf(b, sizeof b, "loop%d: detected capacity change from 0 to %d", num(0, 40),
                      num(8, 400000));
        break;
      case 8:
        std::snprintf(b, sizeof b,
                      "perf: interrupt took too long (%d > %d), lowering "
                      "kernel.perf_event_max_sample_rate to %d",
                      num(2500, 9999), num(2500, 9999), num(20000, 80000));
        break;
      case 9:
        std::snprintf(b, sizeof b, "EDAC amd64: MC: %d:     %dMB %d:     %dMB", num(0, 3),
                      num(0, 32768), num(1, 3), num(0, 32768));
        break;
      case 10:
        std::snprintf(b, sizeof b, "NVRM: GPU at PCI:%s: GPU-%s-%s-%s-%s-%s",
                      pci().substr(0, 10).c_str(), hex(8).c_str(), hex(4).c_str(), hex(4).c_str(),
                      hex(4).c_str(), hex(12).c_str());
        break;
      case 11:
        std::snprintf(b, sizeof b, "kauditd_printk_skb: %d callbacks suppressed", num(1, 200));
        break;
      case 12:
        std::snprintf(b, sizeof b, "mlx5_core %s enp%ds0f%dnp%d: renamed from eth%d", pci().c_str(),
                      num(1, 200), num(0, 1), num(0, 1), num(0, 9));
        break;
      default:
        std::snprintf(b, sizeof b, "device veth%s entered promiscuous mode", hex(7).c_str());
        break;
    }
    return b;
  }

  int num(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

 private:
  std::string hex(int digits) {
    static const char kHex[] = "0123456789abcdef";
    std::string s(digits, '0');
    for (char& c : s) {
      c = kHex[num(0, 15)];
    }
    return s;
  }
  std::string pci() {
    char b[32];
    std::snprintf(b, sizeof b, "0000:%02x:%02x.%d", num(0, 255), num(0, 31), num(0, 1));
    return b;
  }

  std::mt19937 rng_;
};

std::shared_ptr<const Bank> bank() {
  static const std::shared_ptr<const Bank> b = loadBank(embeddedRuleFiles());
  return b;
}

// `n` benign kernel messages; every `fault_every`-th one is a fault line instead.
std::vector<std::string> messages(size_t n, size_t fault_every) {
  Matcher check(bank());
  LineGen gen(42);
  std::vector<std::string> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (i % fault_every == fault_every / 2) {
      out.emplace_back(kFaultLines[(i / fault_every) % kFaults]);
      continue;
    }
    std::string s;
    do {
      s = gen.next();
    } while (!check.matchLine(s, StreamKind::kKernel).empty());
    out.push_back(std::move(s));
  }
  return out;
}

// `repeat`: the fault lines are all the first one, from one node (a storm of one line).
void runMatcher(benchmark::State& state, size_t fault_every,
                const std::shared_ptr<const Bank>& matcher_bank = bank(), bool repeat = false) {
  std::vector<std::string> lines = messages(200000, fault_every);
  if (repeat) {
    for (size_t i = fault_every / 2; i < lines.size(); i += fault_every) {
      lines[i] = kFaultLines[0];
    }
  }
  RecordBatch batch;
  int64_t bytes = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    LogRecord& r = batch.records.emplace_back();
    r.time_ns = static_cast<int64_t>(i) * 1000000;
    r.node = "gpu-node-01";
    r.line = lines[i];
    r.stream = StreamKind::kKernel;
    bytes += static_cast<int64_t>(lines[i].size());
  }
  Matcher matcher(matcher_bank);
  std::vector<Hit> hits;
  for (auto _ : state) {
    hits.clear();
    matcher.match(batch, &hits);
    benchmark::DoNotOptimize(hits.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(lines.size()));
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["hits_per_pass"] = static_cast<double>(hits.size());
  state.counters["avg_line_B"] = static_cast<double>(bytes) / static_cast<double>(lines.size());
}

// ~1 fault per 100k lines.
void BM_MatcherQuietCorpus(benchmark::State& state) {
  runMatcher(state, 100000);
}
BENCHMARK(BM_MatcherQuietCorpus)->Unit(benchmark::kMillisecond);

// 1% of lines match.
void BM_MatcherStorm(benchmark::State& state) {
  runMatcher(state, 100);
}
BENCHMARK(BM_MatcherStorm)->Unit(benchmark::kMillisecond);

// 1% of lines match, all the same Xid line from one node.
void BM_MatcherStormOneLine(benchmark::State& state) {
  runMatcher(state, 100, bank(), true);
}
BENCHMARK(BM_MatcherStormOneLine)->Unit(benchmark::kMillisecond);

// The bench bank of N patterns on the quiet corpus: N=300 should run as fast as N=20.
void BM_MatcherBankSize(benchmark::State& state) {
  runMatcher(state, 100000, loadBank(benchBank(static_cast<size_t>(state.range(0)))));
}
BENCHMARK(BM_MatcherBankSize)->Arg(20)->Arg(100)->Arg(300)->Unit(benchmark::kMillisecond);

// The same, 1% of lines matching (the four real fault lines in turn).
void BM_MatcherBankSizeStorm(benchmark::State& state) {
  runMatcher(state, 100, loadBank(benchBank(static_cast<size_t>(state.range(0)))));
}
BENCHMARK(BM_MatcherBankSizeStorm)->Arg(300)->Unit(benchmark::kMillisecond);

// memchr over the quiet corpus joined by newlines: the floor for any per-line matcher.
void BM_LineSplit(benchmark::State& state) {
  std::string text;
  for (const std::string& l : messages(200000, 100000)) {
    text += l;
    text += '\n';
  }
  size_t lines = 0;
  for (auto _ : state) {
    lines = 0;
    for (const char* p = text.data(); p < text.data() + text.size(); ++lines) {
      p = static_cast<const char*>(std::memchr(p, '\n', text.data() + text.size() - p)) + 1;
    }
    benchmark::DoNotOptimize(lines);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(lines));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_LineSplit)->Unit(benchmark::kMillisecond);

// One node repeating one Xid line: the cost of each hit after the first.
//   /0: fatal Xid 119, 1 ms apart: the first hit taints the node, the rest meet a tainted node.
//   /1: Xid 13 (warning rule, count 3, dedup 10s) all in one burst: the node stays untainted and
//       every hit builds its counter key and falls into the dedup window.
void BM_CorrelatorFlood(benchmark::State& state) {
  const bool burst = state.range(0) == 1;
  RecordBatch batch;
  LogRecord& r = batch.records.emplace_back();
  r.node = "gpu-node-01";
  r.line = kFaultLines[burst ? 1 : 0];
  r.stream = StreamKind::kKernel;
  Matcher matcher(bank());
  std::vector<Hit> hits;
  matcher.match(batch, &hits);
  if (hits.empty()) {
    state.SkipWithError("the Xid line does not match the bank");
    return;
  }
  Correlator correlator(bank(), Taint{});
  std::vector<Decision> out;
  Hit hit = hits.front();
  int64_t decisions = 0;
  for (auto _ : state) {
    hit.time_ns += burst ? 0 : 1000000;
    correlator.observe(hit, &out);
    decisions += static_cast<int64_t>(out.size());
    out.clear();
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["decisions"] = static_cast<double>(decisions);
}
BENCHMARK(BM_CorrelatorFlood)->Arg(0)->Arg(1);

std::string jsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
    }
    out += c;
  }
  return out;
}

// Raw lines of `format` wrapping quiet-corpus messages.
std::vector<std::string> rawLines(Format format, size_t n) {
  const std::vector<std::string> msgs = messages(n, 100000);
  LineGen gen(7);
  std::vector<std::string> out;
  out.reserve(n);
  char b[96];
  for (size_t i = 0; i < n; ++i) {
    const int64_t us = 1741000000000000 + static_cast<int64_t>(i) * 1000 + gen.num(0, 999);
    switch (format) {
      case Format::kDmesg:
        std::snprintf(b, sizeof b, "[%5d.%06d] ", static_cast<int>(i / 1000) + 100,
                      static_cast<int>(us % 1000000));
        out.push_back(b + msgs[i]);
        break;
      case Format::kSyslog:
        std::snprintf(b, sizeof b, "Feb %2d %02d:%02d:%02d gpu-node-%02d kernel: ",
                      static_cast<int>(i / 86400000) + 14, static_cast<int>(i / 3600000) % 24,
                      static_cast<int>(i / 60000) % 60, static_cast<int>(i / 1000) % 60,
                      gen.num(1, 16));
        out.push_back(b + msgs[i]);
        break;
      default:
        std::snprintf(b, sizeof b, "{\"__REALTIME_TIMESTAMP\": \"%lld\", \"_HOSTNAME\": ",
                      static_cast<long long>(us));
        out.push_back(b + std::string("\"gpu-node-01\", \"_TRANSPORT\": \"kernel\", ") +
                      "\"SYSLOG_IDENTIFIER\": \"kernel\", \"PRIORITY\": \"6\", \"MESSAGE\": \"" +
                      jsonEscape(msgs[i]) + "\"}");
        break;
    }
  }
  return out;
}

void runParser(benchmark::State& state, Format format) {
  const std::vector<std::string> lines = rawLines(format, 100000);
  int64_t bytes = 0;
  for (const std::string& l : lines) {
    bytes += static_cast<int64_t>(l.size());
  }
  ParseOptions opts;
  opts.node = "gpu-node-01";
  opts.year = 2025;
  auto parser = makeParser(format, opts);
  RecordBatch batch;
  int64_t rejected = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i % 8192 == 0) {
        batch.clear();  // as ArchiveSource hands on batches of 8192 records
      }
      rejected += parser->parse(lines[i], &batch) ? 0 : 1;
    }
    parser->finish(&batch);
    benchmark::DoNotOptimize(batch.records.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(lines.size()));
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["rejected"] = static_cast<double>(rejected);
}

void BM_DmesgParse(benchmark::State& state) {
  runParser(state, Format::kDmesg);
}
BENCHMARK(BM_DmesgParse)->Unit(benchmark::kMillisecond);

void BM_SyslogParse(benchmark::State& state) {
  runParser(state, Format::kSyslog);
}
BENCHMARK(BM_SyslogParse)->Unit(benchmark::kMillisecond);

void BM_JournalJsonParse(benchmark::State& state) {
  runParser(state, Format::kJournalJson);
}
BENCHMARK(BM_JournalJsonParse)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace faultline

BENCHMARK_MAIN();
