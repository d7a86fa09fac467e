// JSON line formats: journalctl -o json (systemd.journal-fields(7)), the OTLP JSON mapping of
// ExportLogsServiceRequest (opentelemetry-proto docs/specification.md, "JSON Protobuf
// Encoding"; opentelemetry/proto/logs/v1/logs.proto) and logcli --output=jsonl (grafana/loki
// cmd/logcli, pkg/logcli/output/jsonl.go). Parsed with simdjson's DOM parser; its strings live
// until the parser's next parse, so everything a record keeps is copied into the batch.
#include <charconv>
#include <string>
#include <system_error>

#include <simdjson.h>

#include "core/time.h"
#include "ingest/formats/parsers.h"

namespace faultline {
namespace {

using simdjson::SUCCESS;
using simdjson::dom::element;

// obj[key] into *out; false if obj is not an object or has no such key.
bool member(element obj, std::string_view key, element* out) {
  simdjson::dom::object o;
  return obj.get(o) == SUCCESS && o.at_key(key).get(*out) == SUCCESS;
}

// Integer nanoseconds from a JSON string or integer; 0 if absent or not a number.
int64_t intOf(element v) {
  int64_t i = 0;
  uint64_t u = 0;
  std::string_view s;
  if (v.get(i) == SUCCESS) {
    return i;
  }
  if (v.get(u) == SUCCESS) {
    return static_cast<int64_t>(u);
  }
  if (v.get(s) == SUCCESS) {  // OTLP JSON writes 64-bit integers as decimal strings
    int64_t n = 0;
    return std::from_chars(s.data(), s.data() + s.size(), n).ec == std::errc() ? n : 0;
  }
  return 0;
}

// A string, or an array of byte values (how journalctl and the OTel journald receiver render a
// non-UTF-8 field), as text: *out views the parser's string or *buf.
bool bytesOf(element v, std::string* buf, std::string_view* out) {
  if (v.get(*out) == SUCCESS) {
    return true;
  }
  simdjson::dom::array a;
  if (v.get(a) != SUCCESS) {
    return false;
  }
  buf->clear();
  for (element b : a) {
    int64_t c = 0;
    if (b.get(c) != SUCCESS) {
      return false;
    }
    buf->push_back(static_cast<char>(c));
  }
  *out = *buf;
  return true;
}

class JournalJsonParser : public LineParser {
 public:
  explicit JournalJsonParser(const ParseOptions& o) : rules_(o.streams), keep_(o.streams) {}

  bool parse(std::string_view line, RecordBatch* batch) override {
    element entry;
    element message_value;
    std::string_view message;
    if (parser_.parse(line.data(), line.size()).get(entry) != SUCCESS ||
        !member(entry, "MESSAGE", &message_value) || !bytesOf(message_value, &buf_, &message)) {
      return false;
    }
    LogRecord& r = batch->records.emplace_back();
    element realtime;
    const int64_t us = member(entry, "__REALTIME_TIMESTAMP", &realtime) ? intOf(realtime) : 0;
    r.time_ns = us > 0 && us < INT64_MAX / 1000 ? us * 1000 : 0;  // µs; absurd values read as 0
    r.line = batch->copy(message);
    r.labels_begin = static_cast<uint32_t>(batch->labels.size());
    for (const auto field : simdjson::dom::object(entry)) {
      std::string_view value;
      if (keep_.keeps(field.key) && field.value.get(value) == SUCCESS) {
        batch->labels.push_back({batch->copy(field.key), batch->copy(value)});
      }
    }
    r.labels_end = static_cast<uint32_t>(batch->labels.size());
    classify(rules_, *batch, &r);
    return true;
  }

