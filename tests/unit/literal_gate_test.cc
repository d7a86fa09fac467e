// The literal gate in front of the RE2::Set: the literals it derives, and that it never rules out
// a line the Set matches (it may change speed, never results).
#include "matcher/literal_gate.h"

#include <fstream>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "matcher/bank.h"
#include "matcher/matcher.h"
#include "tests/unit/helpers.h"

namespace faultline {
namespace {

bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(LiteralGate, DerivesRequiredLiteralsLowercased) {
  const LiteralGate gate({R"(NVRM: Xid \(PCI:(?P<pci>[0-9a-f:]+)\): (?P<code>\d+),)",
                          R"(mlx5_core (?P<pci>\S+) (?P<dev>\S+): Port: (?P<port>\d+) Link)"},
                         "");
  EXPECT_FALSE(gate.open());
  EXPECT_TRUE(has(gate.literals(), "nvrm: xid (pci:"));
  EXPECT_TRUE(gate.mayMatch("[  12.5] NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"));
  EXPECT_TRUE(gate.mayMatch("nvrm: XID (pci:"));  // any ASCII case: the Set decides
  EXPECT_FALSE(gate.mayMatch("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.144.03"));
  EXPECT_FALSE(gate.mayMatch(""));
  EXPECT_FALSE(gate.mayMatch("NVRM"));
}

TEST(LiteralGate, SampleRanksRareLiteralsFirst) {
  const std::vector<std::string> p = {
      R"(mlx5_core (?P<pci>\S+) (?P<ifname>\S+): Link (?P<state>up|down))"};
  // Without a sample the longest literal wins; a sample full of benign mlx5_core lines moves the
  // gate to the literals that are rare there.
  EXPECT_TRUE(has(LiteralGate(p, "").literals(), "mlx5_core "));
  const std::string sample =
      "mlx5_core 0000:ab:00.0: E-Switch: Total vports 8\nmlx5_core 0000:ab:00.1: renamed\n";
  const LiteralGate tuned(p, sample);
  EXPECT_FALSE(has(tuned.literals(), "mlx5_core "));
  EXPECT_TRUE(has(tuned.literals(), ": link up"));
  EXPECT_TRUE(has(tuned.literals(), ": link down"));
  EXPECT_TRUE(tuned.mayMatch("mlx5_core 0000:ab:00.0 enp1s0f0np0: Link up"));
  EXPECT_FALSE(tuned.mayMatch("mlx5_core 0000:ab:00.0: E-Switch: Total vports 8"));
}

TEST(LiteralGate, AFamilyOfPatternsSharesOneLiteral) {
  // One SXid pattern per code, as a bank that sets severity per code has them: each could be
  // gated by its own code ("): 10001, fatal, link" ...) or by a literal they all share; the
  // longest shared one makes one literal where the others would make two per pattern.
  std::vector<std::string> family;
  for (int code = 10001; code <= 10030; ++code) {
    family.push_back(R"(nvidia-nvswitch\d+: SXid \(PCI:[0-9a-f:.]+\): )" + std::to_string(code) +
                     ", (?P<severity>Fatal|Non-fatal), Link");
  }
  for (const std::string& sample : {std::string(), std::string("kernel: eth0: link up\n")}) {
    const LiteralGate gate(family, sample);
    EXPECT_EQ(gate.literals(), std::vector<std::string>{"nvidia-nvswitch"});
    EXPECT_TRUE(gate.mayMatch("nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 10007, Fatal, Link 4"));
  }
  // Shared literals that are common in the sample lose to the rare per-code ones.
  std::string sample;
  for (int i = 0; i < 20; ++i) {
    sample += "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Non-fatal, Link 9\n";
  }
  const LiteralGate tuned(family, sample);
  EXPECT_FALSE(has(tuned.literals(), "nvidia-nvswitch"));
  EXPECT_FALSE(has(tuned.literals(), ": sxid (pci:"));
  EXPECT_TRUE(has(tuned.literals(), "): 10001, fatal, link"));
  EXPECT_FALSE(
      tuned.mayMatch("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 20034, Non-fatal, Link 9"));
}

TEST(LiteralGate, OpenWhenAPatternNeedsNoLiteralOrFoldsCase) {
  EXPECT_TRUE(LiteralGate({"NVRM: Xid", R"(\d+ errors?)"}, "").open() == false);
  EXPECT_TRUE(LiteralGate({"NVRM: Xid", R"(\d+)"}, "").open());
  EXPECT_TRUE(LiteralGate({"NVRM: Xid", "(?i)fallen off the bus"}, "").open());
  EXPECT_TRUE(LiteralGate({"NVRM: Xid", "(?s-i:a)|x"}, "").open());  // `x` is 1 byte: no atom
  EXPECT_FALSE(LiteralGate({R"(NVRM: Xid \((?P<pci>[^)]*)\))"}, "").open());  // (?P is no flag
  const LiteralGate open({R"(\d+)"}, "");
  EXPECT_TRUE(open.mayMatch("anything"));
  uint8_t may[2] = {0, 0};
  const std::string_view lines[2] = {"a", ""};
  open.mayMatch(lines, 2, may);
  EXPECT_EQ(may[0], 1);
  EXPECT_EQ(may[1], 1);
}

// RE2's prefilter lowercases a rune by Unicode rules: the Kelvin sign to `k`, the long s to `s`.
// A literal from it would be ASCII text that lines holding the rune itself do not contain, so a
// pattern naming any rune beyond ASCII, in UTF-8 or by an escape, opens the gate.
TEST(LiteralGate, OpenWhenAPatternNamesARuneBeyondAscii) {
  const std::string kelvin = "\xE2\x84\xAA";  // U+212A
  const std::string long_s = "\xC5\xBF";      // U+017F
  for (const std::string& p : std::vector<std::string>{
           kelvin + "ernel panic", R"(\x{212A}ernel panic)", R"([\x{212a}]ernel panic)",
           R"((?:\x{212A}|X)ernel panic)", "fal" + long_s + "e alarm", R"(fal\x{17F}e alarm)",
           R"(caf\xE9 crash)", R"(caf\351 crash)", R"(\p{Greek}+ crash)"}) {
    const LiteralGate gate({"NVRM: Xid", p}, "");
    EXPECT_TRUE(gate.open()) << p;
    const RE2 re(p);
    ASSERT_TRUE(re.ok()) << p;
    for (const std::string& line :
         std::vector<std::string>{kelvin + "ernel panic", "fal" + long_s + "e alarm"}) {
      if (RE2::PartialMatch(line, re)) {
        EXPECT_TRUE(gate.mayMatch(line)) << p;
      }
    }
  }
  // Escapes of ASCII runes, and an escaped backslash before an x, keep their literals.
  for (const char* p :
       {R"(NVRM\x3a Xid)", R"(NVRM\x{3A} Xid)", R"(NVRM\072 Xid)", R"(NVRM: Xid \\x{212A})"}) {
    EXPECT_FALSE(LiteralGate({p}, "").open()) << p;
  }
}

// Every line the Set matches passes the gate, over the real bank's example lines (as written, and
// upper- and lower-cased) and the bundled sample archive; and the batch scan (four lines at once)
// agrees with the one-line scan on every batch size, fewer lines than lanes included.
TEST(LiteralGate, NeverRulesOutALineTheSetMatches) {
  const std::shared_ptr<const Bank> bank = shippedBank();
  std::vector<std::string> lines;
  for (const Signature& sig : bank->signatures) {
    for (const auto* examples : {&sig.match_examples, &sig.no_match_examples}) {
      for (const Example& e : *examples) {
        lines.push_back(e.line);
        std::string upper = e.line;
        std::string lower = e.line;
        for (size_t i = 0; i < upper.size(); ++i) {
          upper[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(upper[i])));
          lower[i] = static_cast<char>(std::tolower(static_cast<unsigned char>(lower[i])));
        }
        lines.push_back(upper);
        lines.push_back(lower);
      }
    }
  }
  std::ifstream in(std::string(FL_SOURCE_DIR) + "/tests/data/sample/gpu-node-01.dmesg");
  ASSERT_TRUE(in.good());
  for (std::string l; std::getline(in, l);) {
    lines.push_back(l);
  }
  std::string sample;
  for (size_t i = 0; i < lines.size(); i += 3) {
    sample += lines[i] + "\n";
  }
  std::vector<std::string_view> views(lines.begin(), lines.end());
  size_t matched = 0;
  for (int k = 0; k < kStreamKinds; ++k) {
    const CompiledSet& cs = bank->sets[static_cast<size_t>(k)];
    if (!cs.set) {
      continue;
    }
    for (const std::string& s : {std::string(), sample}) {
      const LiteralGate gate(bank->patterns(static_cast<StreamKind>(k)), s);
      ASSERT_FALSE(gate.open());
      std::vector<int> ids;
      for (const std::string& l : lines) {
        if (cs.set->Match(l, &ids)) {
          ++matched;
          EXPECT_TRUE(gate.mayMatch(l)) << l;
        }
      }
      for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{5}, size_t{7},
                       views.size()}) {
        std::vector<uint8_t> may(n, 2);
        gate.mayMatch(views.data(), n, may.data());
        for (size_t i = 0; i < n; ++i) {
          EXPECT_EQ(may[i], gate.mayMatch(views[i]) ? 1 : 0) << views[i];
        }
      }
    }
  }
  EXPECT_GT(matched, 100U);
}

