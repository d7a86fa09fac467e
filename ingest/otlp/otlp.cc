#include "ingest/otlp/otlp.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "ingest/formats/protobuf_wire.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb.h"

namespace faultline {
namespace {

namespace collector = opentelemetry::proto::collector::logs::v1;

constexpr auto kVarint = WireReader::kVarint;
constexpr auto kFixed64 = WireReader::kFixed64;
constexpr auto kBytes = WireReader::kBytes;

// One AnyValue, its case as in the generated class.
struct AnyValue {
  enum Kind : uint8_t {
    kNotSet,
    kStringValue,
    kBoolValue,
    kIntValue,
    kDoubleValue,
    kArrayValue,
    kKvlistValue,
    kBytesValue
  } kind = kNotSet;
  WireBytes bytes;      // string, bytes, or the ArrayValue / KeyValueList message
  uint64_t number = 0;  // bool, int
};

// AnyValue (common.proto): string_value 1, bool_value 2, int_value 3, double_value 4,
// array_value 5, kvlist_value 6, bytes_value 7; a oneof, so the last field read wins.
bool readAnyValue(WireBytes bytes, AnyValue* v) {
  WireReader r(bytes);
  while (r.next()) {
    const uint32_t n = r.number();
    if (n >= 1 && n <= 7) {
      const bool delimited = n == 1 || n == 5 || n == 6 || n == 7;
      if (!r.is(delimited ? kBytes : n == 4 ? kFixed64 : kVarint)) {
        continue;  // a known number with another wire type is an unknown field
      }
      v->kind = static_cast<AnyValue::Kind>(n);  // the cases are the field numbers
      v->bytes = delimited ? r.messageValue() : WireBytes();
      v->number = delimited ? 0 : r.numberValue();
    }
  }
  return r.ok();
}

// A scalar AnyValue as text, into *text: string and bytes point into the message, others are
// copied into the batch. An array of integers is a byte string (journald's non-UTF-8 MESSAGE; the
// OTel journald receiver's are doubleValues, Go having read journalctl's numbers as float64).
// *text is left as it is for other values. False on malformed wire.
bool scalarOf(const AnyValue& v, RecordBatch* batch, std::optional<std::string_view>* text) {
  switch (v.kind) {
    case AnyValue::kStringValue:
    case AnyValue::kBytesValue:
      *text = v.bytes.view();
      return true;
    case AnyValue::kIntValue:
      *text = batch->copy(std::to_string(static_cast<int64_t>(v.number)));
      return true;
    case AnyValue::kBoolValue:
      *text = v.number != 0 ? "true" : "false";
      return true;
    case AnyValue::kArrayValue: {  // ArrayValue: values 1
      std::string bytes;
      bool ints = true;
      const bool ok = forEachField(v.bytes, 1, [&](WireBytes value) {
        AnyValue e;
        if (!readAnyValue(value, &e)) {
          return false;
        }
        if (e.kind == AnyValue::kDoubleValue) {
          double d = 0;
          std::memcpy(&d, &e.number, sizeof d);
          ints = ints && d >= 0 && d <= 255 && d == std::floor(d);
          bytes.push_back(ints ? static_cast<char>(static_cast<int>(d)) : '\0');
          return true;
        }
        ints = ints && e.kind == AnyValue::kIntValue;
        bytes.push_back(static_cast<char>(e.number));
        return true;
      });
      if (ok && ints) {
        *text = batch->copy(bytes);
      }
      return ok;
    }
    default:
      return true;
  }
}

// KeyValue (common.proto): key 1, value 2 (an AnyValue, left unread).
bool readKeyValue(WireBytes kv, std::string_view* key, WireBytes* value) {
  WireReader r(kv);
  while (r.next()) {
    if (r.number() == 1 && r.is(kBytes)) {
      *key = r.bytesValue();
    } else if (r.number() == 2 && r.is(kBytes)) {
      *value = r.messageValue();
    }
  }
  return r.ok();
}

// A KeyValue's value (an AnyValue) as text: *text is set only if it is a scalar (scalarOf).
// False on malformed wire.
bool scalarValue(WireBytes value, RecordBatch* batch, std::optional<std::string_view>* text) {
  AnyValue v;
  return readAnyValue(value, &v) && scalarOf(v, batch, text);
}

// Appends key = value (an AnyValue) as a label if `keep` keeps the key and the value is a scalar,
// or key = kNotAString for any other value of a pod label (LabelFilter::marksPod). The value of a
// key not kept is not read, so not checked either. False on malformed wire.
bool addLabel(std::string_view key, WireBytes value, const LabelFilter& keep, RecordBatch* batch) {
  if (!keep.keeps(key)) {
    return true;
  }
  std::optional<std::string_view> text;
  if (!scalarValue(value, batch, &text)) {
    return false;
  }
  if (text) {
    batch->labels.push_back({key, *text});
  } else if (keep.marksPod(key)) {
    batch->labels.push_back({key, kNotAString});
  }
  return true;
}

// A KeyValue as a label (addLabel).
bool addAttribute(WireBytes kv, const LabelFilter& keep, RecordBatch* batch) {
  std::string_view key;
  WireBytes value;
  return readKeyValue(kv, &key, &value) && addLabel(key, value, keep, batch);
}

// LogRecord (logs.proto): time_unix_nano 1 (fixed64), body 5, attributes 6,
// observed_time_unix_nano 11 (fixed64). Appends the record after the resource's labels; false on
// malformed wire. *added: whether it had a usable line.
bool addRecord(WireBytes bytes, const std::vector<Label>& resource, const StreamRules& rules,
               const LabelFilter& keep, RecordBatch* batch, bool* added) {
  const size_t labels_begin = batch->labels.size();
  batch->labels.insert(batch->labels.end(), resource.begin(), resource.end());
  uint64_t time = 0;
  uint64_t observed = 0;
  AnyValue body;
  WireReader r(bytes);
  while (r.next()) {
    const uint32_t n = r.number();
    if ((n == 1 || n == 11) && r.is(kFixed64)) {
      (n == 1 ? time : observed) = r.numberValue();
    } else if (n == 5 && r.is(kBytes)) {
      if (!readAnyValue(r.messageValue(), &body)) {
        return false;
      }
    } else if (n == 6 && r.is(kBytes) && !addAttribute(r.messageValue(), keep, batch)) {
      return false;
    }
  }
  if (!r.ok()) {
    return false;
  }
  const size_t attributes_end = batch->labels.size();
  std::optional<std::string_view> line;
  if (body.kind == AnyValue::kKvlistValue) {
    // journald receiver: the body is a map of journal fields (KeyValueList: values 1); the line
    // is MESSAGE, the last one if several.
    const bool ok = forEachField(body.bytes, 1, [&](WireBytes kv) {
      std::string_view key;
      WireBytes value;
      if (!readKeyValue(kv, &key, &value)) {
        return false;
      }
      return key == "MESSAGE" ? scalarValue(value, batch, &line)
                              : addLabel(key, value, keep, batch);
    });
    if (!ok) {
      return false;
    }
  } else if (!scalarOf(body, batch, &line)) {
    return false;
  }
  *added = line.has_value();
  if (!line) {
    batch->labels.resize(labels_begin);
    return true;
  }
  LogRecord& rec = batch->records.emplace_back();
  // A fixed64 past int64 nanoseconds (year 2262) is the latest time there is, which the pipeline
  // bounds (Pipeline::match), as in the Loki decoders: cast, it wrapped to a time before 1970.
  rec.time_ns = static_cast<int64_t>(
      std::min<uint64_t>(time != 0 ? time : observed, std::numeric_limits<int64_t>::max()));
  rec.line = *line;
  rec.labels_begin = static_cast<uint32_t>(labels_begin);
  rec.labels_end = static_cast<uint32_t>(batch->labels.size());
  // The body's fields before the attributes: a kvlist body is the journald receiver's, whose
  // fields may mark the kernel stream; attributes are what a json_parser made of the line.
  const auto labels = batch->labels.begin();
  std::rotate(labels + static_cast<ptrdiff_t>(labels_begin + resource.size()),
              labels + static_cast<ptrdiff_t>(attributes_end), batch->labels.end());
  const size_t body_fields = batch->labels.size() - attributes_end;
  classifyShipped(rules, static_cast<uint32_t>(resource.size()),
                  static_cast<uint32_t>(resource.size() + body_fields), batch, &rec);
  return true;
}

// ResourceLogs (logs.proto): resource 1 (Resource: attributes 1), scope_logs 2 (ScopeLogs:
// log_records 2). The resource may follow its scope_logs on the wire, so the message is read
// twice, not its scope_logs kept aside: that list (16 bytes per empty ScopeLogs of 2 wire bytes)
// was outside DecodeBound.
bool addResourceLogs(WireBytes bytes, const StreamRules& rules, const LabelFilter& keep,
                     RecordBatch* batch, uint64_t* rejected, DecodeBound* bound) {
  const size_t labels_begin = batch->labels.size();
  if (!forEachField(bytes, 1, [&](WireBytes res) {
        return forEachField(res, 1, [&](WireBytes kv) { return addAttribute(kv, keep, batch); });
      })) {
    return false;
  }
  // The resource's labels, repeated at the start of each record's.
  const std::vector<Label> resource(batch->labels.begin() + static_cast<ptrdiff_t>(labels_begin),
                                    batch->labels.end());
  batch->labels.resize(labels_begin);
  return forEachField(bytes, 2, [&](WireBytes scope) {
    return forEachField(scope, 2, [&](WireBytes record) {
      bool added = false;
      if (!addRecord(record, resource, rules, keep, batch, &added)) {
        return false;
      }
      *rejected += added ? 0 : 1;
      return bound->holds(*batch);
    });
  });
}

}  // namespace

bool decodeOtlpProto(std::string_view bytes, const StreamRules& rules, const LabelFilter& keep,
                     RecordBatch* batch, uint64_t* rejected, std::string* error) {
  const size_t records_begin = batch->records.size();
  const size_t labels_begin = batch->labels.size();
  uint64_t rejected_here = 0;
  DecodeBound bound(*batch, bytes.size());
  const bool ok =
      bytes.size() <= INT_MAX &&  // WireReader's limit
      forEachField(WireBytes::whole(bytes), 1, [&](WireBytes resource_logs) {
        return addResourceLogs(resource_logs, rules, keep, batch, &rejected_here, &bound);
      });
  if (!ok) {
    batch->records.resize(records_begin);
    batch->labels.resize(labels_begin);
    *error = bound.exceeded() ? "request " + bound.reason()
                              : "not an OTLP ExportLogsServiceRequest (protobuf does not parse)";
    return false;
  }
  *rejected += rejected_here;
  return true;
}

std::string otlpProtoResponse(uint64_t rejected, std::string_view error_message) {
  collector::ExportLogsServiceResponse resp;
  if (rejected > 0) {
    resp.mutable_partial_success()->set_rejected_log_records(static_cast<int64_t>(rejected));
    resp.mutable_partial_success()->set_error_message(std::string(error_message));
  }
  return resp.SerializeAsString();
}

std::string otlpJsonResponse(uint64_t rejected, std::string_view error_message) {
  if (rejected == 0) {
    return "{}";
  }
  // int64 is a decimal string in the OTLP JSON mapping.
  return nlohmann::json{
      {"partialSuccess",
       {{"rejectedLogRecords", std::to_string(rejected)}, {"errorMessage", error_message}}}}
      .dump();
}

}  // namespace faultline
