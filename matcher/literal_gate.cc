#include "matcher/literal_gate.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>

#include <re2/filtered_re2.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace faultline {
namespace {

// True when the pattern sets the i flag in a group such as `(?i)` or `(?si:...)`.
bool foldsCase(const std::string& pattern) {
  for (size_t p = pattern.find("(?"); p != std::string::npos; p = pattern.find("(?", p + 2)) {
    size_t i = p + 2;  // flags are [imsU-]; anything else (`P<name>`) is not a flag group
    bool fold = false;
    for (; i < pattern.size() && std::string_view("imsU-").find(pattern[i]) != std::string::npos;
         ++i) {
      fold = fold || pattern[i] == 'i';
    }
    if (fold && i < pattern.size() && (pattern[i] == ')' || pattern[i] == ':')) {
      return true;
    }
  }
  return false;
}

// True when the pattern may name a rune beyond ASCII: a UTF-8 byte, an escape \x{...}, \xHH or
// octal of 0x80 or more, or a Unicode class \p, \P. The prefilter lowercases such a rune by
// Unicode rules, which may make it ASCII (the Kelvin sign U+212A gives `k`, the long s U+017F
// `s`): a literal that lines holding the rune itself lack. And the scan folds ASCII case only.
bool beyondAscii(const std::string& pattern) {
  // The value of the base-`base` digits from `from` on, at most `max` of them.
  auto value = [&](size_t from, size_t max, uint32_t base) {
    uint32_t rune = 0;
    for (size_t i = from; i < pattern.size() && i - from < max; ++i) {
      const char c = static_cast<char>(pattern[i] | 0x20);  // hex digits in either case
      const uint32_t d = c >= '0' && c <= '9'   ? static_cast<uint32_t>(c - '0')
                         : c >= 'a' && c <= 'f' ? static_cast<uint32_t>(c - 'a' + 10)
                                                : base;
      if (d >= base) {
        break;
      }
      rune = std::min<uint32_t>(rune * base + d, 0x110000);
    }
    return rune;
  };
  for (size_t i = 0; i < pattern.size(); ++i) {
    if ((static_cast<unsigned char>(pattern[i]) & 0x80) != 0) {
      return true;
    }
    if (pattern[i] != '\\' || i + 1 == pattern.size()) {
      continue;
    }
    const char e = pattern[++i];  // skipped with its backslash: in `\\x` the x is no escape
    const bool braced = e == 'x' && i + 1 < pattern.size() && pattern[i + 1] == '{';
    if (e == 'p' || e == 'P' || (braced && value(i + 2, pattern.size(), 16) >= 0x80) ||
        (e == 'x' && !braced && value(i + 1, 2, 16) >= 0x80) ||
        (e >= '0' && e <= '7' && value(i, 3, 8) >= 0x80)) {
      return true;
    }
  }
  return false;
}

// One pattern's prefilter: its atoms (lowercased, per re2/filtered_re2.h) and which
// combinations of them a match needs.
struct Prefilter {
  re2::FilteredRE2 filter{3};  // atoms shorter than 3 bytes filter nothing
  std::vector<std::string> atoms;
};

// Null when RE2 cannot parse the pattern (the Set reports that).
std::unique_ptr<Prefilter> prefilter(const std::string& pattern) {
  auto p = std::make_unique<Prefilter>();
  RE2::Options opts;
  opts.set_log_errors(false);
  int id = 0;
  if (p->filter.Add(pattern, opts, &id) != RE2::NoError) {
    return nullptr;
  }
  p->filter.Compile(&p->atoms);
  return p;
}

// Atoms of the prefiltered pattern such that every match holds at least one, those `before`
// ranks first preferred; empty when the prefilter cannot rule out any text.
template <typename Before>
std::vector<std::string> requiredAtoms(Prefilter& pre, const Before& before) {
  re2::FilteredRE2& filter = pre.filter;
  const std::vector<std::string>& atoms = pre.atoms;
  std::vector<int> present(atoms.size());
  for (size_t i = 0; i < atoms.size(); ++i) {
    present[i] = static_cast<int>(i);
  }
  auto passes = [&](const std::vector<int>& found) {
    std::vector<int> potential;
    filter.AllPotentials(found, &potential);
    return !potential.empty();
  };
  if (atoms.empty() || passes({})) {
    return {};
  }
  // Take atoms away, preferred first, until the pattern can no longer pass: those taken form a
  // cut.
  std::vector<int> order = present;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return before(atoms[static_cast<size_t>(a)], atoms[static_cast<size_t>(b)]);
  });
  std::vector<int> cut;
  for (int a : order) {
    cut.push_back(a);
    present.erase(std::find(present.begin(), present.end(), a));
    if (!passes(present)) {
      break;
    }
  }
  // Give back the atoms the cut does not need, least preferred first.
  for (auto it = cut.rbegin(); it != cut.rend();) {
    std::vector<int> with = present;
    with.push_back(*it);
    std::sort(with.begin(), with.end());
    if (passes(with)) {
      ++it;
    } else {
      present = std::move(with);
      it = std::make_reverse_iterator(cut.erase(std::next(it).base()));
    }
  }
  std::vector<std::string> out;
  out.reserve(cut.size());
  for (int a : cut) {
    out.push_back(atoms[static_cast<size_t>(a)]);
  }
  return out;
}

