// Fuzzes the Loki push decoders (ingest/push/loki.h): the input as a snappy body, the input as
// the protobuf inside one, as a JSON body (from a padded copy and in place, where the two must
// agree) and as a stream selector.
#include <cstdint>
#include <string>
#include <string_view>

#include <snappy.h>

#include "ingest/push/loki.h"
#include "tests/fuzz/json_in_place.h"

namespace {

void touch(const faultline::RecordBatch& batch) {
  size_t sum = 0;
  for (const auto& r : batch.records) {
    for (char c : r.line) {  // ASan catches a view that dangles
      sum += static_cast<unsigned char>(c);
    }
    sum += r.node.size();
  }
  for (const auto& l : batch.labels) {
    sum += l.name.size() + l.value.size();
  }
  volatile size_t keep = sum;
  (void)keep;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const faultline::StreamRules rules;
  std::string error;
  bool too_large = false;
  {
    faultline::RecordBatch batch;
    if (faultline::decodeLokiProto(in, 1 << 20, "t", rules, &batch, &error, &too_large)) {
      touch(batch);
    }
  }
  {
    std::string compressed;
    snappy::Compress(in.data(), in.size(), &compressed);
    faultline::RecordBatch batch;
    if (faultline::decodeLokiProto(compressed, 1 << 20, "", rules, &batch, &error, &too_large)) {
      touch(batch);
    }
  }
  {
    // JSON from a padded copy, and in place.
    const std::string buffer = faultline::fuzz::followedByClosers(in);
    faultline::RecordBatch copied;
    faultline::RecordBatch in_place;
    const bool ok_copied = faultline::decodeLokiJson(in, size, "t", rules, &copied, &error);
    const bool ok_in_place = faultline::decodeLokiJson(
        std::string_view(buffer).substr(0, size), buffer.size(), "t", rules, &in_place, &error);
    faultline::fuzz::requireSame(ok_copied, copied, ok_in_place, in_place);
    if (ok_copied) {
      touch(copied);
      touch(in_place);
    }
  }
  {
    faultline::RecordBatch batch;
    if (faultline::parseLokiSelector(in, &batch, &error)) {
      touch(batch);
    }
  }
  return 0;
}
