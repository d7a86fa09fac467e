#include "ingest/push/loki.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <memory>
#include <vector>

#include <simdjson.h>
#include <snappy.h>

#include "ingest/formats/formats.h"
#include "ingest/formats/protobuf_wire.h"

namespace faultline {
namespace {

using simdjson::SUCCESS;
using simdjson::dom::element;

bool isSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

void skipSpace(std::string_view s, size_t* i) {
  while (*i < s.size() && isSpace(s[*i])) {
    ++*i;
  }
}

bool isNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-' || c == '/' || c == ':';
}

void appendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

// Reads a quoted value (or name) starting at s[*i] (the opening quote). Sets *value to a view of
// `s` when there is nothing to unescape, else to the unescaped copy in *buf.
bool readQuoted(std::string_view s, size_t* i, std::string_view* value, std::string* buf,
                std::string* error) {
  const char quote = s[*i];
  const size_t start = ++*i;
  if (quote == '`') {  // raw string: no escapes
    const size_t end = s.find('`', start);
    if (end == std::string_view::npos) {
      *error = "unterminated `value`";
      return false;
    }
    *value = s.substr(start, end - start);
    *i = end + 1;
    return true;
  }
  bool escaped = false;
  buf->clear();
  while (*i < s.size() && s[*i] != '"') {
    const char c = s[(*i)++];
    if (c != '\\') {
      buf->push_back(c);
      continue;
    }
    escaped = true;
    if (*i >= s.size()) {
      break;
    }
    const char e = s[(*i)++];
    switch (e) {
      case 'n':
        buf->push_back('\n');
        break;
      case 't':
        buf->push_back('\t');
        break;
      case 'r':
        buf->push_back('\r');
        break;
      // Go's strconv.Quote (Prometheus' labels.String(), which clients use) writes these for
      // control characters, and its Unquote (Loki's selector lexer) reads them.
      case 'a':
        buf->push_back('\a');
        break;
      case 'b':
        buf->push_back('\b');
        break;
      case 'f':
        buf->push_back('\f');
        break;
      case 'v':
        buf->push_back('\v');
        break;
      case '0':
      case '1':
      case '2':
      case '3': {  // octal \ooo, a byte (Go's Unquote: at most \377)
        auto v = static_cast<uint32_t>(e - '0');
        for (int d = 0; d < 2; ++d) {
          if (*i >= s.size() || s[*i] < '0' || s[*i] > '7') {
            *error = "bad octal escape in a label";
            return false;
          }
          v = v * 8 + static_cast<uint32_t>(s[(*i)++] - '0');
        }
        buf->push_back(static_cast<char>(v));
        break;
      }
      case '\\':
      case '"':
      case '\'':
        buf->push_back(e);
        break;
      case 'x':
      case 'u':
      case 'U': {
        const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t v = 0;
        for (int d = 0; d < digits; ++d) {
          const int h = *i < s.size() ? hexDigit(s[*i]) : -1;
          if (h < 0) {
            *error = "bad \\" + std::string(1, e) + " escape in a label";
            return false;
          }
          v = v * 16 + static_cast<uint32_t>(h);
          ++*i;
        }
        if (e == 'x') {
          buf->push_back(static_cast<char>(v));
        } else if (v > 0x10ffff) {
          *error = "escape beyond Unicode in a label";
          return false;
        } else {
          appendUtf8(v, buf);
        }
        break;
      }
      default:
        *error = "unknown escape \\" + std::string(1, e) + " in a label";
        return false;
    }
  }
  if (*i >= s.size()) {
    *error = "unterminated \"value\"";
    return false;
  }
  *value = escaped ? std::string_view(*buf) : s.substr(start, *i - start);
  ++*i;  // closing quote
  return true;
}

// Appends `{tenant}` and the stream labels; returns false on a bad selector.
bool streamLabels(std::string_view selector, std::string_view tenant, RecordBatch* batch,
                  std::string* error) {
  if (!parseLokiSelector(selector, batch, error)) {
    return false;
  }
  if (!tenant.empty()) {
    batch->labels.push_back({"tenant", tenant});
  }
  return true;
}

// An entry's timestamp: a string of nanoseconds, or (accepted too) a JSON integer. One past
// int64 (years 1678 to 2262) is taken as INT64_MAX or INT64_MIN, as in the protobuf body
// (readEntry).
bool nanosOf(element v, int64_t* ns) {
  std::string_view s;
  if (v.get(*ns) == SUCCESS) {
    return true;
  }
  if (uint64_t above = 0; v.get(above) == SUCCESS) {  // an unsigned one past int64
    *ns = INT64_MAX;
    return true;
  }
  if (v.get(s) != SUCCESS || s.empty()) {
    return false;
  }
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *ns);
  if (ec == std::errc::result_out_of_range && end == s.data() + s.size()) {
    *ns = s.front() == '-' ? INT64_MIN : INT64_MAX;
    return true;
  }
  return ec == std::errc() && end == s.data() + s.size();
}

