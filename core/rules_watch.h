// Live: the service's rule directory (`rules`, core/config.h) read again every `rules_reload`,
// so that a changed bank takes effect without a rollout and a bank that does not load changes
// nothing: the running service keeps its last good bank (README "The signature bank").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "matcher/bank.h"

namespace faultline {

class RulesWatch {
 public:
  enum class State : uint8_t {
    kRunning,  // the directory holds the running bank's files, or the same YAML in other comments
               // or layout
    kRefused,  // it holds other files, which do not load: message() says why
    kNew,      // it holds other files, which load: message() counts their signatures and rules
  };
  struct Check {
    State state = State::kRunning;
    bool changed = false;  // the files differ from those of the previous check (or the start)
  };

  // dir: the rule directory; loaded: the files the running bank was loaded from (readRuleDir).
  RulesWatch(std::string dir, std::vector<RuleFile> loaded);

  // Reads the directory (readRuleDir: every *.yaml / *.yml file, names and texts). Files equal to
  // the previous check's give that check's state again without loading them, so that a refused
  // bank is loaded (and logged) once, not at every check. Other files are loaded as at the start
  // (loadBank: parse, compile, check every example). Files that load and whose YAML trees equal
  // the running bank's, file by file under the same names (comments, blank lines, indentation,
  // flow or block style and quotes aside), are the running bank: a restart on them would only
  // lose the correlator's windows. A directory that cannot be read or holds no rule file is
  // refused. Throws nothing but std::bad_alloc.
  Check check();
  // For kRefused, each problem as "FILE:LINE: cause" (BankError), or the directory's read error;
  // for kNew, "N signatures and M rules"; for kRunning, empty if the files are the running bank's
  // as loaded, else "in other comments or layout".
  const std::string& message() const { return message_; }

 private:
  std::string dir_;
  std::vector<RuleFile> loaded_;
  std::vector<RuleFile> seen_;  // the files of the previous check
  State state_ = State::kRunning;
  std::string message_;
};

}  // namespace faultline
