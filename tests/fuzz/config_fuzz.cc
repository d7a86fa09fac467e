// Fuzzes loadServiceConfig (core/config.h), `faultline serve --config FILE`, with arbitrary file
// contents: a file either loads, or is refused by a std::runtime_error whose message starts with
// the file's path (what the operator sees), never by another exception or a crash.
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <unistd.h>

#include "core/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) {
    return 0;
  }
  static const std::string path = "/tmp/faultline_config_fuzz_" + std::to_string(getpid());
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) {
    __builtin_trap();  // the harness, not the input
  }
  try {
    const faultline::ServiceConfig cfg = faultline::loadServiceConfig(path, true);
    faultline::validateTaint(cfg.taint);  // what loaded is valid
    if (cfg.queue_bytes == 0 || cfg.match_threads == 0 || cfg.match_threads > 256 ||
        cfg.max_lag_ns < 0 || cfg.max_lag_ns > 86400 * faultline::kNanosPerSecond) {
      __builtin_trap();
    }
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()).rfind(path + ":", 0) != 0) {
      __builtin_trap();  // a refusal that does not name the file
    }
  }
  std::remove(path.c_str());
  return 0;
}