#if defined(__x86_64__)
// Teddy's test of 16 bytes `t`: byte j of the result holds the buckets whose window may end at
// byte j. `prev` holds the previous 16 bytes' per-window-byte results (for windows that began
// there) and is moved on to this chunk's.
struct TeddyMasks {
  __m128i lo[4];
  __m128i hi[4];
};
__attribute__((target("ssse3"))) inline __m128i teddyChunk(const TeddyMasks& m, __m128i t,
                                                           __m128i prev[3]) {
  const __m128i nibble = _mm_set1_epi8(0x0f);
  const __m128i tl = _mm_and_si128(t, nibble);
  const __m128i th = _mm_and_si128(_mm_srli_epi16(t, 4), nibble);
  __m128i r[4];
  for (int k = 0; k < 4; ++k) {
    r[k] = _mm_and_si128(_mm_shuffle_epi8(m.lo[k], tl), _mm_shuffle_epi8(m.hi[k], th));
  }
  // Window byte k of a window ending at byte j is byte j - 3 + k.
  const __m128i res = _mm_and_si128(
      _mm_and_si128(r[3], _mm_alignr_epi8(r[2], prev[2], 15)),
      _mm_and_si128(_mm_alignr_epi8(r[1], prev[1], 14), _mm_alignr_epi8(r[0], prev[0], 13)));
  prev[0] = r[0];
  prev[1] = r[1];
  prev[2] = r[2];
  return res;
}
#endif

bool equalFolded(const unsigned char* text, const std::string& lower) {
  for (size_t i = 0; i < lower.size(); ++i) {
    unsigned char c = text[i];
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<unsigned char>(c | 0x20);
    }
    if (c != static_cast<unsigned char>(lower[i])) {
      return false;
    }
  }
  return true;
}

}  // namespace

inline uint32_t LiteralGate::hash(const unsigned char* p) {
  // | 0x20 folds ASCII case (and merges a few punctuation pairs: harmless, a hit is confirmed).
  // Shifts and xors, no multiply: each probe's position depends on the previous probe's table
  // load, so the hash's latency is the scan's.
  const uint32_t a = p[0] | 0x20U;
  const uint32_t b = p[1] | 0x20U;
  const uint32_t c = p[2] | 0x20U;
  return ((a << 8) ^ (b << 4) ^ c ^ (a >> 3)) & ((1U << kTableBits) - 1);
}

