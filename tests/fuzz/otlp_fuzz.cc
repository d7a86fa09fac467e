// Fuzzes the OTLP logs decoders: ExportLogsServiceRequest protobuf (ingest/otlp/otlp.h) and its
// JSON mapping (decodeOtlpJson, ingest/formats/formats.h), the latter both from its own padded
// copy and in place, where the two must agree.
#include <cstdint>
#include <string>
#include <string_view>

#include "ingest/formats/formats.h"
#include "ingest/otlp/otlp.h"
#include "tests/fuzz/json_in_place.h"

namespace {

// Reads every record's line, node and a label, so that ASan catches a view that dangles.
void touch(const faultline::RecordBatch& batch) {
  size_t sum = 0;
  for (const auto& r : batch.records) {
    for (char c : r.line) {
      sum += static_cast<unsigned char>(c);
    }
    sum += r.node.size() + batch.label(r, "k8s.pod.name").size();
  }
  volatile size_t keep = sum;
  (void)keep;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const faultline::StreamRules rules;
  static const faultline::LabelFilter keep{rules};  // the fuzzer's hot loop builds it once
  std::string error;
  uint64_t rejected = 0;
  faultline::RecordBatch proto;
  if (faultline::decodeOtlpProto(in, rules, keep, &proto, &rejected, &error)) {
    touch(proto);
  }

  // JSON from a padded copy, and in place.
  const std::string buffer = faultline::fuzz::followedByClosers(in);
  faultline::RecordBatch copied;
  faultline::RecordBatch in_place;
  uint64_t rejected_copied = 0;
  uint64_t rejected_in_place = 0;
  const bool ok_copied =
      faultline::decodeOtlpJson(in, size, rules, keep, &copied, &rejected_copied, &error);
  const bool ok_in_place =
      faultline::decodeOtlpJson(std::string_view(buffer).substr(0, size), buffer.size(), rules,
                                keep, &in_place, &rejected_in_place, &error);
  faultline::fuzz::requireSame(ok_copied, copied, ok_in_place, in_place);
  if (rejected_copied != rejected_in_place) {
    __builtin_trap();
  }
  if (ok_copied) {
    touch(copied);
    touch(in_place);
  }
  return 0;
}
