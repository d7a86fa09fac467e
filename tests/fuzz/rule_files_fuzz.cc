// Fuzzes takeHandedOverRuleFiles (core/rules_watch.h), the rule files a restart hands over in a
// memory file: any bytes either read back as files that, handed over again, read back the same,
// or are refused by a BankError naming the variable, never by another exception or a crash.
#include <cstdint>
#include <cstdlib>
#include <string>

#include <sys/mman.h>
#include <unistd.h>

#include "core/rules_watch.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("rule_files_fuzz", MFD_CLOEXEC);
  if (fd < 0 || ::write(fd, data, size) != static_cast<ssize_t>(size)) {
    __builtin_trap();  // the harness, not the input
  }
  ::setenv(faultline::kRuleFilesFd, std::to_string(fd).c_str(), 1);
  try {
    const auto files = faultline::takeHandedOverRuleFiles();
    std::string error;
    if (!files || !faultline::handOverRuleFiles(*files, &error)) {
      __builtin_trap();
    }
    // Handed over again, they read back the same.
    if (faultline::takeHandedOverRuleFiles() != files) {
      __builtin_trap();
    }
  } catch (const faultline::BankError& e) {
    if (std::string(e.what()).rfind(faultline::kRuleFilesFd, 0) != 0) {
      __builtin_trap();
    }
  }
  return 0;
}
