// A prefilter in front of an RE2::Set: the literals that every match of each pattern must
// contain, searched for in a line case-insensitively. A line that holds none of them cannot match
// any pattern and skips the Set; the Set stays the judge of every line that holds one, so the
// gate changes speed, never results.
//
// The literals are derived from the patterns, not hand-kept: RE2's FilteredRE2 prefilter gives
// each pattern's atoms (lowercased, per re2/filtered_re2.h) and which atom combinations a match
// needs; for each pattern the gate keeps a smallest set of atoms of which a match must contain at
// least one, preferring atoms of 8 bytes or more (the shortest literal bounds the search's skip),
// then atoms that are rare in a sample of the stream (a subsystem tag such as `mlx5_core ` is a
// poor gate on a GPU node, the `: Port: ` of a port state line a good one), among those the atoms
// more patterns share (a family of per-code patterns gets one literal), then long ones.
//
// The search is Teddy where the CPU has SSSE3 (x86-64): Langdale's SIMD multi-literal search, as
// in Hyperscan and Rust's aho-corasick (src/packed/teddy/README.md there). Each literal gets a
// 4-byte window of itself, literals sharing a window share a bucket (8 at most), and 16 bytes of
// a line are tested against every bucket's window at once: per window byte, a lookup of the
// byte's low and of its high nibble (pshufb) gives the buckets that byte may belong to. A
// position where every window byte agrees is confirmed with a compare of the bucket's literals.
// Windows are chosen rare in the sample (how often they occur in its first kTeddySampleBytes).
// Where more windows than buckets are needed, buckets are merged two at a time: those whose merged
// nibble masks add the least odds (from the sample's byte frequencies) down to kTeddyCounted, then
// those whose merged masks accept the fewest of the sample's positions. Elsewhere, and for
// literals needing more than kTeddyGroups windows, the search is Wu-Manber (Wu and Manber, "A
// fast algorithm for multi-pattern searching", TR-94-17, 1994) over case-folded 3-byte blocks: it
// skips up to (shortest literal - 2) bytes per probe, and confirms a candidate with a byte
// compare. Both find the same lines.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace faultline {

class LiteralGate {
 public:
  // `patterns` in RE2 syntax, as the Set compiles them (default options, case-sensitive).
  // `sample`: text like the lines the gate will scan (lines joined by '\n'), to rank atoms by how
  // often they occur; empty: longer atoms first. When a pattern has no required literal of at
  // least 3 bytes, turns on case-insensitive matching itself (`(?i)`: Unicode case folding
  // reaches beyond ASCII), or names a rune beyond ASCII (RE2 lowercases the Kelvin sign to `k`),
  // the gate is open: every line passes.
  // `scan`: kPortable takes Wu-Manber even where Teddy runs (tests compare the two).
  enum class Scan : uint8_t { kFastest, kPortable };
  LiteralGate(const std::vector<std::string>& patterns, std::string_view sample,
              Scan scan = Scan::kFastest);

  // True when no line can be ruled out.
  bool open() const { return literals_.empty(); }
  // True when `line` holds one of the literals in any ASCII case (or the gate is open): only
  // then can a pattern match.
  bool mayMatch(std::string_view line) const;
  // Sets may[i] to 1 if mayMatch(lines[i]), else 0, for i < n. Wu-Manber scans kLanes lines at
  // a time: each probe waits on the previous one's table load, and independent chains fill that
  // wait.
  void mayMatch(const std::string_view* lines, size_t n, uint8_t* may) const;
  // The literals searched for, lowercased; empty when the gate is open.
  const std::vector<std::string>& literals() const { return literals_; }
  // True when mayMatch runs Teddy: not kPortable, an x86-64 CPU with SSSE3, the gate not open,
  // and the literals need at most kTeddyGroups windows.
  bool teddy() const { return teddy_; }

 private:
  static constexpr int kBlock = 3;            // bytes per Wu-Manber block
  static constexpr size_t kLongLiteral = 8;   // bytes; shorter atoms are taken only if need be
  static constexpr size_t kTableBits = 16;    // hashed blocks in the shift table
  static constexpr size_t kLanes = 4;         // lines scanned at once
  static constexpr size_t kRareLines = 1000;  // an atom in at most 1 sample line of this is rare
  struct Cursor {  // one line's scan: `end` is the last byte of the Wu-Manber window
    const unsigned char* text = nullptr;
    size_t size = 0;
    size_t end = 0;
  };
  static uint32_t hash(const unsigned char* p);
  void buildWuManber();  // from literals_
  Cursor cursor(std::string_view line) const;
  // Moves `c` by one probe; true when its line is decided, with *found set.
  bool probe(Cursor& c, bool* found) const;
  // The probe's window ends a literal's key: compares the literals of that block.
  bool confirm(Cursor& c, bool* found) const;

  std::vector<std::string> literals_;
  size_t shortest_ = 0;  // bytes
  // The literals whose key ends in a block, by the block's hash: only hashes of skip 0 are
  // looked up, on every such probe, so an open-addressing table (a power of two in size, at most
  // half full) of ranges of end_literals_ rather than a node-based map.
  struct EndBucket {
    uint32_t hash = kNoHash;
    uint32_t first = 0;  // index into end_literals_
    uint32_t count = 0;
  };
  static constexpr uint32_t kNoHash = ~0U;
  const EndBucket& endBucket(uint32_t h) const;

  std::vector<uint8_t> shift_;  // block hash -> safe skip
  std::vector<EndBucket> end_buckets_;
  std::vector<uint32_t> end_literals_;

  // Teddy's tables. A literal's window ends at its byte `end`; a literal shorter than the window
  // leaves the window's first bytes open (any byte, before the line's start too).
  static constexpr size_t kWindow = 4;                // bytes
  static constexpr size_t kBuckets = 8;               // the bits of a byte
  static constexpr size_t kTeddySampleBytes = 16384;  // of the sample, to cost windows and buckets
  static constexpr size_t kTeddyGroups = 256;         // distinct windows at most, else Wu-Manber
  static constexpr size_t kTeddyCounted = 32;         // groups merged by their count in the sample
  struct Windowed {
    uint32_t literal = 0;  // index into literals_
    uint32_t end = 0;      // index in the literal of its window's last byte
    uint32_t window = 0;   // its window's 4 bytes | 0x20 each, as loaded (if end >= 3)
  };
  // `lower_sample`: `sample` with ASCII letters lowercased.
  void buildTeddy(std::string_view sample, std::string_view lower_sample);
  bool teddyMayMatch(std::string_view line) const;
  // A window of every bucket set in `buckets` may end at text[end]: compares their literals.
  bool teddyConfirm(const unsigned char* text, size_t size, size_t end, uint32_t buckets) const;

  bool teddy_ = false;
  // [window byte][nibble] -> the buckets whose window byte may have that low (lo_) or high (hi_)
  // nibble; a window byte open in a bucket has its bit in every entry.
  std::array<std::array<uint8_t, 16>, kWindow> lo_{};
  std::array<std::array<uint8_t, 16>, kWindow> hi_{};
  uint8_t open_before_ = 0;  // buckets holding a literal shorter than the window
  std::array<uint32_t, kBuckets + 1> bucket_first_{};  // bucket b: windowed_[first[b], first[b+1])
  std::vector<Windowed> windowed_;
};

}  // namespace faultline