LiteralGate::LiteralGate(const std::vector<std::string>& patterns, std::string_view sample,
                         Scan scan) {
  std::string lower(sample);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') {
      c = static_cast<char>(c | 0x20);
    }
  }
  std::unordered_map<std::string, size_t> seen;  // atom -> occurrences in the sample
  auto occurrences = [&](const std::string& atom) {
    const auto [it, fresh] = seen.try_emplace(atom, 0);
    for (size_t p = fresh ? lower.find(atom) : std::string::npos; p != std::string::npos;
         p = lower.find(atom, p + 1)) {
      ++it->second;
    }
    return it->second;
  };
  const size_t sample_lines = static_cast<size_t>(std::count(lower.begin(), lower.end(), '\n'));
  std::vector<std::unique_ptr<Prefilter>> pre;
  std::unordered_map<std::string, size_t> shared;  // atom -> patterns that have it
  for (const std::string& p : patterns) {
    pre.push_back(foldsCase(p) || beyondAscii(p) ? nullptr : prefilter(p));
    if (pre.back() == nullptr) {
      return;  // open: a pattern without usable atoms may match a line without any literal
    }
    for (const std::string& atom : pre.back()->atoms) {
      ++shared[atom];
    }
  }
  // Long atoms first (the shortest literal bounds the scan's skip); then rare ones (in at most
  // one sample line of kRareLines); among rare ones, those more patterns share (a family of
  // per-code patterns gets one literal, not one each: fewer literals, fewer probes that stop);
  // then fewer occurrences, then longer.
  auto before = [&](const std::string& a, const std::string& b) {
    const bool la = a.size() >= kLongLiteral;
    const bool lb = b.size() >= kLongLiteral;
    if (la != lb) {
      return la;
    }
    const size_t ca = occurrences(a);
    const size_t cb = occurrences(b);
    const bool ra = ca * kRareLines <= sample_lines;
    const bool rb = cb * kRareLines <= sample_lines;
    if (ra != rb) {
      return ra;
    }
    if (ra && shared[a] != shared[b]) {
      return shared[a] > shared[b];
    }
    return ca != cb ? ca < cb : a.size() > b.size();
  };
  std::vector<std::string> literals;
  for (size_t i = 0; i < patterns.size(); ++i) {
    std::vector<std::string> atoms = requiredAtoms(*pre[i], before);
    if (atoms.empty()) {
      return;  // open: this pattern may match a line without any literal
    }
    literals.insert(literals.end(), atoms.begin(), atoms.end());
  }
  std::sort(literals.begin(), literals.end());
  literals.erase(std::unique(literals.begin(), literals.end()), literals.end());
  if (literals.empty()) {
    return;
  }
  literals_ = std::move(literals);
#if defined(__x86_64__)
  if (scan == Scan::kFastest && __builtin_cpu_supports("ssse3")) {
    buildTeddy(sample, lower);
  }
#else
  (void)scan;
#endif
  if (!teddy_) {
    buildWuManber();
  }
}

void LiteralGate::buildWuManber() {
  shortest_ = literals_.front().size();
  for (const std::string& l : literals_) {
    shortest_ = std::min(shortest_, l.size());
  }
  // Each literal's first `shortest_` bytes are its key: a block ending at key offset j allows a
  // skip of shortest_ - 1 - j; a block that ends a key (skip 0) names the literals to confirm.
  const auto max_skip = static_cast<uint8_t>(std::min<size_t>(shortest_ - kBlock + 1, 255));
  shift_.assign(size_t{1} << kTableBits, max_skip);
  std::map<uint32_t, std::vector<uint32_t>> ends;  // block hash -> literals whose key it ends
  for (uint32_t li = 0; li < literals_.size(); ++li) {
    const auto* key = reinterpret_cast<const unsigned char*>(literals_[li].data());
    for (size_t j = kBlock - 1; j < shortest_; ++j) {
      const uint32_t h = hash(key + j - (kBlock - 1));
      const auto skip = static_cast<uint8_t>(std::min<size_t>(shortest_ - 1 - j, 255));
      shift_[h] = std::min(shift_[h], skip);
      if (j == shortest_ - 1) {
        ends[h].push_back(li);
      }
    }
  }
  size_t buckets = 2;
  while (buckets < 2 * ends.size()) {
    buckets *= 2;
  }
  end_buckets_.resize(buckets);
  for (const auto& [h, lits] : ends) {
    size_t i = h & (buckets - 1);
    while (end_buckets_[i].hash != kNoHash) {
      i = (i + 1) & (buckets - 1);
    }
    end_buckets_[i] = {h, static_cast<uint32_t>(end_literals_.size()),
                       static_cast<uint32_t>(lits.size())};
    end_literals_.insert(end_literals_.end(), lits.begin(), lits.end());
  }
}

