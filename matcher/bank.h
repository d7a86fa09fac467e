// The signature bank: signatures (RE2 patterns with named captures) and the rules that turn their
// hits into decisions, loaded from the YAML files in rules/ (format: rules/README.md).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <re2/re2.h>
#include <re2/set.h>

#include "core/record.h"

namespace faultline {

enum class Severity : uint8_t { kInfo, kWarning, kFatal };
std::string_view severityName(Severity s);

struct Example {
  std::string line;
  std::vector<std::pair<std::string, std::string>> fields;  // expected captures (match only)
};

struct Signature {
  std::string id;
  std::string description;
  std::string source;  // where the pattern and examples come from (URL)
  std::string file;    // rule file and line of the definition, for error messages
  int file_line = 0;
  std::string pattern;
  uint8_t streams = 0;  // bit (1 << StreamKind)
  Severity severity = Severity::kWarning;
  std::vector<Example> match_examples;
  std::vector<Example> no_match_examples;
  std::unique_ptr<RE2> re;          // run only on a Set hit, to extract fields
  std::vector<std::string> fields;  // capture group names by group index - 1 ("" if unnamed)

  bool appliesTo(StreamKind k) const { return (streams & (1U << static_cast<unsigned>(k))) != 0; }
};

struct Rule {
  std::string id;
  std::string file;
  int file_line = 0;
  uint32_t signature = 0;  // index into Bank::signatures
  Severity severity = Severity::kFatal;
  // Every listed field must equal one of its values for a hit to count.
  std::vector<std::pair<std::string, std::vector<std::string>>> where;
  std::vector<std::string> entity;  // fields forming the entity key (empty: the node itself)
  int count = 1;                    // hits within `window_ns` needed (warning rules)
  int64_t window_ns = 0;
  int64_t dedup_ns = 0;  // repeats of (node, rule, entity) inside this window count once
};

// One RE2::Set per stream kind over the signatures that apply to it.
struct CompiledSet {
  std::unique_ptr<RE2::Set> set;    // null when no signature applies to this stream kind
  std::vector<uint32_t> signature;  // Set pattern index -> signature index
};

struct Bank {
  std::vector<Signature> signatures;
  std::vector<Rule> rules;
  std::array<CompiledSet, kStreamKinds> sets;

  const Signature* find(std::string_view id) const;
};

// A rule file's name and text.
struct RuleFile {
  std::string name;
  std::string text;
};

// Thrown when a bank cannot be loaded. what() lists every problem found, one per line, each as
// "FILE:LINE: cause" (for example "rules/xid.yaml:12: signature nvidia-xid: pattern does not
// compile: missing )").
class BankError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses and compiles a bank from rule files (in the given order). Signature ids and rule ids must
// be unique across files. Throws BankError.
std::shared_ptr<const Bank> loadBank(const std::vector<RuleFile>& files);

// Reads every *.yaml / *.yml file of `dir` (sorted by name). Throws BankError if the directory
// cannot be read or holds no rule file.
std::vector<RuleFile> readRuleDir(const std::string& dir);

// The bank compiled into the binary from rules/ at build time.
std::vector<RuleFile> embeddedRuleFiles();

}  // namespace faultline
