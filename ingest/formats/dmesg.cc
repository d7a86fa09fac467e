// The kernel ring buffer as dmesg(1) and /dev/kmsg print it (util-linux dmesg(1),
// Documentation/ABI/testing/dev-kmsg).
#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <system_error>

#include "core/time.h"
#include "ingest/formats/parsers.h"

namespace faultline {

bool parseSeconds(std::string_view s, int64_t* ns) {
  s = trimLeft(s);
  int64_t sec = 0;
  size_t i = 0;
  while (i < s.size() && isDigit(s[i])) {
    if (i == 9) {
      return false;  // over 9 digits (31 years) could overflow int64 nanoseconds
    }
    sec = sec * 10 + (s[i++] - '0');
  }
  if (i == 0) {
    return false;
  }
  int64_t frac = 0;
  int64_t scale = kNanosPerSecond;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && isDigit(s[i])) {
      scale /= 10;
      frac += (s[i++] - '0') * scale;
    }
  }
  if (i != s.size()) {
    return false;
  }
  *ns = sec * kNanosPerSecond + frac;
  return true;
}

namespace {

// "Fri Apr  5 21:29:39 2024" (dmesg -T, ctime(3) layout) to ns, read as UTC.
bool parseCtime(std::string_view s, int64_t* ns) {
  if (s.size() != 24 || s[3] != ' ' || s[7] != ' ' || s[13] != ':' || s[16] != ':' ||
      s[19] != ' ') {
    return false;
  }
  static constexpr std::array<size_t, 11> kDigits = {9, 11, 12, 14, 15, 17, 18, 20, 21, 22, 23};
  if ((s[8] != ' ' && !isDigit(s[8])) ||
      !std::all_of(kDigits.begin(), kDigits.end(), [&](size_t i) { return isDigit(s[i]); })) {
    return false;
  }
  const int month = monthFromAbbrev(s.substr(4, 3));
  const int day = (s[8] == ' ' ? 0 : (s[8] - '0') * 10) + (s[9] - '0');
  const int hour = (s[11] - '0') * 10 + (s[12] - '0');
  const int min = (s[14] - '0') * 10 + (s[15] - '0');
  const int sec = (s[17] - '0') * 10 + (s[18] - '0');
  const int year = std::atoi(std::string(s.substr(20, 4)).c_str());
  if (year < 1970 || year > 2261 ||  // int64 ns ends in 2262
      !isValidCivil(year, month, day, hour, min, sec)) {
    return false;
  }
  *ns = civilToNanos(year, month, day, hour, min, sec);
  return true;
}

// "KEY=value", KEY in capitals, digits and '_': a line of a /dev/kmsg record's dictionary
// (Documentation/ABI/testing/dev-kmsg), such as "SUBSYSTEM=pci" or "DEVICE=+pci:0000:44:00.0".
bool isDictionaryEntry(std::string_view s) {
  const size_t eq = s.find('=');
  return eq != 0 && eq != std::string_view::npos &&
         std::all_of(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(eq),
                     [](char c) { return (c >= 'A' && c <= 'Z') || isDigit(c) || c == '_'; });
}

// util-linux dmesg's iso stamp and the space after it: "2025-01-21T04:41:44,283302+00:00 ", in
// exactly this shape (a comma, 6 digits, an offset with a colon), which no syslog, journalctl or
// application stamp ("2025-01-21 04:41:44,283 WARNING") has.
constexpr size_t kDmesgIsoBytes = 32;
bool isDmesgIso(std::string_view s) {
  constexpr std::string_view kShape = "dddd-dd-ddTdd:dd:dd,dddddd+dd:dd ";
  if (s.size() <= kDmesgIsoBytes) {
    return false;
  }
  for (size_t i = 0; i < kShape.size(); ++i) {
    const char want = kShape[i];
    const bool ok = want == 'd'   ? isDigit(s[i])
                    : want == '+' ? s[i] == '+' || s[i] == '-'
                                  : s[i] == want;
    if (!ok) {
      return false;
    }
  }
  return true;
}

// A /dev/kmsg message with its escapes undone into *out: the kernel writes each byte below ' ',
// from 127, and '\' itself as "\xNN" (kernel/printk/printk.c, msg_add_ext_text), so a multi-line
// report (the "fallen off the bus" one, whose lines name the GPU) arrives as one record joined by
// "\x0a". Undone, its lines join with '\n' as the other dmesg forms' continuations do.
void unescapeKmsg(std::string_view msg, std::string* out) {
  out->clear();
  for (size_t i = 0; i < msg.size(); ++i) {
    const bool escape = msg[i] == '\\' && i + 3 < msg.size() && msg[i + 1] == 'x' &&
                        hexDigit(msg[i + 2]) >= 0 && hexDigit(msg[i + 3]) >= 0;
    if (escape) {
      out->push_back(static_cast<char>(hexDigit(msg[i + 2]) * 16 + hexDigit(msg[i + 3])));
      i += 3;
    } else {
      out->push_back(msg[i]);
    }
  }
}

// kDelta and kMinute are dmesg --reltime's (-e; -H prints it too): "[Nov30 08:25]" (util-linux
// short_ctime(): "%b%e %H:%M", local time) on a record whose minute differs from the record
// before's, else "[  +0.000123]", the time since the record before.
enum class Stamp { kNone, kUptime, kDelta, kMinute, kAbsolute };

struct Head {
  Stamp stamp = Stamp::kNone;
  int64_t ns = 0;  // kMinute: the minute of the day, in ns; its month and day below
  std::string_view msg;
  bool kmsg = false;  // a /dev/kmsg record, whose indented lines are its dictionary
  // The record names a facility other than kern: a process wrote it to /dev/kmsg. The kernel
  // gives a process's write the user facility unless it names another one, never kern
  // (kernel/printk/printk.c, devkmsg_write), so only the kernel logs as kern.
  bool from_process = false;
  int month = 0;  // kMinute
  int day = 0;
};

// Whether a syslog priority prefix's number (facility * 8 + level, RFC 5424 section 6.2.1), in
// decimal, names a facility other than kern.
bool processPriority(std::string_view prio) {
  int p = 0;
  const auto [end, ec] = std::from_chars(prio.data(), prio.data() + prio.size(), p);
  return ec == std::errc() && end == prio.data() + prio.size() && p >= 8;
}

// dmesg --decode (-x): the "FACILITY:LEVEL : " before a record's stamp (util-linux prints
// "%-6s:%-6s: ", names padded to 6). On a match, sets *facility to the facility's name ("kern")
// and *rest to the text after the prefix, and returns true; else false.
bool decodePrefix(std::string_view s, std::string_view* facility, std::string_view* rest) {
  const size_t colon = s.find(':');
  const size_t second = colon <= 8 ? s.find(':', colon + 1) : std::string_view::npos;
  if (second == std::string_view::npos || second > colon + 7 || second + 1 >= s.size() ||
      s[second + 1] != ' ') {
    return false;
  }
  const auto name = [](std::string_view padded) { return padded.substr(0, padded.find(' ')); };
  const std::string_view f = name(s.substr(0, colon));
  const std::string_view level = name(s.substr(colon + 1, second - colon - 1));
  static constexpr std::array<std::string_view, 8> kLevels = {"emerg", "alert",  "crit", "err",
                                                              "warn",  "notice", "info", "debug"};
  if (f.empty() ||
      !std::all_of(f.begin(), f.end(),
                   [](char c) { return (c >= 'a' && c <= 'z') || isDigit(c); }) ||
      std::find(kLevels.begin(), kLevels.end(), level) == kLevels.end()) {
    return false;
  }
  *facility = f;
  *rest = trimLeft(s.substr(second + 1));
  return true;
}

// "Nov30 08:25" or "Nov 5 08:25" (dmesg --reltime's minute, Stamp::kMinute): sets the month,
// day and minute of the day (in ns); the day is checked against the year by the caller.
bool parseReltimeMinute(std::string_view s, Head* h) {
  if (s.size() != 11 || s[5] != ' ' || s[8] != ':' || (s[3] != ' ' && !isDigit(s[3])) ||
      !isDigit(s[4]) || !isDigit(s[6]) || !isDigit(s[7]) || !isDigit(s[9]) || !isDigit(s[10])) {
    return false;
  }
  const int month = monthFromAbbrev(s.substr(0, 3));
  const int day = (s[3] == ' ' ? 0 : (s[3] - '0') * 10) + (s[4] - '0');
  const int hour = (s[6] - '0') * 10 + (s[7] - '0');
  const int min = (s[9] - '0') * 10 + (s[10] - '0');
  if (month == 0 || !isValidCivil(2000, month, day, hour, min, 0)) {  // 2000: Feb 29 passes
    return false;
  }
  h->month = month;
  h->day = day;
  h->ns = (int64_t{hour} * 3600 + int64_t{min} * 60) * kNanosPerSecond;
  return true;
}

// Recognises the head of a record in any dmesg form; Stamp::kNone if `line` is not a head.
Head parseHead(std::string_view line) {
  Head h;
  std::string_view s = line;
  // /dev/kmsg: "prio,seq,usec,flags;msg", or dmesg --time-format iso (util-linux):
  // "2025-01-21T04:41:44,283302+00:00 msg".
  if (!s.empty() && isDigit(s.front())) {
    if (isDmesgIso(s) && parseRfc3339(s.substr(0, kDmesgIsoBytes), &h.ns)) {
      h.stamp = Stamp::kAbsolute;
      h.msg = s.substr(kDmesgIsoBytes + 1);
      return h;
    }
    const size_t semi = s.find(';');
    const size_t c1 = s.find(',');
    const size_t c2 = c1 == std::string_view::npos ? c1 : s.find(',', c1 + 1);
    const size_t c3 = c2 == std::string_view::npos ? c2 : s.find(',', c2 + 1);
    if (semi != std::string_view::npos && c3 != std::string_view::npos && c3 < semi) {
      const std::string_view us = s.substr(c2 + 1, c3 - c2 - 1);  // µs since boot
      int64_t v = 0;
      if (!us.empty() && us.size() <= 15 &&
          std::all_of(us.begin(), us.end(), [](char c) { return isDigit(c); })) {
        for (char c : us) {
          v = v * 10 + (c - '0');
        }
        h = {Stamp::kUptime, v * 1000, s.substr(semi + 1), true, processPriority(s.substr(0, c1))};
      }
    }
    return h;
  }
  bool from_process = false;
  if (std::string_view facility; decodePrefix(s, &facility, &s)) {
    from_process = facility != "kern";
    // dmesg --decode --time-format iso: "kern  :warn  : 2025-01-21T04:41:44,283302+00:00 msg";
    // with any other time format the bracketed stamps below follow.
    size_t used = 0;
    if (parseRfc3339(s, &h.ns, &used)) {
      h.stamp = Stamp::kAbsolute;
      h.msg = trimLeft(s.substr(used));
      h.from_process = from_process;
      return h;
    }
  } else if (s.size() > 3 && s[0] == '<' && isDigit(s[1])) {
    // "<6>" priority prefix (pstore, `dmesg -r`)
    const size_t gt = s.find('>');
    if (gt > 4) {  // also a missing '>' (npos)
      return h;
    }
    from_process = processPriority(s.substr(1, gt - 1));
    s.remove_prefix(gt + 1);
  }
  if (s.empty() || s.front() != '[') {
    return h;
  }
  const size_t close = s.find(']');
  if (close == std::string_view::npos) {
    return h;
  }
  std::string_view stamp = s.substr(1, close - 1);
  // dmesg --show-delta (-d): "[    5.000000 <    0.000123>]", the time since the record before
  // after the uptime.
  if (const size_t lt = stamp.find(" <"); lt != std::string_view::npos && stamp.back() == '>') {
    stamp = stamp.substr(0, lt);
  }
  std::string_view msg = s.substr(close + 1);
  if (!msg.empty() && msg.front() == ' ') {
    msg.remove_prefix(1);
  }
  h.msg = msg;
  h.from_process = from_process;
  const std::string_view t = trimLeft(stamp);
  if (!t.empty() && t.front() == '+' && parseSeconds(t.substr(1), &h.ns)) {
    h.stamp = Stamp::kDelta;
  } else if (parseSeconds(stamp, &h.ns)) {
    h.stamp = Stamp::kUptime;
  } else if (parseCtime(stamp, &h.ns)) {
    h.stamp = Stamp::kAbsolute;
  } else if (parseReltimeMinute(stamp, &h)) {
    h.stamp = Stamp::kMinute;
  }
  return h;
}

class DmesgParser : public LineParser {
 public:
  explicit DmesgParser(const ParseOptions& o)
      : boot_ns_(o.boot_time_ns), year_(o.year), now_ns_(o.now_ns), node_(o.node) {}

