// Internal: one constructor per format, and the line tests detectFormat() uses.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "ingest/formats/formats.h"

namespace faultline {

std::unique_ptr<LineParser> makeDmesgParser(const ParseOptions& options);
std::unique_ptr<LineParser> makeSyslogParser(const ParseOptions& options);
std::unique_ptr<LineParser> makeJournalJsonParser(const ParseOptions& options);
std::unique_ptr<LineParser> makeOtlpJsonParser(const ParseOptions& options);
std::unique_ptr<LineParser> makeLokiJsonlParser(const ParseOptions& options);
std::unique_ptr<LineParser> makeContainerParser(const ParseOptions& options);
std::unique_ptr<LineParser> makeJsonRecordParser(const ParseOptions& options);

bool looksLikeDmesg(std::string_view line);
bool looksLikeSyslog(std::string_view line);
// Whether `line` starts with an RFC 3339 stamp of more than 6 fraction digits and a space: Go's
// time.RFC3339Nano, as kubectl and the container runtimes write it. No syslog or journal writer
// stamps finer than microseconds (rsyslog, syslog-ng, journalctl short-iso-precise), so such a
// line is a container's output, never a syslog record.
bool isContainerStamp(std::string_view line);
// Whether the RFC 3339 stamp `stamp` (the stamp alone) has more than 6 fraction digits.
bool finerThanMicroseconds(std::string_view stamp);

// "12345.678901" (seconds since boot, optional fraction, leading spaces allowed) to ns; false for
// anything else, or over 9 digits of seconds.
bool parseSeconds(std::string_view s, int64_t* ns);

// Whether `line` is one of `journalctl -o short-monotonic`: "[  12.345678] HOST IDENT[PID]: msg"
// or "[  12.345678] HOST kernel: msg". Read as dmesg, its every line was the kernel's, a process's
// too; a dmesg message never starts with a word and then `ident[pid]:` or `kernel:`.
bool isMonotonicJournal(std::string_view line);

// The year of a file's first `Mon DD` stamp, at time_of_day_ns into the day: `year`; with `now_ns`
// the latest of year + 1 and year that puts it no more than a day after now_ns
// (ParseOptions::now_ns), else the latest year before `year` that has the date (Feb 29: the last
// leap year), else year - 1 (no such date: the caller refuses it).
int firstStampYear(int year, std::optional<int64_t> now_ns, int month, int day,
                   int64_t time_of_day_ns);

// Skips ASCII spaces and tabs.
inline std::string_view trimLeft(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
    s.remove_prefix(1);
  }
  return s;
}

}  // namespace faultline