// Teddy (the SIMD scan) passes exactly the lines Wu-Manber (the portable one) passes: every
// literal of the real bank's gates, in random case, ending at each byte of lines of every length
// from 1 to 70 (the first 16-byte chunk, later ones, the last partial chunk read again from the
// line's end, a line shorter than 16), cut short by a byte, and random lines made of the
// literals' own bytes, where windows agree by chance. Gates tuned on a sample and not; a bank
// whose literals need a 3-byte window (open before the line's start); and literals needing more
// windows than kTeddyGroups, which keep Wu-Manber.
TEST(LiteralGate, TeddyPassesTheLinesWuManberPasses) {
#if defined(__x86_64__)
  if (!__builtin_cpu_supports("ssse3")) {
    GTEST_SKIP() << "no SSSE3: Teddy does not run here";
  }
#else
  GTEST_SKIP() << "not x86-64: Teddy does not run here";
#endif
  const std::shared_ptr<const Bank> bank = shippedBank();
  std::string sample;
  for (const Signature& sig : bank->signatures) {
    for (const Example& e : sig.match_examples) {
      sample += e.line + "\n";
    }
  }
  std::vector<std::vector<std::string>> banks;
  for (int k = 0; k < kStreamKinds; ++k) {
    if (bank->sets[static_cast<size_t>(k)].set) {
      banks.push_back(bank->patterns(static_cast<StreamKind>(k)));
    }
  }
  banks.push_back({"abc.", "xyz.", "NVRM: Xid"});  // 3-byte literals
  std::mt19937 rng(11);
  size_t teddies = 0;
  size_t passed = 0;
  for (const std::vector<std::string>& patterns : banks) {
    for (const std::string& s : {std::string(), sample}) {
      const LiteralGate teddy(patterns, s);
      const LiteralGate portable(patterns, s, LiteralGate::Scan::kPortable);
      ASSERT_EQ(teddy.literals(), portable.literals());
      ASSERT_TRUE(teddy.teddy());
      ASSERT_FALSE(portable.teddy());
      if (patterns.front() == "abc.") {
        ASSERT_TRUE(has(teddy.literals(), "abc"));
      }
      ++teddies;
      std::string alphabet;
      for (const std::string& l : teddy.literals()) {
        alphabet += l;
      }
      std::vector<std::string> lines;
      for (const std::string& l : teddy.literals()) {
        for (size_t size = l.size(); size <= 70; ++size) {
          for (size_t at = 0; at + l.size() <= size; ++at) {
            std::string line(size, '.');
            for (size_t i = 0; i < l.size(); ++i) {
              line[at + i] = rng() % 2 == 0 ? l[i] : static_cast<char>(std::toupper(l[i]));
            }
            lines.push_back(line);
            line[at + l.size() - 1] = '\n';  // cut short: no literal, or another
            lines.push_back(line);
          }
        }
      }
      for (size_t n = 0; n < 20000; ++n) {
        std::string line(rng() % 70, ' ');
        for (char& c : line) {
          c = alphabet[rng() % alphabet.size()];
        }
        lines.push_back(line);
      }
      std::vector<std::string_view> views(lines.begin(), lines.end());
      std::vector<uint8_t> a(views.size(), 2);
      std::vector<uint8_t> b(views.size(), 2);
      teddy.mayMatch(views.data(), views.size(), a.data());
      portable.mayMatch(views.data(), views.size(), b.data());
      for (size_t i = 0; i < views.size(); ++i) {
        ASSERT_EQ(a[i], b[i]) << "line " << i << ": " << views[i];
        ASSERT_EQ(teddy.mayMatch(views[i]), b[i] == 1) << views[i];
        passed += b[i];
      }
    }
  }
  EXPECT_EQ(teddies, 2 * banks.size());
  EXPECT_GT(passed, 100000U);
  // Words of random letters share no 4 bytes: each needs a window of its own. 100 are merged
  // into the buckets (first by their odds, then by their count in the sample); 300 are more
  // than kTeddyGroups, and keep Wu-Manber.
  for (const size_t count : {size_t{100}, size_t{300}}) {
    std::vector<std::string> words;
    std::string sample;
    for (size_t i = 0; i < count; ++i) {
      std::string w(6, 'a');
      for (char& c : w) {
        c = static_cast<char>('a' + rng() % 26);
      }
      words.push_back(w);
      sample += "x " + w.substr(0, 4) + " y\n";
    }
    const LiteralGate fast(words, sample);
    const LiteralGate portable(words, sample, LiteralGate::Scan::kPortable);
    EXPECT_EQ(fast.literals().size(), count);
    EXPECT_EQ(fast.teddy(), count == 100);
    size_t found = 0;
    for (size_t n = 0; n < 20000; ++n) {
      std::string line(rng() % 60, ' ');
      for (char& c : line) {
        c = static_cast<char>('a' + rng() % 26);
      }
      const std::string& w = words[rng() % count];
      line.insert(rng() % (line.size() + 1), n % 2 == 0 ? w : w.substr(1));
      if (n % 3 == 0) {
        for (char& c : line) {
          c = static_cast<char>(std::toupper(c));
        }
      }
      ASSERT_EQ(fast.mayMatch(line), portable.mayMatch(line)) << line;
      found += portable.mayMatch(line) ? 1 : 0;
    }
    EXPECT_GE(found, 10000U);
  }
}

