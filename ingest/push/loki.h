// The Loki push API body (POST /loki/api/v1/push), after any Content-Encoding is undone:
// protobuf PushRequest in raw snappy block format, or JSON. Sources: grafana/loki
// pkg/push/push.proto @01a3f3fa (ingest/push/proto/loki/push.proto), pkg/loghttp/push/push.go
// @21c78615 (ParseLokiRequest), docs/sources/reference/loki-http-api.md @003e03c9. The protobuf
// fields read: PushRequest streams 1; StreamAdapter labels 1, entries 2; EntryAdapter timestamp 1
// (google.protobuf.Timestamp seconds 1, nanos 2), line 2, structuredMetadata 3
// (LabelPairAdapter name 1, value 2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/record.h"
#include "ingest/formats/labels.h"

namespace faultline {

// Parses a LogQL stream selector, `{job="kernel", node="n-1"}`, appending one Label per pair to
// batch->labels. Values are Go-quoted ("..." with strconv.Unquote's escapes: \" \\ \n \t \r \a \b
// \f \v \ooo \xHH \uXXXX \UXXXXXXXX) or backquoted (raw); a name is bare (letters, digits, _ . - /
// :) or quoted as a value (`{"service.name"="x"}`: Prometheus 3's UTF-8 names, which Loki 3 takes);
// spaces around names, `=` and commas are allowed; `{}` is an empty set.
// Views point into `selector` where a value has no escape, else into the batch, so `selector`
// must live as long as the batch. Returns false with a reason in *error (labels unchanged).
bool parseLokiSelector(std::string_view selector, RecordBatch* batch, std::string* error);

// Both decoders append one record per entry. Labels, in the order the body gives them: the
// stream's selector, then `tenant` (the X-Scope-OrgID header, when not empty), then the entry's
// structured metadata. Time: the entry's
// timestamp (ns since the epoch). Node: the first of rules.node_labels among the stream's labels,
// else among the entry's structured metadata (which shippers fill from the line's own fields, so
// it never overrides the stream's). Stream: classifyShipped(rules) (labels.h), the stream's
// selector as the shipper's labels. On false (a reason in *error) the
// batch may hold part of the request and must be discarded.

// `snappy` is the raw body: snappy block format (not framed) of a PushRequest. Its uncompressed
// length, read from the block header before anything is allocated, must not exceed
// `max_bytes` nor INT_MAX; if it does, *too_large is set as well. The message is read in place
// (ingest/formats/protobuf_wire.h): the batch holds the uncompressed bytes and records point
// into them.
bool decodeLokiProto(std::string_view snappy, size_t max_bytes, std::string_view tenant,
                     const StreamRules& rules, RecordBatch* batch, std::string* error,
                     bool* too_large);

// {"streams":[{"stream":{"k":"v"},"values":[["<ns>","<line>",{"meta":"v"}]]}]}; the time is a
// string of nanoseconds (a JSON integer is accepted too). Parsed with simdjson's DOM parser (its
// tape, not a tree of allocated nodes); unknown keys are skipped, metadata values other than
// strings dropped, and of a repeated "streams" key the last is read. A null "streams", "stream" or
// "values" is an empty one, as Loki reads it (Go clients write a nil slice or map as null). Errors
// name the place: "streams[0].values[3][0] is not a string of nanoseconds"; invalid JSON gives
// "body is not a JSON object (<the parser's message>)". `readable`: how many bytes from
// json.data() may be read, json.size() or more; with kJsonPadding (ingest/formats/formats.h) more
// than json.size() the body is parsed where it lies, else from a padded copy.
bool decodeLokiJson(std::string_view json, size_t readable, std::string_view tenant,
                    const StreamRules& rules, RecordBatch* batch, std::string* error);

}  // namespace faultline
