#include "matcher/literal_gate.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <unordered_map>

#include <re2/filtered_re2.h>

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

LiteralGate::LiteralGate(const std::vector<std::string>& patterns, std::string_view sample) {
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
  shortest_ = literals.front().size();
  for (const std::string& l : literals) {
    shortest_ = std::min(shortest_, l.size());
  }
  // Each literal's first `shortest_` bytes are its key: a block ending at key offset j allows a
  // skip of shortest_ - 1 - j; a block that ends a key (skip 0) names the literals to confirm.
  const auto max_skip = static_cast<uint8_t>(std::min<size_t>(shortest_ - kBlock + 1, 255));
  shift_.assign(size_t{1} << kTableBits, max_skip);
  std::map<uint32_t, std::vector<uint32_t>> ends;  // block hash -> literals whose key it ends
  for (uint32_t li = 0; li < literals.size(); ++li) {
    const auto* key = reinterpret_cast<const unsigned char*>(literals[li].data());
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
  literals_ = std::move(literals);
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

bool LiteralGate::mayMatch(std::string_view line) const {
  if (literals_.empty()) {
    return true;
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
