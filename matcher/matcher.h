// Matches record batches against the bank: per line, the literal gate of its stream kind's set,
// then one RE2::Set pass only if the line holds a literal, then the single signature's RE2 only
// on a Set hit, to extract the named fields.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/record.h"
#include "matcher/bank.h"
#include "matcher/literal_gate.h"

namespace faultline {

// The value of the field `name` in `fields` (a hit's or evidence's); empty if it has none.
std::string_view fieldOf(const std::vector<std::pair<std::string, std::string>>& fields,
                         std::string_view name);

// True if `text` holds, whole, the head of a kernel report that quotes text a process chose, so
// that what follows it may be the process's: the file name a crashed process had mapped
// (print_vma_addr's " in NAME[...]" after x86's segfault, trap and bad-frame reports and arm64's
// unhandled exception), a ptrace target's command line (Yama's "ptrace attach of \"CMDLINE\"[PID]
// was attempted by ...", security/yama/yama_lsm.c), an executed path (fs/exec.c's "process
// 'COMM' launched 'PATH' with NULL argv" and, at the start of the message, "process 'PATH'
// started with executable stack"), a file written with direct I/O (at the start of the message,
// "File: PATH PID: ..."), a path executed with setuid-root and file capabilities (at the start of
// the message, "warning: `PATH' has both setuid-root and effective capabilities"), a module name of
// a busy request_module() ("request_module: modprobe NAME ..." or "... (max_modprobes: 50), for
// module NAME, throttling...", kernel/module/kmod.c; an AF_ALG socket's algorithm names it) or the
// version string of a /dev/nvidiactl client ("NVRM: API mismatch: the client ... has the version
// VERSION"), or any text in a quote opened after a space or '=' and not closed ("tmpfs: Unknown
// parameter 'KEY", audit's exe="PATH). A process can put a whole fault line there, so no
// signature's match may start after such a head (Matcher::match). A message starts the line, or
// follows a dmesg stamp ("] ") or a syslog tag ("kernel: ").
bool quotesProcessText(std::string_view text);

// Whether `line` is a JSON object's text: `{`, optional blanks, then `"` or `}`. A shipper's record
// of a line (Promtail's journal scrape with `json: true`, an exporter's `raw` encoding of a map
// body), never the kernel's own line, and its escaped quotes hide a process's text from
// quotesProcessText: a kernel record's line of this shape makes no hit (Matcher::match).
bool jsonObjectText(std::string_view line);

// A line that matched a signature. Owns its bytes: it outlives the batch it came from.
struct Hit {
  int64_t time_ns = 0;  // event time of the line, ns since the epoch
  std::string node;
  uint32_t signature = 0;  // index into Bank::signatures
  StreamKind stream = StreamKind::kOther;
  std::string line;
  // The named captures that participated, then the columns of each of the signature's tables
  // whose row the captures key (Bank::tables: an Xid code's catalog action and class), then for
  // a pod record labelled with a job (kJobLabels) "job" and its name.
  std::vector<std::pair<std::string, std::string>> fields;
  // Arrival order, so that sorting by event time stays deterministic (replay: the input's number
  // in the high bits, Pipeline::collect).
  uint64_t seq = 0;
  // Records right after this hit's in its batch (no other record with hits between) that
  // repeated its node, stream, line and (pod records) job in the same second of event time, no
  // earlier: they make no hits of their own, since the correlator takes such hits for repeats
  // (Correlator).
  uint32_t repeats = 0;

  std::string_view field(std::string_view name) const;
};

// A signature's example line that the matcher does not confirm (rules/README.md, "Signatures").
struct ExampleFailure {
  uint32_t signature = 0;  // index into Bank::signatures
  const Example* example = nullptr;
  std::string cause;  // e.g. "match example not matched on stream kernel"
};

// Matches every signature's examples as the service matches lines, on each stream kind the
// signature applies to: a match example must hit it with the expected fields, a no_match example
// must not. loadBank refuses a bank that fails any.
std::vector<ExampleFailure> checkExamples(const Bank& bank);

struct MatcherStats {
  uint64_t lines = 0;
  uint64_t hits = 0;
  uint64_t candidates = 0;  // lines the literal gate passed to the RE2::Set
  uint64_t set_errors = 0;  // RE2::Set DFA out of memory: the line was matched pattern by pattern
  uint64_t reused = 0;      // candidate lines seen recently: their earlier outcome was reused
  // Kernel records a signature matched whose line is jsonObjectText(): no hit was made. A line
  // repeated within the reuse cache (seen_) counts once.
  uint64_t json_kernel_lines = 0;
};

class Matcher {
 public:
  static constexpr size_t kTuneLines = 1000;
  // The tuning samples at most this many bytes of each line (all of a usual log line): a flood of
  // 256 KiB lines would otherwise hold 256 MB for the sample, and take seconds to rank atoms in.
  static constexpr size_t kTuneLineBytes = 1024;

