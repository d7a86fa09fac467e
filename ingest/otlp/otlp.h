// OTLP logs in protobuf: ExportLogsServiceRequest (POST /v1/logs) and LogsData (the OTel
// collector's kafka exporter, encoding otlp_proto), which are wire-identical
// (opentelemetry-proto v1.11.0, opentelemetry/proto/collector/logs/v1/logs_service.proto and
// logs/v1/logs.proto; field numbers in ingest/otlp/proto/). The JSON mapping of the same message
// is decoded by decodeOtlpJson() (ingest/formats/formats.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/record.h"
#include "ingest/formats/labels.h"

namespace faultline {

// Appends one record per LogRecord of the message to `batch`. Labels: resource attributes, then
// the record's attributes, then (journald receiver) the body's kvlist entries; scalar values
// only (string, int, bool, bytes, an array of byte values). Line: a string or bytes body, or the
// kvlist body's MESSAGE. Time: time_unix_nano, else observed_time_unix_nano, else 0 (ns since
// the epoch). Node and stream: classify(rules). Records point into the decoded message, which
// the batch holds; decoding keeps no copy of the input.
// A LogRecord without a usable line is skipped and counted in *rejected. Returns false, with the
// batch unchanged and a one-line reason in *error, when `bytes` is not a valid message.
bool decodeOtlpProto(std::string_view bytes, const StreamRules& rules, RecordBatch* batch,
                     uint64_t* rejected, std::string* error);

// The body of an OTLP/HTTP 200 answer: ExportLogsServiceResponse, with partial_success set only
// when records were rejected (opentelemetry-proto docs/specification.md, "Partial Success").
std::string otlpProtoResponse(uint64_t rejected, std::string_view error_message);
std::string otlpJsonResponse(uint64_t rejected, std::string_view error_message);

}  // namespace faultline
