// Replay source: reads archived logs (plain, gzip or zstd, told apart by their magic bytes) in
// any of the line formats of ingest/formats, each file's format detected on its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/source.h"
#include "ingest/formats/formats.h"

namespace faultline {

struct ArchiveInput {
  std::string name;   // a path, or "-" for standard input; names the node of dmesg files
  std::string bytes;  // when `from_memory`: the file's content (the embedded sample)
  bool from_memory = false;
  uint32_t number = 0;  // the replay's: its place among all inputs by name (Pipeline::collect)
};

struct ArchiveOptions {
  std::optional<Format> format;  // force one format for every file; default: detect per file
  ParseOptions parse;            // parse.node empty: dmesg files take the node from their name,
                                 // container files have none (an error), json records without
                                 // a node field none (dropped)
};

struct ArchiveError {
  uint32_t number = 0;  // the input's ArchiveInput::number
  std::string message;  // names the file and the cause
};

struct ArchiveStats {
  uint64_t files = 0;
  uint64_t bytes_text = 0;  // after decompression, bytes
  uint64_t lines = 0;
  uint64_t malformed = 0;  // lines no parser of the file's format accepted, records naming no node
  uint64_t records = 0;
};

class ArchiveSource : public Source {
 public:
  ArchiveSource(std::vector<ArchiveInput> inputs, ArchiveOptions options);

  // Reads the inputs in order. A file that cannot be opened or read in full (corrupt, truncated),
  // whose format cannot be detected (binary, logcli's default output), a tar archive, a container
  // log without ParseOptions::node, or a file of which no line gave a record is recorded in
  // errors() and the next one is read: the whole lines it gave before
  // the error are delivered, its cut last line is not. NUL bytes that start a line (a log's
  // unwritten blocks after a power loss) are skipped.
  void run(const BatchHandler& handle, std::stop_token stop) override;

  const ArchiveStats& stats() const { return stats_; }
  // One per failed input, in the order read.
  const std::vector<ArchiveError>& errors() const { return errors_; }
  // The numbers (ArchiveInput::number) of the loki-jsonl inputs read that list their records
  // newest first, as logcli does unless --forward: the first two records whose times differ go
  // back in time. Their records of one time came in the reverse of the order they were logged.
  const std::vector<uint32_t>& newestFirst() const { return newest_first_; }
  // An input read whose times count from its first stamp since boot, at the epoch
  // (LineParser::sinceFirstStamp: no ArchiveOptions' boot time): its name, and the node its file
  // speaks for ("" when its lines name their hosts: journalctl -o short-monotonic).
  struct SinceBoot {
    std::string name;
    std::string node;
    bool operator==(const SinceBoot&) const = default;
  };
  // Such inputs, in the order read.
  const std::vector<SinceBoot>& sinceFirstStamp() const { return since_first_stamp_; }
  // The input being read; valid in the handler that run() calls.
  const ArchiveInput& current() const { return inputs_[current_]; }

 private:
  void runOne(const ArchiveInput& input, const BatchHandler& handle, const std::stop_token& stop);

  std::vector<ArchiveInput> inputs_;
  ArchiveOptions options_;
  ArchiveStats stats_;
  std::vector<ArchiveError> errors_;
  std::vector<uint32_t> newest_first_;
  std::vector<SinceBoot> since_first_stamp_;
  size_t current_ = 0;
};

// The node a dmesg archive speaks for when --node is not given: its file name without the parts
// that log tools, logrotate and archives add at its end, so that a node name with dots (EKS's
// "ip-10-0-1-23.ec2.internal") stays whole. Dropped from the end, in this order: a compression
// extension (gz, zst, zstd); a rotation number after a log word ("kern.log.1", "dmesg.0"); then
// any log word (log, logs, txt, out, dmesg, kmsg, kern, kernel, syslog, journal, json, jsonl,
// messages, each also with logrotate's "-20261128") or date ("20261128", "2026-11-28"). The first
// part always stays: "/logs/ip-10-0-1-23.ec2.internal.dmesg.1.gz" -> "ip-10-0-1-23.ec2.internal",
// "gpu-node-7.2026-11-28.dmesg.zst" -> "gpu-node-7", "10.0.1.23.log" -> "10.0.1.23". A name left
// a log word or date ("dmesg", "kern.log.1") gives way to the nearest directory of `path` named
// otherwise (by the same rule, `var` and `sos_commands` skipped too; not past "." or ".."):
// "gpu-node-01/var/log/dmesg" -> "gpu-node-01", "/var/log/dmesg" and "dmesg.log" -> "dmesg".
// The name alone: no file is read (sosReportHost() comes first).
std::string nodeFromFileName(const std::string& path);

// Whether file `path` is a pod's log as `kubectl cluster-info dump --output-directory` writes it:
// NAMESPACE/POD/logs.txt beside NAMESPACE/pods.json. Such a file has no timestamps and is the
// pod's own output: ArchiveSource refuses it (an error naming the file).
bool isClusterInfoDumpPodLog(const std::string& path);

// The node of file `path` (relative to the working directory) when it lies in a sosreport: the
// first line of the `hostname` file (sos's host plugin links hostname(1)'s output there) in the
// nearest of its real directories (links resolved) that holds a sos_commands directory,
// lowercased as the kubelet names nodes, if that is a host name (letters, digits, '-', '.');
// else "". "sosreport-x/sos_commands/kernel/dmesg_-T" -> "gpu-7". A missing or unreadable file
// is no error.
std::string sosReportHost(const std::string& path);

}  // namespace faultline
