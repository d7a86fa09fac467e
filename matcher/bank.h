// The signature bank: signatures (RE2 patterns with named captures) and the rules that turn their
// hits into decisions, loaded from the YAML files in rules/ (format: rules/README.md).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <re2/re2.h>
#include <re2/set.h>

#include "core/record.h"
#include "matcher/literal_gate.h"

namespace faultline {

enum class Severity : uint8_t { kInfo, kWarning, kFatal };

struct Example {
  std::string line;
  std::vector<std::pair<std::string, std::string>> fields;  // expected captures (match only)
  int file_line = 0;                                        // where the example is written
};

// The most capture groups a pattern may have: the matcher extracts a hit's fields into this many
// groups, so a field of a later group would never be filled. Longer patterns are refused.
constexpr int kMaxCaptureGroups = 32;
// The field a pod hit carries its job in (the first of core/record.h's kJobLabels), which
// distinct_jobs rules count: no capture group or table column of a pod signature may take its
// name.
inline constexpr std::string_view kJobField = "job";

struct Signature {
  std::string id;
  std::string file;  // rule file and line of the definition, for error messages
  int file_line = 0;
  std::string pattern;
  uint8_t streams = 0;  // bit (1 << StreamKind)
  Severity severity = Severity::kWarning;
  std::vector<Example> match_examples;
  std::vector<Example> no_match_examples;
  std::unique_ptr<RE2> re;          // run only on a Set hit, to extract fields
  std::string prefix;               // literalPrefix(*re): where extraction may anchor
  std::vector<std::string> fields;  // capture group names by group index - 1 ("" if unnamed)
  std::vector<uint32_t> tables;     // indexes into Bank::tables that add fields to its hits
  // For a pattern that starts "^[^\n]*" (anywhere in the record's first line), the rest of it: a
  // match's own text starts where this one's leftmost match does, not at the line's start
  // (quotesProcessText). Null for other patterns.
  std::unique_ptr<RE2> body;
  // Its lines report a state (a port DOWN, ACTIVE): a `flap` or `unless_followed_by` rule, or such
  // a rule's follower, reads it. None of its lines is a repeat of one in the same second
  // (Correlator): DOWN, ACTIVE, DOWN in one second is the state changing twice.
  bool state = false;

  bool appliesTo(StreamKind k) const { return (streams & (1U << static_cast<unsigned>(k))) != 0; }
};

// A table of values keyed by fields of one signature's hits (format: rules/README.md, "Tables").
// Hits of `signature` whose `key` fields equal a row's key get the row's `columns` as extra fields
// (e.g. an Xid code's catalog action), which rules may test with `where` like captured fields.
struct Table {
  std::string id;
  uint32_t signature = 0;            // index into Bank::signatures
  std::vector<std::string> key;      // field names of the key, in order
  std::vector<std::string> columns;  // names of the fields a row adds
  // Key values joined with '\x1f' -> column values (as many as `columns`).
  std::unordered_map<std::string, std::vector<std::string>> rows;
};

// Rule semantics are documented in rules/README.md and matcher/correlator.h. Durations are ns of
// event time; rule references are indexes into Bank::rules.
struct Rule {
  std::string id;
  std::string file;
  int file_line = 0;
  uint32_t signature = 0;  // index into Bank::signatures
  Severity severity = Severity::kFatal;
  // Every listed field must equal one of its values for a hit to count ("" = field absent).
  std::vector<std::pair<std::string, std::vector<std::string>>> where;
  std::vector<std::string> entity;  // fields forming the entity key (empty: the node itself)
  int count = 1;                    // hits within `window_ns` needed (warning rules)
  // Pod rules: the hits counted must come from `count` distinct jobs (the hit's "job" field,
  // kJobLabels); a hit without a job does not count. One job hanging twice implicates no node.
  bool distinct_jobs = false;
  int64_t window_ns = 0;
  int64_t dedup_ns = 0;  // repeats of (node, rule, entity) inside this window count once
  int64_t burst_ns = 0;  // a hit closer than this to the key's previous hit, counted or not, is
                         // part of the same burst and does not count

  // Cause and effect: hits attach to a recent hit of one of `attach_to` (same node, equal shared
  // entity fields, within attach_within_ns) and then never count; `suppressed_by` drops a hit
  // when one of those rules hit first under the same conditions.
  std::vector<uint32_t> attach_to;
  int64_t attach_within_ns = 0;
  std::vector<uint32_t> suppressed_by;
  int64_t suppress_within_ns = 0;
  // Continuation join: a hit takes the fields it lacks from the node's newest hit of `joins`
  // within join_within_ns (a printk report split into one record per line).
  int joins = -1;
  int64_t join_within_ns = 0;
  // A (node, uuid) -> pci style map: this rule's hits record alias_from's value as a name of
  // alias_to's value; later hits on the node that carry alias_from but not alias_to get it.
  std::string alias_from;
  std::string alias_to;

