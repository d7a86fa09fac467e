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

void parseRule(const YAML::Node& n, const std::string& file, Bank* bank, Problems* problems) {
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
      if (std::find(it->fields.begin(), it->fields.end(), field) == it->fields.end()) {
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
      if (std::find(it->fields.begin(), it->fields.end(), field) == it->fields.end()) {
        problems->add(file, f, where + ": entity field " + field + " is not captured by " + sig_id);
        return;
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
  auto duration = [&](const char* key, int64_t* out) {
    if (!n[key]) {
      return true;
    }
    if (!parseDuration(scalar(n[key]), out)) {
      problems->add(file, n[key], where + ": " + key + " is not a duration (like 90s, 10m, 1h)");
      return false;
    }
    return true;
  };
  if (!duration("window", &rule.window_ns) || !duration("dedup", &rule.dedup_ns)) {
    return;
  }
  if (rule.severity == Severity::kWarning && (rule.count < 2 || rule.window_ns <= 0)) {
    problems->add(file, n, where + ": a warning rule needs count >= 2 and a window");
    return;
  }
  if (rule.severity == Severity::kFatal && rule.count != 1) {
    problems->add(file, n, where + ": a fatal rule acts on the first hit; use severity warning");
    return;
  }
  bank->rules.push_back(std::move(rule));
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
    if (!cs.signature.empty()) {
      if (!set->Compile()) {
        problems->addAt("(bank)", 0,
                        "RE2::Set for stream kind " +
                            std::string(streamKindName(static_cast<StreamKind>(k))) +
                            " does not compile (out of memory)");
        continue;
      }
      cs.set = std::move(set);
    }
  }
}

}  // namespace

std::string_view severityName(Severity s) {
  switch (s) {
    case Severity::kFatal:
      return "fatal";
    case Severity::kWarning:
      return "warning";
    case Severity::kInfo:
      break;
  }
  return "info";
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
      for (const YAML::Node& r : doc["rules"]) {
        try {
          parseRule(r, name, bank.get(), &problems);
        } catch (const YAML::Exception& e) {
          problems.add(name, r, "rule: " + e.msg);
        }
      }
    }
  }
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
