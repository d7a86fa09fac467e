// Line formats of archived logs, as the tools that write them produce them. Each parser turns one
// line of text into zero or more LogRecords.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/record.h"
#include "ingest/formats/json_record.h"
#include "ingest/formats/labels.h"

namespace faultline {

enum class Format : uint8_t {
  kDmesg,        // kernel ring buffer (util-linux dmesg(1); /dev/kmsg: the kernel's
                 // Documentation/ABI/testing/dev-kmsg): `[12345.678901] msg`, `dmesg -T`,
                 // `<6>[..]`, `6,1234,5678,-;msg`, `dmesg --time-format iso`, each with or
                 // without --decode, --show-delta, and --reltime (-H)
  kSyslog,       // `Mon DD HH:MM:SS host tag: msg` (RFC 3164 as rsyslog's traditional file
                 // format writes it) and journalctl(1)'s `-o short-iso`, `short-iso-precise`,
                 // `short-monotonic`, `short-delta`
  kJournalJson,  // `journalctl -o json`, one entry per line (systemd's JOURNAL_EXPORT_FORMATS)
  kOtlpJson,     // one OTLP ExportLogsServiceRequest (JSON mapping) per line, as the collector's
                 // file exporter writes it
  kLokiJsonl,    // `logcli query --output=jsonl` (Loki's pkg/logcli/output/jsonl.go):
                 // {"labels":{..},"line":"..","timestamp":".."}
  kContainer,    // a container's output: `kubectl logs --timestamps` and the CRI log files of
                 // /var/log/pods (`STAMP stdout F msg`: the kubelet's
                 // pkg/kubelet/kuberuntime/logs/logs.go); pod streams of ParseOptions::node
  kJson,         // one JSON object per line as Vector, Fluent Bit or rsyslog write them (the
                 // Kafka source's json encoding): JsonRecordDecoder (json_record.h)
};

// "dmesg" | "syslog" | "journal-json" | "otlp-json" | "loki-jsonl" | "container" | "json"; false
// for anything else.
bool parseFormatName(std::string_view name, Format* f);
// The name parseFormatName() takes for `f`.
std::string_view formatName(Format f);

// Guesses the format from the first lines of a file (up to ~64 KiB of text is plenty), each read
// without the NUL bytes that start it. A JSON object is a json record if it has a key of one of
// `json_lines` (ParseOptions::json_fields.line: a path's first part, or the whole path as a flat
// key). journalctl's own lines (isJournalctlMarker) are skipped. Returns nullopt when no format
// fits any of them.
std::optional<Format> detectFormat(
    std::string_view head, const std::vector<std::string>& json_lines = JsonRecordFields().line);

// Whether `line` is journalctl's own, not the log's: "-- No entries --" (a query that matched
// nothing), "-- Boot 9b1c... --" between boots, "-- Journal begins at ..., ends at ... --" (systemd
// before v250) in its text outputs (systemd src/shared/logs-show.c, src/journal/journalctl.c).
// Format detection and replay skip such lines.
inline bool isJournalctlMarker(std::string_view line) {
  return line.size() >= 7 && line.starts_with("-- ") && line.ends_with(" --");
}

// Whether the first line of `head` that is not blank has the shape of `logcli query`'s default
// output (grafana/loki pkg/logcli/output/default.go: an RFC 3339 stamp to the second, the stream's
// labels as `{name="value", ...}`, the line). No format reads it: logcli leaves out of each line
// the labels all its streams share (node and transport, for one node's kernel), so its lines name
// neither their node nor their stream. `logcli query --output=jsonl` keeps them (kLokiJsonl).
bool isLogcliDefault(std::string_view head);

struct ParseOptions {
  std::string node;                     // dmesg, container: the node; json: the node of a
                                        // record that names none; others take it from the line
  std::optional<int64_t> boot_time_ns;  // dmesg, syslog: boot time for `[uptime]` stamps (dmesg,
                                        // journalctl -o short-monotonic); else the first
                                        // stamp of the file is taken as time 0 (the epoch)
  int year = 1970;                      // syslog, dmesg --reltime: the year of a file's first
                                        // `Mon DD` line (dmesg: minute)
  StreamRules streams;                  // which labels name the node and the stream kind
  JsonRecordFields json_fields;         // json: the field paths (a Kafka json topic's `fields`);
                                        // a record without a time field is malformed
  StreamKind json_stream = StreamKind::kOther;  // json: the stream of a record that no field
                                                // makes a pod's, the kernel's or a process's
                                                // (a Kafka json topic's `stream`)
  // With it (replay without --year): a file's first `Mon DD` line is of the year before `year`
  // when `year` would put it over a day after now_ns (ns since the epoch), as a December log
  // read in January, or has no such day (Feb 29: then valid only if the year before has one);
  // of the year after when that is within a day of now_ns (New Year's Eve, a host ahead of UTC).
  std::optional<int64_t> now_ns;
};

class LineParser {
 public:
  virtual ~LineParser() = default;
  // Parses one line (no trailing newline) and appends its records to `batch`, with views into
  // `line` where the bytes need no change. `line` must stay valid until the following parse() or
  // finish() call returns (a record may be held back to join continuation lines). Returns false
  // when the line is not in this format; the caller counts it and goes on.
  virtual bool parse(std::string_view line, RecordBatch* batch) = 0;
  // Appends any record held back for continuation lines. Call once at the end of input.
  virtual void finish(RecordBatch* /*batch*/) {}
  // Whether a record was placed by a stamp since boot without ParseOptions::boot_time_ns (dmesg's
  // `[12345.678901]`, journalctl -o short-monotonic): its time counts from the input's first such
  // stamp, taken as the epoch.
  virtual bool sinceFirstStamp() const { return false; }
};

std::unique_ptr<LineParser> makeParser(Format format, const ParseOptions& options);

// One OTLP ExportLogsServiceRequest (or LogsData) in the JSON mapping (opentelemetry-proto
// docs/specification.md, "JSON Protobuf Encoding": camelCase keys, 64-bit integers as strings or
// numbers; the proto field names, `time_unix_nano`, are read too, as the proto3 JSON mapping and
// the OTel collector read them). Shared by the otlp-json replay format, POST /v1/logs and the
// Kafka otlp_json encoding.
// Appends one record per logRecord: labels are the resource attributes, the record's
// attributes and a kvlist body's entries whose keys `keep` keeps (scalars only); the line is a
// scalar body or a kvlist body's MESSAGE (journald receiver). Scalars are stringValue, intValue,
// boolValue, an arrayValue of intValues, or of integral doubleValues as the OTel journald receiver
// writes them (journald's MESSAGE that is not UTF-8: its bytes) and
// bytesValue (base64, as the protobuf decoder takes bytes_value); time is timeUnixNano, else
// observedTimeUnixNano, else 0 (ns since the epoch; a time or intValue written as a string counts
// only if it is a JSON integer, "0012" being none; an intValue past int64 is no scalar, a time
// past it is the latest there is); node and stream come from classifyShipped(rules) (labels.h). A
// logRecord without a usable line is skipped and counted in *rejected. Returns false with a
// one-line reason in *error, and the batch as it was, when `doc` is not a JSON object or
// resourceLogs is not an array; a document without resourceLogs is an empty request. Read in one
// forward pass (simdjson On Demand): what it reads is validated, values it does not read (other
// fields, dropped attributes) are skipped unchecked, so a document broken only inside those can
// be accepted; a truncated one is refused. Field names are matched as written, not unescaped.
// `readable`: how many bytes from doc.data() may be read, doc.size() or more. With kJsonPadding
// more than doc.size() the document is parsed where it lies, else from a padded copy (a copy of a
// 1 MB push body per request); what those bytes hold does not matter.
bool decodeOtlpJson(std::string_view doc, size_t readable, const StreamRules& rules,
                    const LabelFilter& keep, RecordBatch* batch, uint64_t* rejected,
                    std::string* error);

// The bytes simdjson reads past a document's end (SIMDJSON_PADDING), for decodeOtlpJson and
// decodeLokiJson (ingest/push/loki.h).
inline constexpr size_t kJsonPadding = 64;

// Whether `c` is an ASCII digit ('0'..'9'): for stamps and file names, where a locale's
// std::isdigit has no say.
inline bool isDigit(char c) {
  return c >= '0' && c <= '9';
}

// The value of the hex digit `c` in either case, -1 if `c` is none: for the escapes of
// /dev/kmsg records and of Loki's selectors.
inline int hexDigit(char c) {
  if (isDigit(c)) {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

// For a JSON document simdjson refused (UTF8_ERROR, STRING_ERROR): sets *out to `json`, of the
// same size, with what it refuses and Go's decoders (Loki's, the OTel collector's) take as U+FFFD
// replaced, and returns true; false, *out untouched, if there is none. Replaced: each byte that
// is not part of a well-formed UTF-8 sequence (RFC 3629 section 4) by '?', one per byte, as Go's
// utf8 package decodes them (U+FFFD would triple the body, past the memory bound of the push
// server); and each \u escape of a UTF-16 surrogate that is not half of a pair (RFC 8259 section
// 8.2: JavaScript's JSON.stringify of a string cut inside an emoji writes "\ud83d") by \ufffd.
// So that one such line does not refuse a request whose other lines are a node's kernel log.
bool replaceInvalidUnicode(std::string_view json, std::string* out);

}  // namespace faultline
