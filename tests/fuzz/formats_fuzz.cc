// Fuzzes format detection and every line parser of ingest/formats.
#include <cstdint>
#include <string>
#include <string_view>

#include "ingest/formats/formats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) {
    return 0;
  }
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)faultline::detectFormat(text);
  for (int f = 0; f <= static_cast<int>(faultline::Format::kJson); ++f) {
    faultline::ParseOptions opts;
    opts.node = "n";
    opts.now_ns = 0;  // replay without --year: a first `Mon DD` stamp may be the year before
    auto parser = faultline::makeParser(static_cast<faultline::Format>(f), opts);
    faultline::RecordBatch batch;
    std::string_view rest = text;
    while (!rest.empty()) {
      const size_t nl = rest.find('\n');
      parser->parse(rest.substr(0, nl), &batch);
      rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
    }
    parser->finish(&batch);
    size_t sum = 0;
    for (const auto& r : batch.records) {
      // Touch every view: ASan catches one that dangles.
      for (char c : r.line) {
        sum += static_cast<unsigned char>(c);
      }
      sum += r.node.size();
    }
    volatile size_t keep = sum;  // so that the loop is not optimised away
    (void)keep;
  }
  return 0;
}