void LiteralGate::buildTeddy(std::string_view sample, std::string_view lower_sample) {
  // What a bucket costs: at how many bytes of the sample's first kTeddySampleBytes, as logged, its
  // masks accept the 4 bytes ending there (merged nibble masks may take an upper-case letter for
  // another letter), plus the odds that they accept 4 bytes drawn apart from the sample's byte
  // frequencies (under 1: it ranks what the count ties, as without a sample).
  const std::string_view probe = sample.substr(0, kTeddySampleBytes);
  std::array<double, 256> freq{};  // every byte counts a half more: none is impossible
  for (const char c : sample) {
    freq[static_cast<unsigned char>(c)] += 1;
  }
  for (double& f : freq) {
    f = (f + 0.5) / (static_cast<double>(sample.size()) + 128);
  }
  struct Group {
    std::array<uint16_t, kWindow> lo{};  // nibble sets per window byte
    std::array<uint16_t, kWindow> hi{};
    std::vector<Windowed> members;
  };
  auto accepted = [](const Group& g, size_t k, size_t c) {
    return (g.lo[k] >> (c & 15) & g.hi[k] >> (c >> 4) & 1U) != 0;
  };
  auto odds = [&](const Group& g) {
    double p = 1;
    for (size_t k = 0; k < kWindow; ++k) {
      double q = 0;
      for (size_t c = 0; c < 256; ++c) {
        q += accepted(g, k, c) ? freq[c] : 0;
      }
      p *= q;
    }
    return p;
  };
  auto cost = [&](const Group& g) {
    std::array<std::array<uint8_t, 256>, kWindow> ok{};
    for (size_t k = 0; k < kWindow; ++k) {
      for (size_t c = 0; c < 256; ++c) {
        ok[k][c] = accepted(g, k, c) ? 1 : 0;
      }
    }
    const auto* t = reinterpret_cast<const unsigned char*>(probe.data());
    size_t n = 0;
    for (size_t i = kWindow - 1; i < probe.size(); ++i) {
      n += ok[0][t[i - 3]] & ok[1][t[i - 2]] & ok[2][t[i - 1]] & ok[3][t[i]];
    }
    return static_cast<double>(n) + odds(g);
  };
  // A literal's window ending at its byte `end`: a letter in either case, an open byte before it.
  auto windowOf = [&](const std::string& l, size_t end) {
    Group g;
    for (size_t k = 0; k < kWindow; ++k) {
      const size_t back = kWindow - 1 - k;
      const int c = end >= back ? static_cast<unsigned char>(l[end - back]) : -1;
      g.lo[k] = c < 0 ? 0xffff : static_cast<uint16_t>(1U << (c & 15));
      g.hi[k] = c < 0 ? 0xffff : static_cast<uint16_t>(1U << (c >> 4));
      if (c >= 'a' && c <= 'z') {
        g.hi[k] = static_cast<uint16_t>(g.hi[k] | (1U << ((c & ~0x20) >> 4)));
      }
    }
    return g;
  };
  // Literals sharing a window form a group: greedily the window that covers the most literals not
  // yet covered per unit of cost.
  std::map<std::pair<std::array<uint16_t, kWindow>, std::array<uint16_t, kWindow>>, Group> by;
  for (uint32_t li = 0; li < literals_.size(); ++li) {
    const std::string& l = literals_[li];
    for (size_t end = std::min(kWindow, l.size()) - 1; end < l.size(); ++end) {
      Group w = windowOf(l, end);
      Group& g = by.try_emplace({w.lo, w.hi}, w).first->second;
      if (g.members.empty() || g.members.back().literal != li) {
        g.members.push_back({li, static_cast<uint32_t>(end)});
      }
    }
  }
  // A single window's cost is its occurrences in any case (it accepts its own bytes and their upper
  // case), found in the lowercased probe's sorted 4-byte grams, the last byte highest (so that an
  // open first byte is a range), plus its odds.
  std::vector<uint32_t> grams;
  const auto* t = reinterpret_cast<const unsigned char*>(lower_sample.data());
  for (size_t i = kWindow - 1; i < probe.size(); ++i) {
    grams.push_back(uint32_t{t[i]} << 24 | uint32_t{t[i - 1]} << 16 | uint32_t{t[i - 2]} << 8 |
                    t[i - 3]);
  }
  std::sort(grams.begin(), grams.end());
  std::vector<std::pair<double, Group*>> windows;  // (cost, window)
  for (auto& [key, g] : by) {
    const std::string& l = literals_[g.members.front().literal];
    const size_t end = g.members.front().end;
    uint32_t lowest = 0;
    uint32_t highest = 0;
    for (size_t back = 0; back < kWindow; ++back) {
      const auto c = end >= back ? static_cast<unsigned char>(l[end - back]) : 0U;
      const int shift = static_cast<int>(8 * (kWindow - 1 - back));
      lowest |= uint32_t{c} << shift;
      highest |= (end >= back ? uint32_t{c} : 0xffU) << shift;  // an open byte: any
    }
    const auto n = std::upper_bound(grams.begin(), grams.end(), highest) -
                   std::lower_bound(grams.begin(), grams.end(), lowest);
    windows.emplace_back(static_cast<double>(n) + odds(g), &g);
  }
  std::vector<Group> groups;
  std::vector<bool> covered(literals_.size(), false);
  for (size_t left = literals_.size(); left > 0;) {
    auto uncovered = [&](const Group& g) {
      return static_cast<double>(
          std::count_if(g.members.begin(), g.members.end(),
                        [&](const Windowed& m) { return !covered[m.literal]; }));
    };
    const std::pair<double, Group*>* best = &windows.front();
    for (const auto& w : windows) {
      if (uncovered(*w.second) * best->first > uncovered(*best->second) * w.first) {
        best = &w;
      }
    }
    Group g = *best->second;
    std::erase_if(g.members, [&](const Windowed& m) { return covered[m.literal]; });
    for (const Windowed& m : g.members) {
      covered[m.literal] = true;
      --left;
    }
    groups.push_back(std::move(g));
  }
  if (groups.size() > kTeddyGroups) {
    return;  // Wu-Manber: merging them would cost time, and pass too many positions
  }
  // More groups than buckets: merge the two whose merged masks add the least to `measure`, until
  // `target` are left. Pricing every pair is the work, so the odds alone merge down to
  // kTeddyCounted groups, and the cost, which scans the probe, from there.
  auto merged = [](const Group& a, const Group& b) {
    Group m;
    for (size_t k = 0; k < kWindow; ++k) {
      m.lo[k] = static_cast<uint16_t>(a.lo[k] | b.lo[k]);
      m.hi[k] = static_cast<uint16_t>(a.hi[k] | b.hi[k]);
    }
    m.members = a.members;
    m.members.insert(m.members.end(), b.members.begin(), b.members.end());
    return m;
  };
  auto mergeDown = [&](size_t target, const auto& measure) {
    if (groups.size() <= target) {
      return;
    }
    std::vector<double> own(groups.size());
    for (size_t a = 0; a < groups.size(); ++a) {
      own[a] = measure(groups[a]);
    }
    std::vector<std::vector<double>> added(groups.size(), std::vector<double>(groups.size()));
    auto price = [&](size_t a, size_t b) {
      added[a][b] = added[b][a] = measure(merged(groups[a], groups[b])) - own[a] - own[b];
    };
    for (size_t a = 0; a < groups.size(); ++a) {
      for (size_t b = a + 1; b < groups.size(); ++b) {
        price(a, b);
      }
    }
    while (groups.size() > target) {
      size_t ma = 0;
      size_t mb = 1;
      for (size_t a = 0; a < groups.size(); ++a) {
        for (size_t b = a + 1; b < groups.size(); ++b) {
          if (added[a][b] < added[ma][mb]) {
            ma = a;
            mb = b;
          }
        }
      }
      groups[ma] = merged(groups[ma], groups[mb]);
      own[ma] = measure(groups[ma]);
      groups.erase(groups.begin() + static_cast<std::ptrdiff_t>(mb));
      own.erase(own.begin() + static_cast<std::ptrdiff_t>(mb));
      added.erase(added.begin() + static_cast<std::ptrdiff_t>(mb));
      for (std::vector<double>& row : added) {
        row.erase(row.begin() + static_cast<std::ptrdiff_t>(mb));
      }
      for (size_t b = 0; b < groups.size(); ++b) {
        if (b != ma) {
          price(ma, b);
        }
      }
    }
  };
  mergeDown(kTeddyCounted, odds);
  mergeDown(kBuckets, cost);
  for (size_t b = 0; b < groups.size(); ++b) {
    const auto bit = static_cast<uint8_t>(1U << b);
    for (size_t k = 0; k < kWindow; ++k) {
      for (size_t n = 0; n < 16; ++n) {
        if ((groups[b].lo[k] >> n & 1U) != 0) {
          lo_[k][n] = static_cast<uint8_t>(lo_[k][n] | bit);
        }
        if ((groups[b].hi[k] >> n & 1U) != 0) {
          hi_[k][n] = static_cast<uint8_t>(hi_[k][n] | bit);
        }
      }
    }
    for (const Windowed& m : groups[b].members) {
      if (m.end + 1 < kWindow) {
        open_before_ = static_cast<uint8_t>(open_before_ | bit);
      }
    }
    bucket_first_[b] = static_cast<uint32_t>(windowed_.size());
    for (Windowed m : groups[b].members) {
      if (m.end + 1 >= kWindow) {
        std::memcpy(&m.window, literals_[m.literal].data() + m.end + 1 - kWindow, kWindow);
        m.window |= 0x20202020U;
      }
      windowed_.push_back(m);
    }
  }
  for (size_t b = groups.size(); b <= kBuckets; ++b) {
    bucket_first_[b] = static_cast<uint32_t>(windowed_.size());
  }
  teddy_ = true;
}

