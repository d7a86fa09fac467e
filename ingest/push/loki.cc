#include "ingest/push/loki.h"

#include <charconv>
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

// A Loki JSON PushRequest read through nlohmann's SAX interface: no parse tree, so nothing is
// allocated per value; keys and strings go straight into the batch. Unknown keys are skipped.
// JSON objects are unordered, so an entry's labels are settled when its stream object closes.
class LokiJsonReader final : public nlohmann::json_sax<json> {
 public:
  LokiJsonReader(std::string_view tenant, const StreamRules& rules, RecordBatch* batch,
                 std::string* error)
      : tenant_(batch->copy(tenant)),
        rules_(rules),
        batch_(batch),
        error_(error),
        records_before_(batch->records.size()) {}

  // True when the document was a whole PushRequest (sax_parse only knows it was JSON).
  bool complete() { return saw_streams_ || fail("streams is missing or not an array"); }

  bool null() override { return scalar(); }
  bool boolean(bool /*value*/) override { return scalar(); }
  bool number_integer(number_integer_t value) override { return integer(value); }
  bool number_unsigned(number_unsigned_t value) override {
    return value <= static_cast<uint64_t>(INT64_MAX) ? integer(static_cast<int64_t>(value))
                                                     : scalar();
  }
  bool number_float(number_float_t /*value*/, const string_t& /*text*/) override {
    return scalar();
  }
  bool binary(binary_t& /*value*/) override { return scalar(); }
  bool string(string_t& value) override;
  bool key(string_t& value) override;
  bool start_object(std::size_t /*elements*/) override;
  bool end_object() override;
  bool start_array(std::size_t /*elements*/) override;
  bool end_array() override;
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& e) override {
    return fail(std::string("body is not a JSON object (") + e.what() + ")");
  }

 private:
  // Where the next value goes. kSkip: inside a value nobody reads (depth in skip_).
  enum class At {
    kTop,
    kRoot,
    kStreamsValue,
    kStreams,
    kStream,
    kLabelsValue,
    kLabels,
    kValuesValue,
    kValues,
    kEntry,
    kMeta,
    kSkip,
    kDone
  };
  struct Entry {  // an entry of the current stream, until its labels are settled
    uint32_t record;
    uint32_t meta_begin;  // its structured metadata in batch_->labels
    uint32_t meta_end;
  };

  bool fail(const std::string& why) {
    *error_ = why;
    return false;
  }
  std::string where() const { return "streams[" + std::to_string(stream_index_) + "]"; }
  std::string entryAt() const {
    return where() + ".values[" + std::to_string(entries_.size()) + "]";
  }
  bool badEntry() const {
    *error_ = entryAt() + R"( is not ["<ns>", "<line>"(, {metadata})])";
    return false;
  }
  // Starts skipping a value whose first event was a start_object or start_array.
  bool skipNested(At resume) {
    resume_ = resume;
    skip_ = 1;
    at_ = At::kSkip;
    return true;
  }
  bool scalar();
  bool integer(int64_t value);
  // The stream object closed: every entry gets the stream's labels (and its metadata).
  void settleStream();

  std::string_view tenant_;
  const StreamRules& rules_;
  RecordBatch* batch_;
  std::string* error_;
  size_t records_before_;  // records the batch held before this body
  At at_ = At::kTop;
  At resume_ = At::kTop;  // where a skipped value returns to
  int skip_ = 0;          // nesting depth of the value being skipped
  bool saw_streams_ = false;
  size_t stream_index_ = 0;
  bool saw_values_ = false;
  bool saw_labels_ = false;
  uint32_t labels_begin_ = 0;  // the stream's labels (and tenant) in batch_->labels
  uint32_t labels_end_ = 0;
  std::string_view label_key_;
  std::vector<Entry> entries_;
  size_t field_ = 0;  // index within the current entry
  int64_t time_ns_ = 0;
  std::string_view line_;
  uint32_t meta_begin_ = 0;
  uint32_t meta_end_ = 0;
};

