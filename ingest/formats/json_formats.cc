// JSON line formats: journalctl -o json (systemd.journal-fields(7)), the OTLP JSON mapping of
// ExportLogsServiceRequest (opentelemetry-proto docs/specification.md, "JSON Protobuf
// Encoding"; opentelemetry/proto/logs/v1/logs.proto) and logcli --output=jsonl (grafana/loki
// cmd/logcli, pkg/logcli/output/jsonl.go).
#include <cstdlib>
#include <string>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/time.h"
#include "ingest/formats/parsers.h"

namespace faultline {
namespace {

using nlohmann::json;

// Integer nanoseconds from a JSON string or number; 0 if absent or not a number.
int64_t intOf(const json& v) {
  if (v.is_number_integer()) {
    return v.get<int64_t>();
  }
  if (v.is_string()) {
    return std::strtoll(v.get_ref<const std::string&>().c_str(), nullptr, 10);
  }
  return 0;
}

// journalctl renders a non-UTF-8 field as an array of byte values.
bool stringOf(const json& v, std::string* out) {
  if (v.is_string()) {
    *out = v.get<std::string>();
    return true;
  }
  if (v.is_array()) {
    out->clear();
    for (const json& b : v) {
      if (!b.is_number_integer()) {
        return false;
      }
      out->push_back(static_cast<char>(b.get<int>()));
    }
    return true;
  }
  return false;
}

// Label names worth keeping: those StreamRules look at, plus the usual Kubernetes ones.
std::unordered_set<std::string> wantedLabels(const StreamRules& rules) {
  std::unordered_set<std::string> names(rules.node_labels.begin(), rules.node_labels.end());
  names.insert(rules.pod_labels.begin(), rules.pod_labels.end());
  for (const auto& kv : rules.kernel_labels) {
    names.insert(kv.first);
  }
  return names;
}

class JournalJsonParser : public LineParser {
 public:
  explicit JournalJsonParser(const ParseOptions& o)
      : rules_(o.streams), wanted_(wantedLabels(o.streams)) {}

  bool parse(std::string_view line, RecordBatch* batch) override {
    const json entry = json::parse(line, nullptr, false);
    std::string message;
    if (!entry.is_object() || !entry.contains("MESSAGE") || !stringOf(entry["MESSAGE"], &message)) {
      return false;
    }
    LogRecord& r = batch->records.emplace_back();
    const int64_t us = intOf(entry.value("__REALTIME_TIMESTAMP", json()));
    r.time_ns = us > 0 && us < INT64_MAX / 1000 ? us * 1000 : 0;  // µs; absurd values read as 0
    r.line = batch->copy(message);
    r.labels_begin = static_cast<uint32_t>(batch->labels.size());
    for (const auto& [key, value] : entry.items()) {
      if (value.is_string() && wanted_.count(key) != 0) {
        batch->labels.push_back(
            {batch->copy(key), batch->copy(value.get_ref<const std::string&>())});
      }
    }
    r.labels_end = static_cast<uint32_t>(batch->labels.size());
    classify(rules_, *batch, &r);
    return true;
  }

