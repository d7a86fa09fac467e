#include "ingest/formats/json_record.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <utility>

#include <simdjson.h>

#include "core/time.h"
#include "ingest/formats/formats.h"
#include "ingest/formats/name_table.h"
#include "ingest/formats/parsers.h"

namespace faultline {

// Fluent Bit's tail input keeps the line's '\n' in `log`; kcat and rsyslog may send one too.
std::string_view trimNewline(std::string_view s) {
  if (!s.empty() && s.back() == '\n') {
    s.remove_suffix(1);
    if (!s.empty() && s.back() == '\r') {
      s.remove_suffix(1);
    }
  }
  return s;
}

namespace {

using simdjson::dom::element;

// Epoch integers by magnitude: below 1e11 seconds (until year 5138), below 1e14 ms, below 1e17
// µs, else ns.
bool epochIntToNanos(int64_t v, int64_t* ns) {
  if (v <= 0) {
    return false;
  }
  int64_t unit = 1;
  if (v < 100'000'000'000) {
    unit = kNanosPerSecond;
  } else if (v < 100'000'000'000'000) {
    unit = 1'000'000;
  } else if (v < 100'000'000'000'000'000) {
    unit = 1'000;
  }
  if (v > INT64_MAX / unit) {
    return false;  // past the year 2262: int64 nanoseconds cannot hold it
  }
  *ns = v * unit;
  return true;
}

bool epochFloatToNanos(double v, int64_t* ns) {
  if (!(v > 0) || v >= 9.2e18) {
    return false;
  }
  if (v < 1e11) {  // float seconds: keep the fraction
    if (v >= 9.2e9) {
      return false;  // past the year 2262
    }
    const double whole = std::floor(v);
    *ns = static_cast<int64_t>(whole) * kNanosPerSecond + std::llround((v - whole) * 1e9);
    return true;
  }
  return epochIntToNanos(static_cast<int64_t>(v), ns);
}

bool parseTime(element v, int64_t* ns) {
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0;
  std::string_view s;
  if (v.get(i) == simdjson::SUCCESS) {
    return epochIntToNanos(i, ns);
  }
  if (v.get(u) == simdjson::SUCCESS) {
    return false;  // beyond int64: past any epoch unit's range
  }
  if (v.get(d) == simdjson::SUCCESS) {
    return epochFloatToNanos(d, ns);
  }
  if (v.get(s) != simdjson::SUCCESS) {
    return false;
  }
  size_t consumed = 0;
  if (int64_t t = 0; parseRfc3339(s, &t, &consumed) && consumed == s.size()) {
    *ns = t;  // only a whole stamp: "12:00:00 +0200" must not pass for 12:00Z
    return true;
  }
  // journald exports __REALTIME_TIMESTAMP as a string of µs digits.
  const char* end = s.data() + s.size();
  if (auto r = std::from_chars(s.data(), end, i); r.ec == std::errc() && r.ptr == end) {
    return epochIntToNanos(i, ns);
  }
  if (auto r = std::from_chars(s.data(), end, d); r.ec == std::errc() && r.ptr == end) {
    return epochFloatToNanos(d, ns);
  }
  return false;
}

// Whether two occurrences of one path in a record agree: equal strings, or both null.
bool sameValue(element a, element b) {
  std::string_view x;
  std::string_view y;
  if (a.get(x) == simdjson::SUCCESS && b.get(y) == simdjson::SUCCESS) {
    return x == y;
  }
  return a.is_null() && b.is_null();
}

}  // namespace

// The field paths, found in one walk over each record. A path "a.b.c" matches
// the flat key "a.b.c" (OTel-style attribute names) and any nesting of it ({"a": {"b.c": ..}},
// {"a": {"b": {"c": ..}}}): the walk joins nested keys with '.' and descends only into objects
// that some path continues below. Where a record holds a line or time path twice, the first in
// document order is taken. A node or label path twice with different values makes the record's
// attribution ambiguous: with Fluent Bit's Merge_Log a pod's own JSON keys come before the
// shipper's `kubernetes` map, and a first-wins pick would let the pod name any node and pass for
// kernel output.
class JsonRecordDecoder::Fields {
 public:
  Fields(const JsonRecordFields& fields, const std::vector<std::string>& label_fields) {
    line = slots(fields.line, false);
    node = slots(fields.node, true);
    time = slots(fields.time, false);
    labels = slots(label_fields, true);
    job = slots(fields.job, true);
    for (size_t i = 0; i < fields.node.size(); ++i) {
      if (fields.node[i].starts_with("kubernetes.")) {
        shipper_node.push_back(node[i]);
      }
    }
    // The same pod label in Vector's map and in Fluent Bit's.
    constexpr std::string_view kVector = "kubernetes.pod_labels.";
    constexpr std::string_view kFluentBit = "kubernetes.labels.";
    for (size_t i = 0; i < fields.job.size(); ++i) {
      for (size_t j = 0; j < fields.job.size(); ++j) {
        if (fields.job[i].starts_with(kVector) && fields.job[j].starts_with(kFluentBit) &&
            fields.job[i].substr(kVector.size()) == fields.job[j].substr(kFluentBit.size())) {
          shipper_jobs.push_back({job[i], job[j]});
        }
      }
    }
  }

