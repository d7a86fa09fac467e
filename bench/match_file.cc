// The matcher alone over files, for bench/compare.sh: the same bytes grep, rg, Python and Go see.
//
//   faultline_match_file --patterns N            prints the bench bank's N patterns, one a line
//   faultline_match_file N FILE... [--reps R]    matches every line of the files (as kernel
//                                                stream lines) against the N-pattern bench bank
//
// Output, one line per engine, best of R passes (default 3) over the bytes held in memory:
//   memchr <MB/s> <lines/s> <lines>                     the line split alone (the floor)
//   faultline <MB/s> <lines/s> <matching lines> <hits>  split into 8192-line batches + Matcher
//   re2_set <MB/s> <lines/s> <matching lines>           the bank's RE2::Set alone on each line
//                                                       (the reference for the Matcher's overhead)
//   gate <MB/s> <lines/s> <candidate lines>             the Set's literal gate alone on each line
//   setup <ms> ms <literals>                            building the Matcher and tuning its gate
//                                                       on the first batch (once per bank load)
// MB = 10^6 bytes of text, newlines included.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_bank.h"
#include "matcher/matcher.h"

namespace faultline {
namespace {

template <typename F>
double bestSeconds(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

int run(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--patterns") == 0) {
    for (const BenchPattern& p : benchPatterns(std::stoul(argv[2]))) {
      std::printf("%s\n", p.pattern.c_str());
    }
    return 0;
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: faultline_match_file --patterns N | N FILE... [--reps R]\n");
    return 2;
  }
  const size_t n = std::stoul(argv[1]);
  int reps = 3;
  std::string text;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::stoi(argv[++i]);
      continue;
    }
    std::ifstream in(argv[i], std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "faultline_match_file: cannot read %s\n", argv[i]);
      return 1;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    text += ss.str();
  }
  size_t lines = 0;
  const double t_split = bestSeconds(reps, [&] {
    lines = 0;
    const char* p = text.data();
    const char* end = p + text.size();
    while (p < end) {
      const void* nl = std::memchr(p, '\n', static_cast<size_t>(end - p));
      p = nl == nullptr ? end : static_cast<const char*>(nl) + 1;
      ++lines;
    }
  });
  std::printf("memchr %.1f %.0f %zu\n", static_cast<double>(text.size()) / t_split / 1e6,
              static_cast<double>(lines) / t_split, lines);

  const std::shared_ptr<const Bank> bank = loadBank(benchBank(n));
  std::vector<RecordBatch> batches;
  for (size_t pos = 0; pos < text.size();) {
    if (batches.empty() || batches.back().records.size() == 8192) {
      batches.emplace_back();
    }
    size_t nl = text.find('\n', pos);
    nl = nl == std::string::npos ? text.size() : nl;
    LogRecord& r = batches.back().records.emplace_back();
    r.node = "bench";
    r.line = std::string_view(text).substr(pos, nl - pos);
    r.stream = StreamKind::kKernel;
    pos = nl + 1;
  }
  size_t matching = 0;
  size_t hit_count = 0;
  std::vector<Hit> hits;
  // One Matcher, as in the service: its gates are built once and tuned on the first batch.
  const auto t0 = std::chrono::steady_clock::now();
  Matcher matcher(bank);
  matcher.match(batches.front(), &hits);
  const double t_tune =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double t_match = bestSeconds(reps, [&] {
    matching = hit_count = 0;
    for (const RecordBatch& b : batches) {
      hits.clear();
      matcher.match(b, &hits);
      hit_count += hits.size();
      for (size_t i = 0; i < hits.size(); ++i) {
        matching += i == 0 || hits[i].seq != hits[i - 1].seq;
      }
    }
  });
  std::printf("faultline %.1f %.0f %zu %zu\n", static_cast<double>(text.size()) / t_match / 1e6,
              static_cast<double>(lines) / t_match, matching, hit_count);
  const RE2::Set& set = *bank->sets[static_cast<size_t>(StreamKind::kKernel)].set;
  size_t set_matching = 0;
  std::vector<int> ids;
  const double t_set = bestSeconds(reps, [&] {
    set_matching = 0;
    for (const RecordBatch& b : batches) {
      for (const LogRecord& r : b.records) {
        set_matching += set.Match(r.line, &ids) ? 1 : 0;
      }
    }
  });
  std::printf("re2_set %.1f %.0f %zu\n", static_cast<double>(text.size()) / t_set / 1e6,
              static_cast<double>(lines) / t_set, set_matching);
  const LiteralGate& gate = matcher.gate(StreamKind::kKernel);
  size_t candidates = 0;
  const double t_gate = bestSeconds(reps, [&] {
    candidates = 0;
    for (const RecordBatch& b : batches) {
      for (const LogRecord& r : b.records) {
        candidates += gate.mayMatch(r.line) ? 1 : 0;
      }
    }
  });
  std::printf("gate %.1f %.0f %zu\n", static_cast<double>(text.size()) / t_gate / 1e6,
              static_cast<double>(lines) / t_gate, candidates);
  std::printf("setup %.1f ms %zu literals\n", t_tune * 1e3, gate.literals().size());
  return 0;
}

}  // namespace
}  // namespace faultline

int main(int argc, char** argv) {
  return faultline::run(argc, argv);
}