// A Matcher gives the same hits before and after it tunes its gates on what it has seen.
TEST(LiteralGate, TuningKeepsTheMatchersHits) {
  const std::shared_ptr<const Bank> bank = shippedBank();
  std::mt19937 rng(7);
  std::vector<std::string> text;
  for (const Signature& sig : bank->signatures) {
    if (sig.appliesTo(StreamKind::kKernel)) {
      for (const Example& e : sig.match_examples) {
        text.push_back(e.line);
      }
    }
  }
  const size_t examples = text.size();
  for (size_t i = 0; i < 2 * Matcher::kTuneLines; ++i) {
    text.push_back("mlx5_core 0000:ab:00." + std::to_string(rng() % 8) +
                   ": E-Switch: Total vports " + std::to_string(rng() % 16));
    text.push_back(text[rng() % examples]);
  }
  auto batchOf = [&](size_t from, size_t to) {
    RecordBatch b;
    for (size_t i = from; i < to; ++i) {
      LogRecord& r = b.records.emplace_back();
      r.time_ns = static_cast<int64_t>(i) * 1'000'000'000;  // no record repeats one in its second
      r.node = "n1";
      r.stream = StreamKind::kKernel;
      r.line = text[i];
    }
    return b;
  };
  // `whole` tunes before its one batch; `steps` matches its first kTuneLines lines untuned.
  Matcher whole(bank);
  Matcher steps(bank);
  std::vector<Hit> a;
  std::vector<Hit> b;
  whole.match(batchOf(0, text.size()), &a);
  ASSERT_TRUE(has(steps.gate(StreamKind::kKernel).literals(), "mlx5_core "));
  for (size_t i = 0; i < text.size(); i += 100) {
    steps.match(batchOf(i, std::min(text.size(), i + 100)), &b);
  }
  EXPECT_FALSE(has(steps.gate(StreamKind::kKernel).literals(), "mlx5_core "));
  EXPECT_FALSE(has(whole.gate(StreamKind::kKernel).literals(), "mlx5_core "));
  ASSERT_EQ(a.size(), b.size());
  EXPECT_GE(a.size(), Matcher::kTuneLines);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].signature, b[i].signature);
    EXPECT_EQ(a[i].line, b[i].line);
  }
}

