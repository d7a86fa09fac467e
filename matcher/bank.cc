#include "matcher/bank.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "core/time.h"
#include "core/yaml_read.h"
#include "matcher/matcher.h"

namespace faultline {
namespace {

// Rule durations are added to event times (ns since the epoch, up to 2262 in int64): ten years
// keeps every sum in range for any log time before 2252.
constexpr std::string_view kJobReserved =
    "field job is the pod's job label (matcher/bank.h kJobField): no capture or column may take "
    "its name";
constexpr int64_t kMaxDurationNs = int64_t{3650} * 86400 * 1'000'000'000;

// Collects "file:line: cause" messages; the loader reports them all at once.
class Problems {
 public:
  void add(const std::string& file, const YAML::Node& at, const std::string& cause) {
    addAt(file, at.IsDefined() ? at.Mark().line + 1 : 0, cause);
  }
  void addAt(const std::string& file, int line, const std::string& cause) {
    // Line 0: the problem is of no one line (a bank of empty files).
    list_ << file;
    if (line > 0) {
      list_ << ':' << line;
    }
    list_ << ": " << cause << '\n';
    ++n_;
  }
  bool any() const { return n_ > 0; }
  std::string str() const { return list_.str(); }

 private:
  std::ostringstream list_;
  int n_ = 0;
};

bool parseSeverity(const std::string& s, Severity* out) {
  if (s == "fatal") {
    *out = Severity::kFatal;
  } else if (s == "warning") {
    *out = Severity::kWarning;
  } else if (s == "info") {
    *out = Severity::kInfo;
  } else {
    return false;
  }
  return true;
}

// A missing key yields an invalid node, on which yaml-cpp's type queries throw: test first.
std::string scalar(const YAML::Node& n) {
  return n.IsDefined() && n.IsScalar() ? n.as<std::string>() : "";
}

// The line of a `---` or `...` after which a second document starts (one with content after it),
// or 0. Load() reads the first document only, so a second would be dropped unread; LoadAll() would
// find it, but yaml-cpp 0.7's hangs on some inputs (a bank_fuzz finding). A `---` (or `--- ...`)
// or `...` line is a document marker only at the start of a line, where no scalar's content can
// be; `%` directive lines before the first content are no content.
int secondDocument(std::string_view text) {
  if (text.starts_with("\xEF\xBB\xBF")) {
    text.remove_prefix(3);  // a byte order mark, which yaml-cpp skips: no content
  }
  bool content = false;  // the first document has some
  int marker = 0;        // the line of a `---` or `...` after it
  int line = 0;
  auto isMarker = [](std::string_view l, std::string_view m) {
    return l.substr(0, 3) == m && (l.size() == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r');
  };
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view l = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line;
    const bool start = isMarker(l, "---");
    const bool end = isMarker(l, "...");
    if ((start || end) && content && marker == 0) {
      marker = line;
    }
    if (end) {
      continue;  // what follows `...` on its line is a comment
    }
    const std::string_view rest = start ? l.substr(3) : l;
    const size_t first = rest.find_first_not_of(" \t\r");
    if (first != std::string_view::npos && rest[first] != '#' &&
        !(!content && !start && rest[first] == '%')) {
      if (marker != 0) {
        return marker;
      }
      content = true;
    }
  }
  return 0;
}

// Refuses a key of the map `n` given twice: yaml-cpp keeps both, and a lookup takes the first.
// `what` names the map in messages ("rule r1: where").
bool uniqueKeys(const YAML::Node& n, const std::string& file, const std::string& what,
                Problems* problems) {
  bool ok = true;
  std::set<std::string> seen;
  for (const auto& kv : n) {
    if (!kv.first.IsScalar()) {
      problems->add(file, kv.first, what + ": a key is a name, not a list or map");
      ok = false;
    } else if (!seen.insert(kv.first.Scalar()).second) {
      problems->add(file, kv.first, what + ": duplicate key '" + kv.first.Scalar() + "'");
      ok = false;
    }
  }
  return ok;
}

// Refuses a key of the map `n` that the loader does not read, as uniqueKeys does a repeated one: a
// misspelt key would be ignored, and what it says silently lost (a `wehre` makes a rule match
// every hit).
bool knownKeys(const YAML::Node& n, std::initializer_list<std::string_view> keys,
               const std::string& file, const std::string& what, Problems* problems) {
  bool ok = uniqueKeys(n, file, what, problems);
  for (const auto& kv : n) {
    if (kv.first.IsScalar() &&
        std::find(keys.begin(), keys.end(), kv.first.Scalar()) == keys.end()) {
      problems->add(file, kv.first, what + ": unknown key '" + kv.first.Scalar() + "'");
      ok = false;
    }
  }
  return ok;
}

// A list of names or values: a sequence of scalars, appended to *out. False, with a problem, for
// anything else: yaml-cpp iterates a scalar or a map as an empty list, and a list item that is not
// a scalar reads as '' (a `where` value that matches an absent field).
bool scalarList(const YAML::Node& n, const std::string& file, const std::string& what,
                std::vector<std::string>* out, Problems* problems) {
  if (!n.IsSequence()) {
    problems->add(file, n, what + " must be a list");
    return false;
  }
  for (const YAML::Node& v : n) {
    if (!v.IsScalar()) {
      problems->add(file, v, what + ": each item is a single value, not a list, map or null");
      return false;
    }
    out->push_back(v.Scalar());
  }
  return true;
}

void parseExamples(const YAML::Node& list, std::vector<Example>* out, bool with_fields,
                   const std::string& file, const std::string& what, Problems* problems) {
  if (!list) {
    return;
  }
  if (!list.IsSequence()) {
    problems->add(file, list, what + " must be a list");
    return;
  }
  for (const YAML::Node& e : list) {
    Example ex;
    ex.file_line = e.Mark().line + 1;
    if (e.IsMap()) {
      if (!(with_fields ? knownKeys(e, {"line", "fields"}, file, what, problems)
                        : knownKeys(e, {"line"}, file, what, problems))) {
        continue;
      }
    } else if (!e.IsScalar()) {
      problems->add(file, e, what + ": each example is a string or {line, fields}");
      continue;
    }
    const YAML::Node line = e.IsMap() ? e["line"] : e;
    if (!line || !line.IsScalar()) {
      problems->add(file, e, what + ": each example is a string or {line, fields}");
      continue;
    }
    ex.line = line.Scalar();
    if (e.IsMap() && e["fields"]) {
      const YAML::Node f = e["fields"];
      if (!f.IsMap()) {
        problems->add(file, f, what + ": fields must be a map");
        continue;
      }
      if (!uniqueKeys(f, file, what + ": fields", problems)) {
        continue;
      }
      for (const auto& kv : f) {
        if (!kv.second.IsScalar()) {
          problems->add(file, kv.second, what + ": fields: each value is a single value");
          continue;
        }
        ex.fields.emplace_back(kv.first.Scalar(), kv.second.Scalar());
      }
    }
    out->push_back(std::move(ex));
  }
}

void parseSignature(const YAML::Node& n, const std::string& file, Bank* bank, Problems* problems) {
  Signature sig;
  sig.file = file;
  sig.file_line = n.Mark().line + 1;
  sig.id = scalar(n["id"]);
  if (sig.id.empty()) {
    problems->add(file, n, "signature without id");
    return;
  }
  const std::string where = "signature " + sig.id;
  if (!knownKeys(n, {"id", "description", "source", "streams", "severity", "pattern", "examples"},
                 file, where, problems)) {
    return;
  }
  // description and source are for the reader of the file (source: where the pattern and
  // examples come from); nothing reads them here.
  sig.pattern = scalar(n["pattern"]);
  if (sig.pattern.empty()) {
    problems->add(file, n, where + ": missing pattern");
    return;
  }
  if (!n["streams"].IsSequence() || n["streams"].size() == 0) {
    problems->add(file, n, where + ": streams must be a non-empty list of kernel, pod, other");
    return;
  }
  for (const YAML::Node& s : n["streams"]) {
    StreamKind k{};
    if (!parseStreamKind(scalar(s), &k)) {
      problems->add(file, s, where + ": unknown stream kind '" + scalar(s) + "'");
      return;
    }
    sig.streams |= static_cast<uint8_t>(1U << static_cast<unsigned>(k));
  }
  if (!parseSeverity(scalar(n["severity"]), &sig.severity)) {
    problems->add(file, n["severity"].IsDefined() ? n["severity"] : n,
                  where + ": severity must be fatal, warning or info");
    return;
  }
  RE2::Options opts;
  opts.set_log_errors(false);
  sig.re = std::make_unique<RE2>(sig.pattern, opts);
  if (!sig.re->ok()) {
    problems->add(file, n["pattern"], where + ": pattern does not compile: " + sig.re->error());
    return;
  }
  if (sig.re->NumberOfCapturingGroups() > kMaxCaptureGroups) {
    problems->add(file, n["pattern"],
                  where + ": pattern has " + std::to_string(sig.re->NumberOfCapturingGroups()) +
                      " capture groups, more than the " + std::to_string(kMaxCaptureGroups) +
                      " the matcher fills; write (?:...) for a group that need not capture");
    return;
  }
  // The Set runs patterns unanchored: one that matches the empty text hits every line (or, as
  // `^$`, only empty ones: no signature either); one that matches an empty string inside a line
  // (`\b`, `x|\b`) hits nearly every line.
  if (RE2::FullMatch("", *sig.re)) {
    problems->add(file, n["pattern"], where + ": pattern matches an empty line, so every line");
    return;
  }
  for (const std::string_view text : {"a", "a a", "[ 1.0] NVRM: x"}) {
    for (size_t p = 0; p <= text.size(); ++p) {
      if (sig.re->Match(text, p, p, RE2::ANCHOR_BOTH, nullptr, 0)) {
        problems->add(file, n["pattern"],
                      where + ": pattern matches an empty string inside the line \"" +
                          std::string(text) + "\", so nearly every line");
        return;
      }
    }
  }
  sig.prefix = literalPrefix(*sig.re);
  constexpr std::string_view kFirstLine = "^[^\\n]*";
  if (std::string_view(sig.pattern).substr(0, kFirstLine.size()) == kFirstLine) {
    sig.body = std::make_unique<RE2>(sig.pattern.substr(kFirstLine.size()), opts);
    if (!sig.body->ok()) {
      sig.body.reset();  // "^[^\n]*?x": the rest is no pattern of its own
    }
  }
  sig.fields.assign(static_cast<size_t>(sig.re->NumberOfCapturingGroups()), "");
  for (const auto& [name, index] : sig.re->NamedCapturingGroups()) {
    if (name == kJobField && sig.appliesTo(StreamKind::kPod)) {
      problems->add(file, n["pattern"], where + ": " + std::string(kJobReserved));
      return;
    }
    sig.fields[static_cast<size_t>(index - 1)] = name;
  }
  if (const YAML::Node ex = n["examples"]) {
    if (!ex.IsMap()) {
      problems->add(file, ex, where + ": examples is {match: [...], no_match: [...]}");
      return;
    }
    if (!knownKeys(ex, {"match", "no_match"}, file, where + ": examples", problems)) {
      return;
    }
    parseExamples(ex["match"], &sig.match_examples, true, file, where + ": examples.match",
                  problems);
    parseExamples(ex["no_match"], &sig.no_match_examples, false, file,
                  where + ": examples.no_match", problems);
  }
  if (sig.match_examples.empty()) {
    problems->add(file, n, where + ": needs at least one examples.match line");
    return;
  }
  bank->signatures.push_back(std::move(sig));
}

// The table that adds `field` to the hits of `sig`, or null when `field` is none of its columns or
// is a capture group of `sig`.
const Table* columnTable(const Bank& bank, const Signature& sig, const std::string& field) {
  if (std::find(sig.fields.begin(), sig.fields.end(), field) != sig.fields.end()) {
    return nullptr;
  }
  for (uint32_t t : sig.tables) {
    const auto& cols = bank.tables[t].columns;
    if (std::find(cols.begin(), cols.end(), field) != cols.end()) {
      return &bank.tables[t];
    }
  }
  return nullptr;
}

// The fields a rule on `sig` may name: its captures and the columns of its tables ('' names an
// unnamed group).
bool hasField(const Bank& bank, const Signature& sig, const std::string& field) {
  return !field.empty() &&
         (std::find(sig.fields.begin(), sig.fields.end(), field) != sig.fields.end() ||
          columnTable(bank, sig, field) != nullptr);
}

// Rule ids a rule names (attach_to, ...), resolved once every rule is parsed.
struct RuleRefs {
  size_t rule = 0;
  std::string key;
  YAML::Node at;
  std::vector<std::string> ids;
};

void parseTable(const YAML::Node& n, const std::string& file, Bank* bank, Problems* problems) {
  Table t;
  t.id = scalar(n["id"]);
  const std::string where = "table " + t.id;
  if (!knownKeys(n, {"id", "signature", "key", "columns", "rows"}, file, where, problems)) {
    return;
  }
  const Signature* sig = bank->find(scalar(n["signature"]));
  if (t.id.empty() || sig == nullptr) {
    problems->add(file, n, where + ": needs an id and a known signature");
    return;
  }
  if (std::any_of(bank->tables.begin(), bank->tables.end(),
                  [&](const Table& x) { return x.id == t.id; })) {
    problems->add(file, n, "duplicate table id " + t.id);
    return;
  }
  t.signature = static_cast<uint32_t>(sig - bank->signatures.data());
  if (!n["key"] || !n["columns"]) {
    problems->add(file, n, where + ": needs key and columns lists");
    return;
  }
  if (!scalarList(n["key"], file, where + ": key", &t.key, problems) ||
      !scalarList(n["columns"], file, where + ": columns", &t.columns, problems)) {
    return;
  }
  if (t.key.empty() || t.columns.empty()) {
    problems->add(file, n, where + ": needs key and columns lists");
    return;
  }
  for (const std::string& k : t.key) {
    if (std::find(sig->fields.begin(), sig->fields.end(), k) == sig->fields.end()) {
      problems->add(file, n["key"], where + ": signature " + sig->id + " has no field " + k);
      return;
    }
  }
  // A hit's fields are looked up by name, the first one found: captures come before columns,
  // and columns in table order.
  for (auto c = t.columns.begin(); c != t.columns.end(); ++c) {
    if (*c == kJobField && sig->appliesTo(StreamKind::kPod)) {
      problems->add(file, n["columns"], where + ": " + std::string(kJobReserved));
      return;
    }
    if (std::find(sig->fields.begin(), sig->fields.end(), *c) != sig->fields.end()) {
      problems->add(file, n["columns"],
                    where + ": column " + *c + " is also a capture group of signature " + sig->id +
                        ", which would hide it");
      return;
    }
    if (hasField(*bank, *sig, *c) || std::find(t.columns.begin(), c, *c) != c) {
      problems->add(
          file, n["columns"],
          where + ": column " + *c + " is given twice to the hits of signature " + sig->id);
      return;
    }
  }
  if (!n["rows"] || !n["rows"].IsSequence()) {
    problems->add(file, n, where + ": rows must be a list of lists");
    return;
  }
  for (const YAML::Node& r : n["rows"]) {
    std::vector<std::string> v;
    if (!scalarList(r, file, where + ": row", &v, problems)) {
      return;
    }
    if (v.size() != t.key.size() + t.columns.size()) {
      problems->add(file, r, where + ": a row holds the key values then one value per column");
      return;
    }
    std::string key;
    for (size_t i = 0; i < t.key.size(); ++i) {
      key += (i == 0 ? "" : "\x1f") + v[i];
    }
    v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(t.key.size()));
    if (!t.rows.emplace(std::move(key), std::move(v)).second) {
      problems->add(file, r, where + ": duplicate row key");
      return;
    }
  }
  bank->signatures[t.signature].tables.push_back(static_cast<uint32_t>(bank->tables.size()));
  bank->tables.push_back(std::move(t));
}

void parseRule(const YAML::Node& n, const std::string& file, Bank* bank, Problems* problems,
               std::vector<RuleRefs>* refs) {
  Rule rule;
  rule.file = file;
  rule.file_line = n.Mark().line + 1;
  rule.id = scalar(n["id"]);
  if (rule.id.empty()) {
    problems->add(file, n, "rule without id");
    return;
  }
  const std::string where = "rule " + rule.id;
  if (!knownKeys(n,
                 {"id",
                  "signature",
                  "severity",
                  "where",
                  "entity",
                  "count",
                  "distinct_jobs",
                  "window",
                  "dedup",
                  "burst",
                  "attach_to",
                  "suppressed_by",
                  "corroborated_by",
                  "unless_followed_by",
                  "joins",
                  "alias",
                  "flap",
                  "suspects_peers",
                  "cluster",
                  "recovery"},
                 file, where, problems)) {
    return;
  }
  const std::string sig_id = scalar(n["signature"]);
  const auto it = std::find_if(bank->signatures.begin(), bank->signatures.end(),
                               [&](const Signature& s) { return s.id == sig_id; });
  if (it == bank->signatures.end()) {
    problems->add(file, n, where + ": unknown signature '" + sig_id + "'");
    return;
  }
  rule.signature = static_cast<uint32_t>(it - bank->signatures.begin());
  rule.severity = it->severity;
  if (n["severity"] && !parseSeverity(scalar(n["severity"]), &rule.severity)) {
    problems->add(file, n["severity"], where + ": severity must be fatal, warning or info");
    return;
  }
  if (const YAML::Node w = n["where"]) {
    if (!w.IsMap()) {
      problems->add(file, w, where + ": where must map field names to value lists");
      return;
    }
    if (!uniqueKeys(w, file, where + ": where", problems)) {
      return;
    }
    for (const auto& kv : w) {
      const std::string& field = kv.first.Scalar();
      if (!hasField(*bank, *it, field)) {
        problems->add(file, kv.first, where + ": signature " + sig_id + " has no field " + field);
        return;
      }
      // One value, or a list of them ('' for an absent field, written out: a null is a mistake).
      std::vector<std::string> values;
      if (kv.second.IsScalar()) {
        values.push_back(kv.second.Scalar());
      } else if (!kv.second.IsSequence()) {
        problems->add(file, kv.second, where + ": where: " + field + " is a value or a list");
        return;
      } else if (!scalarList(kv.second, file, where + ": where: " + field, &values, problems)) {
        return;
      }
      // A table column holds only its rows' values (or '' where no row matched): a value no row
      // holds, `Fatal` for `fatal`, would load a rule that never fires.
      if (const Table* t = columnTable(*bank, *it, field)) {
        const size_t col =
            std::find(t->columns.begin(), t->columns.end(), field) - t->columns.begin();
        for (const std::string& v : values) {
          if (!v.empty() && std::none_of(t->rows.begin(), t->rows.end(),
                                         [&](const auto& row) { return row.second[col] == v; })) {
            problems->add(
                file, kv.second,
                where + ": where: no row of table " + t->id + " gives " + field + " '" + v + "'");
            return;
          }
        }
      }
      rule.where.emplace_back(field, std::move(values));
    }
  }
  if (const YAML::Node e = n["entity"]) {
    if (!scalarList(e, file, where + ": entity", &rule.entity, problems)) {
      return;
    }
    for (size_t i = 0; i < rule.entity.size(); ++i) {
      if (!hasField(*bank, *it, rule.entity[i])) {
        // May still come from an alias or a joined line: checked once every rule is known.
        refs->push_back({bank->rules.size(), "entity", e[i], {rule.entity[i]}});
      }
    }
  }
  if (n["count"]) {
    rule.count = n["count"].as<int>(0);
    if (rule.count < 1) {
      problems->add(file, n["count"], where + ": count must be a positive integer");
      return;
    }
  }
  if (const YAML::Node d = n["distinct_jobs"]) {
    if (!d.IsScalar() || !YAML::convert<bool>::decode(d, rule.distinct_jobs)) {
      problems->add(file, d, where + ": distinct_jobs is true or false");
      return;
    }
    if (rule.distinct_jobs && (rule.count < 2 || !it->appliesTo(StreamKind::kPod))) {
      problems->add(file, d,
                    where + ": distinct_jobs needs a count of at least 2 and a pod signature");
      return;
    }
  }
  auto durationAt = [&](const YAML::Node& node, const std::string& key, int64_t* out) {
    if (!node[key]) {
      return true;
    }
    if (!parseDuration(scalar(node[key]), out) || *out < 0 || *out > kMaxDurationNs) {
      problems->add(file, node[key],
                    where + ": " + key + " is not a duration (like 90s, 10m, 1h) of at most 3650d");
      return false;
    }
    return true;
  };
  auto duration = [&](const char* key, int64_t* out) { return durationAt(n, key, out); };
  if (!duration("window", &rule.window_ns) || !duration("dedup", &rule.dedup_ns) ||
      !duration("burst", &rule.burst_ns)) {
    return;
  }
  // Map-valued keys: `shape` says what `key` holds when it is not a map of `keys`.
  auto mapAt = [&](const YAML::Node& m, const std::string& key,
                   std::initializer_list<std::string_view> keys, const std::string& shape) {
    if (!m.IsMap()) {
      problems->add(file, m, where + ": " + key + " is " + shape);
      return false;
    }
    return knownKeys(m, keys, file, where + ": " + key, problems);
  };
  // Each is {rules: [...], within: DUR}.
  auto refsAt = [&](const char* key, const char* list, int64_t* within) {
    const YAML::Node m = n[key];
    if (!m) {
      return true;
    }
    const std::string shape = std::string("{") + list + ": [...], within: DUR}";
    if (!mapAt(m, key, {list, "within"}, shape)) {
      return false;
    }
    if (!m[list] || !m["within"]) {
      problems->add(file, m, where + ": " + key + " is " + shape);
      return false;
    }
    std::vector<std::string> ids;
    if (!scalarList(m[list], file, where + ": " + key + ": " + list, &ids, problems)) {
      return false;
    }
    refs->push_back({bank->rules.size(), key, m[list], std::move(ids)});
    return durationAt(m, "within", within);
  };
  if (!refsAt("attach_to", "rules", &rule.attach_within_ns) ||
      !refsAt("suppressed_by", "rules", &rule.suppress_within_ns) ||
      !refsAt("corroborated_by", "rules", &rule.corroborate_within_ns) ||
      !refsAt("unless_followed_by", "rules", &rule.unless_within_ns)) {
    return;
  }
  if (const YAML::Node j = n["joins"]) {
    if (!mapAt(j, "joins", {"rule", "within"}, "{rule: ID, within: DUR}")) {
      return;
    }
    if (!j["rule"] || !j["within"]) {
      problems->add(file, j, where + ": joins is {rule: ID, within: DUR}");
      return;
    }
    refs->push_back({bank->rules.size(), "joins", j["rule"], {scalar(j["rule"])}});
    if (!durationAt(j, "within", &rule.join_within_ns)) {
      return;
    }
  }
  if (const YAML::Node a = n["alias"]) {
    const std::string shape = "{from: FIELD, to: FIELD}, both captured by " + sig_id;
    if (!mapAt(a, "alias", {"from", "to"}, shape)) {
      return;
    }
    rule.alias_from = scalar(a["from"]);
    rule.alias_to = scalar(a["to"]);
    if (!hasField(*bank, *it, rule.alias_from) || !hasField(*bank, *it, rule.alias_to)) {
      problems->add(file, a, where + ": alias is " + shape);
      return;
    }
  }
  if (const YAML::Node f = n["flap"]) {
    const std::string shape = "{field: F, down: [...], up: [...], within: DUR}";
    if (!mapAt(f, "flap", {"field", "down", "up", "within"}, shape)) {
      return;
    }
    rule.flap_field = scalar(f["field"]);
    if (!f["down"] || !f["up"] ||
        !scalarList(f["down"], file, where + ": flap: down", &rule.flap_down, problems) ||
        !scalarList(f["up"], file, where + ": flap: up", &rule.flap_up, problems) ||
        !hasField(*bank, *it, rule.flap_field) || rule.flap_down.empty() || rule.flap_up.empty() ||
        !f["within"] || !durationAt(f, "within", &rule.flap_within_ns)) {
      problems->add(file, f, where + ": flap is " + shape);
      return;
    }
  }
  if (const YAML::Node p = n["suspects_peers"]) {
    if (!mapAt(p, "suspects_peers", {"within"}, "{within: DUR}")) {
      return;
    }
    // Whole seconds: the correlator keeps one report per node and second (Correlator).
    if (!p["within"] || !durationAt(p, "within", &rule.peers_within_ns) ||
        rule.peers_within_ns < kNanosPerSecond || rule.peers_within_ns % kNanosPerSecond != 0) {
      problems->add(file, p, where + ": suspects_peers is {within: DUR}, whole seconds from 1s");
      return;
    }
  }
  if (const YAML::Node c = n["cluster"]) {
    if (!mapAt(c, "cluster", {"nodes", "within"}, "{nodes: N >= 2, within: DUR}")) {
      return;
    }
    rule.cluster_nodes = c["nodes"].IsScalar() ? c["nodes"].as<int>(0) : 0;
    if (rule.cluster_nodes < 2 || !c["within"] ||
        !durationAt(c, "within", &rule.cluster_within_ns)) {
      problems->add(file, c, where + ": cluster is {nodes: N >= 2, within: DUR}");
      return;
    }
  }
  if (rule.cluster_nodes > 0 && n["unless_followed_by"]) {
    // A held hit would join its cluster window late, out of the window's time order.
    problems->add(file, n["cluster"], where + ": cluster and unless_followed_by do not combine");
    return;
  }
  if (const YAML::Node r = n["recovery"]) {
    if (!mapAt(r, "recovery", {"by", "stable", "quiet"}, "{by: [...], stable: DUR, quiet: DUR}")) {
      return;
    }
    if (r["by"]) {
      std::vector<std::string> ids;
      if (!scalarList(r["by"], file, where + ": recovery: by", &ids, problems)) {
        return;
      }
      refs->push_back({bank->rules.size(), "recovery.by", r["by"], std::move(ids)});
    }
    if (!durationAt(r, "stable", &rule.stable_ns) || !durationAt(r, "quiet", &rule.quiet_ns)) {
      return;
    }
  }
  if (rule.severity == Severity::kWarning && (rule.count < 2 || rule.window_ns <= 0)) {
    problems->add(file, n, where + ": a warning rule needs count >= 2 and a window");
    return;
  }
  if (rule.severity == Severity::kFatal && rule.count != 1) {
    problems->add(file, n, where + ": a fatal rule acts on the first hit; use severity warning");
    return;
  }
  // The correlator never counts an info rule's hits: its first corroborated hit faults. Nor
  // does it read the keys of counting (a window, dedup, bursts, flaps, holding) on one.
  if (rule.severity == Severity::kInfo && rule.count != 1) {
    problems->add(file, n,
                  where +
                      ": an info rule acts only through corroborated_by, on its first hit; use "
                      "severity warning to count");
    return;
  }
  if (rule.severity == Severity::kInfo) {
    for (const char* key : {"window", "dedup", "burst", "flap", "unless_followed_by", "cluster"}) {
      if (n[key]) {
        problems->add(file, n[key],
                      where + ": " + key +
                          " does nothing on an info rule, which acts only through "
                          "corroborated_by, on its first hit; use severity warning");
        return;
      }
    }
  }
  if (rule.peers_within_ns > 0 && rule.severity != Severity::kInfo) {
    problems->add(file, n,
                  where + ": a suspects_peers rule never acts on its own node: severity info");
    return;
  }
  if (rule.severity == Severity::kFatal && rule.quiet_ns > 0) {
    problems->add(file, n, where + ": a fatal fault needs repair; recovery.quiet is for warnings");
    return;
  }
  bank->rules.push_back(std::move(rule));
}

void resolveRefs(const std::vector<RuleRefs>& refs, Bank* bank, Problems* problems) {
  // Rule references first: an entity field may come from the rule's own join.
  for (const RuleRefs& r : refs) {
    if (r.key == "entity") {
      continue;
    }
    Rule& rule = bank->rules[r.rule];
    for (const std::string& id : r.ids) {
      const std::optional<uint32_t> found = bank->ruleIndex(id);
      if (!found) {
        problems->add(rule.file, r.at,
                      "rule " + rule.id + ": " + r.key + ": unknown rule '" + id + "'");
        continue;
      }
      const uint32_t index = *found;
      if (index == r.rule) {
        // suppressed_by itself drops every hit but none before it (`dedup` says "a repeat");
        // attach_to, corroborated_by, joins and recovery by itself say nothing a rule can do.
        problems->add(rule.file, r.at,
                      "rule " + rule.id + ": " + r.key + ": names the rule itself");
        continue;
      }
      if (r.key == "attach_to") {
        rule.attach_to.push_back(index);
      } else if (r.key == "suppressed_by") {
        rule.suppressed_by.push_back(index);
      } else if (r.key == "corroborated_by") {
        rule.corroborated_by.push_back(index);
      } else if (r.key == "unless_followed_by") {
        rule.unless_followed_by.push_back(index);
      } else if (r.key == "joins") {
        rule.joins = static_cast<int>(index);
      } else {
        rule.recovered_by.push_back(index);
      }
    }
  }
  for (const Rule& rule : bank->rules) {
    if (!rule.flap_field.empty() || !rule.unless_followed_by.empty()) {
      bank->signatures[rule.signature].state = true;
    }
    for (const uint32_t follower : rule.unless_followed_by) {
      bank->signatures[bank->rules[follower].signature].state = true;
    }
  }
  for (const RuleRefs& r : refs) {
    if (r.key != "entity") {
      continue;
    }
    const Rule& rule = bank->rules[r.rule];
    const std::string& field = r.ids[0];
    // An alias gives its `to` only to hits carrying its `from`: the rule's signature must have it.
    const Signature& sig = bank->signatures[rule.signature];
    const bool aliased =
        !field.empty() && std::any_of(bank->rules.begin(), bank->rules.end(), [&](const Rule& x) {
          return x.alias_to == field && hasField(*bank, sig, x.alias_from);
        });
    const bool joined =
        rule.joins >= 0 &&
        hasField(*bank, bank->signatures[bank->rules[static_cast<size_t>(rule.joins)].signature],
                 field);
    if (!aliased && !joined) {
      problems->add(rule.file, r.at,
                    "rule " + rule.id + ": entity field " + field + " is not captured by " +
                        bank->signatures[rule.signature].id + " nor given by an alias or join");
    }
  }
}

// The entries of a rule file's list `key` (signatures, tables or rules), each a map. A list with
// every entry commented out is empty; anything else but a list of maps is a problem.
std::vector<YAML::Node> entries(const YAML::Node& doc, const char* key, const std::string& file,
                                Problems* problems) {
  std::vector<YAML::Node> out;
  const YAML::Node list = doc[key];
  if (!list || list.IsNull()) {
    return out;
  }
  if (!list.IsSequence()) {
    problems->add(file, list, std::string(key) + " must be a list");
    return out;
  }
  for (const YAML::Node& e : list) {
    if (e.IsMap()) {
      out.push_back(e);
    } else {
      problems->add(file, e, std::string("each entry of ") + key + " is a map");
    }
  }
  return out;
}

void compileSets(Bank* bank, Problems* problems) {
  for (int k = 0; k < kStreamKinds; ++k) {
    CompiledSet& cs = bank->sets[static_cast<size_t>(k)];
    RE2::Options opts;
    opts.set_log_errors(false);
    auto set = std::make_unique<RE2::Set>(opts, RE2::UNANCHORED);
    for (uint32_t i = 0; i < bank->signatures.size(); ++i) {
      const Signature& sig = bank->signatures[i];
      if (!sig.appliesTo(static_cast<StreamKind>(k))) {
        continue;
      }
      std::string error;
      if (set->Add(sig.pattern, &error) < 0) {
        problems->addAt(sig.file, sig.file_line, "signature " + sig.id + ": " + error);
        continue;
      }
      cs.signature.push_back(i);
    }
    if (cs.signature.empty()) {
      continue;
    }
    const std::string kind(streamKindName(static_cast<StreamKind>(k)));
    if (!set->Compile()) {
      // Named at the largest of its patterns, the likeliest to shrink.
      const Signature* largest = nullptr;
      for (uint32_t i : cs.signature) {
        const Signature& sig = bank->signatures[i];
        if (largest == nullptr || sig.re->ProgramSize() > largest->re->ProgramSize()) {
          largest = &sig;
        }
      }
      problems->addAt(largest->file, largest->file_line,
                      "RE2::Set for stream kind " + kind +
                          " does not compile (out of memory); its largest pattern is signature " +
                          largest->id + "'s (RE2 program size " +
                          std::to_string(largest->re->ProgramSize()) + ")");
      continue;
    }
    cs.set = std::move(set);
    cs.gate = LiteralGate(bank->patterns(static_cast<StreamKind>(k)), "");
  }
}

}  // namespace

