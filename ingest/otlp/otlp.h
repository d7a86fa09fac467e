// OTLP logs in protobuf: ExportLogsServiceRequest (POST /v1/logs) and LogsData (the OTel
// collector's kafka exporter, encoding otlp_proto), which are wire-identical
// (opentelemetry-proto v1.11.0, opentelemetry/proto/collector/logs/v1/logs_service.proto and
// logs/v1/logs.proto; field numbers in ingest/otlp/proto/). The fields read: request
// resource_logs 1; ResourceLogs resource 1 (Resource attributes 1), scope_logs 2; ScopeLogs
// log_records 2; LogRecord time_unix_nano 1 (fixed64), body 5, attributes 6,
// observed_time_unix_nano 11 (fixed64); KeyValue key 1, value 2; AnyValue string_value 1,
// bool_value 2, int_value 3, double_value 4, array_value 5 (ArrayValue values 1), kvlist_value 6
// (KeyValueList values 1), bytes_value 7. The JSON mapping of the same message is decoded by
// decodeOtlpJson() (ingest/formats/formats.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/record.h"
#include "ingest/formats/labels.h"

namespace faultline {

// Appends one record per LogRecord of the message to `batch`. Labels: resource attributes, then
// the record's attributes, then (journald receiver) the body's kvlist entries, each only if `keep`
// keeps its key (the values of other keys are not read) and its value is a scalar (string, int,
// bool, bytes, an array of byte values). Line: a string or bytes body, or the kvlist body's
// MESSAGE. Time: time_unix_nano, else observed_time_unix_nano, else 0 (ns since the epoch). Node
// and stream: classifyShipped(rules) (labels.h), the resource attributes as the shipper's labels.
// The message is read in place, field by field (WireReader: libprotobuf's wire parsers), not
// parsed into generated classes: lines and labels are views into `bytes`, so the caller makes
// the batch hold them (RecordBatch::hold) or keeps them alive as long. Only integer and byte-array
// values are copied (into the batch). Sub-messages the decoder does not use (scope, trace ids,
// the values of attributes not kept) are skipped by their length, unchecked; of a singular field
// that occurs twice the last occurrence is taken, while a parser would merge the two (a writer
// that follows the spec sends each once).
// A LogRecord without a usable line is skipped and counted in *rejected. Returns false, with no
// record or label added and a one-line reason in *error, when `bytes` is not a valid message.
bool decodeOtlpProto(std::string_view bytes, const StreamRules& rules, const LabelFilter& keep,
                     RecordBatch* batch, uint64_t* rejected, std::string* error);

// The body of an OTLP/HTTP 200 answer: ExportLogsServiceResponse, with partial_success set only
// when records were rejected (opentelemetry-proto docs/specification.md, "Partial Success").
std::string otlpProtoResponse(uint64_t rejected, std::string_view error_message);
std::string otlpJsonResponse(uint64_t rejected, std::string_view error_message);

}  // namespace faultline