 private:
  StreamRules rules_;
  LabelFilter keep_;
  simdjson::dom::parser parser_;
  std::string buf_;
};

// An OTLP AnyValue as text, if it is a scalar: *out views the parser's string or *buf.
bool anyValueString(element v, std::string* buf, std::string_view* out) {
  element e;
  bool b = false;
  if (member(v, "stringValue", &e)) {
    return e.get(*out) == SUCCESS;
  }
  if (member(v, "intValue", &e)) {
    *buf = std::to_string(intOf(e));
    *out = *buf;
    return true;
  }
  if (member(v, "boolValue", &e)) {
    *out = e.get(b) == SUCCESS && b ? "true" : "false";
    return e.is_bool();
  }
  if (member(v, "arrayValue", &e)) {  // journald MESSAGE as bytes
    simdjson::dom::array values;
    if (!member(e, "values", &e) || e.get(values) != SUCCESS) {
      return false;
    }
    buf->clear();
    for (element item : values) {
      element i;
      if (!member(item, "intValue", &i)) {
        return false;
      }
      buf->push_back(static_cast<char>(intOf(i)));
    }
    *out = *buf;
    return true;
  }
  return false;
}

// Calls f(key, value) for each KeyValue of an array of them.
template <typename F>
void forEachKeyValue(element attrs, F f) {
  simdjson::dom::array a;
  if (attrs.get(a) != SUCCESS) {
    return;
  }
  for (element kv : a) {
    element key;
    element value;
    std::string_view name;
    if (member(kv, "key", &key) && key.get(name) == SUCCESS && member(kv, "value", &value)) {
      f(name, value);
    }
  }
}

// name = value (an AnyValue) as a label, if `keep` keeps the name and the value is a scalar.
void addLabel(std::string_view name, element value, const LabelFilter& keep, std::string* buf,
              RecordBatch* batch) {
  std::string_view text;
  if (keep.keeps(name) && anyValueString(value, buf, &text)) {
    batch->labels.push_back({batch->copy(name), batch->copy(text)});
  }
}

// The attributes (an array of KeyValue) as labels (addLabel).
void addAttributes(element attrs, const LabelFilter& keep, RecordBatch* batch) {
  std::string buf;
  forEachKeyValue(attrs, [&](std::string_view name, element value) {
    addLabel(name, value, keep, &buf, batch);
  });
}

// Appends the record; false (batch unchanged) if it has no usable line.
// resource_attrs: the resource's attributes, null if it has none.
bool addOtlpRecord(element lr, const element* resource_attrs, const StreamRules& rules,
                   const LabelFilter& keep, RecordBatch* batch) {
  const size_t labels_begin = batch->labels.size();
  element e;
  if (resource_attrs != nullptr) {
    addAttributes(*resource_attrs, keep, batch);
  }
  if (member(lr, "attributes", &e)) {
    addAttributes(e, keep, batch);
  }
  element body;
  const bool has_body = member(lr, "body", &body);
  std::string buf;
  std::string_view message;
  bool found = false;
  if (has_body && member(body, "kvlistValue", &e)) {
    // journald receiver: the body is a map of journal fields; the line is MESSAGE, the last one
    // if several.
    if (member(e, "values", &e)) {
      forEachKeyValue(e, [&](std::string_view name, element value) {
        std::string_view text;
        if (name != "MESSAGE") {
          addLabel(name, value, keep, &buf, batch);
        } else if (anyValueString(value, &buf, &text)) {
          message = batch->copy(text);
          found = true;
        }
      });
    }
  } else if (has_body && anyValueString(body, &buf, &message)) {
    message = batch->copy(message);
    found = true;
  }
  if (!found) {
    batch->labels.resize(labels_begin);
    return false;
  }
  LogRecord& r = batch->records.emplace_back();
  r.time_ns = member(lr, "timeUnixNano", &e) ? intOf(e) : 0;
  if (r.time_ns == 0 && member(lr, "observedTimeUnixNano", &e)) {
    r.time_ns = intOf(e);
  }
  r.line = message;
  r.labels_begin = static_cast<uint32_t>(labels_begin);
  r.labels_end = static_cast<uint32_t>(batch->labels.size());
  classify(rules, *batch, &r);
  return true;
}

class OtlpJsonParser : public LineParser {
 public:
  explicit OtlpJsonParser(const ParseOptions& o) : rules_(o.streams), keep_(o.streams) {}