  // Starts from the bank's literal gate of each stream kind; once kTuneLines lines of a
  // kind have been matched, retunes that kind's gate to what is rare in those lines (speed only:
  // the gate never changes which lines match).
  explicit Matcher(std::shared_ptr<const Bank> bank);

  // Appends one Hit per (record, signature) that matches, in record order, but for records that
  // only repeat the hits before them (Hit::repeats), for a kernel record's matches that start
  // after the head of a report quoting a process's text (quotesProcessText), and for a kernel
  // record whose line is a JSON object's text (jsonObjectText; counted in
  // MatcherStats::json_kernel_lines). Records of a stream kind no signature applies to cost
  // nothing beyond the lookup. Allocates only for hits.
  void match(const RecordBatch& batch, std::vector<Hit>* hits);

  // Matches a single line as stream kind `kind`; returns the signature indexes that match, in
  // increasing order.
  std::vector<uint32_t> matchLine(std::string_view line, StreamKind kind);

  const MatcherStats& stats() const { return stats_; }
  const LiteralGate& gate(StreamKind kind) const { return gates_[static_cast<size_t>(kind)]; }
  const Bank& bank() const { return *bank_; }

 private:
  using Fields = std::vector<std::pair<std::string, std::string>>;

  // Sets sigs_ to the signatures of stream kind `kind` that match `line`, in increasing order
  // (the Set alone: callers ask the gate first).
  void matchSet(std::string_view line, StreamKind kind);
  // Adds the line to its kind's sample (a kind not yet tuned); rebuilds the kind's gate when
  // the sample is full.
  void sample(const LogRecord& rec);
  // Runs the signature's own RE2 for its named captures, then adds its tables' columns (Hit's
  // fields); false if it does not match after all, or, in a line of stream kind kKernel, its match
  // starts in text a process chose (quotesProcessText). The search is anchored at the first
  // occurrence of the signature's literal prefix (Signature::prefix), and unanchored only if it has
  // none or no match starts there: the same leftmost match, without the two DFA passes that find
  // where an unanchored match starts.
  bool extract(std::string_view line, StreamKind kind, const Signature& sig, Fields* fields);

  std::shared_ptr<const Bank> bank_;
  std::vector<LiteralGate> gates_;  // by stream kind
  std::array<bool, kStreamKinds> tuned_{};
  std::array<std::string, kStreamKinds> sample_;  // lines joined by '\n', until tuned
  std::array<size_t, kStreamKinds> sampled_{};
  MatcherStats stats_;
  // Reused across batches: no allocation per line.
  std::array<std::vector<std::string_view>, kStreamKinds> lines_;  // a batch's lines by kind
  std::array<std::vector<uint32_t>, kStreamKinds> index_;          // their record indexes
  std::vector<uint8_t> flags_;                                     // the gate's verdicts
  std::vector<uint8_t> may_;  // by record: 1 if the line holds a literal of its kind's gate
  std::vector<int> ids_;
  std::vector<uint32_t> sigs_;  // likewise
  std::string table_key_;       // likewise
  uint64_t seq_ = 0;
  // Recent candidate lines and their hits (none, for a line the gate passed in vain), by a hash
  // of the line, one entry per slot: a storm of repeated lines (800K Xid 95 lines with 29
  // distinct) pays for the Set and the captures once per distinct line.
  struct Seen {
    bool valid = false;
    StreamKind stream = StreamKind::kOther;
    std::string line;
    std::vector<std::pair<uint32_t, Fields>> hits;
  };
  static constexpr size_t kSeenSlots = 256;
  static constexpr size_t kSeenLineBytes = 1024;  // longer lines are not kept: at most 256 KiB
  std::vector<Seen> seen_ = std::vector<Seen>(kSeenSlots);
};

}  // namespace faultline
