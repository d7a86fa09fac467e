// Syslog text as rsyslog writes /var/log/syslog (RFC 3164 `Mon DD HH:MM:SS host tag: msg`, also
// with fractional seconds) and as `journalctl -o short-iso` / `short-iso-precise` /
// `short-monotonic` print it (`2024-02-14T05:03:41+0000 host tag[pid]: msg`,
// `[  12.345678] host tag[pid]: msg`; the further lines of a multi-line message, which
// journalctl indents, are joined to it with newlines). A `short-monotonic` stamp is seconds since
// boot, as dmesg's: ParseOptions::boot_time_ns is added, else the file's first stamp is time 0.
//
// `Mon DD` stamps carry no year: ParseOptions::year is the year of a file's first such stamp, and
// a later stamp whose month is over 6 months before the previous one's (Dec -> Jan) starts the
// next year, as a log crossing New Year does; one over 6 months after it (Jan -> Dec: a lagging
// host's line in a file several hosts write) is of the year before. A stamp that names no real
// date or time (`Feb 30`, `Feb 29` outside a leap year, `25:00:00`) makes its line malformed.
#include <algorithm>
#include <iterator>
#include <optional>
#include <string>

#include "core/time.h"
#include "ingest/formats/parsers.h"

namespace faultline {
namespace {

// A `Mon DD HH:MM:SS[.ffffff]` stamp, without its year.
struct BsdStamp {
  int month = 0;
  int day = 0;
  int hour = 0;
  int min = 0;
  int sec = 0;
  int64_t frac = 0;
};

// "Feb 14 05:03:41[.ffffff] " at the start of s; sets the stamp and the length consumed. Checks
// every field but the day against the year (Feb 29), which the caller knows.
bool parseBsdStamp(std::string_view s, BsdStamp* t, size_t* used) {
  if (s.size() < 16 || s[3] != ' ' || s[6] != ' ' || s[9] != ':' || s[12] != ':') {
    return false;
  }
  t->month = monthFromAbbrev(s.substr(0, 3));
  if (t->month == 0 || (s[4] != ' ' && !isDigit(s[4])) || !isDigit(s[5]) || !isDigit(s[7]) ||
      !isDigit(s[8]) || !isDigit(s[10]) || !isDigit(s[11]) || !isDigit(s[13]) || !isDigit(s[14])) {
    return false;
  }
  t->day = (s[4] == ' ' ? 0 : (s[4] - '0') * 10) + (s[5] - '0');
  t->hour = (s[7] - '0') * 10 + (s[8] - '0');
  t->min = (s[10] - '0') * 10 + (s[11] - '0');
  t->sec = (s[13] - '0') * 10 + (s[14] - '0');
  size_t i = 15;
  if (s[i] == '.') {
    int64_t scale = kNanosPerSecond;
    for (++i; i < s.size() && isDigit(s[i]); ++i) {
      scale /= 10;
      t->frac += (s[i] - '0') * scale;
    }
  }
  // 2000 is a leap year: only the caller can refuse Feb 29.
  if (i >= s.size() || s[i] != ' ' ||
      !isValidCivil(2000, t->month, t->day, t->hour, t->min, t->sec)) {
    return false;
  }
  *used = i + 1;
  return true;
}

// A syslog severity written as a word before the tag (SONiC: "INFO kernel:").
bool isLevel(std::string_view word) {
  constexpr std::string_view kLevels[] = {"EMERG",   "ALERT", "CRIT",   "ERR",  "ERROR",
                                          "WARNING", "WARN",  "NOTICE", "INFO", "DEBUG"};
  return std::find(std::begin(kLevels), std::end(kLevels), word) != std::end(kLevels);
}

// The `[  12.345678] ` stamp of a `journalctl -o short-monotonic` line (isMonotonicJournal), or
// `-o short-delta`'s, which adds the time since the entry before (`[  12.345678 <    0.000123 >]`,
// `*>` when the realtime clock gave it) or 16 spaces for the first (systemd's
// output_timestamp_monotonic): if the host and tag after it have that format's shape, returns
// true with *ns (since boot) and *used (the stamp and its space) set; else false, *ns changed.
bool parseMonotonicStamp(std::string_view line, int64_t* ns, size_t* used) {
  const size_t close = line.find(']');
  if (line.empty() || line.front() != '[' || close == std::string_view::npos ||
      close + 1 >= line.size() || line[close + 1] != ' ') {
    return false;
  }
  std::string_view stamp = line.substr(1, close - 1);
  if (stamp.ends_with('>')) {
    stamp = stamp.substr(0, stamp.find(" <"));  // the whole stamp if none: no seconds then
  }
  while (!stamp.empty() && stamp.back() == ' ') {
    stamp.remove_suffix(1);
  }
  if (!parseSeconds(stamp, ns)) {
    return false;
  }
  const std::string_view rest = line.substr(close + 2);
  const size_t sp = rest.find(' ');
  const std::string_view host = rest.substr(0, sp);
  if (sp == std::string_view::npos || host.empty() ||
      host.find_first_of(":[") != std::string_view::npos) {
    return false;
  }
  const std::string_view ident = rest.substr(sp + 1, rest.find(' ', sp + 1) - sp - 1);
  const size_t open = ident.find('[');  // IDENT[PID]:
  if (ident != "kernel:" && (open == std::string_view::npos || open == 0 ||
                             ident.size() <= open + 3 || !ident.ends_with("]:") ||
                             !std::all_of(ident.begin() + static_cast<std::ptrdiff_t>(open) + 1,
                                          ident.end() - 2, isDigit))) {
    return false;
  }
  *used = close + 2;
  return true;
}

struct Parsed {
  std::optional<BsdStamp> bsd;  // a `Mon DD` stamp, whose year the parser sets
  bool uptime = false;          // a `[seconds]` stamp: ns is since boot, which the parser adds
  int64_t ns = 0;
  std::string_view host;
  std::string_view tag;
  std::string_view msg;
  // The tag is `kernel` without a `[PID]`: the kernel's own records have no process, and
  // `logger -t kernel` (journalctl prints `kernel[4242]:`, rsyslog with `logger -i`) is a process.
  bool kernel = false;
};

bool parseLine(std::string_view line, Parsed* p) {
  size_t used = 0;
  BsdStamp bsd;
  if (parseBsdStamp(line, &bsd, &used)) {
    p->bsd = bsd;
  } else if (!line.empty() && line.front() == '[') {
    // Only the shape isMonotonicJournal() tells from dmesg: a dmesg line forced as syslog
    // ("[ 1.0] NVRM: Xid ...") is malformed, not a record of a host "NVRM:".
    if (!parseMonotonicStamp(line, &p->ns, &used)) {
      return false;
    }
    p->uptime = true;
  } else {
    // A finer stamp is a container's (isContainerStamp): its text is a pod's own, whose
    // `gpu-3 kernel: NVRM: Xid ...` would pass for gpu-3's kernel.
    if (!parseRfc3339(line, &p->ns, &used) || used >= line.size() || line[used] != ' ' ||
        finerThanMicroseconds(line.substr(0, used))) {
      return false;
    }
    ++used;
  }
  std::string_view rest = line.substr(used);
  const size_t sp = rest.find(' ');
  if (sp == std::string_view::npos || sp == 0) {
    return false;
  }
  p->host = rest.substr(0, sp);
  // A label set is no host: `STAMP {host="gpu-1", transport="kernel"} NVRM: Xid ...` is logcli's
  // default output (isLogcliDefault), whose kernel lines would read as a process's record. Nor is
  // a word that ends in a colon: `STAMP kernel: NVRM: Xid ...` (a template without the host) or
  // `STAMP NVRM: Xid ...` (nor the tag) would have made a process's record of the kernel's line.
  // Both ends only: a scan of the whole host cost replay about 5% of its lines per second.
  if (p->host.front() == '{' || p->host.back() == ':') {
    return false;
  }
  rest.remove_prefix(sp + 1);
  size_t colon = rest.find(": ");
  if (colon == std::string_view::npos) {
    if (rest.empty() || rest.back() != ':') {
      return false;
    }
    colon = rest.size() - 1;
  }
  std::string_view tag = rest.substr(0, colon);
  if (tag.find(':') != std::string_view::npos) {
    return false;  // no ident has one: `STAMP mlx5_core 0000:41:00.1: ...` has no host either
  }
  p->msg = rest.substr(std::min(colon + 2, rest.size()));
  // "INFO kernel" (a level before the tag, as SONiC writes it): the tag is the second word. Other
  // words before the colon are no tag: in a container runtime's log ("stdout F kernel: ...") they
  // are a pod's own text, which must not name the kernel.
  if (const size_t sp2 = tag.find(' '); sp2 != std::string_view::npos) {
    if (isLevel(tag.substr(0, sp2))) {
      tag.remove_prefix(sp2 + 1);
    }
  }
  p->kernel = tag == "kernel";
  if (const size_t bracket = tag.find('['); bracket != std::string_view::npos) {
    tag = tag.substr(0, bracket);
  }
  p->tag = tag;
  return true;
}

class SyslogParser : public LineParser {
 public:
  explicit SyslogParser(const ParseOptions& o)
      : year_(o.year), now_ns_(o.now_ns), boot_ns_(o.boot_time_ns) {}