  bool parse(std::string_view line, RecordBatch* batch) override {
    uint64_t rejected = 0;
    std::string error;
    return decodeOtlpJson(line, rules_, keep_, batch, &rejected, &error);
  }

 private:
  StreamRules rules_;
  LabelFilter keep_;
};

class LokiJsonlParser : public LineParser {
 public:
  explicit LokiJsonlParser(const ParseOptions& o) : rules_(o.streams) {}

  bool parse(std::string_view line, RecordBatch* batch) override {
    element e;
    element v;
    std::string_view text;
    if (parser_.parse(line.data(), line.size()).get(e) != SUCCESS || !member(e, "line", &v) ||
        v.get(text) != SUCCESS) {
      return false;
    }
    int64_t ns = 0;
    std::string_view ts;
    if (member(e, "timestamp", &v) && (v.get(ts) != SUCCESS || !parseRfc3339(ts, &ns))) {
      ns = intOf(v);  // a nanosecond epoch, as the push API writes it
    }
    LogRecord& r = batch->records.emplace_back();
    r.time_ns = ns;
    r.line = batch->copy(text);
    r.labels_begin = static_cast<uint32_t>(batch->labels.size());
    simdjson::dom::object labels;
    if (member(e, "labels", &v) && v.get(labels) == SUCCESS) {
      for (const auto field : labels) {
        if (field.value.get(text) == SUCCESS) {
          batch->labels.push_back({batch->copy(field.key), batch->copy(text)});
        }
      }
    }
    r.labels_end = static_cast<uint32_t>(batch->labels.size());
    classify(rules_, *batch, &r);
    return true;
  }

 private:
  StreamRules rules_;
  simdjson::dom::parser parser_;
};

}  // namespace

bool decodeOtlpJson(std::string_view doc, const StreamRules& rules, const LabelFilter& keep,
                    RecordBatch* batch, uint64_t* rejected, std::string* error) {
  simdjson::dom::parser parser;  // one per call: the HTTP server decodes on several threads
  element req;
  if (const auto err = parser.parse(doc.data(), doc.size()).get(req); err != SUCCESS) {
    *error = std::string("not JSON (") + simdjson::error_message(err) + ")";
    return false;
  }
  if (!req.is_object()) {
    *error = "not a JSON object";
    return false;
  }
  element e;
  if (!member(req, "resourceLogs", &e)) {
    return true;  // an empty request is valid (OTLP specification, "OTLP/HTTP Request")
  }
  simdjson::dom::array resource_logs;
  if (e.get(resource_logs) != SUCCESS) {
    *error = "resourceLogs is not an array";
    return false;
  }
  for (element rl : resource_logs) {
    element resource_attrs;
    const bool has_attrs = member(rl, "resource", &e) && member(e, "attributes", &resource_attrs);
    simdjson::dom::array scope_logs;
    if (!member(rl, "scopeLogs", &e) || e.get(scope_logs) != SUCCESS) {
      continue;
    }
    for (element sl : scope_logs) {
      simdjson::dom::array records;
      if (!member(sl, "logRecords", &e) || e.get(records) != SUCCESS) {
        continue;
      }
      for (element lr : records) {
        if (!lr.is_object() ||
            !addOtlpRecord(lr, has_attrs ? &resource_attrs : nullptr, rules, keep, batch)) {
          ++*rejected;
        }
      }
    }
  }
  return true;
}

std::unique_ptr<LineParser> makeJournalJsonParser(const ParseOptions& options) {
  return std::make_unique<JournalJsonParser>(options);
}
std::unique_ptr<LineParser> makeOtlpJsonParser(const ParseOptions& options) {
  return std::make_unique<OtlpJsonParser>(options);
}
std::unique_ptr<LineParser> makeLokiJsonlParser(const ParseOptions& options) {
  return std::make_unique<LokiJsonlParser>(options);
}

}  // namespace faultline
