#include "ingest/push/loki.h"

#include <memory>

#include <google/protobuf/arena.h>
#include <nlohmann/json.hpp>
#include <snappy.h>

#include "loki/push.pb.h"

namespace faultline {
namespace {

using nlohmann::json;

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

int hexDigit(char c) {
  if (c >= '0' && c <= '9') {
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

// Reads a quoted value starting at s[*i] (the opening quote). Sets *value to a view of `s` when
// there is nothing to unescape, else to the unescaped copy in *buf.
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
            *error = "bad \\" + std::string(1, e) + " escape in a label value";
            return false;
          }
          v = v * 16 + static_cast<uint32_t>(h);
          ++*i;
        }
        if (e == 'x') {
          buf->push_back(static_cast<char>(v));
        } else if (v > 0x10ffff) {
          *error = "escape beyond Unicode in a label value";
          return false;
        } else {
          appendUtf8(v, buf);
        }
        break;
      }
      default:
        *error = "unknown escape \\" + std::string(1, e) + " in a label value";
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

// Appends a record whose labels are [stream_begin, stream_end) plus `metadata`; entries without
// metadata share the stream's label range.
LogRecord& addEntry(uint32_t stream_begin, uint32_t stream_end, RecordBatch* batch) {
  LogRecord& r = batch->records.emplace_back();
  r.labels_begin = stream_begin;
  r.labels_end = stream_end;
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
    while (i < s.size() && isNameChar(s[i])) {
      ++i;
    }
    if (i == name_start) {
      return bad("expected a label name at offset " + std::to_string(i));
    }
    const std::string_view name = s.substr(name_start, i - name_start);
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
  if (length > max_bytes) {
    *too_large = true;
    *error = "snappy body decompresses to " + std::to_string(length) +
             " bytes, over the limit of " + std::to_string(max_bytes);
    return false;
  }
  std::string proto;
  if (!snappy::Uncompress(snappy.data(), snappy.size(), &proto)) {
    *error = "snappy body is corrupt";
    return false;
  }
  auto arena = std::make_shared<google::protobuf::Arena>();
  auto* req = google::protobuf::Arena::CreateMessage<logproto::PushRequest>(arena.get());
  if (!req->ParseFromString(proto)) {
    *error = "not a Loki PushRequest (protobuf does not parse)";
    return false;
  }
  proto = std::string();                   // the message holds its own copies
  batch->hold(arena, arena->SpaceUsed());  // records and labels point into the message
  std::string_view tenant_view = batch->copy(tenant);
  for (const logproto::StreamAdapter& stream : req->streams()) {
    const auto begin = static_cast<uint32_t>(batch->labels.size());
    if (!streamLabels(stream.labels(), tenant_view, batch, error)) {
      return false;
    }
    const auto end = static_cast<uint32_t>(batch->labels.size());
    for (const logproto::EntryAdapter& entry : stream.entries()) {
      uint32_t b = begin;
      uint32_t e = end;
      if (entry.structuredmetadata_size() > 0) {
        b = static_cast<uint32_t>(batch->labels.size());
        for (uint32_t k = begin; k < end; ++k) {
          batch->labels.push_back(batch->labels[k]);
        }
        for (const logproto::LabelPairAdapter& kv : entry.structuredmetadata()) {
          batch->labels.push_back({kv.name(), kv.value()});
        }
        e = static_cast<uint32_t>(batch->labels.size());
      }
      LogRecord& r = addEntry(b, e, batch);
      r.time_ns = entry.timestamp().seconds() * 1'000'000'000 + entry.timestamp().nanos();
      r.line = entry.line();
      classify(rules, *batch, &r);
    }
  }
  return true;
}

bool decodeLokiJson(std::string_view text, std::string_view tenant, const StreamRules& rules,
                    RecordBatch* batch, std::string* error) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) {
    *error = "body is not a JSON object";
    return false;
  }
  const auto streams = doc.find("streams");
  if (streams == doc.end() || !streams->is_array()) {
    *error = "streams is missing or not an array";
    return false;
  }
  const std::string_view tenant_view = batch->copy(tenant);
  for (size_t s = 0; s < streams->size(); ++s) {
    const json& stream = (*streams)[s];
    const std::string where = "streams[" + std::to_string(s) + "]";
    if (!stream.is_object()) {
      *error = where + " is not an object";
      return false;
    }
    const auto begin = static_cast<uint32_t>(batch->labels.size());
    if (const auto labels = stream.find("stream"); labels != stream.end()) {
      if (!labels->is_object()) {
        *error = where + ".stream is not an object";
        return false;
      }
      for (const auto& [k, v] : labels->items()) {
        if (!v.is_string()) {
          *error = where + ".stream." + k + " is not a string";
          return false;
        }
        batch->labels.push_back({batch->copy(k), batch->copy(v.get_ref<const std::string&>())});
      }
    }
    if (!tenant_view.empty()) {
      batch->labels.push_back({"tenant", tenant_view});
    }
    const auto end = static_cast<uint32_t>(batch->labels.size());
    const auto values = stream.find("values");
    if (values == stream.end() || !values->is_array()) {
      *error = where + ".values is missing or not an array";
      return false;
    }
    for (size_t v = 0; v < values->size(); ++v) {
      const json& entry = (*values)[v];
      const std::string at = where + ".values[" + std::to_string(v) + "]";
      if (!entry.is_array() || entry.size() < 2 || entry.size() > 3 || !entry[1].is_string()) {
        *error = at + R"( is not ["<ns>", "<line>"(, {metadata})])";
        return false;
      }
      int64_t ns = 0;
      if (entry[0].is_string()) {
        const auto& t = entry[0].get_ref<const std::string&>();
        size_t used = 0;
        try {
          ns = std::stoll(t, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != t.size()) {
          *error = at + "[0] is not a string of nanoseconds";
          return false;
        }
      } else if (entry[0].is_number_integer()) {
        ns = entry[0].get<int64_t>();
      } else {
        *error = at + "[0] is not a string of nanoseconds";
        return false;
      }
      uint32_t b = begin;
      uint32_t e = end;
      if (entry.size() == 3) {
        if (!entry[2].is_object()) {
          *error = at + "[2] (structured metadata) is not an object";
          return false;
        }
        b = static_cast<uint32_t>(batch->labels.size());
        for (uint32_t k = begin; k < end; ++k) {
          batch->labels.push_back(batch->labels[k]);
        }
        for (const auto& [k, val] : entry[2].items()) {
          if (val.is_string()) {
            batch->labels.push_back(
                {batch->copy(k), batch->copy(val.get_ref<const std::string&>())});
          }
        }
        e = static_cast<uint32_t>(batch->labels.size());
      }
      LogRecord& r = addEntry(b, e, batch);
      r.time_ns = ns;
      r.line = batch->copy(entry[1].get_ref<const std::string&>());
      classify(rules, *batch, &r);
    }
  }
  return true;
}

}  // namespace faultline
