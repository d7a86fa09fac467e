// The decision log: one JSON object per decision, one per line.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

#include "core/decision.h"

namespace faultline {

// Renders a decision as one line of JSON (no newline):
// {"time": RFC 3339 with ns, "node", "action": "taint" | "untaint" | "suppressed" | "suspect",
//  ["dry_run": true (Decision::dry_run: not applied),] "taint": {"key","value","effect"} (not
//  for "suspect", which puts none on the node), "rule",
//  ["reason",]
//  "evidence": [{"time", "signature", "line", "fields": {...}}]}
std::string decisionToJson(const Decision& d);

class DecisionLog : public DecisionSink {
 public:
  // Appends to `path`, one write(2) per line, or writes to stdout (flushed after each line) when
  // path is empty or "-". A readable file whose last line has no newline (a writer killed
  // mid-line) gets one before the first line. Throws std::runtime_error if the file cannot be
  // opened for appending.
  explicit DecisionLog(const std::string& path);
  DecisionLog(const DecisionLog&) = delete;
  DecisionLog& operator=(const DecisionLog&) = delete;
  DecisionLog(DecisionLog&&) = delete;
  DecisionLog& operator=(DecisionLog&&) = delete;
  ~DecisionLog() override;

  // DecisionSink. A write error (a full disk) is logged, naming the file and the cause, and
  // counted in errors(); the next line starts with a newline, which ends any part of a line the
  // failed write left (a blank line if it left none), so that later lines stay whole. Safe to call
  // from several threads: each line is written and flushed whole.
  void write(const Decision& decision) override;
  void flush() override;

  // The writes and flushes that failed: while not 0, a decision line may be lost.
  uint64_t errors() const { return errors_; }

 private:
  // Counts and logs a failed write or flush. mu_ held.
  void check(bool ok);

  std::string name_;  // the path, or "stdout"
  std::FILE* out_;
  bool owned_ = false;
  std::mutex mu_;      // write() may run on the taint sink's thread too
  bool torn_ = false;  // a write or flush failed since the last line written whole
  std::atomic<uint64_t> errors_ = 0;
};

}  // namespace faultline
