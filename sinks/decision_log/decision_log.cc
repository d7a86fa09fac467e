#include "sinks/decision_log/decision_log.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include "core/time.h"

namespace faultline {

std::string decisionToJson(const Decision& d) {
  nlohmann::ordered_json j;
  j["time"] = formatRfc3339(d.time_ns);
  j["node"] = d.node;
  j["action"] = actionName(d.action);
  if (d.dry_run) {
    j["dry_run"] = true;
  }
  if (d.action != Decision::Action::kSuspect) {  // a suspicion puts no taint on the node
    j["taint"] = {{"key", d.taint.key}, {"value", d.taint.value}, {"effect", d.taint.effect}};
  }
  j["rule"] = d.rule;
  if (!d.reason.empty()) {
    j["reason"] = d.reason;
  }
  nlohmann::ordered_json evidence = nlohmann::ordered_json::array();
  for (const Evidence& e : d.evidence) {
    nlohmann::ordered_json fields = nlohmann::ordered_json::object();
    for (const auto& [k, v] : e.fields) {
      fields[k] = v;
    }
    evidence.push_back({{"time", formatRfc3339(e.time_ns)},
                        {"signature", e.signature},
                        {"line", e.line},
                        {"fields", std::move(fields)}});
  }
  j["evidence"] = std::move(evidence);
  // Log lines may hold invalid UTF-8; replace it rather than fail the decision.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

DecisionLog::DecisionLog(const std::string& path) : name_("stdout"), out_(stdout) {
  if (path.empty() || path == "-") {
    return;  // stdout is the process's: its buffering is left as it is
  }
  name_ = path;
  // Read too, to find a torn last line; a file that may be written but not read is appended to
  // without that check.
  out_ = std::fopen(path.c_str(), "a+");
  const bool readable = out_ != nullptr;
  if (out_ == nullptr && errno == EACCES) {
    out_ = std::fopen(path.c_str(), "a");
  }
  if (out_ == nullptr) {
    throw std::runtime_error(path + ": " + std::strerror(errno));
  }
  owned_ = true;
  // Unbuffered (set before any other use of the stream, as C requires): each line goes in one
  // write(2), appended whole (O_APPEND) even beside another process appending to the file; a
  // 4 KiB stdio buffer wrote a longer line in parts.
  std::setvbuf(out_, nullptr, _IONBF, 0);
  // A process killed mid-line, or a full disk, left the file without its last newline: the
  // first line written ends that part of a line first, as after a failed write. Only a regular
  // file: a terminal's read would wait for input.
  struct stat st {};
  if (readable && fstat(fileno(out_), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    torn_ = std::fseek(out_, -1, SEEK_END) == 0 && std::fgetc(out_) != '\n';
    std::fseek(out_, 0, SEEK_END);  // stdio wants a seek between a read and a write
  }
}

DecisionLog::~DecisionLog() {
  if (owned_) {
    std::fclose(out_);
  } else {
    std::fflush(out_);
  }
}

void DecisionLog::write(const Decision& decision) {
  std::string line = decisionToJson(decision) + '\n';
  std::lock_guard lock(mu_);
  if (torn_) {
    // The failed write may have left part of a line (a full disk takes what fits): ended here, it
    // stays one bad line, not the start of this one.
    line.insert(line.begin(), '\n');
  }
  // Decisions are rare and operators tail this log: never hold one back.
  const bool ok =
      std::fwrite(line.data(), 1, line.size(), out_) == line.size() && std::fflush(out_) == 0;
  torn_ = !ok;
  check(ok);
}

void DecisionLog::flush() {
  std::lock_guard lock(mu_);
  // A flush after a failed write has nothing left to write (glibc drops what failed), so its
  // success says nothing of the part of a line that write left.
  const bool ok = std::fflush(out_) == 0;
  torn_ = torn_ || !ok;
  check(ok);
}

void DecisionLog::check(bool ok) {
  if (!ok) {
    spdlog::error("decision log {}: write failed: {}", name_, std::strerror(errno));
    std::clearerr(out_);
    ++errors_;
  }
}

}  // namespace faultline
