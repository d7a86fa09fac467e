// Turns one Kafka message into LogRecords. Four encodings, one per topic:
//
//  raw   The value is the log line. The OTel collector's kafka exporter `raw` encoding
//        json.Marshal-s every non-bytes body, so a string body arrives as a quoted JSON string
//        (contrib exporter/kafkaexporter internal/marshaler/raw_marshaler.go, issue #32237); a
//        value that starts with '"' and is a valid JSON string is unquoted. Resource attributes
//        are dropped by that encoding, so the node comes from a header or the message key.
//  json  One JSON object per message, as written by Vector's kafka sink (`encoding.codec: json`),
//        Fluent Bit's kafka output (`format json`) and rsyslog omkafka with a JSON template,
//        decoded by JsonRecordDecoder (ingest/formats/json_record.h), as replay's `json` format.
//  otlp_proto  The OTel collector kafka exporter's default: one message per export batch, the
//        value is LogsData bytes (wire-identical to ExportLogsServiceRequest; contrib
//        exporter/kafkaexporter internal/marshaler/pdata_marshaler.go), decoded by
//        decodeOtlpProto() (ingest/otlp/otlp.h).
//  otlp_json   The same message in the OTLP JSON mapping (plog.JSONMarshaler), decoded by
//        decodeOtlpJson() (ingest/formats/formats.h).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/record.h"
#include "ingest/formats/json_record.h"
#include "ingest/formats/labels.h"

namespace faultline {

enum class KafkaEncoding : uint8_t { kRaw, kJson, kOtlpProto, kOtlpJson };

struct KafkaTopicConfig {
  std::string name;
  KafkaEncoding encoding = KafkaEncoding::kRaw;
  // The stream kind of records that carry no pod or kernel marker (for raw: of every record).
  StreamKind stream = StreamKind::kOther;
  // Header whose value names the node; empty disables the header lookup.
  std::string node_header = "node";
  JsonRecordFields fields;
};

// The parts of a Kafka message the decoders read. Plain views so that tests need no broker.
struct KafkaMessage {
  std::string_view value;
  std::string_view key;
  // The value of the topic's node_header, empty if absent; null if the topic reads no header.
  // Called only for a record whose node the message itself does not name (raw: every record):
  // librdkafka parses a message's headers on first access, at 1,650–1,770 instructions for one
  // header (callgrind), six times the rest of a raw line's decoding. The view lives as long as
  // `value`.
  std::function<std::string_view()> node_header;
  int64_t timestamp_ms = -1;  // message timestamp in ms since the epoch, -1 if none
  // Keeps the views above alive. otlp_proto records point into them without a copy, and the
  // batch then holds `owner`; null if they outlive the batch anyway.
  std::shared_ptr<const void> owner;
};

// Decodes the messages of one topic. Not thread-safe; one per topic per consumer.
class KafkaDecoder {
 public:
  explicit KafkaDecoder(KafkaTopicConfig config);
  KafkaDecoder(const KafkaDecoder&) = delete;
  KafkaDecoder& operator=(const KafkaDecoder&) = delete;
  KafkaDecoder(KafkaDecoder&&) noexcept;
  KafkaDecoder& operator=(KafkaDecoder&&) noexcept;
  ~KafkaDecoder();

  // Appends the message's records (none for a malformed one) to `batch`: one for raw and json,
  // one per LogRecord for the otlp encodings. Time: for json the first parseable time field,
  // for otlp the record's time; else (and always for raw) the message timestamp if it fits int64
  // ns (not a producer's µs), else `receive_ns` (ns since the epoch). Node: for json the first
  // node field, for otlp the first of StreamRules::node_labels among the attributes; else the
  // node header, else the key if it looks like a node name (OTel's resource-hash keys are
  // binary). Stream: pod if a pod field or attribute is present; kernel if journald's _TRANSPORT
  // or SYSLOG_IDENTIFIER (json also: rsyslog's programname) is "kernel" and no SYSLOG_FACILITY
  // names a facility other than 0 (StreamRules::facility_labels) nor _TRANSPORT another transport
  // (transport_labels); other if one does (a process's record); else the topic's `stream`. Returns
  // false if the message is malformed (empty value; json: not an object, no line field that is a
  // string or an array of byte values (journalctl -o json's rendering of a line that is not
  // printable UTF-8), or a node or label path twice with different values (JsonRecordFields); otlp:
  // does not decode, or holds no LogRecord with a line, as another encoding's message would), or if
  // a record names no node, or (otlp) a LogRecord has no line: such a record is skipped, the
  // message's other records kept. The topic and the cause (with the parser's words) are logged
  // the first time of each cause, so that a count of malformed messages can be explained. The
  // caller counts the message.
  bool decode(const KafkaMessage& msg, int64_t receive_ns, RecordBatch* batch) const;
  // Whether records point into the message (otlp_proto), so that decode() needs its `owner`;
  // the other encodings copy what they keep. A raw message is one short line: copying it lets
  // the source free the message at once, where holding ten thousand of them for a batch's life
  // (each with librdkafka's objects and a shared owner) cost more in malloc than the copy.
  bool pointsIntoMessages() const;

 private:
  bool decodeRaw(const KafkaMessage& msg, int64_t receive_ns, RecordBatch* batch) const;
  bool decodeJson(const KafkaMessage& msg, int64_t receive_ns, RecordBatch* batch) const;
  bool decodeOtlp(const KafkaMessage& msg, int64_t receive_ns, RecordBatch* batch) const;
  // Returns false for a message with a record that names no node, logging the topic once.
  bool refuseNodeless() const;
  // Returns false for a malformed message, logging the topic, `cause` (what the message is, e.g.
  // "is not JSON") and `detail` (the parser's words, or empty) the first time of each cause.
  bool refuse(std::string_view cause, std::string_view detail) const;

  KafkaTopicConfig config_;
  StreamRules otlp_rules_;              // otlp: the defaults of ingest/formats/labels.h
  LabelFilter otlp_keep_{otlp_rules_};  // otlp: the attributes kept as labels
  // json, and quoted raw values (JSON strings); held by pointer, as decode() is const and the
  // decoder's parser keeps its buffers from one message to the next.
  std::unique_ptr<JsonRecordDecoder> json_;
  mutable bool warned_nodeless_ = false;            // refuseNodeless() logs a topic once
  mutable std::vector<std::string> warned_causes_;  // refuse() logs each cause once
};

}  // namespace faultline