std::string literalPrefix(const RE2& re) {
  // \b and \B may hold inside a line where they fail at the start of a text, where RE2 computes
  // the range.
  const std::string& p = re.pattern();
  for (size_t i = 0; i + 1 < p.size(); ++i) {
    if (p[i] == '\\' && (p[++i] == 'b' || p[i] == 'B')) {
      return "";
    }
  }
  std::string min;
  std::string max;
  if (!re.PossibleMatchRange(&min, &max, kPrefixRangeBytes)) {
    return "";
  }
  // Every match lies between min and max, so it starts with what they share.
  const auto [end, _] = std::mismatch(min.begin(), min.end(), max.begin(), max.end());
  return {min.begin(), end};
}

const Signature* Bank::find(std::string_view id) const {
  for (const Signature& s : signatures) {
    if (s.id == id) {
      return &s;
    }
  }
  return nullptr;
}

std::vector<std::string> Bank::patterns(StreamKind kind) const {
  std::vector<std::string> out;
  for (uint32_t sig : sets[static_cast<size_t>(kind)].signature) {
    out.push_back(signatures[sig].pattern);
  }
  return out;
}

std::optional<uint32_t> Bank::ruleIndex(std::string_view id) const {
  for (size_t i = 0; i < rules.size(); ++i) {
    if (rules[i].id == id) {
      return static_cast<uint32_t>(i);
    }
  }
  return std::nullopt;
}

