// Fuzzes the OTLP logs decoders: ExportLogsServiceRequest protobuf (ingest/otlp/otlp.h) and its
// JSON mapping (decodeOtlpJson, ingest/formats/formats.h).
#include <cstdint>
#include <string>
#include <string_view>

#include "ingest/formats/formats.h"
#include "ingest/otlp/otlp.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const faultline::StreamRules rules;
  static const faultline::LabelFilter keep{rules};  // the fuzzer's hot loop builds it once
  for (bool json : {false, true}) {
    faultline::RecordBatch batch;
    uint64_t rejected = 0;
    std::string error;
    const bool ok =
        json ? faultline::decodeOtlpJson(in, in.size(), rules, keep, &batch, &rejected, &error)
             : faultline::decodeOtlpProto(in, rules, keep, &batch, &rejected, &error);
    if (!ok) {
      continue;
    }
    size_t sum = 0;
    for (const auto& r : batch.records) {
      for (char c : r.line) {  // ASan catches a view that dangles
        sum += static_cast<unsigned char>(c);
      }
      sum += r.node.size() + batch.label(r, "k8s.pod.name").size();
    }
    volatile size_t keep = sum;
    (void)keep;
  }
  return 0;
}