  bool parse(std::string_view line, RecordBatch* batch) override {
    const Head h = parseHead(line);
    if (h.stamp == Stamp::kNone) {
      // A printk continuation: indented, no stamp of its own. It belongs to the record before.
      const std::string_view cont = trimLeft(line);
      if (has_pending_ && cont.size() < line.size() && !cont.empty()) {
        if (pending_kmsg_ && isDictionaryEntry(cont)) {
          keepPending();
          return true;  // udev metadata (SUBSYSTEM=pci), not part of the message
        }
        if (joined_.empty()) {
          joined_.assign(pending_line_);
        }
        joined_ += '\n';
        joined_.append(cont);
        return true;
      }
      keepPending();
      return false;
    }
    if (h.stamp == Stamp::kDelta && minute_month_ == 0) {
      // A reltime file cut after its first record: nothing tells the time these deltas add to.
      keepPending();
      return false;
    }
    int64_t t = h.ns;
    if (h.stamp == Stamp::kMinute) {
      // The year is ParseOptions::year's, and the next from a month over 6 months before the
      // last minute's (Dec -> Jan), as syslog's `Mon DD`. The record's seconds are not printed:
      // it is taken at its minute's start (or at the record before, if later), so its minute's
      // records, their deltas exact, may be up to a minute early.
      int year = year_;
      if (minute_month_ == 0) {
        year = firstStampYear(year_, now_ns_, h.month, h.day, h.ns);
      } else if (h.month + 6 < minute_month_) {
        ++year;
      }
      if (year > 2261 || !isValidCivil(year, h.month, h.day, 0, 0, 0)) {
        keepPending();
        return false;
      }
      year_ = year;
      minute_month_ = h.month;
      t = std::max(civilToNanos(year, h.month, h.day, 0, 0, 0) + h.ns, last_ns_);
    }
    flush(batch);
    if (h.stamp == Stamp::kUptime) {
      if (boot_ns_) {
        if (__builtin_add_overflow(*boot_ns_, h.ns, &t)) {
          return false;  // past the year 2262: not a real uptime
        }
      } else {
        if (!first_uptime_ns_) {
          first_uptime_ns_ = h.ns;
        }
        t = h.ns - *first_uptime_ns_;
      }
    } else if (h.stamp == Stamp::kDelta) {
      if (last_ns_ > INT64_MAX - h.ns) {
        return false;  // deltas adding up past the year 2262: not a real log
      }
      t = last_ns_ + h.ns;
    }
    last_ns_ = t;
    has_pending_ = true;
    pending_kmsg_ = h.kmsg;
    pending_from_process_ = h.from_process;
    pending_time_ = t;
    pending_line_ = h.msg;
    if (h.kmsg && h.msg.find("\\x") != std::string_view::npos) {
      unescapeKmsg(h.msg, &joined_);
    }
    return true;
  }

