#include "ingest/otlp/otlp.h"

#include <memory>

#include <google/protobuf/arena.h>
#include <nlohmann/json.hpp>

#include "opentelemetry/proto/collector/logs/v1/logs_service.pb.h"

namespace faultline {
namespace {

namespace common = opentelemetry::proto::common::v1;
namespace logs = opentelemetry::proto::logs::v1;
namespace collector = opentelemetry::proto::collector::logs::v1;
using KeyValues = google::protobuf::RepeatedPtrField<common::KeyValue>;

// A scalar AnyValue as text: string and bytes point into the message, others are copied into
// the batch. An array of integers is a byte string (journald's non-UTF-8 MESSAGE).
bool scalarOf(const common::AnyValue& v, RecordBatch* batch, std::string_view* out) {
  switch (v.value_case()) {
    case common::AnyValue::kStringValue:
      *out = v.string_value();
      return true;
    case common::AnyValue::kBytesValue:
      *out = v.bytes_value();
      return true;
    case common::AnyValue::kIntValue:
      *out = batch->copy(std::to_string(v.int_value()));
      return true;
    case common::AnyValue::kBoolValue:
      *out = v.bool_value() ? "true" : "false";
      return true;
    case common::AnyValue::kArrayValue: {
      std::string bytes;
      for (const common::AnyValue& e : v.array_value().values()) {
        if (e.value_case() != common::AnyValue::kIntValue) {
          return false;
        }
        bytes.push_back(static_cast<char>(e.int_value()));
      }
      *out = batch->copy(bytes);
      return true;
    }
    default:
      return false;
  }
}

void addAttributes(const KeyValues& attrs, RecordBatch* batch) {
  std::string_view value;
  for (const common::KeyValue& kv : attrs) {
    if (scalarOf(kv.value(), batch, &value)) {
      batch->labels.push_back({kv.key(), value});
    }
  }
}

// Appends the record; false (batch unchanged) if it has no usable line.
bool addRecord(const logs::LogRecord& lr, const KeyValues& resource_attrs, const StreamRules& rules,
               RecordBatch* batch) {
  const size_t labels_begin = batch->labels.size();
  addAttributes(resource_attrs, batch);
  addAttributes(lr.attributes(), batch);
  std::string_view line;
  bool has_line = false;
  if (lr.body().value_case() == common::AnyValue::kKvlistValue) {
    // journald receiver: the body is a map of journal fields; the line is MESSAGE.
    const size_t body_begin = batch->labels.size();
    addAttributes(lr.body().kvlist_value().values(), batch);
    for (size_t i = body_begin; i < batch->labels.size(); ++i) {
      if (batch->labels[i].name == "MESSAGE") {
        line = batch->labels[i].value;
        has_line = true;
      }
    }
  } else {
    has_line = scalarOf(lr.body(), batch, &line);
  }
  if (!has_line) {
    batch->labels.resize(labels_begin);
    return false;
  }
  LogRecord& r = batch->records.emplace_back();
  r.time_ns = static_cast<int64_t>(lr.time_unix_nano() != 0 ? lr.time_unix_nano()
                                                            : lr.observed_time_unix_nano());
  r.line = line;
  r.labels_begin = static_cast<uint32_t>(labels_begin);
  r.labels_end = static_cast<uint32_t>(batch->labels.size());
  classify(rules, *batch, &r);
  return true;
}

}  // namespace

bool decodeOtlpProto(std::string_view bytes, const StreamRules& rules, RecordBatch* batch,
                     uint64_t* rejected, std::string* error) {
  auto arena = std::make_shared<google::protobuf::Arena>();
  auto* req =
      google::protobuf::Arena::CreateMessage<collector::ExportLogsServiceRequest>(arena.get());
  if (!req->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    *error = "not an OTLP ExportLogsServiceRequest (protobuf does not parse)";
    return false;
  }
  for (const logs::ResourceLogs& rl : req->resource_logs()) {
    for (const logs::ScopeLogs& sl : rl.scope_logs()) {
      for (const logs::LogRecord& lr : sl.log_records()) {
        if (!addRecord(lr, rl.resource().attributes(), rules, batch)) {
          ++*rejected;
        }
      }
    }
  }
  const size_t held = arena->SpaceUsed();
  batch->hold(std::move(arena), held);  // records point into the message's strings
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