  bool parse(std::string_view line, RecordBatch* batch) override {
    Parsed p;
    if (!parseLine(line, &p)) {
      // journalctl indents the further lines of a multi-line message under its first (the
      // fallen-off-the-bus report): they belong to the record before.
      const std::string_view cont = trimLeft(line);
      if (held_ && cont.size() < line.size() && !cont.empty()) {
        keepHeld();
        joined_ += '\n';
        joined_.append(cont);
        return true;
      }
      keepHeld();
      return false;
    }
    if (p.uptime) {
      if (boot_ns_) {
        if (__builtin_add_overflow(*boot_ns_, p.ns, &p.ns)) {
          keepHeld();
          return false;  // past the year 2262: not a real uptime
        }
      } else {
        if (!first_uptime_ns_) {
          first_uptime_ns_ = p.ns;
        }
        p.ns -= *first_uptime_ns_;
      }
    } else if (p.bsd) {
      const BsdStamp& t = *p.bsd;
      int year = year_;
      if (last_month_ == 0) {
        year = firstStampYear(year_, now_ns_, t.month, t.day,
                              ((t.hour * 60LL + t.min) * 60 + t.sec) * kNanosPerSecond + t.frac);
      } else if (t.month < last_month_ - 6) {
        ++year;  // the log crossed New Year
      } else if (last_month_ == 1 && t.month == 12) {
        --year;  // a lagging host's line from before it (a sparse log's jump on is no lag)
      }
      // int64 ns end in 2262.
      if (year > 2261 || !isValidCivil(year, t.month, t.day, t.hour, t.min, t.sec)) {
        keepHeld();
        return false;
      }
      year_ = year;
      last_month_ = t.month;
      p.ns = civilToNanos(year, t.month, t.day, t.hour, t.min, t.sec, t.frac);
    }
    flush(batch);
    held_ = p;
    return true;
  }