std::shared_ptr<const Bank> loadBank(const std::vector<RuleFile>& files) {
  auto bank = std::make_shared<Bank>();
  Problems problems;
  std::vector<std::pair<std::string, YAML::Node>> docs;
  for (const RuleFile& f : files) {
    try {
      if (const int line = secondDocument(f.text); line != 0) {
        problems.addAt(f.name, line, "more than one YAML document (--- or ...): one per file");
        continue;
      }
      docs.emplace_back(f.name, loadYaml(f.text));
    } catch (const YAML::ParserException& e) {
      problems.addAt(f.name, e.mark.line + 1, "YAML: " + e.msg);
    }
  }
  // Signatures first, across all files, so that a rule may name a signature of another file.
  for (const auto& [name, doc] : docs) {
    if (doc.IsNull()) {
      continue;  // comments only: an empty file
    }
    if (!doc.IsMap()) {
      problems.add(name, doc, "a rule file is a map with 'signatures' and/or 'rules'");
      continue;
    }
    knownKeys(doc, {"signatures", "tables", "rules"}, name, "rule file", &problems);
    for (const YAML::Node& s : entries(doc, "signatures", name, &problems)) {
      try {
        parseSignature(s, name, bank.get(), &problems);
      } catch (const YAML::Exception& e) {
        problems.add(name, s, "signature: " + e.msg);
      }
    }
  }
  // Refuses a second signature or rule of one id, naming where it came first: the file read
  // first (by name) is not the one at fault more often than the other.
  const auto refuseDuplicates = [&problems](const auto& items, const std::string& what) {
    std::map<std::string, std::string> first;
    for (const auto& x : items) {
      if (const auto [at, fresh] =
              first.try_emplace(x.id, x.file + ":" + std::to_string(x.file_line));
          !fresh) {
        problems.addAt(x.file, x.file_line,
                       "duplicate " + what + " id " + x.id + " (first at " + at->second + ")");
      }
    }
  };
  refuseDuplicates(bank->signatures, "signature");
  for (const auto& [name, doc] : docs) {
    if (doc.IsMap()) {
      for (const YAML::Node& t : entries(doc, "tables", name, &problems)) {
        try {
          parseTable(t, name, bank.get(), &problems);
        } catch (const YAML::Exception& e) {
          problems.add(name, t, "table: " + e.msg);
        }
      }
    }
  }
  std::vector<RuleRefs> refs;
  for (const auto& [name, doc] : docs) {
    if (doc.IsMap()) {
      for (const YAML::Node& r : entries(doc, "rules", name, &problems)) {
        const size_t refs_before = refs.size();
        const size_t rules_before = bank->rules.size();
        try {
          parseRule(r, name, bank.get(), &problems, &refs);
        } catch (const YAML::Exception& e) {
          problems.add(name, r, "rule: " + e.msg);
        }
        if (bank->rules.size() == rules_before) {
          refs.resize(refs_before);  // the rule was refused: its references go with it
        }
      }
    }
  }
  resolveRefs(refs, bank.get(), &problems);
  refuseDuplicates(bank->rules, "rule");
  if (!problems.any() && bank->signatures.empty() && bank->rules.empty()) {
    // Empty files load (comments only), but a bank of them decides nothing: a ConfigMap whose
    // keys lost their values would stop every taint in silence.
    std::string names;
    for (const RuleFile& f : files) {
      names += (names.empty() ? "" : ", ") + f.name;
    }
    problems.addAt(names, 0, "no signature and no rule: the bank would decide nothing");
  }
  if (!problems.any()) {
    compileSets(bank.get(), &problems);
  }
  if (!problems.any()) {
    // The examples are the bank's own tests: serve and replay refuse a bank that fails them, as
    // `rules test` does.
    for (const ExampleFailure& f : checkExamples(*bank)) {
      const Signature& sig = bank->signatures[f.signature];
      problems.addAt(sig.file, f.example->file_line,
                     "signature " + sig.id + ": " + f.cause + ": " + f.example->line);
    }
  }
  if (problems.any()) {
    throw BankError(problems.str());
  }
  return bank;
}