bool LokiJsonReader::scalar() {
  switch (at_) {
    case At::kSkip:
      return true;  // inside a skipped array or object
    case At::kTop:
      return fail("body is not a JSON object");
    case At::kStreamsValue:
      return fail("streams is missing or not an array");
    case At::kStreams:
      return fail(where() + " is not an object");
    case At::kLabelsValue:
      return fail(where() + ".stream is not an object");
    case At::kLabels:
      return fail(where() + ".stream." + std::string(label_key_) + " is not a string");
    case At::kValuesValue:
      return fail(where() + ".values is missing or not an array");
    case At::kValues:
      return badEntry();
    case At::kEntry:
      if (field_ == 0) {
        return fail(entryAt() + "[0] is not a string of nanoseconds");
      }
      return field_ == 2 ? fail(entryAt() + "[2] (structured metadata) is not an object")
                         : badEntry();
    case At::kRoot:
    case At::kStream:
      at_ = resume_;  // the value of an unknown key
      return true;
    case At::kMeta:  // metadata values other than strings are dropped
    case At::kDone:
      return true;
  }
  return true;
}

bool LokiJsonReader::integer(int64_t value) {
  if (at_ == At::kEntry && field_ == 0) {
    time_ns_ = value;
    ++field_;
    return true;
  }
  return scalar();
}

bool LokiJsonReader::string(string_t& value) {
  switch (at_) {
    case At::kLabels:
    case At::kMeta:
      batch_->labels.push_back({label_key_, batch_->copy(value)});
      return true;
    case At::kEntry:
      if (field_ == 0) {
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), time_ns_);
        if (value.empty() || ec != std::errc() || end != value.data() + value.size()) {
          return fail(entryAt() + "[0] is not a string of nanoseconds");
        }
      } else if (field_ == 1) {
        line_ = batch_->copy(value);
      } else {
        return scalar();
      }
      ++field_;
      return true;
    default:
      return scalar();
  }
}

bool LokiJsonReader::key(string_t& value) {
  switch (at_) {
    case At::kRoot:
      // A repeated "streams" key would add its streams again: nlohmann keeps the last one, and
      // so does this (the first one's records are dropped below).
      at_ = value == "streams" ? At::kStreamsValue : At::kRoot;
      resume_ = At::kRoot;
      return true;
    case At::kStream:
      at_ = value == "stream"   ? At::kLabelsValue
            : value == "values" ? At::kValuesValue
                                : At::kStream;
      resume_ = At::kStream;
      return true;
    case At::kLabels:
    case At::kMeta:
      label_key_ = batch_->copy(value);
      return true;
    default:
      return true;  // keys inside skipped values
  }
}

bool LokiJsonReader::start_object(std::size_t /*elements*/) {
  switch (at_) {
    case At::kSkip:
      ++skip_;
      return true;
    case At::kTop:
      at_ = At::kRoot;
      return true;
    case At::kStreams:
      at_ = At::kStream;
      saw_values_ = saw_labels_ = false;
      entries_.clear();
      return true;
    case At::kLabelsValue:
      if (saw_labels_) {
        return fail(where() + ".stream is given twice");
      }
      saw_labels_ = true;
      labels_begin_ = static_cast<uint32_t>(batch_->labels.size());
      at_ = At::kLabels;
      return true;
    case At::kEntry:
      if (field_ != 2) {
        return field_ == 0 ? fail(entryAt() + "[0] is not a string of nanoseconds") : badEntry();
      }
      meta_begin_ = static_cast<uint32_t>(batch_->labels.size());
      at_ = At::kMeta;
      return true;
    case At::kRoot:
    case At::kStream:
      return skipNested(at_);  // the value of an unknown key
    case At::kMeta:
      return skipNested(At::kMeta);  // nested metadata is dropped
    default:
      return scalar();  // an object where something else belongs: scalar() names it
  }
}

bool LokiJsonReader::end_object() {
  switch (at_) {
    case At::kSkip:
      if (--skip_ == 0) {
        at_ = resume_;
      }
      return true;
    case At::kLabels:
      if (!tenant_.empty()) {
        batch_->labels.push_back({"tenant", tenant_});
      }
      labels_end_ = static_cast<uint32_t>(batch_->labels.size());
      at_ = At::kStream;
      return true;
    case At::kMeta:
      meta_end_ = static_cast<uint32_t>(batch_->labels.size());
      ++field_;
      at_ = At::kEntry;
      return true;
    case At::kStream:
      if (!saw_values_) {
        return fail(where() + ".values is missing or not an array");
      }
      settleStream();
      ++stream_index_;
      at_ = At::kStreams;
      return true;
    case At::kRoot:
      at_ = At::kDone;
      return true;
    default:
      return true;
  }
}