  // Flap: a hit whose `flap_field` is in flap_down, then one in flap_up on the same entity within
  // flap_within_ns, count as one hit (e.g. an IB port DOWN then ACTIVE).
  std::string flap_field;
  std::vector<std::string> flap_down;
  std::vector<std::string> flap_up;
  int64_t flap_within_ns = 0;

  // Cluster-wide event: when this rule hits on at least cluster_nodes nodes within
  // cluster_within_ns, those hits are one job's event and count for no node.
  int cluster_nodes = 0;
  int64_t cluster_within_ns = 0;
  // Corroboration: a counted hit with a hit of one of these rules on the same node within
  // corroborate_within_ns (before or after) decides at once.
  std::vector<uint32_t> corroborated_by;
  int64_t corroborate_within_ns = 0;
  // Peers: a hit reports a hang of each job this node was running (Correlator::member); that
  // long after a job's first report, the nodes running it that did not report it are suspect
  // (Neuron HANG_ON_COLLECTIVES: the fault is on the worker not waiting). The hit never counts
  // for its own node.
  int64_t peers_within_ns = 0;
  // A lasting state: a hit that would fault waits unless_within_ns, and faults only if no hit of
  // one of `unless_followed_by` on the same entity came meanwhile (an IB port DOWN for 5 min).
  std::vector<uint32_t> unless_followed_by;
  int64_t unless_within_ns = 0;

  // Recovery: a fault of this rule clears on a hit of one of `recovered_by` (equal shared entity
  // fields), once no hit of this rule follows for stable_ns; or after quiet_ns without a hit of
  // this rule (recoverable faults only: fatal rules may not set it).
  std::vector<uint32_t> recovered_by;
  int64_t stable_ns = 0;
  int64_t quiet_ns = 0;
};

// One RE2::Set per stream kind over the signatures that apply to it.
struct CompiledSet {
  std::unique_ptr<RE2::Set> set;    // null when no signature applies to this stream kind
  std::vector<uint32_t> signature;  // Set pattern index -> signature index
  LiteralGate gate{{}, ""};         // the Set's literal gate, longest literals first (untuned)
};

struct Bank {
  std::vector<Signature> signatures;
  std::vector<Rule> rules;
  std::vector<Table> tables;
  std::array<CompiledSet, kStreamKinds> sets;

  const Signature* find(std::string_view id) const;
  // The patterns of the signatures in sets[kind], in the Set's index order
  // (CompiledSet::signature): what the Set's LiteralGate is built from. Empty if no signature
  // applies to `kind`.
  std::vector<std::string> patterns(StreamKind kind) const;
  // The index in `rules` of the rule `id`; nullopt if there is none.
  std::optional<uint32_t> ruleIndex(std::string_view id) const;
};

// The text every match of `re` starts with, wherever in a line it starts: the common prefix of
// the bounds RE2::PossibleMatchRange gives for its matches (re2/re2.h), computed up to
// kPrefixRangeBytes. Empty when RE2 gives none, and for patterns with \b or \B (the range is that
// of matches at the start of a text). Example: `NVRM: Xid \((?:PCI:)?...` gives `NVRM: Xid (`.
constexpr int kPrefixRangeBytes = 32;
std::string literalPrefix(const RE2& re);

// A rule file's name and text.
struct RuleFile {
  std::string name;
  std::string text;
  bool operator==(const RuleFile&) const = default;
};

// Thrown when a bank cannot be loaded. what() lists every problem found, one per line, each as
// "FILE:LINE: cause" (for example "rules/xid.yaml:12: signature nvidia-xid: pattern does not
// compile: missing )").
class BankError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses and compiles a bank from rule files (in the given order), then checks every signature's
// examples (checkExamples, matcher/matcher.h). Signature, table and rule ids must be unique across
// files. Throws BankError.
std::shared_ptr<const Bank> loadBank(const std::vector<RuleFile>& files);

// Reads every *.yaml / *.yml file of `dir` (sorted by name; a symbolic link to nothing is no
// file). In a ConfigMap volume (`dir/..data` a link) those of the directory `..data` names, named
// as in `dir`: all of one version, every file of it, while the kubelet swaps the link and removes
// the old version. Throws BankError, and no other error but std::bad_alloc, if the directory
// cannot be read, one of those entries cannot be told a file or not (a link loop), opened (its
// permissions) or read in full (EIO), or it holds no rule file.
std::vector<RuleFile> readRuleDir(const std::string& dir);

// The bank compiled into the binary from rules/ at build time.
std::vector<RuleFile> embeddedRuleFiles();

}  // namespace faultline
