// Live: the service's rule directory (`rules`, core/config.h) read again every `rules_reload`,
// so that a changed bank takes effect without a rollout and a bank that does not load changes
// nothing: the running service keeps its last good bank (README "The signature bank").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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
    // The files differ from those of the previous check (or the start), or `runnable`, asked
    // again about the same files, answered otherwise.
    bool changed = false;
  };

  // Throws std::runtime_error, its what() the reason, if a restart on `bank` would refuse to
  // start, ending the service (serve: its configuration as the restart reads it does not load, or
  // names in kubernetes.dry_run_rules a rule the bank lacks).
  using Runnable = std::function<void(const std::shared_ptr<const Bank>& bank)>;

  // dir: the rule directory; loaded: the files the running bank was loaded from (readRuleDir);
  // runnable: checks files that load as another bank (empty: none).
  RulesWatch(std::string dir, std::vector<RuleFile> loaded, Runnable runnable = {});

  // Reads the directory (readRuleDir: every *.yaml / *.yml file, names and texts). Files equal to
  // the previous check's give that check's state again without loading them, so that a refused
  // bank is loaded (and logged) once, not at every check; but for files `runnable` refused, which
  // are loaded and asked about again at each check (what it reads may change). Other files are
  // loaded as at the start (loadBank: parse, compile, check every example). Files that load and
  // whose YAML trees equal the running bank's, file by file under the same names (comments, blank
  // lines, indentation, flow or block style and quotes aside), are the running bank: a restart on
  // them would only lose the correlator's windows. Other files that load are refused if `runnable`
  // throws, as are a directory that cannot be read or holds no rule file. Throws nothing but
  // std::bad_alloc.
  Check check();
  // For kRefused, each problem as "FILE:LINE: cause" (BankError), the directory's read error, or
  // why `runnable` refused the bank; for kNew, "N signatures and M rules"; for kRunning, empty if
  // the files are the running bank's as loaded, else "in other comments or layout".
  const std::string& message() const { return message_; }
  // The files of the last check (empty if the directory could not be read): for kNew, those that
  // load, which a restart runs (handOverRuleFiles).
  const std::vector<RuleFile>& files() const { return seen_; }

 private:
  std::string dir_;
  std::vector<RuleFile> loaded_;
  Runnable runnable_;
  bool ask_again_ = false;      // `runnable` refused the files of the previous check
  std::vector<RuleFile> seen_;  // the files of the previous check
  State state_ = State::kRunning;
  std::string message_;
};

// A restart on new rules executes the binary again, which would read the directory again: by
// then it may hold other files, which do not load, and the new process would refuse to start
// (exit 2) where the running service keeps its last good bank. So the files the watch loaded are
// handed over: written to a memory file (memfd) left open across execv, whose descriptor the
// environment variable kRuleFilesFd names. The new process runs exactly them; its own watch then
// refuses what the directory holds, or restarts again on it.
inline constexpr const char* kRuleFilesFd = "FAULTLINE_RULE_FILES_FD";

// Writes `files` (names and texts) to a new memory file and sets kRuleFilesFd to its descriptor,
// for the next execv. Returns false with the system's reason in *error (memfd_create, write).
bool handOverRuleFiles(const std::vector<RuleFile>& files, std::string* error);

// In the executed process: the files handed over, with kRuleFilesFd unset and its descriptor
// closed; nullopt if kRuleFilesFd is not set. Throws BankError when it is set but its descriptor
// does not read back as handed-over files (a variable set by hand, not by a restart).
std::optional<std::vector<RuleFile>> takeHandedOverRuleFiles();

}  // namespace faultline