bool LokiJsonReader::start_array(std::size_t /*elements*/) {
  switch (at_) {
    case At::kSkip:
      ++skip_;
      return true;
    case At::kStreamsValue:
      // Records of an earlier "streams" key are dropped: the last key wins, as in a parse tree.
      batch_->records.resize(records_before_);
      stream_index_ = 0;
      saw_streams_ = true;
      at_ = At::kStreams;
      return true;
    case At::kValuesValue:
      if (saw_values_) {
        return fail(where() + ".values is given twice");
      }
      saw_values_ = true;
      at_ = At::kValues;
      return true;
    case At::kValues:
      field_ = 0;
      time_ns_ = 0;
      line_ = {};
      meta_begin_ = meta_end_ = 0;
      at_ = At::kEntry;
      return true;
    case At::kRoot:
    case At::kStream:
    case At::kMeta:
      return skipNested(at_);
    default:
      return scalar();
  }
}

bool LokiJsonReader::end_array() {
  switch (at_) {
    case At::kSkip:
      if (--skip_ == 0) {
        at_ = resume_;
      }
      return true;
    case At::kEntry: {
      if (field_ < 2) {
        return badEntry();
      }
      LogRecord& r = batch_->records.emplace_back();
      r.time_ns = time_ns_;
      r.line = line_;
      entries_.push_back(
          {static_cast<uint32_t>(batch_->records.size() - 1), meta_begin_, meta_end_});
      at_ = At::kValues;
      return true;
    }
    case At::kValues:
      at_ = At::kStream;
      return true;
    case At::kStreams:
      at_ = At::kRoot;
      return true;
    default:
      return true;
  }
}

void LokiJsonReader::settleStream() {
  if (!saw_labels_) {
    labels_begin_ = static_cast<uint32_t>(batch_->labels.size());
    if (!tenant_.empty()) {
      batch_->labels.push_back({"tenant", tenant_});
    }
    labels_end_ = static_cast<uint32_t>(batch_->labels.size());
  }
  for (const Entry& e : entries_) {
    LogRecord& r = batch_->records[e.record];
    r.labels_begin = labels_begin_;
    r.labels_end = labels_end_;
    if (e.meta_begin != e.meta_end) {  // its own range: the stream's labels, then its metadata
      r.labels_begin = static_cast<uint32_t>(batch_->labels.size());
      for (uint32_t k = labels_begin_; k < labels_end_; ++k) {
        batch_->labels.push_back(batch_->labels[k]);
      }
      for (uint32_t k = e.meta_begin; k < e.meta_end; ++k) {
        batch_->labels.push_back(batch_->labels[k]);
      }
      r.labels_end = static_cast<uint32_t>(batch_->labels.size());
    }
    classify(rules_, *batch_, &r);
  }
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
      // A Timestamp reaches year 9999; int64 nanoseconds end in 2262.
      int64_t ns = 0;
      if (__builtin_mul_overflow(entry.timestamp().seconds(), int64_t{1'000'000'000}, &ns) ||
          __builtin_add_overflow(ns, int64_t{entry.timestamp().nanos()}, &ns)) {
        *error = "entry timestamp out of range (" + std::to_string(entry.timestamp().seconds()) +
                 " s): nanoseconds since the epoch must fit in 64 bits";
        return false;
      }
      LogRecord& r = addEntry(b, e, batch);
      r.time_ns = ns;
      r.line = entry.line();
      classify(rules, *batch, &r);
    }
  }
  return true;
}

bool decodeLokiJson(std::string_view text, std::string_view tenant, const StreamRules& rules,
                    RecordBatch* batch, std::string* error) {
  LokiJsonReader reader(tenant, rules, batch, error);
  // false on a syntax error (parse_error) or on a schema error (a handler returned false).
  return json::sax_parse(text.begin(), text.end(), &reader) && reader.complete();
}

}  // namespace faultline
