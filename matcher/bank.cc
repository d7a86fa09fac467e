#include "matcher/bank.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "core/time.h"

namespace faultline {
namespace {

// Rule durations are added to event times (ns since the epoch, up to 2262 in int64): ten years
// keeps every sum in range for any log time before 2252.
constexpr int64_t kMaxDurationNs = int64_t{3650} * 86400 * 1'000'000'000;

// Collects "file:line: cause" messages; the loader reports them all at once.
class Problems {
 public:
  void add(const std::string& file, const YAML::Node& at, const std::string& cause) {
    addAt(file, at.IsDefined() ? at.Mark().line + 1 : 0, cause);
  }
  void addAt(const std::string& file, int line, const std::string& cause) {
    list_ << file << ':' << line << ": " << cause << '\n';
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
    if (e.IsScalar()) {
      ex.line = e.as<std::string>();
    } else if (e.IsMap() && e["line"].IsScalar()) {
      ex.line = e["line"].as<std::string>();
      if (with_fields && e["fields"]) {
        if (!e["fields"].IsMap()) {
          problems->add(file, e["fields"], what + ": fields must be a map");
          continue;
        }
        for (const auto& kv : e["fields"]) {
          ex.fields.emplace_back(kv.first.as<std::string>(), scalar(kv.second));
        }
      }
    } else {
      problems->add(file, e, what + ": each example is a string or {line, fields}");
      continue;
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
  sig.description = scalar(n["description"]);
  sig.source = scalar(n["source"]);
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
  sig.prefix = literalPrefix(*sig.re);
  sig.fields.assign(static_cast<size_t>(sig.re->NumberOfCapturingGroups()), "");
  for (const auto& [name, index] : sig.re->NamedCapturingGroups()) {
    sig.fields[static_cast<size_t>(index - 1)] = name;
  }
  const YAML::Node ex = n["examples"];
  parseExamples(ex["match"], &sig.match_examples, true, file, where + ": examples.match", problems);
  parseExamples(ex["no_match"], &sig.no_match_examples, false, file, where + ": examples.no_match",
                problems);
  if (sig.match_examples.empty()) {
    problems->add(file, n, where + ": needs at least one examples.match line");
    return;
  }
  bank->signatures.push_back(std::move(sig));
}

// The fields a rule on `sig` may name: its captures and the columns of its tables.
bool hasField(const Bank& bank, const Signature& sig, const std::string& field) {
  if (std::find(sig.fields.begin(), sig.fields.end(), field) != sig.fields.end()) {
    return true;
  }
  return std::any_of(sig.tables.begin(), sig.tables.end(), [&](uint32_t t) {
    const auto& cols = bank.tables[t].columns;
    return std::find(cols.begin(), cols.end(), field) != cols.end();
  });
}

std::vector<std::string> scalars(const YAML::Node& n) {
  std::vector<std::string> out;
  if (n.IsSequence()) {
    for (const YAML::Node& v : n) {
      out.push_back(scalar(v));
    }
  } else if (n.IsDefined() && n.IsScalar()) {
    out.push_back(scalar(n));
  }
  return out;
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
  const Signature* sig = bank->find(scalar(n["signature"]));
  if (t.id.empty() || sig == nullptr) {
    problems->add(file, n, where + ": needs an id and a known signature");
    return;
  }
  t.signature = static_cast<uint32_t>(sig - bank->signatures.data());
  t.key = scalars(n["key"]);
  t.columns = scalars(n["columns"]);
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
  if (!n["rows"].IsSequence()) {
    problems->add(file, n, where + ": rows must be a list of lists");
    return;
  }
  for (const YAML::Node& r : n["rows"]) {
    std::vector<std::string> v = scalars(r);
    if (!r.IsSequence() || v.size() != t.key.size() + t.columns.size()) {
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
    for (const auto& kv : w) {
      const auto field = kv.first.as<std::string>();
      if (!hasField(*bank, *it, field)) {
        problems->add(file, kv.first, where + ": signature " + sig_id + " has no field " + field);
        return;
      }
      std::vector<std::string> values;
      if (kv.second.IsSequence()) {
        for (const YAML::Node& v : kv.second) {
          values.push_back(scalar(v));
        }
      } else {
        values.push_back(scalar(kv.second));
      }
      rule.where.emplace_back(field, std::move(values));
    }
  }
  if (const YAML::Node e = n["entity"]) {
    for (const YAML::Node& f : e) {
      const std::string field = scalar(f);
      if (!hasField(*bank, *it, field)) {
        // May still come from an alias or a joined line: checked once every rule is known.
        refs->push_back({bank->rules.size(), "entity", f, {field}});
      }
      rule.entity.push_back(field);
    }
  }
  if (n["count"]) {
    rule.count = n["count"].as<int>(0);
    if (rule.count < 1) {
      problems->add(file, n["count"], where + ": count must be a positive integer");
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
  // Map-valued keys: each is {rules: [...], within: DUR} or a documented variant.
  auto refsAt = [&](const char* key, const char* list, int64_t* within) {
    const YAML::Node m = n[key];
    if (!m) {
      return true;
    }
    if (!m.IsMap() || !m[list] || !m["within"]) {
      problems->add(file, m, where + ": " + key + " is {" + list + ": [...], within: DUR}");
      return false;
    }
    refs->push_back({bank->rules.size(), key, m[list], scalars(m[list])});
    return durationAt(m, "within", within);
  };
  if (!refsAt("attach_to", "rules", &rule.attach_within_ns) ||
      !refsAt("suppressed_by", "rules", &rule.suppress_within_ns) ||
      !refsAt("corroborated_by", "rules", &rule.corroborate_within_ns) ||
      !refsAt("unless_followed_by", "rules", &rule.unless_within_ns)) {
    return;
  }
  if (const YAML::Node j = n["joins"]) {
    if (!j.IsMap() || !j["rule"] || !j["within"]) {
      problems->add(file, j, where + ": joins is {rule: ID, within: DUR}");
      return;
    }
    refs->push_back({bank->rules.size(), "joins", j["rule"], {scalar(j["rule"])}});
    if (!durationAt(j, "within", &rule.join_within_ns)) {
      return;
    }
  }
  if (const YAML::Node a = n["alias"]) {
    rule.alias_from = scalar(a["from"]);
    rule.alias_to = scalar(a["to"]);
    if (!hasField(*bank, *it, rule.alias_from) || !hasField(*bank, *it, rule.alias_to)) {
      problems->add(file, a,
                    where + ": alias is {from: FIELD, to: FIELD}, both captured by " + sig_id);
      return;
    }
  }
  if (const YAML::Node f = n["flap"]) {
    rule.flap_field = scalar(f["field"]);
    rule.flap_down = scalars(f["down"]);
    rule.flap_up = scalars(f["up"]);
    if (!hasField(*bank, *it, rule.flap_field) || rule.flap_down.empty() || rule.flap_up.empty() ||
        !f["within"] || !durationAt(f, "within", &rule.flap_within_ns)) {
      problems->add(file, f, where + ": flap is {field: F, down: [...], up: [...], within: DUR}");
      return;
    }
  }
  if (const YAML::Node p = n["suspects_peers"]) {
    if (!p.IsMap() || !p["within"] || !durationAt(p, "within", &rule.peers_within_ns) ||
        rule.peers_within_ns <= 0) {
      problems->add(file, p, where + ": suspects_peers is {within: DUR}");
      return;
    }
  }
  if (const YAML::Node c = n["cluster"]) {
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
    if (!r.IsMap()) {
      problems->add(file, r, where + ": recovery is {by: [...], stable: DUR, quiet: DUR}");
      return;
    }
    if (r["by"]) {
      refs->push_back({bank->rules.size(), "recovery.by", r["by"], scalars(r["by"])});
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
  for (const RuleRefs& r : refs) {
    Rule& rule = bank->rules[r.rule];
    if (r.key == "entity") {
      const std::string& field = r.ids[0];
      const bool aliased = std::any_of(bank->rules.begin(), bank->rules.end(),
                                       [&](const Rule& x) { return x.alias_to == field; });
      const bool joined =
          rule.joins >= 0 &&
          hasField(*bank, bank->signatures[bank->rules[static_cast<size_t>(rule.joins)].signature],
                   field);
      if (!aliased && !joined) {
        problems->add(rule.file, r.at,
                      "rule " + rule.id + ": entity field " + field + " is not captured by " +
                          bank->signatures[rule.signature].id + " nor given by an alias or join");
      }
      continue;
    }
    for (const std::string& id : r.ids) {
      const auto it = std::find_if(bank->rules.begin(), bank->rules.end(),
                                   [&](const Rule& x) { return x.id == id; });
      if (it == bank->rules.end()) {
        problems->add(rule.file, r.at,
                      "rule " + rule.id + ": " + r.key + ": unknown rule '" + id + "'");
        continue;
      }
      const auto index = static_cast<uint32_t>(it - bank->rules.begin());
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
}

void compileSets(Bank* bank, Problems* problems) {
  for (int k = 0; k < kStreamKinds; ++k) {
    CompiledSet& cs = bank->sets[static_cast<size_t>(k)];
    RE2::Options opts;
    opts.set_log_errors(false);
    auto set = std::make_unique<RE2::Set>(opts, RE2::UNANCHORED);
    std::vector<std::string> patterns;
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
      patterns.push_back(sig.pattern);
    }
    if (cs.signature.empty()) {
      continue;
    }
    const std::string kind(streamKindName(static_cast<StreamKind>(k)));
    if (!set->Compile()) {
      problems->addAt("(bank)", 0,
                      "RE2::Set for stream kind " + kind + " does not compile (out of memory)");
      continue;
    }
    cs.set = std::move(set);
    cs.gate = LiteralGate(patterns, "");
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

std::shared_ptr<const Bank> loadBank(const std::vector<RuleFile>& files) {
  auto bank = std::make_shared<Bank>();
  Problems problems;
  std::vector<std::pair<std::string, YAML::Node>> docs;
  for (const RuleFile& f : files) {
    try {
      docs.emplace_back(f.name, YAML::Load(f.text));
    } catch (const YAML::ParserException& e) {
      problems.addAt(f.name, e.mark.line + 1, "YAML: " + e.msg);
    }
  }
  // Signatures first, across all files, so that a rule may name a signature of another file.
  for (const auto& [name, doc] : docs) {
    if (!doc.IsMap()) {
      problems.add(name, doc, "a rule file is a map with 'signatures' and/or 'rules'");
      continue;
    }
    for (const YAML::Node& s : doc["signatures"]) {
      try {
        parseSignature(s, name, bank.get(), &problems);
      } catch (const YAML::Exception& e) {
        problems.add(name, s, "signature: " + e.msg);
      }
    }
  }
  std::set<std::string> ids;
  for (const Signature& s : bank->signatures) {
    if (!ids.insert(s.id).second) {
      problems.addAt(s.file, s.file_line, "duplicate signature id " + s.id);
    }
  }
  for (const auto& [name, doc] : docs) {
    if (doc.IsMap()) {
      for (const YAML::Node& t : doc["tables"]) {
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
      for (const YAML::Node& r : doc["rules"]) {
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
  ids.clear();
  for (const Rule& r : bank->rules) {
    if (!ids.insert(r.id).second) {
      problems.addAt(r.file, r.file_line, "duplicate rule id " + r.id);
    }
  }
  if (!problems.any()) {
    compileSets(bank.get(), &problems);
  }
  if (problems.any()) {
    throw BankError(problems.str());
  }
  return bank;
}

std::vector<RuleFile> readRuleDir(const std::string& dir) {
  std::vector<RuleFile> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const auto ext = entry.path().extension();
    if (entry.is_regular_file() && (ext == ".yaml" || ext == ".yml")) {
      std::ifstream in(entry.path(), std::ios::binary);
      std::ostringstream text;
      text << in.rdbuf();
      files.push_back({entry.path().string(), text.str()});
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

}  // namespace faultline
