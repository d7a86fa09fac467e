// Syslog text as rsyslog writes /var/log/syslog (RFC 3164 `Mon DD HH:MM:SS host tag: msg`, also
// with fractional seconds) and as `journalctl -o short-iso` / `short-iso-precise` print it
// (`2024-02-14T05:03:41+0000 host tag[pid]: msg`).
#include <string>

#include "core/time.h"
#include "ingest/formats/parsers.h"

namespace faultline {
namespace {

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

// "Feb 14 05:03:41[.ffffff] " at the start of s; sets ns (in `year`) and the length consumed.
bool parseBsdStamp(std::string_view s, int year, int64_t* ns, size_t* used) {
  if (s.size() < 16 || s[3] != ' ' || s[6] != ' ' || s[9] != ':' || s[12] != ':') {
    return false;
  }
  const int month = monthFromAbbrev(s.substr(0, 3));
  if (month == 0 || !isDigit(s[5]) || !isDigit(s[7]) || !isDigit(s[8]) || !isDigit(s[10]) ||
      !isDigit(s[11]) || !isDigit(s[13]) || !isDigit(s[14])) {
    return false;
  }
  const int day = (s[4] == ' ' ? 0 : (s[4] - '0') * 10) + (s[5] - '0');
  const int hour = (s[7] - '0') * 10 + (s[8] - '0');
  const int min = (s[10] - '0') * 10 + (s[11] - '0');
  const int sec = (s[13] - '0') * 10 + (s[14] - '0');
  size_t i = 15;
  int64_t frac = 0;
  if (s[i] == '.') {
    int64_t scale = kNanosPerSecond;
    for (++i; i < s.size() && isDigit(s[i]); ++i) {
      scale /= 10;
      frac += (s[i] - '0') * scale;
    }
  }
  if (i >= s.size() || s[i] != ' ' || day < 1) {
    return false;
  }
  *ns = civilToNanos(year, month, day, hour, min, sec, frac);
  *used = i + 1;
  return true;
}

struct Parsed {
  int64_t ns = 0;
  std::string_view host;
  std::string_view tag;
  std::string_view msg;
};

bool parseLine(std::string_view line, int year, Parsed* p) {
  size_t used = 0;
  if (!parseBsdStamp(line, year, &p->ns, &used)) {
    if (!parseRfc3339(line, &p->ns, &used) || used >= line.size() || line[used] != ' ') {
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
  rest.remove_prefix(sp + 1);
  size_t colon = rest.find(": ");
  if (colon == std::string_view::npos) {
    if (rest.empty() || rest.back() != ':') {
      return false;
    }
    colon = rest.size() - 1;
  }
  std::string_view tag = rest.substr(0, colon);
  p->msg = rest.substr(std::min(colon + 2, rest.size()));
  // "INFO kernel" (a level before the tag, as SONiC writes it): the tag is the last word.
  if (const size_t last_sp = tag.rfind(' '); last_sp != std::string_view::npos) {
    tag.remove_prefix(last_sp + 1);
  }
  if (const size_t bracket = tag.find('['); bracket != std::string_view::npos) {
    tag = tag.substr(0, bracket);
  }
  p->tag = tag;
  return true;
}

class SyslogParser : public LineParser {
 public:
  explicit SyslogParser(const ParseOptions& o) : year_(o.year) {}

  bool parse(std::string_view line, RecordBatch* batch) override {
    Parsed p;
    if (!parseLine(line, year_, &p)) {
      return false;
    }
    LogRecord& r = batch->records.emplace_back();
    r.time_ns = p.ns;
    r.node = p.host;
    r.line = p.msg;
    r.stream = p.tag == "kernel" ? StreamKind::kKernel : StreamKind::kOther;
    r.labels_begin = static_cast<uint32_t>(batch->labels.size());
    batch->labels.push_back({"syslog_identifier", p.tag});
    r.labels_end = static_cast<uint32_t>(batch->labels.size());
    return true;
  }

 private:
  int year_;
};

}  // namespace

bool looksLikeSyslog(std::string_view line) {
  Parsed p;
  return parseLine(line, 1970, &p);
}

std::unique_ptr<LineParser> makeSyslogParser(const ParseOptions& options) {
  return std::make_unique<SyslogParser>(options);
}

}  // namespace faultline
