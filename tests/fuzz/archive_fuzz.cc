// Fuzzes the archive reader end to end: magic-byte detection, gzip/zstd decoding, line splitting.
#include <cstdint>
#include <string>

#include "ingest/archive/archive_source.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) {
    return 0;
  }
  faultline::ArchiveInput in{"fuzz.dmesg", std::string(reinterpret_cast<const char*>(data), size),
                             true};
  faultline::ArchiveSource source({in}, {});
  // Corrupt or unknown input is recorded in source.errors(): expected.
  source.run([](faultline::RecordBatch& b) { (void)b.records.size(); }, std::stop_token());
  return 0;
}
