// Differential fuzzing of literalPrefix() against RE2: the input's first line is a pattern, the
// rest a text. Every match of the pattern in the text must start with the prefix, and a search
// anchored at the prefix's first occurrence, falling back to an unanchored one (as
// Matcher::extract searches), must give the unanchored search's groups.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <re2/re2.h>

#include "matcher/bank.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nl = input.find('\n');
  if (nl > 256) {  // npos too: no pattern line
    return 0;
  }
  RE2::Options opts;
  opts.set_log_errors(false);
  opts.set_max_mem(1 << 20);
  const RE2 re(input.substr(0, nl), opts);
  if (!re.ok()) {
    return 0;
  }
  const std::string prefix = faultline::literalPrefix(re);
  const std::string_view text = std::string_view(input).substr(nl + 1);
  const int n = re.NumberOfCapturingGroups() + 1;
  std::vector<re2::StringPiece> want(static_cast<size_t>(n));
  std::vector<re2::StringPiece> got(static_cast<size_t>(n));
  const bool found = re.Match(text, 0, text.size(), RE2::UNANCHORED, want.data(), n);
  if (found && !std::string_view(want[0].data(), text.data() + text.size() - want[0].data())
                    .starts_with(prefix)) {
    std::abort();  // a match that does not start with the prefix
  }
  if (prefix.empty()) {
    return 0;
  }
  const size_t at = text.find(prefix);
  const bool anchored = at != std::string_view::npos &&
                        re.Match(text, at, text.size(), RE2::ANCHOR_START, got.data(), n);
  if (!anchored && !re.Match(text, 0, text.size(), RE2::UNANCHORED, got.data(), n)) {
    got.assign(got.size(), re2::StringPiece());
  }
  if (found != (anchored || got[0].data() != nullptr)) {
    std::abort();
  }
  for (int g = 0; found && g < n; ++g) {
    if (got[static_cast<size_t>(g)].data() != want[static_cast<size_t>(g)].data() ||
        got[static_cast<size_t>(g)].size() != want[static_cast<size_t>(g)].size()) {
      std::abort();  // another match, or other groups
    }
  }
  return 0;
}
