// What the paced load generators of bench/latency.sh share (kafka_load.cc, loki_pace.cc): their
// "--key value" options, the input lines, the clock their fault stamps use and the --sent file
// latency.sh reads.
#pragma once

#include <cstdint>
#include <ctime>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace faultline {

// CLOCK_REALTIME, ns since the epoch: the clock tests/tools/fake_apiserver stamps requests with.
inline int64_t realtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// "--key value" pairs. `usage(error)` must not return (it prints and exits).
class PaceArgs {
 public:
  using Usage = void (*)(const std::string& error);
  PaceArgs(int argc, char** argv, Usage usage) : usage_(usage) {
    for (int i = 1; i < argc; i += 2) {
      if (i + 1 >= argc) {
        usage_(std::string("missing value for ") + argv[i]);
      }
      args_[argv[i]] = argv[i + 1];
    }
  }
  bool has(const std::string& key) const { return args_.count(key) > 0; }
  // Takes the value of `key`; when absent, `dflt`, or usage() if `dflt` is empty.
  std::string get(const std::string& key, const std::string& dflt = "") {
    auto it = args_.find(key);
    if (it == args_.end()) {
      if (dflt.empty()) {
        usage_("missing " + key);
      }
      return dflt;
    }
    std::string v = it->second;
    args_.erase(it);
    return v;
  }
  // usage() if an argument was given that no get() took.
  void finish() const {
    if (!args_.empty()) {
      usage_("unknown or misplaced argument " + args_.begin()->first);
    }
  }

 private:
  Usage usage_;
  std::map<std::string, std::string> args_;
};

struct Line {
  std::string node;
  std::string message;
};

// The "node<TAB>message" lines of `path`, read up front so that sending costs no I/O. False if
// the file cannot be read or has no such line.
inline bool readLines(const std::string& path, std::vector<Line>* lines) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab != std::string::npos) {
      lines->push_back({line.substr(0, tab), line.substr(tab + 1)});
    }
  }
  return in.eof() && !lines->empty();
}

// Writes "node<TAB>sent_ns<TAB>arrived_ns" per fault to `path` (CLOCK_REALTIME: just before the
// send, and the transport's acknowledgement); false if it cannot.
inline bool writeSent(const std::string& path, const std::vector<std::string>& nodes,
                      const std::vector<int64_t>& sent_ns, const std::vector<int64_t>& arrived_ns) {
  std::ofstream out(path);
  for (size_t i = 0; i < nodes.size(); ++i) {
    out << nodes[i] << '\t' << sent_ns[i] << '\t' << arrived_ns[i] << '\n';
  }
  return static_cast<bool>(out);
}

}  // namespace faultline