  void finish(RecordBatch* batch) override { flush(batch); }
  bool sinceFirstStamp() const override { return first_uptime_ns_.has_value(); }

 private:
  // The held record's text outlives the line it views only as a copy (a line may be reused once
  // the parse() after it returns).
  void keepPending() {
    if (has_pending_ && joined_.empty()) {
      joined_.assign(pending_line_);
    }
  }

  void flush(RecordBatch* batch) {
    if (!has_pending_) {
      return;
    }
    const std::string_view node = batch->copy(node_);
    LogRecord& r = batch->records.emplace_back();
    r.time_ns = pending_time_;
    r.node = node;
    r.stream = pending_from_process_ ? StreamKind::kOther : StreamKind::kKernel;
    r.labels_begin = r.labels_end = static_cast<uint32_t>(batch->labels.size());
    r.line = joined_.empty() ? pending_line_ : batch->copy(joined_);
    joined_.clear();
    has_pending_ = false;
  }

  std::optional<int64_t> boot_ns_;
  std::optional<int64_t> first_uptime_ns_;
  int64_t last_ns_ = 0;
  int year_;  // of the last reltime minute read (ParseOptions::year before one)
  std::optional<int64_t> now_ns_;  // ParseOptions::now_ns
  int minute_month_ = 0;  // the last reltime minute's month; 0 before one (deltas add to none)
  std::string node_;
  bool has_pending_ = false;
  bool pending_kmsg_ = false;
  bool pending_from_process_ = false;  // Head::from_process
  int64_t pending_time_ = 0;
  std::string_view pending_line_;
  std::string joined_;
};

}  // namespace

bool looksLikeDmesg(std::string_view line) {
  return parseHead(line).stamp != Stamp::kNone;
}

std::unique_ptr<LineParser> makeDmesgParser(const ParseOptions& options) {
  return std::make_unique<DmesgParser>(options);
}

}  // namespace faultline
