#include "ingest/formats/formats.h"

#include <algorithm>
#include <array>

#include "core/time.h"
#include "ingest/formats/parsers.h"

namespace faultline {
namespace {

constexpr std::array<std::pair<Format, std::string_view>, 7> kNames = {{
    {Format::kDmesg, "dmesg"},
    {Format::kSyslog, "syslog"},
    {Format::kJournalJson, "journal-json"},
    {Format::kOtlpJson, "otlp-json"},
    {Format::kLokiJsonl, "loki-jsonl"},
    {Format::kContainer, "container"},
    {Format::kJson, "json"},
}};

// Which format one line looks like. JSON formats are told apart by their keys; `json_keys` are
// the json format's line keys, quoted.
std::optional<Format> lineFormat(std::string_view line, const std::vector<std::string>& json_keys) {
  if (!line.empty() && line.front() == '{') {
    // A shipper's record of a pod's output (Fluent Bit's, Vector's `kubernetes` map), which may
    // hold the pod's own JSON keys (Merge_Log): a pod must not choose the parser by its keys.
    // No other format's line holds a `kubernetes` map (their labels are strings, OTLP's lists).
    if (line.find("\"kubernetes\":{") != std::string_view::npos ||
        line.find("\"kubernetes\": {") != std::string_view::npos) {
      return Format::kJson;
    }
    if (line.find("\"resourceLogs\"") != std::string_view::npos) {
      return Format::kOtlpJson;
    }
    // journalctl writes both. A shipper's record of a journal entry may keep one and not the
    // other (Vector's journald source writes MESSAGE as message; Fluent Bit's systemd input puts
    // the entry's time in a key of its own): the json format reads it.
    if (line.find("\"__REALTIME_TIMESTAMP\"") != std::string_view::npos &&
        line.find("\"MESSAGE\"") != std::string_view::npos) {
      return Format::kJournalJson;
    }
    if (line.find("\"line\"") != std::string_view::npos) {
      return Format::kLokiJsonl;
    }
    // A quote inside a JSON string is escaped, so `"key"` is found only as a key or a whole value.
    for (const std::string& key : json_keys) {
      if (line.find(key) != std::string_view::npos) {
        return Format::kJson;
      }
    }
    return std::nullopt;
  }
  if (isContainerStamp(line)) {
    return Format::kContainer;
  }
  if (isMonotonicJournal(line)) {
    return Format::kSyslog;
  }
  if (looksLikeDmesg(line)) {
    return Format::kDmesg;
  }
  if (looksLikeSyslog(line)) {
    return Format::kSyslog;
  }
  return std::nullopt;
}

}  // namespace

bool parseFormatName(std::string_view name, Format* f) {
  for (const auto& [format, n] : kNames) {
    if (n == name) {
      *f = format;
      return true;
    }
  }
  return false;
}

std::string_view formatName(Format f) {
  for (const auto& [format, n] : kNames) {
    if (format == f) {
      return n;
    }
  }
  return "";
}

std::optional<Format> detectFormat(std::string_view head,
                                   const std::vector<std::string>& json_lines) {
  std::vector<std::string> json_keys;
  for (const std::string& path : json_lines) {
    json_keys.push_back('"' + path + '"');
    if (const size_t dot = path.find('.'); dot != std::string::npos) {
      json_keys.push_back('"' + path.substr(0, dot) + '"');
    }
  }
  std::array<int, kNames.size()> votes{};
  int lines = 0;
  while (!head.empty() && lines < 200) {
    const size_t nl = head.find('\n');
    std::string_view line = head.substr(0, nl);
    head.remove_prefix(nl == std::string_view::npos ? head.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') {
      line.remove_suffix(1);
    }
    // NULs that start a line (unwritten blocks, a copytruncate hole) are skipped, as the archive
    // reader skips them.
    line.remove_prefix(std::min(line.find_first_not_of('\0'), line.size()));
    if (line.empty() || isJournalctlMarker(line)) {
      continue;
    }
    ++lines;
    if (const auto f = lineFormat(line, json_keys)) {
      ++votes[static_cast<size_t>(*f)];
    }
  }
  // Go drops a stamp's trailing zeros, so a container's line stamped to the 100 ms
  // ("...:02.1Z epoch 3 loss: 0.1") can read as syslog; one stamp of over 6 fraction digits
  // shows the file is no syslog writer's (isContainerStamp).
  const auto container = static_cast<size_t>(Format::kContainer);
  if (votes[container] > 0) {
    votes[container] += votes[static_cast<size_t>(Format::kSyslog)];
    votes[static_cast<size_t>(Format::kSyslog)] = 0;
  }
  size_t best = 0;
  for (size_t i = 1; i < votes.size(); ++i) {
    if (votes[i] > votes[best]) {
      best = i;
    }
  }
  if (votes[best] == 0) {
    return std::nullopt;
  }
  return static_cast<Format>(best);
}

bool isLogcliDefault(std::string_view head) {
  std::string_view line;
  while (!head.empty() && line.find_first_not_of(" \t\r") == std::string_view::npos) {
    const size_t nl = head.find('\n');
    line = head.substr(0, nl);
    head.remove_prefix(nl == std::string_view::npos ? head.size() : nl + 1);
  }
  int64_t ns = 0;
  size_t used = 0;
  if (!parseRfc3339(line, &ns, &used) || !line.substr(used).starts_with(" {")) {
    return false;
  }
  const std::string_view labels = line.substr(used + 1);
  const size_t close = labels.find("} ");
  return labels.starts_with("{}") ||
         (close != std::string_view::npos &&
          labels.substr(0, close).find("=\"") != std::string_view::npos);
}

std::unique_ptr<LineParser> makeParser(Format format, const ParseOptions& options) {
  switch (format) {
    case Format::kDmesg:
      return makeDmesgParser(options);
    case Format::kSyslog:
      return makeSyslogParser(options);
    case Format::kJournalJson:
      return makeJournalJsonParser(options);
    case Format::kOtlpJson:
      return makeOtlpJsonParser(options);
    case Format::kContainer:
      return makeContainerParser(options);
    case Format::kJson:
      return makeJsonRecordParser(options);
    case Format::kLokiJsonl:
      break;
  }
  return makeLokiJsonlParser(options);
}

int firstStampYear(int year, std::optional<int64_t> now_ns, int month, int day,
                   int64_t time_of_day_ns) {
  if (!now_ns) {
    return year;
  }
  // The latest year not over a day ahead of now: a log written in a time zone ahead of this
  // machine's UTC is not the future (on New Year's Eve, its first line may be of the next year).
  constexpr int64_t kDayNs = 86'400 * kNanosPerSecond;
  for (const int y : {std::min(year + 1, 2261), year}) {  // int64 ns end in 2262
    if (isValidCivil(y, month, day, 0, 0, 0) &&
        civilToNanos(y, month, day, 0, 0, 0) + time_of_day_ns <= *now_ns + kDayNs) {
      return y;
    }
  }
  for (int y = year - 1; y >= year - 8; --y) {  // Feb 29: the last leap year (2100 has none)
    if (isValidCivil(y, month, day, 0, 0, 0)) {
      return y;
    }
  }
  return year - 1;
}

}  // namespace faultline
