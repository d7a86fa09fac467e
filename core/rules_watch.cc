#include "core/rules_watch.h"

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <sys/mman.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

namespace faultline {
namespace {

// The YAML tree of `n` as text, without what the bank does not read (the comments, layout, flow
// or block style, quotes): each scalar's length before it, so that no two trees write alike.
void appendTree(const YAML::Node& n, std::string* out) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      if (n.Tag() != "?" && n.Tag() != "!") {  // an explicit tag (`!!str`); not plain or quoted
        *out += n.Tag();
      }
      *out += 's' + std::to_string(n.Scalar().size()) + ':' + n.Scalar();
      return;
    case YAML::NodeType::Sequence:
      *out += '[';
      for (const YAML::Node& item : n) {
        appendTree(item, out);
      }
      *out += ']';
      return;
    case YAML::NodeType::Map:
      *out += '{';
      for (const auto& kv : n) {
        appendTree(kv.first, out);
        appendTree(kv.second, out);
      }
      *out += '}';
      return;
    default:  // null (`~`, an empty value, an empty file) or undefined
      *out += '~';
  }
}

// Whether `a` and `b` are the same files, each holding a YAML tree equal to the other's. Both must
// load (loadBank): Load() reads a file's first document only, and loadBank refuses a second.
bool sameDocuments(const std::vector<RuleFile>& a, const std::vector<RuleFile>& b) {
  if (a.size() != b.size()) {
    return false;
  }
  std::string ta;
  std::string tb;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name) {
      return false;
    }
    if (a[i].text != b[i].text) {
      ta.clear();
      tb.clear();
      appendTree(YAML::Load(a[i].text), &ta);
      appendTree(YAML::Load(b[i].text), &tb);
      if (ta != tb) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace

RulesWatch::RulesWatch(std::string dir, std::vector<RuleFile> loaded, Runnable runnable)
    : dir_(std::move(dir)),
      loaded_(std::move(loaded)),
      runnable_(std::move(runnable)),
      seen_(loaded_) {}

RulesWatch::Check RulesWatch::check() {
  std::vector<RuleFile> files;
  try {
    files = readRuleDir(dir_);
  } catch (const BankError& e) {
    // An unreadable directory is seen as one with no file: refused once until it changes.
    const bool changed = state_ != State::kRefused || !seen_.empty() || message_ != e.what();
    seen_.clear();
    state_ = State::kRefused;
    message_ = e.what();
    return {state_, changed};
  }
  if (files == seen_ && !ask_again_) {
    return {state_, false};
  }
  const bool same_files = files == seen_;
  const State was = state_;
  const std::string said = message_;
  seen_ = files;
  ask_again_ = false;
  if (files == loaded_) {
    state_ = State::kRunning;
    message_.clear();
  } else {
    try {
      const auto bank = loadBank(files);
      if (sameDocuments(files, loaded_)) {
        state_ = State::kRunning;
        message_ = "in other comments or layout";
      } else {
        if (runnable_) {
          // Else the restart on it would refuse to start: the service would end.
          ask_again_ = true;
          runnable_(bank);
          ask_again_ = false;
        }
        state_ = State::kNew;
        message_ = std::to_string(bank->signatures.size()) + " signatures and " +
                   std::to_string(bank->rules.size()) + " rules";
      }
    } catch (const std::runtime_error& e) {  // BankError, or what `runnable` refused
      state_ = State::kRefused;
      message_ = e.what();
      if (!message_.empty() && message_.back() == '\n') {
        message_.pop_back();  // one problem per line, the last one ended too
      }
    }
  }
  return {state_, !same_files || state_ != was || message_ != said};
}

bool handOverRuleFiles(const std::vector<RuleFile>& files, std::string* error) {
  // Each file as "<name bytes> <text bytes>\n<name><text>".
  std::string out;
  for (const RuleFile& f : files) {
    out += std::to_string(f.name.size()) + ' ' + std::to_string(f.text.size()) + '\n';
    out += f.name;
    out += f.text;
  }
  const int fd = memfd_create("faultline-rule-files", 0);  // no MFD_CLOEXEC: kept across execv
  if (fd < 0) {
    *error = std::string("memfd_create: ") + std::strerror(errno);
    return false;
  }
  for (size_t done = 0; done < out.size();) {
    const ssize_t n = ::write(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      *error = std::string("write: ") + std::strerror(errno);
      ::close(fd);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  ::setenv(kRuleFilesFd, std::to_string(fd).c_str(), 1);
  return true;
}

std::optional<std::vector<RuleFile>> takeHandedOverRuleFiles() {
  const char* value = std::getenv(kRuleFilesFd);
  if (value == nullptr) {
    return std::nullopt;
  }
  const std::string named = value;
  ::unsetenv(kRuleFilesFd);  // not handed to a process this one starts
  int fd = -1;
  const auto [end, ec] = std::from_chars(named.data(), named.data() + named.size(), fd);
  const std::string what = std::string(kRuleFilesFd) + "=" + named;
  if (ec != std::errc() || end != named.data() + named.size() || fd < 0) {
    throw BankError(what + ": not a file descriptor\n");
  }
  // The offset is the writer's, at the end: read from the start.
  std::string in;
  char buf[65536];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw BankError(what + ": " + why + "\n");
    }
    if (n == 0) {
      break;
    }
    in.append(buf, static_cast<size_t>(n));
    at += n;
  }
  ::close(fd);
  std::vector<RuleFile> files;
  std::string_view rest = in;
  while (!rest.empty()) {
    // "<name bytes> <text bytes>\n", exactly as handOverRuleFiles writes it.
    const size_t nl = rest.find('\n');
    const std::string_view head = rest.substr(0, nl);
    size_t name_size = 0;
    size_t text_size = 0;
    const char* end = head.data() + head.size();
    const char* space = std::from_chars(head.data(), end, name_size).ptr;
    if (space != end) {
      std::from_chars(space + 1, end, text_size);
    }
    if (nl == std::string_view::npos ||
        head != std::to_string(name_size) + ' ' + std::to_string(text_size) ||
        rest.size() - nl - 1 < name_size || rest.size() - nl - 1 - name_size < text_size) {
      throw BankError(what + ": not rule files handed over by a restart\n");
    }
    rest.remove_prefix(nl + 1);
    RuleFile& f = files.emplace_back();
    f.name = rest.substr(0, name_size);
    f.text = rest.substr(name_size, text_size);
    rest.remove_prefix(name_size + text_size);
  }
  if (files.empty()) {
    throw BankError(what + ": no rule file handed over\n");
  }
  return files;
}

}  // namespace faultline
