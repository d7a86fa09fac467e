// Micro-benchmarks of the hot paths: the matcher with the embedded bank (quiet and storm inputs)
// and with the bench bank of 20/100/300 patterns (bench_bank.h), its literal gate alone (Teddy
// and Wu-Manber), the memchr line split of the same bytes (the floor to compare with), the
// correlator (under a flood of one line, and over a storm of the bank's own example lines across
// many nodes), serve's per-batch match and correlating turn, the five archive line parsers
// (dmesg, syslog, journal-json, otlp-json, loki-jsonl) and the four Kafka decoders (raw, json,
// otlp_proto, otlp_json). The push decoders are in push_bench.cc. Compare rates within one run:
// the machines are shared.
//
// Background lines are generated from a seeded std::mt19937 out of templates shaped like the
// kernel lines of the leptonai/gpud test captures (Apache-2.0, /work/shared/corpora/gpud), with
// varying numbers, PCI addresses, interface names and PIDs. Any generated line that some signature
// matches is drawn again, so only the fault lines below match. Fault lines are real ones.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <malloc.h>

#include "bench/bench_bank.h"
#include "bench/bench_records.h"
#include "core/batch_queue.h"
#include "core/commands.h"
#include "core/decision.h"
#include "core/pipeline.h"
#include "core/record.h"
#include "core/serve_loop.h"
#include "core/time.h"
#include "ingest/formats/formats.h"
#include "ingest/kafka/decoders.h"
#include "matcher/bank.h"
#include "matcher/correlator.h"
#include "matcher/literal_gate.h"
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

// Node names gpu-node-0 .. gpu-node-(n-1).
std::vector<std::string> nodeNames(int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) {
    names.push_back("gpu-node-" + std::to_string(i));
  }
  return names;
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

// The fault lines of a corpus: the real ones in turn, all the first one (a storm of one line), or
// each made distinct by a number, as pids and addresses make them (every one pays for the Set and
// the captures).
enum class Faults : uint8_t { kInTurn, kOneLine, kDistinct };