// The tuning samples the start of each line (Matcher::kTuneLineBytes): a flood of huge lines costs
// no more to sample than lines of that size, and the gate it tunes still passes every hit, with
// the hit's text far into a line.
TEST(LiteralGate, TuningSamplesTheStartOfEachLine) {
  const std::shared_ptr<const Bank> bank = loadBank({{"t.yaml", R"(signatures:
  - id: link
    streams: [kernel]
    severity: info
    pattern: 'mlx5_core (?P<pci>\S+) (?P<ifname>\S+): Link (?P<state>up|down)'
    examples: {match: ['mlx5_core 0000:ab:00.0 enp1s0f0np0: Link up']}
)"}});
  const std::string head(Matcher::kTuneLineBytes, 'x');
  const std::string common = " mlx5_core 0000:ab:00.0: E-Switch: Total vports 8 ";
  const std::string hit = "mlx5_core 0000:ab:00.0 enp1s0f0np0: Link down";
  std::vector<std::string> text;
  for (size_t i = 0; i < Matcher::kTuneLines; ++i) {
    text.push_back(head + common + std::string(size_t{16} * 1024, 'y') + (i % 100 == 0 ? hit : ""));
  }
  RecordBatch batch;
  for (size_t i = 0; i < text.size(); ++i) {
    batch.records.push_back(
        {static_cast<int64_t>(i) * 1'000'000'000, "n1", text[i], 0, 0, StreamKind::kKernel});
  }
  Matcher m(bank);
  std::vector<Hit> hits;
  m.match(batch, &hits);
  EXPECT_EQ(hits.size(), 10U);
  // Tuned on the lines' first bytes, which lack the common `mlx5_core `: it stays the literal.
  EXPECT_TRUE(has(m.gate(StreamKind::kKernel).literals(), "mlx5_core "));
  const std::string late = head + head + hit;  // records view their lines: it must outlive them
  RecordBatch after;
  after.records.push_back({0, "n1", late, 0, 0, StreamKind::kKernel});
  hits.clear();
  m.match(after, &hits);
  ASSERT_EQ(hits.size(), 1U);
  EXPECT_EQ(hits[0].field("state"), "down");
}

}  // namespace
}  // namespace faultline
