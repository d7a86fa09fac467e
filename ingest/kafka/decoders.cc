#include "ingest/kafka/decoders.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "ingest/formats/formats.h"
#include "ingest/otlp/otlp.h"

namespace faultline {
namespace {

// Node names are DNS subdomains; anything with control bytes or spaces (OTel's 16-byte resource
// hash key) is not one, nor is a trace id in hex (32 digits: the OTel kafka exporter's key with
// partition_logs_by_trace_id).
bool plausibleNode(std::string_view s) {
  const auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  return !s.empty() && s.size() <= 253 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 0x7f; }) &&
         !(s.size() == 32 && std::all_of(s.begin(), s.end(), hex));
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

}  // namespace

KafkaDecoder::KafkaDecoder(KafkaDecoder&&) noexcept = default;
KafkaDecoder& KafkaDecoder::operator=(KafkaDecoder&&) noexcept = default;
KafkaDecoder::~KafkaDecoder() = default;

KafkaDecoder::KafkaDecoder(KafkaTopicConfig config)
    : config_(std::move(config)),
      json_(std::make_unique<JsonRecordDecoder>(config_.fields, config_.stream)) {}

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
    if (rec.stream == StreamKind::kOther && !fromProcess(otlp_rules_, *batch, rec)) {
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
    } else if (const std::optional<std::string_view> unquoted = json_->unquote(line)) {
      line = trimNewline(*unquoted);  // in the parser's buffer until its next parse: copied below
    }  // else: a line that merely starts with a quote; keep it verbatim
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
  std::string_view detail;
  const JsonRecordDecoder::Result result = json_->decode(
      msg.value, messageTime(msg, receive_ns), [&] { return headerOrKeyNode(msg); }, batch,
      &detail);
  if (result == JsonRecordDecoder::Result::kNoNode) {
    return refuseNodeless();
  }
  return result == JsonRecordDecoder::Result::kOk ||
         refuse(JsonRecordDecoder::cause(result), detail);
}

}  // namespace faultline
