// The decision log: one JSON object per decision, one per line.
#pragma once

#include <atomic>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

#include "core/decision.h"

namespace faultline {

// Renders a decision as one line of JSON (no newline):
// {"time": RFC 3339 with ns, "node", "action": "taint" | "untaint" | "suppressed",
//  ["dry_run": true,] "taint": {"key","value","effect"}, "rule", ["reason",]
//  "evidence": [{"time", "signature", "line", "fields": {...}}]}
// dry_run: the decision is not applied (the taint sink's dry run), so that the log does not read
// as if the node were tainted.
std::string decisionToJson(const Decision& d, bool dry_run = false);

class DecisionLog : public DecisionSink {
 public:
  // Appends to `path`, or writes to stdout when path is empty or "-". dry_run(rule), if given,
  // tells which rules' decisions the taint sink will not apply (TaintSinkOptions::dryRun); they
  // are marked "dry_run": true. Throws std::runtime_error if the file cannot be opened.
  explicit DecisionLog(const std::string& path,
                       std::function<bool(std::string_view rule)> dry_run = {});
  DecisionLog(const DecisionLog&) = delete;
  DecisionLog& operator=(const DecisionLog&) = delete;
  DecisionLog(DecisionLog&&) = delete;
  DecisionLog& operator=(DecisionLog&&) = delete;
  ~DecisionLog() override;

  // DecisionSink. A write error (a full disk) is logged, naming the file and the
  // cause, and remembered in failed().
  void write(const Decision& decision) override;
  void flush() override;

  // Whether a decision may be lost: some write or flush failed.
  bool failed() const { return failed_; }

 private:
  void check(bool ok);

  std::string name_;  // the path, or "stdout"
  std::function<bool(std::string_view)> dry_run_;
  std::FILE* out_;
  bool owned_ = false;
  std::atomic<bool> failed_ = false;  // write() may run on the taint sink's thread too
};

}  // namespace faultline
