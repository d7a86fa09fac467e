// Fuzzes the rule-file loader: any text either loads or throws BankError.
#include <cstdint>
#include <string>

#include "matcher/bank.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 14) {
    return 0;
  }
  try {
    (void)faultline::loadBank(
        {{"fuzz.yaml", std::string(reinterpret_cast<const char*>(data), size)}});
  } catch (const faultline::BankError&) {
  }
  return 0;
}