  simdjson::dom::parser parser;  // keeps its buffers from one record to the next
  // Slots of each list's paths, in the list's order.
  std::vector<uint32_t> line, node, time, labels, job;
  // The node paths of a shipper's Kubernetes metadata (Vector's kubernetes.pod_node_name, Fluent
  // Bit's kubernetes.host): each shipper writes one, so two naming different nodes are a pod's
  // JSON merged beside the shipper's map (Fluent Bit's Merge_Log without Merge_Log_Key).
  std::vector<uint32_t> shipper_node;
  // Slots of one pod label as Vector's and as Fluent Bit's map name it: a job label of two values
  // is a pod's JSON beside its shipper's map. (Different labels may differ: a JobSet's pod has its
  // child Job's job-name and the JobSet's jobset-name.)
  std::vector<std::vector<uint32_t>> shipper_jobs;

  // Finds every path in `doc`; then at(slot) is the value at that slot's path, or nullptr.
  // Returns false if a node or label path occurs twice with different values.
  bool walk(element doc) {
    std::fill(has_.begin(), has_.end(), false);
    path_.clear();
    ambiguous_ = false;
    walkObject(doc);
    return !ambiguous_;
  }
  const element* at(uint32_t slot) const { return has_[slot] ? &found_[slot] : nullptr; }

  // Whether the non-empty strings at `slots` are all one value.
  bool agree(const std::vector<uint32_t>& slots) const {
    std::string_view first;
    for (uint32_t slot : slots) {
      std::string_view s;
      if (const element* v = at(slot);
          v != nullptr && v->get(s) == simdjson::SUCCESS && !s.empty()) {
        if (!first.empty() && s != first) {
          return false;
        }
        first = s;
      }
    }
    return true;
  }

  // Whether any of `slots` holds a string, empty or not.
  bool hasString(const std::vector<uint32_t>& slots) const {
    return std::any_of(slots.begin(), slots.end(), [&](uint32_t slot) {
      const element* v = at(slot);
      return v != nullptr && v->is_string();
    });
  }

  // Whether one of `slots` is an array of byte values (how journalctl -o json writes a field that
  // is not printable UTF-8); the first such into *bytes.
  bool firstBytes(const std::vector<uint32_t>& slots, std::string* bytes) const {
    for (uint32_t slot : slots) {
      simdjson::dom::array a;
      if (const element* v = at(slot); v == nullptr || v->get(a) != simdjson::SUCCESS) {
        continue;
      }
      bytes->clear();
      bool ok = true;
      for (element b : a) {
        uint64_t c = 0;
        ok = ok && b.get(c) == simdjson::SUCCESS && c <= 0xff;
        bytes->push_back(static_cast<char>(c));
      }
      if (ok) {
        return true;
      }
    }
    return false;
  }

  // The first of `slots` whose value is a non-empty string; valid until the next parse.
  std::string_view firstString(const std::vector<uint32_t>& slots) const {
    for (uint32_t slot : slots) {
      std::string_view s;
      if (const element* v = at(slot);
          v != nullptr && v->get(s) == simdjson::SUCCESS && !s.empty()) {
        return s;
      }
    }
    return {};
  }

