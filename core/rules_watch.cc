#include "core/rules_watch.h"

#include <utility>

namespace faultline {

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
      state_ = State::kNew;
      message_ = std::to_string(bank->signatures.size()) + " signatures and " +
                 std::to_string(bank->rules.size()) + " rules";
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