  void finish(RecordBatch* batch) override { flush(batch); }
  bool sinceFirstStamp() const override { return first_uptime_ns_.has_value(); }

 private:
  void flush(RecordBatch* batch) {
    if (!held_) {
      return;
    }
    LogRecord& r = batch->records.emplace_back();
    r.time_ns = held_->ns;
    r.node = owned_ ? batch->copy(held_->host) : held_->host;
    r.line = joined_.empty() ? held_->msg : batch->copy(joined_);
    r.stream = held_->kernel ? StreamKind::kKernel : StreamKind::kOther;
    r.labels_begin = static_cast<uint32_t>(batch->labels.size());
    batch->labels.push_back({"syslog_identifier", owned_ ? batch->copy(held_->tag) : held_->tag});
    r.labels_end = static_cast<uint32_t>(batch->labels.size());
    held_.reset();
    joined_.clear();
    owned_ = false;
  }

  // The held record outlives the line it views only as a copy: a line may be reused once the
  // parse() after it returns.
  void keepHeld() {
    if (!held_ || owned_) {
      return;
    }
    if (joined_.empty()) {
      joined_.assign(held_->msg);
    }
    host_.assign(held_->host);
    tag_.assign(held_->tag);
    held_->host = host_;
    held_->tag = tag_;
    owned_ = true;
  }

  int year_;                       // of the last `Mon DD` stamp read
  std::optional<int64_t> now_ns_;  // ParseOptions::now_ns
  std::optional<int64_t> boot_ns_;
  std::optional<int64_t> first_uptime_ns_;  // without boot_ns_: the first `[seconds]` stamp
  int last_month_ = 0;                      // of the last `Mon DD` stamp read; 0 before the first
  std::optional<Parsed> held_;              // the last record, held back for its continuation lines
  std::string joined_;  // its message with them, once it has any (or once it is kept)
  bool owned_ = false;  // host_ and tag_ hold its host and tag
  std::string host_;
  std::string tag_;
};

}  // namespace

bool isMonotonicJournal(std::string_view line) {
  int64_t ns = 0;
  size_t used = 0;
  return parseMonotonicStamp(line, &ns, &used);
}

bool looksLikeSyslog(std::string_view line) {
  Parsed p;
  return parseLine(line, &p);
}

std::unique_ptr<LineParser> makeSyslogParser(const ParseOptions& options) {
  return std::make_unique<SyslogParser>(options);
}

}  // namespace faultline