 private:
  struct Path {
    int slot = -1;            // index into found_, or -1: only a prefix of configured paths
    bool prefix = false;      // some configured path continues below it
    bool attributes = false;  // a node or label path: its occurrences must agree
  };

  std::vector<uint32_t> slots(const std::vector<std::string>& paths, bool attributes) {
    std::vector<uint32_t> out;
    for (const std::string& p : paths) {
      Path& path = paths_[p];
      path.attributes = path.attributes || attributes;
      if (path.slot < 0) {
        path.slot = static_cast<int>(found_.size());
        found_.emplace_back();
        has_.push_back(false);
      }
      out.push_back(static_cast<uint32_t>(path.slot));
      for (size_t dot = p.find('.'); dot != std::string::npos; dot = p.find('.', dot + 1)) {
        paths_[std::string_view(p).substr(0, dot)].prefix = true;
      }
    }
    return out;
  }

  void walkObject(element value) {
    simdjson::dom::object o;
    if (value.get(o) != simdjson::SUCCESS) {
      return;
    }
    for (const auto field : o) {
      const size_t length = path_.size();
      if (length > 0) {
        path_ += '.';
      }
      path_ += field.key;
      if (const Path* p = paths_.find(path_)) {
        if (p->slot >= 0) {
          const auto slot = static_cast<size_t>(p->slot);
          if (!has_[slot]) {
            found_[slot] = field.value;
            has_[slot] = true;
          } else if (p->attributes && !sameValue(found_[slot], field.value)) {
            ambiguous_ = true;
          }
        }
        if (p->prefix) {
          walkObject(field.value);
        }
      }
      path_.resize(length);
    }
  }

