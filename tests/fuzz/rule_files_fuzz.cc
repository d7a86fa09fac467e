// Fuzzes takeHandedOverRuleFiles (core/rules_watch.h), the rule files a restart hands over in a
// memory file: any bytes either read back as files that hand over to the same bytes again, or
// are refused by a BankError naming the variable, never by another exception or a crash.
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
    // Handed over again: the same bytes (the reader takes only what the writer writes).
    const int again = std::atoi(std::getenv(faultline::kRuleFilesFd));
    std::string text(size + 1, '\0');
    if (::pread(again, text.data(), text.size(), 0) != static_cast<ssize_t>(size) ||
        text.compare(0, size, reinterpret_cast<const char*>(data), size) != 0) {
      __builtin_trap();
    }
    ::close(again);
    ::unsetenv(faultline::kRuleFilesFd);
  } catch (const faultline::BankError& e) {
    if (std::string(e.what()).rfind(faultline::kRuleFilesFd, 0) != 0) {
      __builtin_trap();
    }
  }
  return 0;
}