LiteralGate::Cursor LiteralGate::cursor(std::string_view line) const {
  return {reinterpret_cast<const unsigned char*>(line.data()), line.size(), shortest_ - 1};
}

// Inlined into the scans: most probes only skip.
inline bool LiteralGate::probe(Cursor& c, bool* found) const {
  if (c.end >= c.size) {
    *found = false;
    return true;
  }
  const uint8_t skip = shift_[hash(c.text + c.end - (kBlock - 1))];
  if (skip != 0) {
    c.end += skip;
    return false;
  }
  return confirm(c, found);
}

const LiteralGate::EndBucket& LiteralGate::endBucket(uint32_t h) const {
  // Present: a block hash has skip 0 only if it ends some literal's key.
  size_t i = h & (end_buckets_.size() - 1);
  while (end_buckets_[i].hash != h) {
    i = (i + 1) & (end_buckets_.size() - 1);
  }
  return end_buckets_[i];
}

bool LiteralGate::confirm(Cursor& c, bool* found) const {
  const size_t start = c.end + 1 - shortest_;
  const EndBucket& b = endBucket(hash(c.text + c.end - (kBlock - 1)));
  for (uint32_t k = b.first; k < b.first + b.count; ++k) {
    const std::string& l = literals_[end_literals_[k]];
    if (start + l.size() <= c.size && equalFolded(c.text + start, l)) {
      *found = true;
      return true;
    }
  }
  ++c.end;
  return false;
}

