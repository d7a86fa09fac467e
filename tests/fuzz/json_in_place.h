// What the JSON fuzz targets (loki_fuzz, otlp_fuzz) share: a document decoded from its own padded
// copy and decoded in place must give the same result.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/record.h"
#include "ingest/formats/formats.h"

namespace faultline::fuzz {

// `in` followed by kJsonPadding bytes that would close an open string, array and object: a
// decoder reading in place must not read them as part of the document.
inline std::string followedByClosers(std::string_view in) {
  std::string buffer(in);
  for (size_t i = 0; i * 3 < kJsonPadding; ++i) {
    buffer += "\"]}";
  }
  return buffer;
}

// Traps unless two decodings agree: both accepted or both refused, the same records (line, time,
// node, stream) and as many labels.
inline void requireSame(bool ok_a, const RecordBatch& a, bool ok_b, const RecordBatch& b) {
  if (ok_a != ok_b || a.records.size() != b.records.size() || a.labels.size() != b.labels.size()) {
    __builtin_trap();
  }
  for (size_t i = 0; i < a.records.size(); ++i) {
    const LogRecord& x = a.records[i];
    const LogRecord& y = b.records[i];
    if (x.line != y.line || x.time_ns != y.time_ns || x.node != y.node || x.stream != y.stream) {
      __builtin_trap();
    }
  }
}

}  // namespace faultline::fuzz