void runMatcher(benchmark::State& state, size_t fault_every,
                const std::shared_ptr<const Bank>& matcher_bank = bank(),
                Faults faults = Faults::kInTurn) {
  std::vector<std::string> lines = messages(200000, fault_every);
  for (size_t i = fault_every / 2; i < lines.size(); i += fault_every) {
    if (faults == Faults::kOneLine) {
      lines[i] = kFaultLines[0];
    } else if (faults == Faults::kDistinct) {
      lines[i] += " " + std::to_string(i);
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
  runMatcher(state, 100, bank(), Faults::kOneLine);
}
BENCHMARK(BM_MatcherStormOneLine)->Unit(benchmark::kMillisecond);

// 1% of lines match, no two alike.
void BM_MatcherStormDistinct(benchmark::State& state) {
  runMatcher(state, 100, bank(), Faults::kDistinct);
}
BENCHMARK(BM_MatcherStormDistinct)->Unit(benchmark::kMillisecond);

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

// The literal gate alone over the quiet corpus, tuned on its first 1000 lines as the Matcher
// tunes it. Args: bank (0: the embedded bank's kernel patterns; N: the bench bank of N), scan
// (0: the fastest here, Teddy on x86-64 with SSSE3; 1: Wu-Manber). Counters: literals, teddy
// (1 if it ran), build_ms (the gate's construction).
void BM_LiteralGate(benchmark::State& state) {
  static const std::vector<std::string> lines = messages(200000, 100000);
  const std::shared_ptr<const Bank> b =
      state.range(0) == 0 ? bank() : loadBank(benchBank(static_cast<size_t>(state.range(0))));
  const std::vector<std::string> patterns = b->patterns(StreamKind::kKernel);
  std::string sample;
  for (size_t i = 0; i < Matcher::kTuneLines; ++i) {
    sample += lines[i] + "\n";
  }
  const auto start = std::chrono::steady_clock::now();
  const LiteralGate gate(
      patterns, sample,
      state.range(1) == 0 ? LiteralGate::Scan::kFastest : LiteralGate::Scan::kPortable);
  const std::chrono::duration<double, std::milli> build = std::chrono::steady_clock::now() - start;
  const std::vector<std::string_view> views(lines.begin(), lines.end());
  int64_t bytes = 0;
  for (const std::string& l : lines) {
    bytes += static_cast<int64_t>(l.size());
  }
  std::vector<uint8_t> may(views.size());
  for (auto _ : state) {
    gate.mayMatch(views.data(), views.size(), may.data());
    benchmark::DoNotOptimize(may.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(views.size()));
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["literals"] = static_cast<double>(gate.literals().size());
  state.counters["teddy"] = gate.teddy() ? 1 : 0;
  state.counters["build_ms"] = build.count();
}
BENCHMARK(BM_LiteralGate)->ArgsProduct({{0, 20, 300}, {0, 1}})->Unit(benchmark::kMillisecond);

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

// One node repeating one Xid line: the cost of each hit after the first. Args: line, ms apart.
//   /0/1: fatal Xid 119, 1 ms apart: the first hit taints the node; of the rest, all but the
//         first of each second are repeats (Correlator), the others meet a tainted node.
//   /1/0: Xid 13 (warning rule, count 3, burst 1m) all at one instant: repeats.
//   /0/1000, /1/1000: the same lines 1 s apart, so that none repeats: every Xid 119 meets a
//         tainted node; every Xid 13 builds its counter key and falls into the burst.
void BM_CorrelatorFlood(benchmark::State& state) {
  const bool burst = state.range(0) == 1;
  const int64_t apart_ns = state.range(1) * 1'000'000;
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
    hit.time_ns += apart_ns;
    correlator.observe(hit, &out);
    decisions += static_cast<int64_t>(out.size());
    out.clear();
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["decisions"] = static_cast<double>(decisions);
}
BENCHMARK(BM_CorrelatorFlood)->Args({0, 1})->Args({1, 0})->Args({0, 1000})->Args({1, 1000});

// The hit of `line` on a `stream` record of gpu-node-01; none (the benchmark skipped) if the
// bank no longer matches the line.
std::optional<Hit> bankHit(benchmark::State& state, std::string_view line, StreamKind stream) {
  RecordBatch batch;
  LogRecord& r = batch.records.emplace_back();
  r.node = "gpu-node-01";
  r.line = line;
  r.stream = stream;
  Matcher matcher(bank());
  std::vector<Hit> hits;
  matcher.match(batch, &hits);
  if (hits.empty()) {
    state.SkipWithError("a benchmark's line does not match the bank");
    return std::nullopt;
  }
  return hits.front();
}

// The hit of an NCCL error a pod logs.
std::optional<Hit> ncclPodHit(benchmark::State& state) {
  return bankHit(state, "NCCL error in: x, internal error, NCCL version 2.18.1", StreamKind::kPod);
}

// Each pass feeds `flood` to a fresh correlator and closes its windows (finish()). Items are hits.
void correlateFlood(benchmark::State& state, const std::vector<Hit>& flood) {
  std::vector<Decision> out;
  for (auto _ : state) {
    Correlator correlator(bank(), Taint{});
    for (const Hit& h : flood) {
      correlator.observe(h, &out);
    }
    correlator.finish(&out);
    out.clear();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(flood.size()));
}

// A flood of job labels (arg: how many jobs), as a hostile push can mint them: each job's pod on
// one node logs one NCCL error at the same time, each held by the cluster rule nccl-error (a
// job's event or a node's, told once its window closes) and counted per job (distinct_jobs). The
// time per hit stays flat as the jobs grow (each window closing scanned every job held, and each
// hit every job counted on the node: 32 s for 64000 jobs).
void BM_CorrelatorManyJobs(benchmark::State& state) {
  const std::optional<Hit> hit = ncclPodHit(state);
  if (!hit) {
    return;
  }
  std::vector<Hit> flood(static_cast<size_t>(state.range(0)), *hit);
  for (size_t j = 0; j < flood.size(); ++j) {
    flood[j].time_ns = 1'740'787'200 * kNanosPerSecond;
    flood[j].fields.emplace_back(kJobField, "job-" + std::to_string(j));
  }
  correlateFlood(state, flood);
}
BENCHMARK(BM_CorrelatorManyJobs)->Arg(4000)->Arg(16000)->Arg(64000)->Unit(benchmark::kMillisecond);

// A flood of NCCL errors from pods without a job (arg: how many), one node's, each in a second of
// its own within ten minutes: they count for no node and only a kernel line corroborates them.
// The time per hit stays flat as the flood grows (held in one cluster window, each closing
// rescanned them all: 5.2 s of replay for 40,000).
void BM_CorrelatorJoblessFlood(benchmark::State& state) {
  const std::optional<Hit> hit = ncclPodHit(state);
  if (!hit) {
    return;
  }
  std::vector<Hit> flood(static_cast<size_t>(state.range(0)), *hit);
  const int64_t step = 600 * kNanosPerSecond / static_cast<int64_t>(flood.size());
  for (size_t i = 0; i < flood.size(); ++i) {
    flood[i].time_ns = 1'740'787'200 * kNanosPerSecond + static_cast<int64_t>(i) * step;
    flood[i].line += " " + std::to_string(i);  // distinct lines: no repeats
  }
  correlateFlood(state, flood);
}
BENCHMARK(BM_CorrelatorJoblessFlood)->Arg(10000)->Arg(40000)->Unit(benchmark::kMillisecond);

// A flood of Neuron HANG_ON_COLLECTIVES reports (100000 distinct lines, nc-id counting up) from
// three nodes of a four-node job within 10 s, among `arg` such jobs, each node running one (job
// runs recorded before the timing). Each pass feeds them to a fresh correlator and closes the
// hangs (finish(): one suspect). Items are reports; `waiting` is how many wait before finish()
// (at most one per node and second).
void BM_CorrelatorHangFlood(benchmark::State& state) {
  const std::optional<Hit> hit =
      bankHit(state, "NEURON_HW_ERR=HANG_ON_COLLECTIVES instance-id=i-1 nd-id=0 nc-id=0",
              StreamKind::kKernel);
  if (!hit) {
    return;
  }
  const int64_t t0 = 1'740'787'200 * kNanosPerSecond;
  std::vector<Hit> flood(100000, *hit);
  for (size_t i = 0; i < flood.size(); ++i) {
    flood[i].node = "n" + std::to_string(i % 3);
    flood[i].time_ns = t0 + static_cast<int64_t>(i) * 100'000;
    flood[i].line += std::to_string(i);  // distinct lines: no repeats
  }
  const auto jobs = static_cast<int>(state.range(0));
  std::vector<Decision> out;
  int64_t suspects = 0;
  size_t waiting = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Correlator correlator(bank(), Taint{});
    for (int j = 0; j < jobs; ++j) {
      for (int k = 0; k < 4; ++k) {
        correlator.member("job-" + std::to_string(j), "n" + std::to_string(4 * j + k),
                          t0 - 300 * kNanosPerSecond, t0);
      }
    }
    state.ResumeTiming();
    for (const Hit& h : flood) {
      correlator.observe(h, &out);
    }
    waiting = correlator.waitingReports();
    correlator.finish(&out);
    suspects += static_cast<int64_t>(out.size());
    out.clear();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(flood.size()));
  state.counters["suspects_per_pass"] =
      static_cast<double>(suspects) / static_cast<double>(state.iterations());
  state.counters["waiting"] = static_cast<double>(waiting);
}
BENCHMARK(BM_CorrelatorHangFlood)->Arg(1)->Arg(300)->Arg(1000)->Unit(benchmark::kMillisecond);

// A storm over many nodes (arg: how many): 100000 records, each a match example of the bank
// (real lines, sources in rules/) on a stream kind its signature applies to, on a node drawn
// at random, 100 µs apart in event time (10000 hits/s cluster-wide). The matcher turns them into
// hits once, outside the timing; each pass feeds them to a fresh correlator, moving its clock
// every 1000 hits as the pipeline does per batch. Items are hits.
void BM_CorrelatorStorm(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  std::vector<std::pair<std::string_view, StreamKind>> examples;
  for (const Signature& sig : bank()->signatures) {
    for (const Example& ex : sig.match_examples) {
      for (int k = 0; k < kStreamKinds; ++k) {
        if (sig.appliesTo(static_cast<StreamKind>(k))) {
          examples.emplace_back(ex.line, static_cast<StreamKind>(k));
          break;
        }
      }
    }
  }
  const std::vector<std::string> names = nodeNames(nodes);
  LineGen gen(11);
  RecordBatch batch;
  for (int i = 0; i < 100000; ++i) {
    const auto& [line, kind] = examples[gen.num(0, static_cast<int>(examples.size()) - 1)];
    LogRecord& r = batch.records.emplace_back();
    r.time_ns = 1'741'000'000'000'000'000 + static_cast<int64_t>(i) * 100000;
    r.node = names[gen.num(0, nodes - 1)];
    r.line = line;
    r.stream = kind;
  }
  Matcher matcher(bank());
  std::vector<Hit> hits;
  matcher.match(batch, &hits);
  std::vector<Decision> out;
  int64_t decisions = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto correlator = std::make_unique<Correlator>(bank(), Taint{});
    state.ResumeTiming();
    for (size_t i = 0; i < hits.size(); ++i) {
      correlator->observe(hits[i], &out);
      if (i % 1000 == 999) {
        correlator->advance(hits[i].time_ns, &out);
      }
      decisions += static_cast<int64_t>(out.size());
      out.clear();
    }
    state.PauseTiming();
    correlator.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(hits.size()));
  state.counters["hits_per_pass"] = static_cast<double>(hits.size());
  state.counters["decisions_per_pass"] = static_cast<double>(decisions) / state.iterations();
}
BENCHMARK(BM_CorrelatorStorm)->Arg(100)->Arg(10000)->Unit(benchmark::kMillisecond);

// What the correlator keeps per node (bytes_per_node: heap in use, mallinfo2, after the hits less
// before the correlator), and what it still keeps once the nodes were silent for forgetAfterNs()
// (bytes_per_node_a_week_on), when it forgets them: node churn does not grow it. Each of 10000
// nodes boots as a GPU node's kernel prints it (Linux version, the NVIDIA driver load, 8 GPUs with
// their UUIDs: aliases), 1 s apart per line; arg 1 adds an Xid 13 per node (a warning rule's
// counter holds it for its window).
void BM_CorrelatorNodeState(benchmark::State& state) {
  constexpr int kNodes = 10000;
  std::vector<std::string> lines = {
      // https://github.com/leptonai/gpud components/os/testdata, kernel boot and driver load
      "Linux version 5.15.0-1053-nvidia (buildd@lcy02-amd64-089) (gcc (Ubuntu "
      "11.4.0-1ubuntu1~22.04) 11.4.0, GNU ld (GNU Binutils for Ubuntu) 2.38) #54-Ubuntu SMP",
      "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023"};
  for (int g = 0; g < 8; ++g) {
    char line[96];
    std::snprintf(line, sizeof line,
                  "NVRM: GPU at PCI:0000:%02x:00: GPU-7f8e%04x-1c2b-4d5e-8f90-a1b2c3d4e5f6",
                  0x18 + g * 0x10, g);
    lines.emplace_back(line);
  }
  if (state.range(0) == 1) {
    lines.emplace_back(kFaultLines[1]);
  }
  const std::vector<std::string> names = nodeNames(kNodes);
  RecordBatch batch;
  for (int n = 0; n < kNodes; ++n) {
    for (size_t i = 0; i < lines.size(); ++i) {
      LogRecord& r = batch.records.emplace_back();
      r.time_ns = 1'741'000'000'000'000'000 + static_cast<int64_t>(i) * 1'000'000'000;
      r.node = names[n];
      r.line = lines[i];
      r.stream = StreamKind::kKernel;
    }
  }
  Matcher matcher(bank());
  std::vector<Hit> hits;
  matcher.match(batch, &hits);
  if (hits.size() < batch.records.size()) {
    state.SkipWithError("a line does not match the bank");
    return;
  }
  std::vector<Decision> out;
  double bytes_per_node = 0;
  double forgotten_bytes_per_node = 0;
  for (auto _ : state) {
    const size_t before = mallinfo2().uordblks;
    // Live, with serve's default max_lag of 10 minutes: only a live correlator forgets nodes.
    auto correlator = std::make_unique<Correlator>(bank(), Taint{}, 600 * kNanosPerSecond);
    for (const Hit& hit : hits) {
      correlator->observe(hit, &out);
      out.clear();
    }
    correlator->advance(hits.back().time_ns, &out);
    bytes_per_node = static_cast<double>(mallinfo2().uordblks - before) / kNodes;
    state.PauseTiming();
    // A week later, with no word from the nodes: forgotten (Correlator::forgetAfterNs).
    correlator->advance(hits.back().time_ns + correlator->forgetAfterNs() + 1, &out);
    forgotten_bytes_per_node = static_cast<double>(mallinfo2().uordblks - before) / kNodes;
    correlator.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(hits.size()));
  state.counters["bytes_per_node"] = bytes_per_node;
  state.counters["bytes_per_node_a_week_on"] = forgotten_bytes_per_node;
}
BENCHMARK(BM_CorrelatorNodeState)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Serve's two parts per batch (core/serve_loop.cc): Pipeline::match, which the match workers run
// at once, and Pipeline::correlate, which they run one batch at a time in queue order. Their
// ratio is the share of the work that does not spread over workers. A batch is one push request:
// 1000 quiet-corpus records of one stream, 1 ms apart. Args: stream (0 kernel; 1 pod records
// labelled with their job, whose membership the turn records; 2 a kernel storm, as a Kafka batch
// holds it: every 100th line a fault line, of 10 nodes, the batch 1 s later on each pass so that
// windows, dedup and active faults see a continuing storm) and part (0 match, 1 correlate).
void BM_PipelineTurn(benchmark::State& state) {
  const bool pod = state.range(0) == 1;
  const bool storm = state.range(0) == 2;
  const bool turn = state.range(1) == 1;
  const std::vector<std::string> lines = messages(1000, storm ? 100 : 100000);
  const std::vector<std::string> nodes = nodeNames(10);
  RecordBatch batch;
  batch.labels = {{"job_name", "llama-pretrain"}, {"pod", "llama-pretrain-worker-7"}};
  for (size_t i = 0; i < lines.size(); ++i) {
    LogRecord& r = batch.records.emplace_back();
    r.time_ns = 1'741'000'000'000'000'000 + static_cast<int64_t>(i) * 1'000'000;
    r.node = nodes[storm ? (i / 100) % nodes.size() : 0];
    r.line = lines[i];
    r.stream = pod ? StreamKind::kPod : StreamKind::kKernel;
    r.labels_end = pod ? 2 : 0;
  }
  Pipeline pipeline(bank(), Taint{}, {});
  BatchMatch matched;
  pipeline.match(0, batch, &matched);
  // The turn moves the hits away: each pass correlates a copy, so that a storm pass pays the
  // allocations the matcher makes for its hits as well (an upper bound of the turn).
  const std::vector<Hit> hits = matched.hits;
  int64_t shift_ns = 0;
  for (auto _ : state) {
    if (turn) {
      matched.hits = hits;
      if (storm) {
        shift_ns += 1'000'000'000;
        for (Hit& h : matched.hits) {
          h.time_ns += shift_ns;
        }
        matched.newest_ns += 1'000'000'000;
      }
      pipeline.correlate(matched);
    } else {
      pipeline.match(0, batch, &matched);
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(lines.size()));
  state.counters["hits_per_batch"] = static_cast<double>(hits.size());
}
BENCHMARK(BM_PipelineTurn)->ArgsProduct({{0, 1, 2}, {0, 1}});

// The calling thread's CPU time, seconds.
double threadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The records of one serve batch (BM_ServeWorkers) whose node is in partition `part` of
// `parts` (node index modulo parts): 1000 lines 1 ms apart from start_ns (ns since the epoch), of
// 10 nodes, 100 lines each in turn, or all of the first node (`one_node`).
BatchQueue::Item serveBatch(const std::vector<std::string>& lines,
                            const std::vector<std::string>& nodes, int64_t start_ns, size_t parts,
                            size_t part, bool one_node) {
  BatchQueue::Item item;
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t node = one_node ? 0 : (i / 100) % nodes.size();
    if (node % parts != part) {
      continue;
    }
    LogRecord& r = item.batch.records.emplace_back();
    r.time_ns = start_ns + static_cast<int64_t>(i) * 1'000'000;
    r.node = nodes[node];
    r.line = lines[i];
    r.stream = StreamKind::kKernel;
  }
  item.bytes = item.batch.memoryBytes();
  return item;
}

// Serve's match workers without ingest (runMatchWorker, core/serve_loop.h): 200 batches of 1000
// kernel records of 10 nodes (the quiet corpus, or BM_PipelineTurn/2's storm: every 100th line a
// fault line), 1 s of event time each, queued at once and then matched and correlated by
// `workers` threads until the queue drains. Wall time: on two otherwise idle CPUs, 2 workers over
// 1 is what a second core gives serve, ingest aside. Args: workers, corpus (0 quiet, 1 storm,
// 2 the storm's lines all from one node: a flood), partitioned (0, 1).
//
// With partitioned (third arg 1), the node space is split instead, which serve does not do: each
// worker has its own Pipeline (matcher and correlator) and its own queue, holding the records of
// every batch whose node falls in its partition (serveBatch). Nothing is shared: no turn, and no
// correlator state moves between cores. So /2/s/1 over /1/s/0 bounds what partitioning by node
// could give, its cross-node parts (cluster windows, suspects_peers, the taint cap) and the
// splitting of batches left out.
void BM_ServeWorkers(benchmark::State& state) {
  const auto workers = static_cast<size_t>(state.range(0));
  const bool storm = state.range(1) >= 1;
  const bool one_node = state.range(1) == 2;
  const size_t parts = state.range(2) == 1 ? workers : 1;
  constexpr int kBatches = 200;
  const std::vector<std::string> lines = messages(1000, storm ? 100 : 100000);
  const std::vector<std::string> nodes = nodeNames(10);
  std::vector<std::unique_ptr<Pipeline>> pipelines;  // one per partition
  for (size_t p = 0; p < parts; ++p) {
    pipelines.push_back(
        std::make_unique<Pipeline>(bank(), Taint{}, std::vector<DecisionSink*>{}, workers / parts));
  }
  int64_t start_ns = 1'741'000'000'000'000'000;
  std::vector<double> worker_cpu_s(workers);  // each worker thread's CPU time, summed
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<std::unique_ptr<BatchQueue>> queues;  // one per partition
    std::vector<std::unique_ptr<InOrder>> in_order;
    for (size_t p = 0; p < parts; ++p) {
      queues.push_back(std::make_unique<BatchQueue>(SIZE_MAX));
      in_order.push_back(std::make_unique<InOrder>());
    }
    for (int b = 0; b < kBatches; ++b) {
      for (size_t p = 0; p < parts; ++p) {
        BatchQueue::Item item = serveBatch(lines, nodes, start_ns, parts, p, one_node);
        queues[p]->tryPush(item);
      }
      start_ns += 1'000'000'000;
    }
    for (auto& q : queues) {
      q->close();
    }
    state.ResumeTiming();
    std::vector<std::thread> threads;
    for (size_t w = 0; w < workers; ++w) {
      threads.emplace_back([&, w] {
        const size_t p = w % parts;
        runMatchWorker(w / parts, *queues[p], *pipelines[p], *in_order[p],
                       [](const BatchQueue::Item&, const BatchMatch&) {});
        worker_cpu_s[w] += threadCpuSeconds();
      });
    }
    for (std::thread& t : threads) {
      t.join();
    }
  }
  state.SetItemsProcessed(state.iterations() * kBatches * static_cast<int64_t>(lines.size()));
  double cpu_s = 0;
  for (double s : worker_cpu_s) {
    cpu_s += s;
  }
  // The workers' CPU time per batch (all its partitions), ms: what two workers add to one's is the
  // cost of sharing (cache misses, locks). Time descheduled does not count, unlike wall time's.
  state.counters["cpu_ms_per_batch"] =
      cpu_s * 1e3 / static_cast<double>(state.iterations() * kBatches);
  // The busiest worker's share of the CPU time (0.5 with two in balance): with the node space
  // partitioned, each worker's load is its nodes'.
  state.counters["busiest_share"] =
      *std::max_element(worker_cpu_s.begin(), worker_cpu_s.end()) / cpu_s;
}
BENCHMARK(BM_ServeWorkers)
    ->Args({1, 0, 0})
    ->Args({2, 0, 0})
    ->Args({2, 0, 1})
    ->Args({1, 1, 0})
    ->Args({2, 1, 0})
    ->Args({2, 1, 1})
    ->Args({1, 2, 0})
    ->Args({2, 2, 0})
    ->Args({2, 2, 1})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

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
      case Format::kJournalJson:
        std::snprintf(b, sizeof b, "{\"__REALTIME_TIMESTAMP\": \"%lld\", \"_HOSTNAME\": ",
                      static_cast<long long>(us));
        out.push_back(b + std::string("\"gpu-node-01\", \"_TRANSPORT\": \"kernel\", ") +
                      "\"SYSLOG_IDENTIFIER\": \"kernel\", \"PRIORITY\": \"6\", \"MESSAGE\": \"" +
                      jsonEscape(msgs[i]) + "\"}");
        break;
      case Format::kLokiJsonl: {
        // A Promtail/Alloy journal scrape relabelled the usual way, as logcli prints it.
        nlohmann::ordered_json j;
        j["labels"] = {{"host", "gpu-node-01"},
                       {"job", "systemd-journal"},
                       {"syslog_identifier", "kernel"},
                       {"transport", "kernel"}};
        j["line"] = msgs[i];
        j["timestamp"] = formatRfc3339(us * 1000 + gen.num(0, 999));
        out.push_back(j.dump());
        break;
      }
      case Format::kOtlpJson: {
        // The collector's file exporter writes one request per batch; 100 entries per line.
        constexpr size_t kPerLine = 100;
        if (i % kPerLine != 0) {
          break;
        }
        std::vector<KernelEntry> entries;
        for (size_t k = i; k < std::min(n, i + kPerLine); ++k) {
          entries.push_back(
              {"gpu-node-01", us * 1000 + static_cast<int64_t>(k - i) * 1000000, msgs[k], k});
        }
        out.push_back(otlpJson(entries.data(), entries.size()));
        break;
      }
      case Format::kContainer:
        // A CRI log file under /var/log/pods, stamped as containerd stamps it.
        out.push_back(formatRfc3339(us * 1000 + gen.num(0, 999)) + " stdout F " + msgs[i]);
        break;
      case Format::kJson:
        // Vector's journald source as its file or aws_s3 sink writes it (encoding.codec: json).
        out.push_back(
            "{\"SYSLOG_IDENTIFIER\":\"kernel\",\"_TRANSPORT\":\"kernel\",\"host\":"
            "\"gpu-node-01\",\"message\":\"" +
            jsonEscape(msgs[i]) + "\",\"source_type\":\"journald\",\"timestamp\":\"" +
            formatRfc3339(us * 1000) + "\"}");
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
  int64_t records = 0;  // items are records: an otlp-json line holds many
  for (auto _ : state) {
    for (const std::string& line : lines) {
      if (batch.records.size() >= 8192) {
        records += static_cast<int64_t>(batch.records.size());
        batch.clear();  // as ArchiveSource hands on batches of 8192 records
      }
      rejected += parser->parse(line, &batch) ? 0 : 1;
    }
    parser->finish(&batch);
    benchmark::DoNotOptimize(batch.records.data());
    records += static_cast<int64_t>(batch.records.size());
    batch.clear();
  }
  state.SetItemsProcessed(records);
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["rejected"] = static_cast<double>(rejected);
  state.counters["records_per_pass"] = static_cast<double>(records) / state.iterations();
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