  NameTable<Path> paths_;  // the configured paths and their prefixes
  std::vector<element> found_;
  std::vector<bool> has_;
  std::string path_;  // the walk's current path
  bool ambiguous_ = false;
};

JsonRecordDecoder::~JsonRecordDecoder() = default;

JsonRecordDecoder::JsonRecordDecoder(const JsonRecordFields& fields, StreamKind stream)
    : stream_(stream) {
  rules_.node_labels.clear();  // the node is taken from fields.node, not from labels
  rules_.pod_labels = fields.pod;
  // rsyslog JSON templates (%jsonmesg%): `logger -t kernel` gives programname kernel too, with
  // its facility (user by default), which the kernel's own records (imklog) have as 0.
  rules_.kernel_labels.emplace_back("programname", "kernel");
  rules_.facility_labels.emplace_back("syslogfacility");
  label_fields_ = fields.pod;
  auto add = [this](const std::string& name) {
    if (std::find(label_fields_.begin(), label_fields_.end(), name) == label_fields_.end()) {
      label_fields_.push_back(name);
    }
  };
  for (const auto& [name, value] : rules_.kernel_labels) {
    add(name);
  }
  std::for_each(rules_.facility_labels.begin(), rules_.facility_labels.end(), add);
  std::for_each(rules_.transport_labels.begin(), rules_.transport_labels.end(), add);
  fields_ = std::make_unique<Fields>(fields, label_fields_);
}

std::string_view JsonRecordDecoder::cause(Result result) {
  switch (result) {
    case Result::kOk:
      break;
    case Result::kNotJson:
      return "is not JSON";
    case Result::kNotObject:
      return "is not a JSON object";
    case Result::kAmbiguous:
      return "names its node, pod, job or kernel marker twice with different values (a pod's own "
             "keys beside its shipper's)";
    case Result::kNoLine:
      return "has no line field (fields.line) that is a string or an array of bytes";
    case Result::kNoNode:
      return "names no node";
    case Result::kNoTime:
      return "has no time field (fields.time) that parses";
  }
  return "";
}

std::optional<std::string_view> JsonRecordDecoder::unquote(std::string_view text) {
  std::string_view value;
  if (fields_->parser.parse(text.data(), text.size()).get(value) != simdjson::SUCCESS) {
    return std::nullopt;
  }
  return value;
}

JsonRecordDecoder::Result JsonRecordDecoder::decode(
    std::string_view text, std::optional<int64_t> fallback_ns,
    const std::function<std::string_view()>& fallback_node, RecordBatch* batch,
    std::string_view* detail) {
  Fields& f = *fields_;
  element doc;
  auto err = f.parser.parse(text.data(), text.size()).get(doc);
  if (std::string repaired; (err == simdjson::UTF8_ERROR || err == simdjson::STRING_ERROR) &&
                            replaceInvalidUnicode(text, &repaired)) {
    err = f.parser.parse(repaired).get(doc);  // the parser's strings outlive `repaired`
  }
  if (err != simdjson::SUCCESS) {
    *detail = simdjson::error_message(err);
    return Result::kNotJson;
  }
  if (!doc.is_object()) {
    return Result::kNotObject;
  }
  // Refused, as ambiguous: a path given twice with different values, or the shipper's node or
  // job named two ways (a pod's merged JSON claiming another node, or a job its pod does not run).
  if (!f.walk(doc) || !f.agree(f.shipper_node) ||
      !std::all_of(f.shipper_jobs.begin(), f.shipper_jobs.end(),
                   [&](const std::vector<uint32_t>& slots) { return f.agree(slots); })) {
    return Result::kAmbiguous;
  }
  // An empty line (a blank printk line, a journal entry without text) is a record, as the other
  // formats take it: it moves its node's own time, by which the node's timers fall due. Only a
  // record without a string (or byte array) line field is refused.
  std::string_view line = trimNewline(f.firstString(f.line));
  std::string bytes;
  if (line.empty() && !f.hasString(f.line)) {
    if (!f.firstBytes(f.line, &bytes)) {
      return Result::kNoLine;
    }
    line = trimNewline(bytes);  // journalctl's array of a line's bytes
  }
  std::string_view node = f.firstString(f.node);
  if (node.empty()) {
    node = fallback_node();
  }
  if (node.empty()) {
    return Result::kNoNode;
  }
  LogRecord rec;
  bool timed = false;
  for (uint32_t slot : f.time) {
    if (const element* v = f.at(slot); v != nullptr && parseTime(*v, &rec.time_ns)) {
      timed = true;
      break;
    }
  }
  if (!timed) {
    if (!fallback_ns) {
      return Result::kNoTime;
    }
    rec.time_ns = *fallback_ns;
  }
  rec.line = batch->copy(line);
  rec.node = batch->copy(node);
  // Label views must point into the batch, so names are copied as well as values.
  rec.labels_begin = static_cast<uint32_t>(batch->labels.size());
  for (size_t i = 0; i < label_fields_.size(); ++i) {
    std::string_view value;
    if (const element* v = f.at(f.labels[i]); v != nullptr && v->get(value) == simdjson::SUCCESS) {
      batch->labels.push_back({batch->copy(label_fields_[i]), batch->copy(value)});
    }
  }
  if (const std::string_view job = f.firstString(f.job); !job.empty()) {
    batch->labels.push_back({"k8s.job.name", batch->copy(job)});
  }
  rec.labels_end = static_cast<uint32_t>(batch->labels.size());
  classify(rules_, *batch, &rec);
  if (rec.stream == StreamKind::kOther && !fromProcess(rules_, *batch, rec)) {
    rec.stream = stream_;  // a process's record stays other on a kernel topic
  }
  batch->records.push_back(rec);
  return Result::kOk;
}

namespace {

// Replay's json format: a line is one record; one without a time field is malformed (replay has
// no message time to fall back on), one without a node field is ParseOptions::node's, and one
// that no field makes a pod's, the kernel's or a process's is of ParseOptions::json_stream.
class JsonRecordParser : public LineParser {
 public:
  explicit JsonRecordParser(const ParseOptions& o)
      : node_(o.node), decoder_(o.json_fields, o.json_stream) {}

  bool parse(std::string_view line, RecordBatch* batch) override {
    std::string_view detail;
    return decoder_.decode(
               line, std::nullopt, [this] { return std::string_view(node_); }, batch, &detail) ==
           JsonRecordDecoder::Result::kOk;
  }

 private:
  std::string node_;
  JsonRecordDecoder decoder_;
};

}  // namespace

std::unique_ptr<LineParser> makeJsonRecordParser(const ParseOptions& options) {
  return std::make_unique<JsonRecordParser>(options);
}

}  // namespace faultline