namespace {

// readRuleDir's files of directory `from`, named as in `dir` (`from` is `dir`, or the directory its
// `..data` link names).
std::vector<RuleFile> readRuleFiles(const std::string& dir, const std::filesystem::path& from) {
  std::vector<RuleFile> files;
  std::error_code ec;
  // The error_code forms throughout: the service reads the directory again while serving
  // (core/rules_watch.h), where a filesystem_error would end it.
  for (std::filesystem::directory_iterator it(from, ec), end; !ec && it != end; it.increment(ec)) {
    const std::filesystem::directory_entry& entry = *it;
    const std::string name = (std::filesystem::path(dir) / entry.path().filename()).string();
    const auto ext = entry.path().extension();
    if (ext != ".yaml" && ext != ".yml") {
      continue;
    }
    std::error_code status_ec;
    const std::filesystem::file_status status = entry.status(status_ec);
    // A link to nothing (not_found) is no file; `none` is an error (a link loop, no permission).
    if (status.type() == std::filesystem::file_type::none) {
      throw BankError(name + ": " + status_ec.message());
    }
    if (std::filesystem::is_regular_file(status)) {
      std::ifstream in(entry.path(), std::ios::binary);
      if (!in) {  // else read as an empty file, which loads: a bank without its rules
        throw BankError(name + ": " + std::strerror(errno));
      }
      // Read by hand: `<< rdbuf()` takes a read error (EIO) for the end of the file, and the file
      // cut short may load, without its rules.
      std::string text;
      char buf[16384];
      while (in.read(buf, sizeof buf) || in.gcount() > 0) {
        text.append(buf, static_cast<size_t>(in.gcount()));
      }
      if (in.bad()) {
        throw BankError(name + ": " + std::strerror(errno));
      }
      files.push_back({name, std::move(text)});
    }
  }
  if (ec) {
    throw BankError(dir + ": " + ec.message());
  }
  if (files.empty()) {
    throw BankError(dir + ": no *.yaml rule file");
  }
  std::sort(files.begin(), files.end(),
            [](const RuleFile& a, const RuleFile& b) { return a.name < b.name; });
  return files;
}

}  // namespace

std::vector<RuleFile> readRuleDir(const std::string& dir) {
  // A ConfigMap volume: each file is a link into `..data`, a link the kubelet swaps to a new
  // directory by a rename, then removes the old one. The files are listed and read in the
  // directory `..data` names, so that they are all of one version, never a mix of two; read
  // again if it was removed under the read. A file removed under the read is skipped as a link to
  // nothing, so a read that succeeded is one version in full only if `..data` still names it.
  const std::filesystem::path link = std::filesystem::path(dir) / "..data";
  for (;;) {
    std::error_code ec;
    const std::filesystem::path data = std::filesystem::read_symlink(link, ec);  // empty: none
    const auto one_version = [&] {
      return data.empty() || std::filesystem::read_symlink(link, ec) == data;
    };
    try {
      std::vector<RuleFile> files = readRuleFiles(
          dir, data.empty() ? std::filesystem::path(dir) : std::filesystem::path(dir) / data);
      if (one_version()) {
        return files;
      }
    } catch (const BankError&) {
      if (one_version()) {
        throw;
      }
    }
  }
}

}  // namespace faultline