// google.protobuf.Timestamp: seconds 1, nanos 2, as two's-complement varints.
bool readTimestamp(WireBytes bytes, int64_t* seconds, int32_t* nanos) {
  WireReader r(bytes);
  while (r.next()) {
    if (r.is(WireReader::kVarint) && r.number() == 1) {
      *seconds = static_cast<int64_t>(r.numberValue());
    } else if (r.is(WireReader::kVarint) && r.number() == 2) {
      *nanos = static_cast<int32_t>(r.numberValue());
    }
  }
  return r.ok();
}

// LabelPairAdapter: name 1, value 2.
bool readLabelPair(WireBytes bytes, Label* kv) {
  WireReader r(bytes);
  while (r.next()) {
    if (r.is(WireReader::kBytes) && r.number() == 1) {
      kv->name = r.bytesValue();
    } else if (r.is(WireReader::kBytes) && r.number() == 2) {
      kv->value = r.bytesValue();
    }
  }
  return r.ok();
}

// EntryAdapter: timestamp 1 (google.protobuf.Timestamp: seconds 1, nanos 2), line 2,
// structuredMetadata 3 (LabelPairAdapter: name 1, value 2). Sets *ns (ns since the epoch),
// *line and appends the metadata, all views into `bytes`. False on malformed wire.
bool readEntry(WireBytes bytes, int64_t* ns, std::string_view* line, std::vector<Label>* metadata) {
  int64_t seconds = 0;
  int32_t nanos = 0;
  WireReader r(bytes);
  while (r.next()) {
    if (!r.is(WireReader::kBytes)) {
      continue;
    }
    if (r.number() == 1 && !readTimestamp(r.messageValue(), &seconds, &nanos)) {
      return false;
    }
    if (r.number() == 2) {
      *line = r.bytesValue();
    }
    if (r.number() == 3 && !readLabelPair(r.messageValue(), &metadata->emplace_back())) {
      return false;
    }
  }
  if (!r.ok()) {
    return false;
  }
  // A Timestamp runs from year 1 to 9999; int64 nanoseconds from 1678 to 2262. A time beyond is
  // taken as the nearest there is, which the pipeline bounds (Pipeline::match): one entry that a
  // pod stamped in year 9999, or with Go's zero time (year 1), must not refuse the request's
  // other streams.
  if (__builtin_mul_overflow(seconds, int64_t{1'000'000'000}, ns) ||
      __builtin_add_overflow(*ns, int64_t{nanos}, ns)) {
    *ns = seconds > 0 ? INT64_MAX : INT64_MIN;
  }
  return true;
}

// A record of the stream's labels [begin, end) of batch.labels alone, classified: what every
// entry without structured metadata is. Once per stream: classifying each such entry scanned
// every label of the stream again (a stream of 60,000 labels and as many entries took seconds).
LogRecord classifyStream(const StreamRules& rules, uint32_t begin, uint32_t end,
                         const RecordBatch& batch) {
  LogRecord r;
  r.labels_begin = begin;
  r.labels_end = end;
  classify(rules, batch, &r);
  return r;
}

// Appends an entry's record: `stream_only` (the stream's labels, classified) if it has no
// structured metadata; else one whose labels are the stream's, copied, followed by the metadata
// (views that live as long as the batch), classified with the stream's labels as the shipper's:
// shippers fill metadata from the line's own fields (Promtail's json and structured_metadata
// stages), so a pod's metadata names neither its node nor its job, and no metadata marks the
// kernel stream.
LogRecord& addEntry(const StreamRules& rules, uint32_t stream_begin, uint32_t stream_end,
                    const std::vector<Label>& metadata, const LogRecord& stream_only,
                    RecordBatch* batch) {
  if (metadata.empty()) {
    return batch->records.emplace_back(stream_only);
  }
  LogRecord& r = batch->records.emplace_back();
  r.labels_begin = static_cast<uint32_t>(batch->labels.size());
  for (uint32_t k = stream_begin; k < stream_end; ++k) {
    batch->labels.push_back(batch->labels[k]);
  }
  batch->labels.insert(batch->labels.end(), metadata.begin(), metadata.end());
  r.labels_end = static_cast<uint32_t>(batch->labels.size());
  classifyShipped(rules, stream_end - stream_begin, stream_end - stream_begin, batch, &r);
  return r;
}

}  // namespace

bool parseLokiSelector(std::string_view s, RecordBatch* batch, std::string* error) {
  const size_t labels_before = batch->labels.size();
  auto bad = [&](const std::string& why) {
    batch->labels.resize(labels_before);
    *error = "stream selector " + std::string(s.substr(0, 200)) + ": " + why;
    return false;
  };
  size_t i = 0;
  skipSpace(s, &i);
  if (i >= s.size() || s[i] != '{') {
    return bad("does not start with {");
  }
  ++i;
  std::string buf;
  std::string why;
  skipSpace(s, &i);
  while (i < s.size() && s[i] != '}') {
    const size_t name_start = i;
    std::string_view name;
    if (s[i] == '"' || s[i] == '`') {
      // Quoted as a value: a UTF-8 name (service.name) as Prometheus 3's labels.String() writes
      // it and Loki 3 reads it (ParseMetric).
      if (!readQuoted(s, &i, &name, &buf, &why)) {
        return bad(why);
      }
      if (name.data() == buf.data()) {
        name = batch->copy(name);
      }
    } else {
      while (i < s.size() && isNameChar(s[i])) {
        ++i;
      }
      name = s.substr(name_start, i - name_start);
    }
    if (name.empty()) {
      return bad("expected a label name at offset " + std::to_string(name_start));
    }
    skipSpace(s, &i);
    if (i >= s.size() || s[i] != '=') {
      return bad("expected = after " + std::string(name));
    }
    ++i;
    skipSpace(s, &i);
    if (i >= s.size() || (s[i] != '"' && s[i] != '`')) {
      return bad("expected a quoted value for " + std::string(name));
    }
    std::string_view value;
    if (!readQuoted(s, &i, &value, &buf, &why)) {
      return bad(why);
    }
    if (value.data() == buf.data()) {
      value = batch->copy(value);
    }
    batch->labels.push_back({name, value});
    skipSpace(s, &i);
    if (i < s.size() && s[i] == ',') {
      ++i;
      skipSpace(s, &i);
    } else if (i < s.size() && s[i] != '}') {
      return bad("expected , or } at offset " + std::to_string(i));
    }
  }
  if (i >= s.size()) {
    return bad("does not end with }");
  }
  ++i;
  skipSpace(s, &i);
  if (i != s.size()) {
    return bad("text after }");
  }
  return true;
}

bool decodeLokiProto(std::string_view snappy, size_t max_bytes, std::string_view tenant,
                     const StreamRules& rules, RecordBatch* batch, std::string* error,
                     bool* too_large) {
  size_t length = 0;
  if (!snappy::GetUncompressedLength(snappy.data(), snappy.size(), &length)) {
    *error = "body is not snappy block format (Loki protobuf bodies are snappy-compressed)";
    return false;
  }
  const size_t limit = std::min<size_t>(max_bytes, INT_MAX);  // WireReader's limit
  if (length > limit) {
    *too_large = true;
    *error = "snappy body decompresses to " + std::to_string(length) +
             " bytes, over the limit of " + std::to_string(limit);
    return false;
  }
  auto proto = std::make_shared<std::string>();
  if (!snappy::Uncompress(snappy.data(), snappy.size(), proto.get())) {
    *error = "snappy body is corrupt";
    return false;
  }
  batch->hold(proto, proto->size());  // records and labels point into the message
  DecodeBound bound(*batch, proto->size());
  const std::string_view tenant_view = batch->copy(tenant);
  std::vector<Label> metadata;
  bool refused = false;  // a reason other than the wire's is in *error
  // PushRequest.streams
  const bool ok = forEachField(WireBytes::whole(*proto), 1, [&](WireBytes stream) {
    // StreamAdapter: labels 1, entries 2. The labels may follow the entries on the wire, so the
    // stream is read twice, not its entries kept aside: that list (16 bytes per entry of 2 wire
    // bytes) was outside DecodeBound.
    std::string_view selector;
    WireReader r(stream);
    while (r.next()) {
      if (r.is(WireReader::kBytes) && r.number() == 1) {
        selector = r.bytesValue();
      }
    }
    if (!r.ok()) {
      return false;
    }
    const auto begin = static_cast<uint32_t>(batch->labels.size());
    if (!streamLabels(selector, tenant_view, batch, error)) {
      refused = true;
      return false;
    }
    const auto end = static_cast<uint32_t>(batch->labels.size());
    const LogRecord stream_only = classifyStream(rules, begin, end, *batch);
    return forEachField(stream, 2, [&](WireBytes bytes) {
      int64_t ns = 0;
      std::string_view line;
      metadata.clear();
      if (!readEntry(bytes, &ns, &line, &metadata)) {
        return false;
      }
      LogRecord& rec = addEntry(rules, begin, end, metadata, stream_only, batch);
      rec.time_ns = ns;
      rec.line = line;
      if (!bound.holds(*batch)) {
        *error = "body " + bound.reason();
        *too_large = true;
        refused = true;
        return false;
      }
      return true;
    });
  });
  if (!ok && !refused) {
    *error = "not a Loki PushRequest (protobuf does not parse)";
  }
  return ok;
}

bool decodeLokiJson(std::string_view text, size_t readable, std::string_view tenant,
                    const StreamRules& rules, RecordBatch* batch, std::string* error) {
  auto fail = [&](const std::string& why) {
    *error = why;
    return false;
  };
  simdjson::dom::parser parser;  // one per call: the HTTP server decodes on several threads
  element doc;
  const bool copy = readable < text.size() + kJsonPadding;
  auto err = parser.parse(text.data(), text.size(), copy).get(doc);
  if (std::string repaired; (err == simdjson::UTF8_ERROR || err == simdjson::STRING_ERROR) &&
                            replaceInvalidUnicode(text, &repaired)) {
    err = parser.parse(repaired).get(doc);  // the parser's strings outlive `repaired`
  }
  if (err != SUCCESS) {
    return fail(std::string("body is not a JSON object (") + simdjson::error_message(err) + ")");
  }
  simdjson::dom::object root;
  if (doc.get(root) != SUCCESS) {
    return fail("body is not a JSON object");
  }
  // null stands for an empty list or map, as Go's encoding/json writes a nil slice or map and
  // Loki reads it: {"streams": null}, "stream": null and "values": null add nothing.
  simdjson::dom::array streams;
  bool has_streams = false;
  bool no_streams = false;
  for (const auto field : root) {
    if (field.key == "streams") {  // a repeated key: the last wins, as in a parse tree
      no_streams = field.value.is_null();
      has_streams = no_streams || field.value.get(streams) == SUCCESS;
    }
  }
  if (!has_streams) {
    return fail("streams is missing or not an array");
  }
  if (no_streams) {
    return true;
  }
  DecodeBound bound(*batch, text.size());
  const std::string_view tenant_view = batch->copy(tenant);
  std::vector<Label> metadata;
  size_t si = 0;
  for (element stream : streams) {
    const auto where = [&] { return "streams[" + std::to_string(si) + "]"; };
    simdjson::dom::object so;
    if (stream.get(so) != SUCCESS) {
      return fail(where() + " is not an object");
    }
    int labels_seen = 0;
    int values_seen = 0;
    bool has_labels = false;
    bool has_values = false;
    simdjson::dom::object labels;
    simdjson::dom::array values;
    for (const auto field : so) {
      if (field.key == "stream") {
        if (labels_seen++ > 0) {
          return fail(where() + ".stream is given twice");
        }
        has_labels = !field.value.is_null();
        if (has_labels && field.value.get(labels) != SUCCESS) {
          return fail(where() + ".stream is not an object");
        }
      } else if (field.key == "values") {
        if (values_seen++ > 0) {
          return fail(where() + ".values is given twice");
        }
        has_values = !field.value.is_null();
        if (has_values && field.value.get(values) != SUCCESS) {
          return fail(where() + ".values is missing or not an array");
        }
      }
    }
    if (values_seen == 0) {
      return fail(where() + ".values is missing or not an array");
    }
    if (!has_values) {
      ++si;
      continue;
    }
    const auto begin = static_cast<uint32_t>(batch->labels.size());
    if (has_labels) {
      for (const auto label : labels) {
        std::string_view value;
        if (label.value.get(value) != SUCCESS) {
          // The key as the client wrote it, cut: the answer and the log quote it.
          return fail(where() + ".stream." + std::string(label.key.substr(0, 200)) +
                      " is not a string");
        }
        batch->labels.push_back({batch->copy(label.key), batch->copy(value)});
      }
    }
    if (!tenant.empty()) {
      batch->labels.push_back({"tenant", tenant_view});
    }
    const auto end = static_cast<uint32_t>(batch->labels.size());
    const LogRecord stream_only = classifyStream(rules, begin, end, *batch);
    size_t ei = 0;
    for (element value : values) {
      const auto entry_at = [&] { return where() + ".values[" + std::to_string(ei) + "]"; };
      const auto bad_entry = [&] {
        return fail(entry_at() + R"( is not ["<ns>", "<line>"(, {metadata})])");
      };
      simdjson::dom::array entry;
      if (value.get(entry) != SUCCESS) {
        return bad_entry();
      }
      int64_t ns = 0;
      std::string_view line;
      simdjson::dom::object meta;
      bool has_meta = false;
      size_t fi = 0;
      for (element f : entry) {
        if (fi == 0) {
          if (!nanosOf(f, &ns)) {
            return fail(entry_at() + "[0] is not a string of nanoseconds");
          }
        } else if (fi == 1) {
          if (f.get(line) != SUCCESS) {
            return bad_entry();
          }
        } else if (fi == 2) {
          if (f.get(meta) != SUCCESS) {
            return fail(entry_at() + "[2] (structured metadata) is not an object");
          }
          has_meta = true;
        } else {
          return bad_entry();
        }
        ++fi;
      }
      if (fi < 2) {
        return bad_entry();
      }
      metadata.clear();
      if (has_meta) {
        for (const auto kv : meta) {  // strings only
          std::string_view v;
          if (kv.value.get(v) == SUCCESS) {
            metadata.push_back({batch->copy(kv.key), batch->copy(v)});
          }
        }
      }
      LogRecord& r = addEntry(rules, begin, end, metadata, stream_only, batch);
      r.time_ns = ns;
      r.line = batch->copy(line);
      if (!bound.holds(*batch)) {
        *error = "body " + bound.reason();
        return false;
      }
      ++ei;
    }
    ++si;
  }
  return true;
}

}  // namespace faultline