void BM_OtlpJsonParse(benchmark::State& state) {
  runParser(state, Format::kOtlpJson);
}
BENCHMARK(BM_OtlpJsonParse)->Unit(benchmark::kMillisecond);

void BM_LokiJsonlParse(benchmark::State& state) {
  runParser(state, Format::kLokiJsonl);
}
BENCHMARK(BM_LokiJsonlParse)->Unit(benchmark::kMillisecond);

void BM_ContainerParse(benchmark::State& state) {
  runParser(state, Format::kContainer);
}
BENCHMARK(BM_ContainerParse)->Unit(benchmark::kMillisecond);

void BM_JsonParse(benchmark::State& state) {
  runParser(state, Format::kJson);
}
BENCHMARK(BM_JsonParse)->Unit(benchmark::kMillisecond);

// Kafka messages of one topic as the shippers produce them, decoded as KafkaSource does, into
// batches handed on every 10000 records, without the broker. Kernel entries of 16 nodes, 1 ms
// apart per node. Arg: the encoding:
//   0 raw: the message is the line, the node in the `node` header (the OTel collector's raw
//     encoding of a string body with a header, as deploy/overlays/kafka sends kernel logs);
//   1 json: Fluent Bit's systemd input through its kafka output (bench_records.h);
//   2 otlp_proto: the journald receiver's records, 1000 per message (one export batch of one
//     node; bench_records.h); 3 otlp_json: the same messages in the JSON mapping.
void BM_KafkaDecode(benchmark::State& state) {
  const auto encoding = static_cast<KafkaEncoding>(state.range(0));
  constexpr size_t kEntries = 100000;
  constexpr int kNodes = 16;
  constexpr int64_t kStartNs = 1'741'000'000'000'000'000;
  const std::vector<std::string> msgs = messages(kEntries, 100000);
  std::vector<std::string> nodes;
  for (int n = 0; n < kNodes; ++n) {
    nodes.push_back("gpu-node-" + std::to_string(n + 1));
  }
  // Grouped by node, so that an OTLP message holds one node's entries.
  std::vector<KernelEntry> entries;
  for (size_t i = 0; i < kEntries; ++i) {
    const size_t node = i % kNodes;
    entries.push_back(
        {nodes[node], kStartNs + static_cast<int64_t>(i / kNodes) * 1000000, msgs[i], i / kNodes});
  }
  std::stable_sort(entries.begin(), entries.end(),
                   [](const KernelEntry& a, const KernelEntry& b) { return a.node < b.node; });
  struct Message {
    std::string value;
    std::string_view node;
  };
  std::vector<Message> values;
  if (encoding == KafkaEncoding::kRaw || encoding == KafkaEncoding::kJson) {
    for (const KernelEntry& e : entries) {
      values.push_back(
          {encoding == KafkaEncoding::kRaw ? std::string(e.message) : fluentBitJson(e), e.node});
    }
  } else {
    for (size_t i = 0; i < entries.size();) {
      size_t end = i;
      while (end < entries.size() && end - i < 1000 && entries[end].node == entries[i].node) {
        ++end;
      }
      values.push_back({encoding == KafkaEncoding::kOtlpProto
                            ? otlpRequest(&entries[i], end - i).SerializeAsString()
                            : otlpJson(&entries[i], end - i),
                        entries[i].node});
      i = end;
    }
  }
  int64_t bytes = 0;
  for (const Message& m : values) {
    bytes += static_cast<int64_t>(m.value.size());
  }
  KafkaTopicConfig config;
  config.name = "bench";
  config.encoding = encoding;
  config.stream = StreamKind::kKernel;  // raw: the topic says what the lines are
  const KafkaDecoder decoder(config);
  RecordBatch batch;
  KafkaMessage first;
  first.value = values[0].value;
  first.node_header = [&] { return std::string_view(values[0].node); };
  if (!decoder.decode(first, kStartNs, &batch) || batch.records[0].stream != StreamKind::kKernel ||
      batch.records[0].node != values[0].node) {
    state.SkipWithError("the first message does not decode to a kernel record of its node");
    return;
  }
  batch.clear();
  int64_t records = 0;
  int64_t malformed = 0;
  for (auto _ : state) {
    for (const Message& m : values) {
      KafkaMessage msg;
      msg.value = m.value;
      msg.node_header = [&m] { return std::string_view(m.node); };
      msg.timestamp_ms = kStartNs / 1000000;
      malformed += decoder.decode(msg, kStartNs, &batch) ? 0 : 1;
      if (batch.records.size() >= 10000) {
        records += static_cast<int64_t>(batch.records.size());
        batch.clear();
      }
    }
    records += static_cast<int64_t>(batch.records.size());
    batch.clear();
  }
  state.SetItemsProcessed(records);
  state.SetBytesProcessed(state.iterations() * bytes);
  state.counters["malformed"] = static_cast<double>(malformed);
  state.counters["records_per_pass"] = static_cast<double>(records) / state.iterations();
  state.counters["avg_record_B"] = static_cast<double>(bytes) / static_cast<double>(kEntries);
}
BENCHMARK(BM_KafkaDecode)->Arg(0)->Arg(1)->Arg(2)->Arg(3)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace faultline

int main(int argc, char** argv) {
  faultline::keepFreedMemory();  // as the faultline command runs the engine
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
