// JSON line formats: journalctl -o json (systemd.journal-fields(7)), the OTLP JSON mapping of
// ExportLogsServiceRequest (opentelemetry-proto docs/specification.md, "JSON Protobuf
// Encoding"; opentelemetry/proto/logs/v1/logs.proto) and logcli --output=jsonl (grafana/loki
// cmd/logcli, pkg/logcli/output/jsonl.go). Parsed with simdjson: the line formats with its DOM
// parser, OTLP with On Demand (below). Its strings live until the parser's next parse, so
// everything a record keeps is copied into the batch.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <simdjson.h>
#include <yaml-cpp/binary.h>

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
    return INT64_MAX;  // past int64: the latest time there is
  }
  if (v.get(s) == SUCCESS) {  // OTLP JSON writes 64-bit integers as decimal strings
    int64_t n = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    return ec == std::errc() && end == s.data() + s.size() ? n : 0;  // "2025-03-03t..." is none
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
    element realtime;
    const int64_t us = member(entry, "__REALTIME_TIMESTAMP", &realtime) ? intOf(realtime) : 0;
    if (us <= 0 || us >= INT64_MAX / 1000) {
      return false;  // no time to place it at (journalctl writes one for every entry): malformed
    }
    LogRecord& r = batch->records.emplace_back();
    r.time_ns = us * 1000;  // µs
    r.line = batch->copy(message);
    r.labels_begin = static_cast<uint32_t>(batch->labels.size());
    for (const auto field : simdjson::dom::object(entry)) {
      std::string_view value;
      if (!keep_.keeps(field.key)) {
        continue;
      }
      if (field.value.get(value) == SUCCESS) {
        batch->labels.push_back({batch->copy(field.key), batch->copy(value)});
      } else if (keep_.marksPod(field.key) && !field.value.is_null()) {
        // A pod's record with a journal entry's keys (Fluent Bit's Merge_Log beside its
        // `kubernetes` map) is no journal entry: malformed, as the keys it names are the pod's.
        batch->labels.resize(r.labels_begin);
        batch->records.pop_back();
        return false;
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

// The OTLP JSON mapping is read with simdjson's On Demand API: one forward pass, without the DOM
// parser's tape and without a scan of an object's keys per lookup (bench/README.md, "OTLP JSON in
// one pass"). Only forward iteration is used: find_field_unordered() assumes that what it skipped
// was well formed, which a malformed request does not promise. Values faultline does not read are
// skipped, not validated. A value of another type than expected makes only its record unusable;
// any other error means the bytes are not JSON, and the request is refused.
namespace od = simdjson::ondemand;
using simdjson::error_code;

// A field of the OTLP JSON mapping, by its two names: lowerCamelCase, which the spec has senders
// write, and the proto name, which the proto3 JSON mapping has parsers accept too, as the OTel
// collector's receiver does (pdata reads "timeUnixNano" and "time_unix_nano"). A request written
// with proto names (libprotobuf's, Go's protojson and Python's json_format can) was read as empty.
struct FieldName {
  std::string_view camel;
  std::string_view proto;
  bool operator==(od::raw_json_string key) const { return key == camel || key == proto; }
};
constexpr FieldName kResourceLogs{"resourceLogs", "resource_logs"};
constexpr FieldName kScopeLogs{"scopeLogs", "scope_logs"};
constexpr FieldName kLogRecords{"logRecords", "log_records"};
constexpr FieldName kTimeUnixNano{"timeUnixNano", "time_unix_nano"};
constexpr FieldName kObservedTimeUnixNano{"observedTimeUnixNano", "observed_time_unix_nano"};
constexpr FieldName kStringValue{"stringValue", "string_value"};
constexpr FieldName kIntValue{"intValue", "int_value"};
constexpr FieldName kBoolValue{"boolValue", "bool_value"};
constexpr FieldName kDoubleValue{"doubleValue", "double_value"};
constexpr FieldName kArrayValue{"arrayValue", "array_value"};
constexpr FieldName kKvlistValue{"kvlistValue", "kvlist_value"};
constexpr FieldName kBytesValue{"bytesValue", "bytes_value"};

// Calls f(key, value) for each field of `v` in document order, if it is an object; f returns an
// error_code, and the first error ends the walk. `key` is the name as written, compared without
// unescaping it (as simdjson's find_field() does): OTLP's field names need no escapes.
template <typename F>
error_code forEachField(od::value v, F f) {
  od::json_type type = od::json_type::null;
  SIMDJSON_TRY(v.type().get(type));
  if (type != od::json_type::object) {
    return SUCCESS;
  }
  od::object o;
  SIMDJSON_TRY(v.get_object().get(o));
  for (auto field_result : o) {
    od::field field;
    SIMDJSON_TRY(std::move(field_result).get(field));
    SIMDJSON_TRY(f(field.key(), field.value()));
  }
  return SUCCESS;
}

// Calls f(element) for each element of the array `v`; as forEachField. null (the proto3 JSON
// mapping's default) has none; any other value is INCORRECT_TYPE: a request whose list is an
// object (`"scopeLogs": {...}`) is refused, not answered 200 with its records left unread.
template <typename F>
error_code forEachElement(od::value v, F f) {
  od::json_type type = od::json_type::null;
  SIMDJSON_TRY(v.type().get(type));
  if (type == od::json_type::null) {
    return SUCCESS;
  }
  if (type != od::json_type::array) {
    return simdjson::INCORRECT_TYPE;
  }
  od::array a;
  SIMDJSON_TRY(v.get_array().get(a));
  for (auto element_result : a) {
    od::value element;
    SIMDJSON_TRY(element_result.get(element));
    SIMDJSON_TRY(f(element));
  }
  return SUCCESS;
}

// The string `v` into *out, if it is a string (*is_string): a view of the request itself when
// the string has no escapes, as most have, else of the parser's unescaped copy. get_string()
// copies every string it reads: 13 field names and 4 values of each journald-receiver record.
error_code stringOf(od::value v, bool* is_string, std::string_view* out) {
  std::string_view raw = v.raw_json_token();  // up to the next token: the quotes, then spaces
  *is_string = !raw.empty() && raw[0] == '"';
  if (!*is_string) {
    return SUCCESS;
  }
  while (raw.size() > 1 &&
         (raw.back() == ' ' || raw.back() == '\n' || raw.back() == '\r' || raw.back() == '\t')) {
    raw.remove_suffix(1);
  }
  if (raw.size() >= 2 && raw.back() == '"' &&
      std::memchr(raw.data(), '\\', raw.size()) == nullptr) {
    *out = raw.substr(1, raw.size() - 2);  // stage 1 refused unescaped control characters
    return SUCCESS;
  }
  return v.get_string().get(*out);
}

// An AnyValue's intValue: an int64 (common.proto), as a JSON string or integer; *ok false for
// anything else (past int64, a fraction, no number): no protobuf sender writes it, and a made-up
// 0 or INT64_MAX would be a line or node name the sender never wrote.
error_code int64Of(od::value v, int64_t* out, bool* ok) {
  *ok = false;
  od::json_type type = od::json_type::null;
  SIMDJSON_TRY(v.type().get(type));
  if (type == od::json_type::string) {
    *ok = v.get_int64_in_string().get(*out) == SUCCESS;
  } else if (type == od::json_type::number) {
    *ok = v.get_int64().get(*out) == SUCCESS;
  }
  return SUCCESS;
}

// Integer nanoseconds from a JSON string or integer into *out (OTLP JSON writes 64-bit integers
// as decimal strings, read in place); a number past int64, quoted or not, is the latest time there
// is (cast, it wrapped to before 1970); anything else (a fraction, an exponent, no integer) reads
// as 0.
error_code intOf(od::value v, int64_t* out) {
  bool ok = false;
  SIMDJSON_TRY(int64Of(v, out, &ok));
  if (!ok) {
    od::json_type type = od::json_type::null;
    SIMDJSON_TRY(v.type().get(type));
    uint64_t u = 0;
    const bool past_int64 = type == od::json_type::string
                                ? v.get_uint64_in_string().get(u) == SUCCESS
                                : v.get_uint64().get(u) == SUCCESS;
    *out = past_int64 ? INT64_MAX : 0;
  }
  return SUCCESS;
}

// An AnyValue's arrayValue ({"values": [{"intValue": n}, ...]}, how journald renders a MESSAGE
// that is not UTF-8; the OTel journald receiver's are {"doubleValue": n}, Go having read
// journalctl's numbers as float64) as bytes in *buf; *ok false if it is no such array.
error_code bytesOf(od::value array_value, std::string* buf, bool* ok) {
  *ok = false;
  bool seen = false;
  return forEachField(array_value, [&](od::raw_json_string key, od::value values) {
    if (key != "values" || seen) {
      return SUCCESS;
    }
    seen = true;
    od::json_type type = od::json_type::null;
    SIMDJSON_TRY(values.type().get(type));
    if (type != od::json_type::array) {
      return SUCCESS;
    }
    buf->clear();
    bool bytes = true;
    SIMDJSON_TRY(forEachElement(values, [&](od::value item) {
      bool has = false;
      int64_t c = 0;
      SIMDJSON_TRY(forEachField(item, [&](od::raw_json_string k, od::value v) {
        if (has) {
          return SUCCESS;
        }
        if (k == kIntValue) {
          has = true;
          return intOf(v, &c);
        }
        if (k != kDoubleValue) {
          return SUCCESS;
        }
        od::json_type t = od::json_type::null;
        SIMDJSON_TRY(v.type().get(t));
        double d = -1;
        if (t == od::json_type::number) {
          SIMDJSON_TRY(v.get_double().get(d));
        }
        has = d >= 0 && d <= 255 && d == std::floor(d);
        c = has ? static_cast<int64_t>(d) : 0;
        return SUCCESS;
      }));
      bytes = bytes && has;
      buf->push_back(static_cast<char>(c));
      return SUCCESS;
    }));
    *ok = bytes;
    return SUCCESS;
  });
}

// An AnyValue's bytesValue (base64, standard or URL-safe, padded or not: the proto3 JSON mapping
// of `bytes`) decoded into *buf; false if it is no base64. The OTel collector's filelog receiver
// with `encoding: nop` sends each line so; the protobuf decoder takes bytes_value as text too.
bool base64Of(std::string_view text, std::string* buf) {
  // yaml-cpp 0.7 indexes its decoding table with each char cast to unsigned: a byte from 0x80 (any
  // non-ASCII text) reads far outside it and crashed the process. Only the alphabet goes to it.
  const auto base64 = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '/' || c == '-' || c == '_' || c == '=';
  };
  if (!std::all_of(text.begin(), text.end(), base64)) {
    return false;
  }
  std::string in(text);
  std::replace(in.begin(), in.end(), '-', '+');
  std::replace(in.begin(), in.end(), '_', '/');
  in.append((4 - in.size() % 4) % 4, '=');  // yaml-cpp drops an unpadded last group
  const std::vector<unsigned char> bytes = YAML::DecodeBase64(in);  // empty if not base64
  buf->assign(bytes.begin(), bytes.end());
  return !bytes.empty() || text.empty();
}

// AnyValue (a oneof) fields read as text, in order of precedence when a writer gives several.
constexpr FieldName kScalarFields[] = {kStringValue, kIntValue, kBoolValue, kArrayValue,
                                       kBytesValue};

// Reads an AnyValue's fields one at a time (add()): the scalar field of highest precedence
// decides, even when its value has a type that makes it unusable.
class ScalarOf {
 public:
  explicit ScalarOf(std::string* buf) : buf_(buf) {}

  error_code add(od::raw_json_string key, od::value value) {
    size_t rank = 0;
    while (rank < std::size(kScalarFields) && key != kScalarFields[rank]) {
      ++rank;
    }
    if (rank >= rank_) {
      return SUCCESS;
    }
    rank_ = rank;
    ok_ = false;
    if (rank == 0) {
      SIMDJSON_TRY(stringOf(value, &ok_, &text_));
    } else if (rank == 1) {
      int64_t i = 0;
      SIMDJSON_TRY(int64Of(value, &i, &ok_));
      *buf_ = std::to_string(i);
      text_ = *buf_;
    } else if (rank == 2) {
      od::json_type type = od::json_type::null;
      SIMDJSON_TRY(value.type().get(type));
      if (type == od::json_type::boolean) {
        bool b = false;
        SIMDJSON_TRY(value.get_bool().get(b));
        text_ = b ? "true" : "false";
        ok_ = true;
      }
    } else if (rank == 3) {
      SIMDJSON_TRY(bytesOf(value, buf_, &ok_));
      text_ = *buf_;
    } else if (rank == 4) {
      bool is_string = false;
      std::string_view base64;
      SIMDJSON_TRY(stringOf(value, &is_string, &base64));
      ok_ = is_string && base64Of(base64, buf_);
      text_ = *buf_;
    }
    return SUCCESS;
  }
  // Whether the AnyValue is a usable scalar; text() views the parser's string or the buffer.
  bool ok() const { return ok_; }
  std::string_view text() const { return text_; }

 private:
  std::string* buf_;
  size_t rank_ = std::size(kScalarFields);
  bool ok_ = false;
  std::string_view text_;
};

// An AnyValue as text, if it is a scalar (*ok): *out views the parser's string or *buf.
error_code anyValueString(od::value v, std::string* buf, std::string_view* out, bool* ok) {
  ScalarOf scalar(buf);
  SIMDJSON_TRY(forEachField(
      v, [&](od::raw_json_string key, od::value value) { return scalar.add(key, value); }));
  *ok = scalar.ok();
  *out = scalar.text();
  return SUCCESS;
}

// Calls f(name, text) for each KeyValue ({"key": ..., "value": AnyValue}) of the array `list`
// whose key is a string that wants(key) accepts and whose value is a scalar, or any value of a
// pod label (`keep`: text kNotAString); `text` views the parser's string or *buf, until the next
// KeyValue. A value written before its key is read whatever the key.
template <typename Wants, typename F>
error_code forEachKeyValue(od::value list, std::string* buf, const LabelFilter& keep, Wants wants,
                           F f) {
  return forEachElement(list, [&](od::value kv) {
    std::string_view name;
    std::string_view text;
    bool wanted = false;  // the first key is a string that wants() accepts
    bool seen_key = false;
    bool seen_value = false;
    bool ok = false;
    SIMDJSON_TRY(forEachField(kv, [&](od::raw_json_string key, od::value v) {
      if (key == "key" && !seen_key) {
        seen_key = true;
        bool is_string = false;
        SIMDJSON_TRY(stringOf(v, &is_string, &name));
        wanted = is_string && wants(name);
      } else if (key == "value" && !seen_value) {
        seen_value = true;
        if (!seen_key || wanted) {
          SIMDJSON_TRY(anyValueString(v, buf, &text, &ok));
        }
      }
      return SUCCESS;
    }));
    if (wanted && !ok && seen_value && keep.marksPod(name)) {
      return f(name, kNotAString);
    }
    return wanted && ok ? f(name, text) : SUCCESS;
  });
}

// Scratch space of one decodeOtlpJson call: labels as views into the batch, and the bound on
// what the call adds to it.
struct OtlpScratch {
  DecodeBound* bound = nullptr;
  std::string buf;
  std::vector<Label> resource;    // the current resource's attributes
  std::vector<Label> attributes;  // the current record's
  std::vector<Label> body;        // the current record's kvlist body entries
  // Of each record of the current ResourceLogs: its kvlist body's entries, for a resource that
  // comes after its records.
  std::vector<uint32_t> body_sizes;
};

// The attributes (an array of KeyValue) that `keep` keeps, copied into the batch, onto *labels.
error_code addAttributes(od::value attrs, const LabelFilter& keep, std::string* buf,
                         RecordBatch* batch, std::vector<Label>* labels) {
  return forEachKeyValue(
      attrs, buf, keep, [&](std::string_view name) { return keep.keeps(name); },
      [&](std::string_view name, std::string_view text) {
        labels->push_back({batch->copy(name), batch->copy(text)});
        return SUCCESS;
      });
}

// Appends the logRecord `lr` (an object) with the resource's labels, unless it has no usable
// line (*added false). The first of a repeated key counts.
error_code addOtlpRecord(od::value lr, const StreamRules& rules, const LabelFilter& keep,
                         OtlpScratch* s, RecordBatch* batch, bool* added) {
  *added = false;
  s->attributes.clear();
  s->body.clear();
  std::string_view message;
  bool found = false;
  bool seen_time = false;
  bool seen_observed = false;
  bool seen_attributes = false;
  bool seen_body = false;
  int64_t time_ns = 0;
  int64_t observed_ns = 0;
  SIMDJSON_TRY(forEachField(lr, [&](od::raw_json_string key, od::value v) {
    if (key == kTimeUnixNano && !seen_time) {
      seen_time = true;
      return intOf(v, &time_ns);
    }
    if (key == kObservedTimeUnixNano && !seen_observed) {
      seen_observed = true;
      return time_ns != 0 ? SUCCESS : intOf(v, &observed_ns);  // read only if it is the time
    }
    if (key == "attributes" && !seen_attributes) {
      seen_attributes = true;
      return addAttributes(v, keep, &s->buf, batch, &s->attributes);
    }
    if (key != "body" || seen_body) {
      return SUCCESS;
    }
    seen_body = true;
    // A kvlist body is the journald receiver's: a map of journal fields whose MESSAGE (the last,
    // if several) is the line, the others labels. Else a scalar body is the line.
    ScalarOf scalar(&s->buf);
    bool seen_kvlist = false;
    SIMDJSON_TRY(forEachField(v, [&](od::raw_json_string kind, od::value value) {
      if (kind != kKvlistValue) {
        return seen_kvlist ? SUCCESS : scalar.add(kind, value);
      }
      if (seen_kvlist) {
        return SUCCESS;
      }
      seen_kvlist = true;
      bool seen_values = false;
      return forEachField(value, [&](od::raw_json_string k, od::value values) {
        if (k != "values" || seen_values) {
          return SUCCESS;
        }
        seen_values = true;
        return forEachKeyValue(
            values, &s->buf, keep,
            [&](std::string_view name) { return name == "MESSAGE" || keep.keeps(name); },
            [&](std::string_view name, std::string_view text) {
              if (name == "MESSAGE") {
                message = batch->copy(text);
                found = true;
              } else {
                s->body.push_back({batch->copy(name), batch->copy(text)});
              }
              return SUCCESS;
            });
      });
    }));
    if (!seen_kvlist && scalar.ok()) {
      message = batch->copy(scalar.text());
      found = true;
    }
    return SUCCESS;
  }));
  if (!found) {
    return SUCCESS;
  }
  const auto labels_begin = static_cast<uint32_t>(batch->labels.size());
  // The body's fields before the attributes: a kvlist body is the journald receiver's, whose
  // fields may mark the kernel stream; attributes are what a json_parser made of the line.
  batch->labels.insert(batch->labels.end(), s->resource.begin(), s->resource.end());
  batch->labels.insert(batch->labels.end(), s->body.begin(), s->body.end());
  batch->labels.insert(batch->labels.end(), s->attributes.begin(), s->attributes.end());
  LogRecord& r = batch->records.emplace_back();
  r.time_ns = time_ns != 0 ? time_ns : observed_ns;
  r.line = message;
  r.labels_begin = labels_begin;
  r.labels_end = static_cast<uint32_t>(batch->labels.size());
  s->body_sizes.push_back(static_cast<uint32_t>(s->body.size()));
  classifyShipped(rules, static_cast<uint32_t>(s->resource.size()),
                  static_cast<uint32_t>(s->resource.size() + s->body.size()), batch, &r);
  *added = true;
  return SUCCESS;
}

// The records of one ResourceLogs object onto the batch.
error_code addResourceLogs(od::value rl, const StreamRules& rules, const LabelFilter& keep,
                           OtlpScratch* s, RecordBatch* batch, uint64_t* rejected) {
  s->resource.clear();
  s->body_sizes.clear();
  const size_t first = batch->records.size();
  bool seen_resource = false;
  bool seen_scopes = false;
  bool resource_late = false;  // after scopeLogs: its records do not have its labels yet
  SIMDJSON_TRY(forEachField(rl, [&](od::raw_json_string key, od::value v) {
    if (key == "resource" && !seen_resource) {
      seen_resource = true;
      resource_late = seen_scopes;
      bool seen_attributes = false;
      return forEachField(v, [&](od::raw_json_string k, od::value attrs) {
        if (k != "attributes" || seen_attributes) {
          return SUCCESS;
        }
        seen_attributes = true;
        return addAttributes(attrs, keep, &s->buf, batch, &s->resource);
      });
    }
    if (key != kScopeLogs || seen_scopes) {
      return SUCCESS;
    }
    seen_scopes = true;
    return forEachElement(v, [&](od::value sl) {
      bool seen_records = false;
      return forEachField(sl, [&](od::raw_json_string k, od::value records) {
        if (k != kLogRecords || seen_records) {
          return SUCCESS;
        }
        seen_records = true;
        return forEachElement(records, [&](od::value lr) {
          od::json_type type = od::json_type::null;
          SIMDJSON_TRY(lr.type().get(type));
          bool added = false;
          if (type == od::json_type::object) {
            SIMDJSON_TRY(addOtlpRecord(lr, rules, keep, s, batch, &added));
          }
          *rejected += added ? 0 : 1;
          return s->bound->holds(*batch) ? SUCCESS : simdjson::CAPACITY;
        });
      });
    });
  }));
  if (resource_late && !s->resource.empty()) {
    // Rare (writers put the resource first): the records get new label ranges, resource first.
    for (size_t i = first; i < batch->records.size(); ++i) {
      LogRecord& r = batch->records[i];
      const std::vector<Label> own(batch->labels.begin() + r.labels_begin,
                                   batch->labels.begin() + r.labels_end);
      r.labels_begin = static_cast<uint32_t>(batch->labels.size());
      batch->labels.insert(batch->labels.end(), s->resource.begin(), s->resource.end());
      batch->labels.insert(batch->labels.end(), own.begin(), own.end());
      r.labels_end = static_cast<uint32_t>(batch->labels.size());
      r.node = {};
      const auto resource = static_cast<uint32_t>(s->resource.size());
      classifyShipped(rules, resource, resource + s->body_sizes[i - first], batch, &r);
      if (!s->bound->holds(*batch)) {
        return simdjson::CAPACITY;
      }
    }
  }
  return SUCCESS;
}

class OtlpJsonParser : public LineParser {
 public:
  explicit OtlpJsonParser(const ParseOptions& o) : rules_(o.streams), keep_(o.streams) {}

  bool parse(std::string_view line, RecordBatch* batch) override {
    uint64_t rejected = 0;
    std::string error;
    return decodeOtlpJson(line, line.size(), rules_, keep_, batch, &rejected, &error);
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
    if (!member(e, "timestamp", &v)) {
      return false;  // no time to place it at (logcli writes one for every entry): malformed
    }
    if (v.get(ts) != SUCCESS || !parseRfc3339(ts, &ns)) {
      ns = intOf(v);  // a nanosecond epoch, as the push API writes it
      if (ns <= 0) {
        return false;  // a stamp that is neither: not logcli's
      }
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

// The request's records onto the batch; an error means it is not JSON. *not_array: resourceLogs
// is there but is neither an array nor null.
error_code addRequest(od::document& req, const StreamRules& rules, const LabelFilter& keep,
                      OtlpScratch* s, RecordBatch* batch, uint64_t* rejected, bool* not_array) {
  od::object root;
  SIMDJSON_TRY(req.get_object().get(root));
  bool seen = false;  // the first resourceLogs counts
  for (auto field_result : root) {
    od::field field;
    SIMDJSON_TRY(std::move(field_result).get(field));
    if (field.key() != kResourceLogs || seen) {
      continue;
    }
    seen = true;
    od::value& v = field.value();
    od::json_type type = od::json_type::null;
    SIMDJSON_TRY(v.type().get(type));
    if (type == od::json_type::null) {
      continue;  // the proto3 JSON mapping's null: the field's default, no records
    }
    if (type != od::json_type::array) {
      *not_array = true;
      return SUCCESS;
    }
    SIMDJSON_TRY(forEachElement(
        v, [&](od::value rl) { return addResourceLogs(rl, rules, keep, s, batch, rejected); }));
  }
  // Past the root object, current_location() is out of bounds unless something follows it.
  return req.current_location().error() == SUCCESS ? simdjson::TRAILING_CONTENT : SUCCESS;
}

}  // namespace

static_assert(kJsonPadding == simdjson::SIMDJSON_PADDING);

namespace {

// The length of the well-formed UTF-8 sequence at s[i] (RFC 3629 section 4), 0 if none.
size_t utf8Length(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = at(i);
  if (c < 0x80) {
    return 1;
  }
  size_t n = 0;
  uint8_t lo = 0x80;  // the second byte's range
  uint8_t hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    lo = c == 0xe0 ? 0xa0 : 0x80;
    hi = c == 0xed ? 0x9f : 0xbf;  // ED A0..BF: surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    lo = c == 0xf0 ? 0x90 : 0x80;
    hi = c == 0xf4 ? 0x8f : 0xbf;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size() || at(i + 1) < lo || at(i + 1) > hi) {
    return 0;
  }
  for (size_t k = 2; k < n; ++k) {
    if (at(i + k) < 0x80 || at(i + k) > 0xbf) {
      return 0;
    }
  }
  return n;
}

// The UTF-16 code unit of the \uXXXX escape at s[i] (s[i] is the backslash), -1 if there is none.
int escapedUnit(std::string_view s, size_t i) {
  if (i + 6 > s.size() || s[i + 1] != 'u') {
    return -1;
  }
  int v = 0;
  const auto [end, ec] = std::from_chars(s.data() + i + 2, s.data() + i + 6, v, 16);
  return ec == std::errc() && end == s.data() + i + 6 ? v : -1;
}

}  // namespace

bool replaceInvalidUnicode(std::string_view json, std::string* out) {
  std::string r;
  bool replaced = false;
  size_t i = 0;
  while (i < json.size()) {
    if (json[i] == '\\' && i + 1 < json.size()) {
      const int unit = escapedUnit(json, i);
      size_t n = 2;  // an escape other than \u: its character is never the start of another
      if (unit >= 0xd800 && unit <= 0xdbff) {
        const int low = json.size() > i + 6 && json[i + 6] == '\\' ? escapedUnit(json, i + 6) : -1;
        n = low >= 0xdc00 && low <= 0xdfff ? 12 : 6;
        if (n == 6) {
          r += "\\ufffd";
          replaced = true;
          i += 6;
          continue;
        }
      } else if (unit >= 0xdc00 && unit <= 0xdfff) {
        r += "\\ufffd";
        replaced = true;
        i += 6;
        continue;
      } else if (unit >= 0) {
        n = 6;
      }
      r.append(json.substr(i, n));
      i += n;
      continue;
    }
    const size_t n = utf8Length(json, i);
    if (n == 0) {
      r += '?';
      replaced = true;
      ++i;
      continue;
    }
    r.append(json.substr(i, n));
    i += n;
  }
  if (replaced) {
    *out = std::move(r);
  }
  return replaced;
}

bool decodeOtlpJson(std::string_view doc, size_t readable, const StreamRules& rules,
                    const LabelFilter& keep, RecordBatch* batch, uint64_t* rejected,
                    std::string* error) {
  od::parser parser;  // one per call: the HTTP server decodes on several threads
  simdjson::padded_string copy;
  simdjson::padded_string_view in(doc.data(), doc.size(), readable);
  if (readable < doc.size() + kJsonPadding) {
    copy = simdjson::padded_string(doc);
    in = copy;
  }
  od::document req;
  od::json_type type = od::json_type::null;
  error_code err = parser.iterate(in).get(req);
  if (err == SUCCESS) {
    err = req.type().get(type);
  }
  if (err == SUCCESS && type != od::json_type::object) {
    *error = "not a JSON object";
    return false;
  }
  const size_t records = batch->records.size();
  const size_t labels = batch->labels.size();
  const uint64_t rejected_before = *rejected;
  DecodeBound bound(*batch, doc.size());
  OtlpScratch scratch;
  scratch.bound = &bound;
  bool not_array = false;
  if (err == SUCCESS) {
    err = addRequest(req, rules, keep, &scratch, batch, rejected, &not_array);
  }
  if (err == SUCCESS && !not_array) {
    return true;
  }
  batch->records.resize(records);  // the request is refused: none of it is kept
  batch->labels.resize(labels);
  *rejected = rejected_before;
  if (std::string repaired; (err == simdjson::UTF8_ERROR || err == simdjson::STRING_ERROR) &&
                            replaceInvalidUnicode(doc, &repaired)) {
    const size_t size = repaired.size();
    repaired.append(kJsonPadding, '\0');
    return decodeOtlpJson(std::string_view(repaired).substr(0, size), repaired.size(), rules, keep,
                          batch, rejected, error);
  }
  *error = not_array          ? "resourceLogs is not an array"
           : bound.exceeded() ? "request " + bound.reason()
           : err == simdjson::INCORRECT_TYPE
               ? "a list (scopeLogs, logRecords, attributes, values) "
                 "is not an array"
               : std::string("not JSON (") + simdjson::error_message(err) + ")";
  return false;
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
