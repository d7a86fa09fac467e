// A container's output as `kubectl logs --timestamps` prints it (`2026-11-28T10:00:00.123456789Z
// msg`) and as the kubelet's container runtime writes it under /var/log/pods (the CRI log format,
// kubernetes/cri-api: `2026-11-28T10:00:00.123456789Z stdout F msg`, a line cut at the runtime's
// buffer size written as `P` parts and ended by an `F` one). Both stamp with Go's
// time.RFC3339Nano, whose fraction has up to 9 digits, trailing zeros dropped.
//
// Every record is a pod stream: the text is the container's own, so a line that reads as a
// kernel's (`gpu-3 kernel: NVRM: Xid ...`) is the pod's text. Before this format such a file was
// read as syslog and that line as gpu-3's kernel. The node is ParseOptions::node alone (--node):
// neither kubectl's output nor the runtime's file names it.
#include <algorithm>
#include <array>
#include <string>

#include "core/time.h"
#include "ingest/formats/parsers.h"

namespace faultline {
namespace {

// A line joined from `P` parts keeps its first 256 KiB, as push keeps of a line (PushConfig's
// max_line_bytes): a progress bar that writes `\r` and never `\n` for hours is one line.
constexpr size_t kMaxJoinedBytes = 256 << 10;

struct Parsed {
  int64_t ns = 0;
  std::string_view msg;
  int stream = -1;       // CRI: 0 stdout, 1 stderr; -1 none (kubectl logs)
  bool partial = false;  // a CRI `P` line: its text goes on in the stream's next line
};

// "STAMP msg" or "STAMP stdout|stderr F|P msg".
bool parseLine(std::string_view line, Parsed* p) {
  size_t used = 0;
  if (!parseRfc3339(line, &p->ns, &used) || used >= line.size() || line[used] != ' ') {
    return false;
  }
  std::string_view rest = line.substr(used + 1);
  for (int s = 0; s < 2; ++s) {
    const std::string_view stream = s == 0 ? "stdout " : "stderr ";
    if (rest.starts_with(stream) && rest.size() >= stream.size() + 1 &&
        (rest[stream.size()] == 'F' || rest[stream.size()] == 'P') &&
        (rest.size() == stream.size() + 1 || rest[stream.size() + 1] == ' ')) {
      p->stream = s;
      p->partial = rest[stream.size()] == 'P';
      rest.remove_prefix(std::min(stream.size() + 2, rest.size()));
      break;
    }
  }
  p->msg = rest;
  return true;
}

class ContainerParser : public LineParser {
 public:
  explicit ContainerParser(const ParseOptions& o) : node_(o.node) {}

  bool parse(std::string_view line, RecordBatch* batch) override {
    Parsed p;
    if (!parseLine(line, &p)) {
      return false;
    }
    // The runtime cuts each stream's lines apart: stderr's lines come between stdout's parts.
    if (p.stream >= 0 && (p.partial || !cut_[p.stream].text.empty())) {
      Cut& cut = cut_[p.stream];
      if (cut.text.empty()) {
        cut.first_ns = p.ns;
      }
      cut.text.append(
          p.msg.substr(0, kMaxJoinedBytes - std::min(cut.text.size(), kMaxJoinedBytes)));
      if (p.partial) {
        return true;
      }
      p.ns = cut.first_ns;
      p.msg = batch->copy(cut.text);
      cut.text.clear();
    }
    emit(p, batch);
    return true;
  }

  // A file that ends inside a cut line: its parts so far, the earlier stream's first.
  void finish(RecordBatch* batch) override {
    const bool stderr_first = cut_[1].first_ns < cut_[0].first_ns;
    for (const int s : {stderr_first ? 1 : 0, stderr_first ? 0 : 1}) {
      Cut& cut = cut_[static_cast<size_t>(s)];
      if (!cut.text.empty()) {
        emit({cut.first_ns, batch->copy(cut.text)}, batch);
        cut.text.clear();
      }
    }
  }

 private:
  void emit(const Parsed& p, RecordBatch* batch) {
    const std::string_view node = batch->copy(node_);
    LogRecord& r = batch->records.emplace_back();
    r.time_ns = p.ns;
    r.node = node;
    r.line = p.msg;
    r.stream = StreamKind::kPod;
    r.labels_begin = r.labels_end = static_cast<uint32_t>(batch->labels.size());
  }

  struct Cut {
    int64_t first_ns = 0;  // the first part's time: the line's
    std::string text;      // the parts of the stream's cut line read so far
  };
  std::string node_;
  std::array<Cut, 2> cut_;  // stdout's, stderr's
};

}  // namespace

bool finerThanMicroseconds(std::string_view stamp) {
  const size_t dot = stamp.find_first_of(".,");
  size_t digits = 0;
  while (dot != std::string_view::npos && dot + 1 + digits < stamp.size() &&
         isDigit(stamp[dot + 1 + digits])) {
    ++digits;
  }
  return digits > 6;
}

bool isContainerStamp(std::string_view line) {
  int64_t ns = 0;
  size_t used = 0;
  return parseRfc3339(line, &ns, &used) && used < line.size() && line[used] == ' ' &&
         finerThanMicroseconds(line.substr(0, used));
}

std::unique_ptr<LineParser> makeContainerParser(const ParseOptions& options) {
  return std::make_unique<ContainerParser>(options);
}

}  // namespace faultline