bool LiteralGate::teddyConfirm(const unsigned char* text, size_t size, size_t end,
                               uint32_t buckets) const {
  for (; buckets != 0; buckets &= buckets - 1) {
    const auto b = static_cast<size_t>(__builtin_ctz(buckets));
    for (uint32_t i = bucket_first_[b]; i < bucket_first_[b + 1]; ++i) {
      const Windowed& w = windowed_[i];
      const std::string& l = literals_[w.literal];
      if (end < w.end || end - w.end + l.size() > size) {
        continue;  // the literal would start before the line or end past it
      }
      if (w.end + 1 >= kWindow) {  // a first test, one compare for the window's 4 bytes
        uint32_t window = 0;
        std::memcpy(&window, text + end + 1 - kWindow, kWindow);
        if ((window | 0x20202020U) != w.window) {
          continue;
        }
      }
      if (equalFolded(text + end - w.end, l)) {
        return true;
      }
    }
  }
  return false;
}

#if defined(__x86_64__)
__attribute__((target("ssse3"))) bool LiteralGate::teddyMayMatch(std::string_view line) const {
  const auto* text = reinterpret_cast<const unsigned char*>(line.data());
  const size_t size = line.size();
  TeddyMasks m{};
  for (size_t k = 0; k < kWindow; ++k) {
    m.lo[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo_[k].data()));
    m.hi[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi_[k].data()));
  }
  // Before the line's start only the open window bytes of short literals' buckets agree.
  const __m128i before = _mm_set1_epi8(static_cast<char>(open_before_));
  __m128i prev[3] = {before, before, before};
  // The positions of `res` set in `valid` (bit j: byte j), chunk at text[base].
  auto found = [&](__m128i res, size_t base, uint32_t valid) {
    uint32_t ends =
        valid & ~static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(res, _mm_setzero_si128())));
    if (ends == 0) {
      return false;
    }
    alignas(16) std::array<uint8_t, 16> buckets{};
    _mm_store_si128(reinterpret_cast<__m128i*>(buckets.data()), res);
    for (; ends != 0; ends &= ends - 1) {
      const auto j = static_cast<size_t>(__builtin_ctz(ends));
      if (teddyConfirm(text, size, base + j, buckets[j])) {
        return true;
      }
    }
    return false;
  };
  size_t i = 0;
  for (; i + 16 <= size; i += 16) {
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text + i));
    if (found(teddyChunk(m, t, prev), i, 0xffff)) {
      return true;
    }
  }
  if (i == size) {
    return false;
  }
  if (size >= 16) {
    // The last 16 bytes, read without reading past the line; its first `skip` were tested. A
    // window ending at a byte not tested began at most 2 bytes before this chunk if skip < 3:
    // at bytes of the last chunk, whose results move up by `skip` bytes.
    const size_t base = size - 16;
    const size_t skip = i - base;
    for (__m128i& r : prev) {
      r = skip == 1 ? _mm_slli_si128(r, 1) : _mm_slli_si128(r, 2);
    }
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text + base));
    return found(teddyChunk(m, t, prev), base, 0xffffU & ~((1U << skip) - 1));
  }
  // A line shorter than 16 bytes, copied into zeros.
  alignas(16) std::array<unsigned char, 16> copy{};
  std::memcpy(copy.data(), text, size);
  const __m128i t = _mm_load_si128(reinterpret_cast<const __m128i*>(copy.data()));
  return found(teddyChunk(m, t, prev), 0, (1U << size) - 1);
}
#else
bool LiteralGate::teddyMayMatch(std::string_view) const {
  return true;  // never called: teddy_ is set on x86-64 only (and passing a line is always safe)
}
#endif

