#include "core/rules_watch.h"

#include <string>
#include <utility>

#include <yaml-cpp/yaml.h>

namespace faultline {
namespace {

// The YAML tree of `n` as text, without what the bank does not read (the comments, layout, flow
// or block style, quotes): each scalar's length before it, so that no two trees write alike.
void appendTree(const YAML::Node& n, std::string* out) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      if (n.Tag() != "?" && n.Tag() != "!") {  // an explicit tag (`!!str`); not plain or quoted
        *out += n.Tag();
      }
      *out += 's' + std::to_string(n.Scalar().size()) + ':' + n.Scalar();
      return;
    case YAML::NodeType::Sequence:
      *out += '[';
      for (const YAML::Node& item : n) {
        appendTree(item, out);
      }
      *out += ']';
      return;
    case YAML::NodeType::Map:
      *out += '{';
      for (const auto& kv : n) {
        appendTree(kv.first, out);
        appendTree(kv.second, out);
      }
      *out += '}';
      return;
    default:  // null (`~`, an empty value, an empty file) or undefined
      *out += '~';
  }
}

// Whether `a` and `b` are the same files, each holding a YAML tree equal to the other's. Both must
// load (loadBank): Load() reads a file's first document only, and loadBank refuses a second.
bool sameDocuments(const std::vector<RuleFile>& a, const std::vector<RuleFile>& b) {
  if (a.size() != b.size()) {
    return false;
  }
  std::string ta;
  std::string tb;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name) {
      return false;
    }
    if (a[i].text != b[i].text) {
      ta.clear();
      tb.clear();
      appendTree(YAML::Load(a[i].text), &ta);
      appendTree(YAML::Load(b[i].text), &tb);
      if (ta != tb) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

RulesWatch::RulesWatch(std::string dir, std::vector<RuleFile> loaded)
    : dir_(std::move(dir)), loaded_(std::move(loaded)), seen_(loaded_) {}

RulesWatch::Check RulesWatch::check() {
  std::vector<RuleFile> files;
  try {
    files = readRuleDir(dir_);
  } catch (const BankError& e) {
    // An unreadable directory is seen as one with no file: refused once until it changes.
    const bool changed = state_ != State::kRefused || !seen_.empty() || message_ != e.what();
    seen_.clear();
    state_ = State::kRefused;
    message_ = e.what();
    return {state_, changed};
  }
  if (files == seen_) {
    return {state_, false};
  }
  seen_ = files;
  if (files == loaded_) {
    state_ = State::kRunning;
    message_.clear();
  } else {
    try {
      const auto bank = loadBank(files);
      if (sameDocuments(files, loaded_)) {
        state_ = State::kRunning;
        message_ = "in other comments or layout";
      } else {
        state_ = State::kNew;
        message_ = std::to_string(bank->signatures.size()) + " signatures and " +
                   std::to_string(bank->rules.size()) + " rules";
      }
    } catch (const BankError& e) {
      state_ = State::kRefused;
      message_ = e.what();
      if (!message_.empty() && message_.back() == '\n') {
        message_.pop_back();  // one problem per line, the last one ended too
      }
    }
  }
  return {state_, true};
}

}  // namespace faultline