 private:
  StreamRules rules_;
  std::unordered_set<std::string> wanted_;
};

// obj[key] if obj is an object holding it, else null: a reference, where json::value() copies.
const json& member(const json& obj, const char* key) {
  static const json kNull;
  if (!obj.is_object()) {
    return kNull;
  }
  const auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

// An OTLP AnyValue as a string, if it is a scalar.
bool anyValueString(const json& v, std::string* out) {
  if (!v.is_object()) {
    return false;
  }
  if (const auto it = v.find("stringValue"); it != v.end() && it->is_string()) {
    *out = it->get<std::string>();
    return true;
  }
  if (const auto it = v.find("intValue"); it != v.end()) {
    *out = std::to_string(intOf(*it));
    return true;
  }
  if (const auto it = v.find("boolValue"); it != v.end() && it->is_boolean()) {
    *out = it->get<bool>() ? "true" : "false";
    return true;
  }
  if (const auto it = v.find("arrayValue"); it != v.end()) {  // journald MESSAGE as bytes
    out->clear();
    const json& values = member(*it, "values");
    if (!values.is_array()) {
      return false;
    }
    for (const json& e : values) {
      const json& i = member(e, "intValue");
      if (i.is_null()) {
        return false;
      }
      out->push_back(static_cast<char>(intOf(i)));
    }
    return true;
  }
  return false;
}

void addAttributes(const json& attrs, RecordBatch* batch) {
  if (!attrs.is_array()) {
    return;
  }
  std::string value;
  for (const json& kv : attrs) {
    const json& key = member(kv, "key");
    if (key.is_string() && anyValueString(member(kv, "value"), &value)) {
      batch->labels.push_back({batch->copy(key.get_ref<const std::string&>()), batch->copy(value)});
    }
  }
}

// Appends the record; false (batch unchanged) if it has no usable line.
bool addOtlpRecord(const json& lr, const json& resource_attrs, const StreamRules& rules,
                   RecordBatch* batch) {
  const json& body = member(lr, "body");
  std::string message;
  const size_t labels_begin = batch->labels.size();
  addAttributes(resource_attrs, batch);
  addAttributes(member(lr, "attributes"), batch);
  if (const json& kv = member(body, "kvlistValue"); !kv.is_null()) {
    // journald receiver: the body is a map of journal fields; the line is MESSAGE.
    const size_t body_begin = batch->labels.size();
    addAttributes(member(kv, "values"), batch);
    bool found = false;
    for (size_t i = body_begin; i < batch->labels.size(); ++i) {
      if (batch->labels[i].name == "MESSAGE") {
        message = batch->labels[i].value;
        found = true;
      }
    }
    if (!found) {
      batch->labels.resize(labels_begin);
      return false;
    }
  } else if (!anyValueString(body, &message)) {
    batch->labels.resize(labels_begin);
    return false;
  }
  LogRecord& r = batch->records.emplace_back();
  r.time_ns = intOf(member(lr, "timeUnixNano"));
  if (r.time_ns == 0) {
    r.time_ns = intOf(member(lr, "observedTimeUnixNano"));
  }
  r.line = batch->copy(message);
  r.labels_begin = static_cast<uint32_t>(labels_begin);
  r.labels_end = static_cast<uint32_t>(batch->labels.size());
  classify(rules, *batch, &r);
  return true;
}

class OtlpJsonParser : public LineParser {
 public:
  explicit OtlpJsonParser(const ParseOptions& o) : rules_(o.streams) {}

  bool parse(std::string_view line, RecordBatch* batch) override {
    uint64_t rejected = 0;
    std::string error;
    return decodeOtlpJson(line, rules_, batch, &rejected, &error);
  }

 private:
  StreamRules rules_;
};

class LokiJsonlParser : public LineParser {
 public:
  explicit LokiJsonlParser(const ParseOptions& o) : rules_(o.streams) {}

  bool parse(std::string_view line, RecordBatch* batch) override {
    const json e = json::parse(line, nullptr, false);
    if (!e.is_object() || !e.contains("line") || !e["line"].is_string()) {
      return false;
    }
    int64_t ns = 0;
    const json ts = e.value("timestamp", json());
    if (!ts.is_string() || !parseRfc3339(ts.get_ref<const std::string&>(), &ns)) {
      ns = intOf(ts);  // a nanosecond epoch, as the push API writes it
    }
    LogRecord& r = batch->records.emplace_back();
    r.time_ns = ns;
    r.line = batch->copy(e["line"].get_ref<const std::string&>());
    r.labels_begin = static_cast<uint32_t>(batch->labels.size());
    const json labels = e.value("labels", json::object());
    for (const auto& [k, v] : labels.items()) {
      if (v.is_string()) {
        batch->labels.push_back({batch->copy(k), batch->copy(v.get_ref<const std::string&>())});
      }
    }
    r.labels_end = static_cast<uint32_t>(batch->labels.size());
    classify(rules_, *batch, &r);
    return true;
  }

 private:
  StreamRules rules_;
};

}  // namespace

bool decodeOtlpJson(std::string_view doc, const StreamRules& rules, RecordBatch* batch,
                    uint64_t* rejected, std::string* error) {
  const json req = json::parse(doc, nullptr, /*allow_exceptions=*/false);
  if (!req.is_object()) {
    *error = "not a JSON object";
    return false;
  }
  const auto resource_logs = req.find("resourceLogs");
  if (resource_logs == req.end()) {
    return true;  // an empty request is valid (OTLP specification, "OTLP/HTTP Request")
  }
  if (!resource_logs->is_array()) {
    *error = "resourceLogs is not an array";
    return false;
  }
  for (const json& rl : *resource_logs) {
    const json& resource_attrs = member(member(rl, "resource"), "attributes");
    const json& scope_logs = member(rl, "scopeLogs");
    if (!scope_logs.is_array()) {
      continue;
    }
    for (const json& sl : scope_logs) {
      const json& records = member(sl, "logRecords");
      if (!records.is_array()) {
        continue;
      }
      for (const json& lr : records) {
        if (!lr.is_object() || !addOtlpRecord(lr, resource_attrs, rules, batch)) {
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