bool LiteralGate::mayMatch(std::string_view line) const {
  if (literals_.empty()) {
    return true;
  }
  if (teddy_) {
    return teddyMayMatch(line);
  }
  Cursor c = cursor(line);
  bool found = false;
  while (!probe(c, &found)) {
  }
  return found;
}

void LiteralGate::mayMatch(const std::string_view* lines, size_t n, uint8_t* may) const {
  if (literals_.empty()) {
    std::fill(may, may + n, uint8_t{1});
    return;
  }
  if (teddy_) {
    for (size_t i = 0; i < n; ++i) {
      may[i] = teddyMayMatch(lines[i]) ? 1 : 0;
    }
    return;
  }
  std::array<Cursor, kLanes> c;
  std::array<size_t, kLanes> line{};
  size_t next = 0;
  size_t active = 0;
  for (; active < kLanes && next < n; ++active, ++next) {
    c[active] = cursor(lines[next]);
    line[active] = next;
  }
  // Every lane busy: a lane whose line is decided takes the next line.
  while (active == kLanes) {
    for (size_t s = 0; s < kLanes; ++s) {
      bool found = false;
      if (!probe(c[s], &found)) {
        continue;
      }
      may[line[s]] = found ? 1 : 0;
      if (next < n) {
        c[s] = cursor(lines[next]);
        line[s] = next++;
      } else {
        --active;  // no more lines: the last lane takes this one's place
        c[s] = c[active];
        line[s] = line[active];
        break;
      }
    }
  }
  // The last lines, fewer than the lanes.
  while (active > 0) {
    for (size_t s = 0; s < active;) {
      bool found = false;
      if (!probe(c[s], &found)) {
        ++s;
        continue;
      }
      may[line[s]] = found ? 1 : 0;
      --active;
      c[s] = c[active];
      line[s] = line[active];
    }
  }
}

}  // namespace faultline
