#include "ingest/kafka/decoders.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <simdjson.h>
#include <spdlog/spdlog.h>

#include "core/time.h"
#include "ingest/formats/formats.h"
#include "ingest/formats/name_table.h"
#include "ingest/otlp/otlp.h"

namespace faultline {
namespace {

using simdjson::dom::element;

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

// Node names are DNS subdomains; anything with control bytes or spaces (OTel's 16-byte resource
// hash key) is not one.
bool plausibleNode(std::string_view s) {
  return !s.empty() && s.size() <= 253 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

std::string_view headerOrKeyNode(const KafkaMessage& msg) {
  if (msg.node_header) {
    if (const std::string_view node = msg.node_header(); !node.empty()) {
      return node;
    }
  }
  return plausibleNode(msg.key) ? msg.key : std::string_view();
}

int64_t messageTime(const KafkaMessage& msg, int64_t receive_ns) {
  // A producer that writes µs or ns where Kafka means ms would overflow int64 ns.
  return msg.timestamp_ms >= 0 && msg.timestamp_ms <= INT64_MAX / 1'000'000
             ? msg.timestamp_ms * 1'000'000
             : receive_ns;
}

// Whether two occurrences of one path in a message agree: equal strings, or both null.
bool sameValue(element a, element b) {
  std::string_view x;
  std::string_view y;
  if (a.get(x) == simdjson::SUCCESS && b.get(y) == simdjson::SUCCESS) {
    return x == y;
  }
  return a.is_null() && b.is_null();
}

}  // namespace

// The json encoding's field paths, found in one walk over each message. A path "a.b.c" matches
// the flat key "a.b.c" (OTel-style attribute names) and any nesting of it ({"a": {"b.c": ..}},
// {"a": {"b": {"c": ..}}}): the walk joins nested keys with '.' and descends only into objects
// that some path continues below. Where a message holds a line or time path twice, the first in
// document order is taken. A node or label path twice with different values makes the message's
// attribution ambiguous: with Fluent Bit's Merge_Log a pod's own JSON keys come before the
// shipper's `kubernetes` map, and a first-wins pick would let the pod name any node and pass for
// kernel output.
class KafkaDecoder::JsonFields {
 public:
  JsonFields(const KafkaJsonFields& fields, const std::vector<std::string>& label_fields) {
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

  simdjson::dom::parser parser;  // keeps its buffers from one message to the next
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

KafkaDecoder::KafkaDecoder(KafkaDecoder&&) noexcept = default;
KafkaDecoder& KafkaDecoder::operator=(KafkaDecoder&&) noexcept = default;
KafkaDecoder::~KafkaDecoder() = default;

KafkaDecoder::KafkaDecoder(KafkaTopicConfig config) : config_(std::move(config)) {
  rules_.node_labels.clear();  // the node is taken from fields.node, not from labels
  rules_.pod_labels = config_.fields.pod;
  rules_.kernel_labels.emplace_back("programname", "kernel");  // rsyslog JSON templates
  label_fields_ = config_.fields.pod;
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
  json_ = std::make_unique<JsonFields>(config_.fields, label_fields_);
}

bool KafkaDecoder::decode(const KafkaMessage& msg, int64_t receive_ns, RecordBatch* batch) const {
  if (msg.value.empty()) {
    return refuse("is empty", "");
  }
  switch (config_.encoding) {
    case KafkaEncoding::kRaw:
      return decodeRaw(msg, receive_ns, batch);
    case KafkaEncoding::kJson:
      return decodeJson(msg, receive_ns, batch);
    case KafkaEncoding::kOtlpProto:
    case KafkaEncoding::kOtlpJson:
      break;
  }
  return decodeOtlp(msg, receive_ns, batch);
}

bool KafkaDecoder::decodeOtlp(const KafkaMessage& msg, int64_t receive_ns,
                              RecordBatch* batch) const {
  const size_t first = batch->records.size();
  uint64_t rejected = 0;
  std::string error;
  const bool ok =
      config_.encoding == KafkaEncoding::kOtlpProto
          ? decodeOtlpProto(msg.value, otlp_rules_, otlp_keep_, batch, &rejected, &error)
          : decodeOtlpJson(msg.value, msg.value.size(), otlp_rules_, otlp_keep_, batch, &rejected,
                           &error);
  if (!ok) {
    batch->records.resize(first);
    return refuse("does not decode", error);
  }
  if (batch->records.size() == first) {
    // No record with a line: no export of logs, but another encoding's message on the topic (a
    // JSON record without resourceLogs, a trace export), which must not pass unseen.
    return refuse("holds no log record with a line", "");
  }
  std::optional<std::string_view> fallback_node;  // read once, for the first record without one
  size_t kept = first;
  for (size_t i = first; i < batch->records.size(); ++i) {
    LogRecord& rec = batch->records[i];
    if (rec.node.empty()) {
      if (!fallback_node) {
        fallback_node = batch->copy(headerOrKeyNode(msg));  // the message may not outlive us
      }
      if (fallback_node->empty()) {
        continue;
      }
      rec.node = *fallback_node;
    }
    if (rec.time_ns == 0) {
      rec.time_ns = messageTime(msg, receive_ns);
    }
    if (rec.stream == StreamKind::kOther && !fromProcess(rules_, *batch, rec)) {
      rec.stream = config_.stream;  // a process's record stays other on a kernel topic
    }
    batch->records[kept++] = rec;
  }
  const bool nodeless = kept < batch->records.size();
  batch->records.resize(kept);
  if (kept > first && msg.owner && config_.encoding == KafkaEncoding::kOtlpProto) {
    batch->hold(msg.owner, msg.value.size() + msg.key.size());  // the records point into it
  }
  if (nodeless) {
    return refuseNodeless();
  }
  // Its other records are kept, as a nodeless record's are; the message is counted.
  return rejected == 0 || refuse("holds a log record without a line (a body)", "");
}

bool KafkaDecoder::refuse(std::string_view cause, std::string_view detail) const {
  if (std::find(warned_causes_.begin(), warned_causes_.end(), cause) == warned_causes_.end()) {
    warned_causes_.emplace_back(cause);
    spdlog::warn(
        "kafka: topic {}: a message {}{}{}; such messages are skipped and counted as malformed "
        "(logged once per cause)",
        config_.name, cause, detail.empty() ? "" : ": ", detail);
  }
  return false;
}

bool KafkaDecoder::refuseNodeless() const {
  if (!warned_nodeless_) {
    warned_nodeless_ = true;
    spdlog::warn(
        "kafka: topic {}: a message names no node (in its fields or attributes, node header or "
        "key); such records are skipped and their messages counted as malformed",
        config_.name);
  }
  return false;
}

bool KafkaDecoder::pointsIntoMessages() const {
  return config_.encoding == KafkaEncoding::kOtlpProto;
}

bool KafkaDecoder::decodeRaw(const KafkaMessage& msg, int64_t receive_ns,
                             RecordBatch* batch) const {
  std::string_view line = trimNewline(msg.value);
  if (line.size() >= 2 && line.front() == '"') {
    const std::string_view inner = line.substr(1, line.size() - 2);
    const bool plain = line.back() == '"' && std::none_of(inner.begin(), inner.end(), [](char c) {
                         return c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20;
                       });
    if (plain) {
      line = inner;  // nothing to unescape
    } else {
      std::string_view unquoted;
      if (json_->parser.parse(line.data(), line.size()).get(unquoted) == simdjson::SUCCESS) {
        line = trimNewline(unquoted);  // in the parser's buffer until its next parse: copied below
      }  // else: a line that merely starts with a quote; keep it verbatim
    }
  }
  if (line.empty()) {
    return refuse("is an empty line", "");
  }
  const std::string_view node = headerOrKeyNode(msg);
  if (node.empty()) {
    return refuseNodeless();
  }
  LogRecord& rec = batch->records.emplace_back();
  rec.time_ns = messageTime(msg, receive_ns);
  rec.node = batch->copy(node);
  rec.line = batch->copy(line);
  rec.labels_begin = rec.labels_end = static_cast<uint32_t>(batch->labels.size());
  rec.stream = config_.stream;
  return true;
}

bool KafkaDecoder::decodeJson(const KafkaMessage& msg, int64_t receive_ns,
                              RecordBatch* batch) const {
  element doc;
  auto err = json_->parser.parse(msg.value.data(), msg.value.size()).get(doc);
  if (std::string repaired; (err == simdjson::UTF8_ERROR || err == simdjson::STRING_ERROR) &&
                            replaceInvalidUnicode(msg.value, &repaired)) {
    err = json_->parser.parse(repaired).get(doc);  // the parser's strings outlive `repaired`
  }
  if (err != simdjson::SUCCESS) {
    return refuse("is not JSON", simdjson::error_message(err));
  }
  if (!doc.is_object()) {
    return refuse("is not a JSON object", "");
  }
  // Refused, as ambiguous: a path given twice with different values, or the shipper's node or
  // job named two ways (a pod's merged JSON claiming another node, or a job its pod does not run).
  if (!json_->walk(doc) || !json_->agree(json_->shipper_node) ||
      !std::all_of(json_->shipper_jobs.begin(), json_->shipper_jobs.end(),
                   [&](const std::vector<uint32_t>& slots) { return json_->agree(slots); })) {
    return refuse(
        "names its node, pod, job or kernel marker twice with different values (a pod's own keys "
        "beside its shipper's)",
        "");
  }
  // An empty line (a blank printk line, a journal entry without text) is a record, as replay and
  // the push decoders take it: it moves its node's own time, by which the node's timers fall due.
  // Only a message without a string (or byte array) line field is malformed.
  std::string_view line = trimNewline(json_->firstString(json_->line));
  std::string bytes;
  if (line.empty() && !json_->hasString(json_->line)) {
    if (!json_->firstBytes(json_->line, &bytes)) {
      return refuse("has no line field (fields.line) that is a string or an array of bytes", "");
    }
    line = trimNewline(bytes);  // journalctl's array of a line's bytes
  }
  std::string_view node = json_->firstString(json_->node);
  if (node.empty()) {
    node = headerOrKeyNode(msg);
  }
  if (node.empty()) {
    return refuseNodeless();
  }
  LogRecord rec;
  rec.line = batch->copy(line);
  rec.time_ns = messageTime(msg, receive_ns);
  for (uint32_t slot : json_->time) {
    if (const element* v = json_->at(slot); v != nullptr && parseTime(*v, &rec.time_ns)) {
      break;
    }
  }
  rec.node = batch->copy(node);
  // Label views must point into the batch, so names are copied as well as values.
  rec.labels_begin = static_cast<uint32_t>(batch->labels.size());
  for (size_t i = 0; i < label_fields_.size(); ++i) {
    std::string_view value;
    if (const element* v = json_->at(json_->labels[i]);
        v != nullptr && v->get(value) == simdjson::SUCCESS) {
      batch->labels.push_back({batch->copy(label_fields_[i]), batch->copy(value)});
    }
  }
  if (const std::string_view job = json_->firstString(json_->job); !job.empty()) {
    batch->labels.push_back({"k8s.job.name", batch->copy(job)});
  }
  rec.labels_end = static_cast<uint32_t>(batch->labels.size());
  classify(rules_, *batch, &rec);
  if (rec.stream == StreamKind::kOther && !fromProcess(rules_, *batch, rec)) {
    rec.stream = config_.stream;  // a process's record stays other on a kernel topic
  }
  batch->records.push_back(rec);
  return true;
}

}  // namespace faultline
