// The matcher alone over files, for bench/compare.sh: the same bytes grep, rg, Python and Go see.
//
//   faultline_match_file --patterns N            prints the bench bank's N patterns, one a line
//   faultline_match_file --grown-rules N DIR     writes rules/ grown to N kernel patterns by the
//                                                bench bank's variants into DIR, as rule files
//                                                for `faultline replay --rules DIR`
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
//   records <lines/s> <records> <matching> <hits>       the Matcher over the records the files'
//                                                       parsers give (the message without its
//                                                       timestamp or syslog header, as the
//                                                       service matches it; parsing not timed)
// MB = 10^6 bytes of text, newlines included.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_bank.h"
#include "ingest/formats/formats.h"
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
  if (argc == 4 && std::strcmp(argv[1], "--grown-rules") == 0) {
    for (const RuleFile& f : grownBank(std::stoul(argv[2]))) {
      const std::string name = f.name.substr(f.name.rfind('/') + 1);  // rules/x.yaml -> x.yaml
      std::ofstream out(std::string(argv[3]) + "/" + name, std::ios::binary);
      out << f.text;
      if (!out) {
        std::fprintf(stderr, "faultline_match_file: cannot write %s/%s\n", argv[3], name.c_str());
        return 1;
      }
    }
    return 0;
  }
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: faultline_match_file --patterns N | --grown-rules N DIR | N FILE... "
                 "[--reps R]\n");
    return 2;
  }
  const size_t n = std::stoul(argv[1]);
  int reps = 3;
  std::string text;
  std::vector<std::pair<std::string, std::string>> files;  // name, content
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
    files.emplace_back(argv[i], ss.str());
    text += files.back().second;
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
  // Best time of `matcher` over `input`, with the matching lines and hits of a pass.
  auto timeMatcher = [&](Matcher& matcher, const std::vector<RecordBatch>& input) {
    return bestSeconds(reps, [&] {
      matching = hit_count = 0;
      for (const RecordBatch& b : input) {
        hits.clear();
        matcher.match(b, &hits);
        // A record that repeats the latest hits in their second adds to their repeats
        // (Hit::repeats) instead of making hits: it still matched.
        for (size_t i = 0; i < hits.size(); ++i) {
          hit_count += 1 + hits[i].repeats;
          matching += i == 0 || hits[i].seq != hits[i - 1].seq ? 1 + hits[i].repeats : 0;
        }
      }
    });
  };
  // One Matcher, as in the service: its gates are built once and tuned on the first batch.
  const auto t0 = std::chrono::steady_clock::now();
  Matcher matcher(bank);
  matcher.match(batches.front(), &hits);
  const double t_tune =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double t_match = timeMatcher(matcher, batches);
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

  // The same files as the service's records: each parsed in its own detected format.
  std::vector<RecordBatch> parsed(1);
  size_t records = 0;
  for (const auto& [name, content] : files) {
    const std::optional<Format> format = detectFormat(std::string_view(content).substr(0, 65536));
    if (!format) {
      std::fprintf(stderr, "faultline_match_file: %s: no known format\n", name.c_str());
      return 1;
    }
    ParseOptions options;
    const size_t slash = name.rfind('/') + 1;
    options.node = name.substr(slash, name.find('.', slash) - slash);
    const std::unique_ptr<LineParser> parser = makeParser(*format, options);
    for (size_t pos = 0; pos < content.size();) {
      size_t nl = content.find('\n', pos);
      nl = nl == std::string::npos ? content.size() : nl;
      if (parsed.back().records.size() >= 8192) {
        parsed.emplace_back();
      }
      parser->parse(std::string_view(content).substr(pos, nl - pos), &parsed.back());
      pos = nl + 1;
    }
    parser->finish(&parsed.back());
  }
  for (const RecordBatch& b : parsed) {
    records += b.records.size();
  }
  Matcher on_records(bank);  // tuned on the first batch, as above
  on_records.match(parsed.front(), &hits);
  const double t_records = timeMatcher(on_records, parsed);
  std::printf("records %.0f %zu %zu %zu\n", static_cast<double>(records) / t_records, records,
              matching, hit_count);
  return 0;
}

}  // namespace
}  // namespace faultline

int main(int argc, char** argv) {
  return faultline::run(argc, argv);
}
