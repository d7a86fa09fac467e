// One log record as one JSON object, as log shippers write them: Vector (`encoding.codec: json`;
// vector.dev/docs/reference/configuration/sources/kubernetes_logs and .../journald), Fluent Bit
// (`format json`; fluent/fluent-bit-docs pipeline/outputs/kafka.md, the kubernetes filter, the
// systemd input) and rsyslog with a JSON template. Read by the Kafka source's `json` encoding
// (ingest/kafka) and by replay's `json` format, so an archive of a topic replays as it was read.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/record.h"
#include "ingest/formats/labels.h"

namespace faultline {

// Dotted field paths, each list tried in order; the first present wins. A path "a.b" matches a
// flat key "a.b" as well as the nested {"a": {"b": ...}}. Of two such spellings of a line or time
// path in one record, the first in document order is taken; a node, pod or job path (or a kernel
// marker) found twice with different values (null or "" against a value counts) leaves the
// record's node, stream or job ambiguous, and the record is refused: with Fluent Bit's Merge_Log a
// pod's own JSON keys come first and could pass for the shipper's. So is a record whose node paths
// under "kubernetes." (the shippers' metadata maps) name two different non-empty values, or one
// pod label two (Vector's kubernetes.pod_labels.L against Fluent Bit's kubernetes.labels.L): a pod
// writing Vector's kubernetes.pod_node_name beside Fluent Bit's kubernetes.host would otherwise
// name any node.
struct JsonRecordFields {
  std::vector<std::string> line = {"message", "log", "msg", "MESSAGE", "body"};
  std::vector<std::string> node = {"kubernetes.pod_node_name",
                                   "kubernetes.host",
                                   "host.name",
                                   "hostname",
                                   "host",
                                   "_HOSTNAME",
                                   "k8s.node.name"};
  // Strings: RFC 3339; numbers or digit strings: epoch seconds / ms / µs / ns by magnitude
  // (Fluent Bit's default `double` is float seconds, journald's __REALTIME_TIMESTAMP is µs).
  std::vector<std::string> time = {"timestamp", "@timestamp", "time", "__REALTIME_TIMESTAMP"};
  // Any of these present and non-empty makes the record a pod stream (Vector: pod_namespace,
  // Fluent Bit: namespace_name; journald's CONTAINER_NAME of a container's output, as
  // StreamRules has it, whatever SYSLOG_IDENTIFIER the container's tag gave it). `stream` is the
  // container runtime's stdout/stderr, which Vector's kubernetes_logs source and Fluent Bit's
  // CRI and Docker parsers write even when their Kubernetes metadata lookup failed (a pod deleted
  // before its log was read, vectordotdev/vector#10122): no kernel or journald record has it.
  std::vector<std::string> pod = {"kubernetes.pod_name",
                                  "kubernetes.pod_namespace",
                                  "kubernetes.namespace_name",
                                  "kubernetes.container_name",
                                  "k8s.pod.name",
                                  "CONTAINER_NAME",
                                  "stream"};
  // The pod's job, the first present and non-empty, kept as the record's label k8s.job.name
  // (core/record.h kJobLabels: the NCCL rules count distinct jobs): the Job controller's,
  // Kubeflow's and JobSet's pod labels in Vector's kubernetes.pod_labels and Fluent Bit's
  // kubernetes.labels maps. No top-level job key is read: such keys are the pod's own to write
  // (Fluent Bit's Merge_Log without Merge_Log_Key), and a pod naming its own jobs could count as
  // several. Merge_Log without a key still lets a pod's JSON claim a job its shipper's map does
  // not name, as it can a node (README, "The live service"): set Merge_Log_Key.
  // The broadest first, as kJobLabels: a JobSet's pods also carry their child Job's job-name.
  std::vector<std::string> job = {"kubernetes.pod_labels.jobset.sigs.k8s.io/jobset-name",
                                  "kubernetes.pod_labels.training.kubeflow.org/job-name",
                                  "kubernetes.pod_labels.job-name",
                                  "kubernetes.pod_labels.batch.kubernetes.io/job-name",
                                  "kubernetes.labels.jobset.sigs.k8s.io/jobset-name",
                                  "kubernetes.labels.training.kubeflow.org/job-name",
                                  "kubernetes.labels.job-name",
                                  "kubernetes.labels.batch.kubernetes.io/job-name"};

  bool operator==(const JsonRecordFields&) const = default;
};

// Decodes records of one field configuration. Not thread-safe: it keeps its parser's buffers from
// one record to the next.
class JsonRecordDecoder {
 public:
  enum class Result : uint8_t {
    kOk,
    kNotJson,    // the text does not parse (*detail: simdjson's words)
    kNotObject,  // valid JSON, but not an object
    kAmbiguous,  // a node, pod, job or kernel marker path twice with different values
    kNoLine,     // no line field that is a string or an array of byte values
    kNoNode,     // no node field, and `fallback_node` gave none
    kNoTime,     // no time field that parses, and no `fallback_ns`
  };

  // `stream`: that of a record no field makes a pod's, the kernel's or a process's (a Kafka json
  // topic's `stream`).
  JsonRecordDecoder(const JsonRecordFields& fields, StreamKind stream);
  JsonRecordDecoder(const JsonRecordDecoder&) = delete;
  JsonRecordDecoder& operator=(const JsonRecordDecoder&) = delete;
  JsonRecordDecoder(JsonRecordDecoder&&) = delete;
  JsonRecordDecoder& operator=(JsonRecordDecoder&&) = delete;
  ~JsonRecordDecoder();

  // Appends the record that `text` (one JSON object; a line that is not valid UTF-8 is read with
  // U+FFFD in place of its bad bytes) holds to `batch`, copying what it keeps: line = the first
  // line field that is a string, trailing "\n" or "\r\n" dropped (Fluent Bit's tail input keeps
  // it), else an array of byte values (journalctl -o json's rendering of a line that is not
  // printable UTF-8); time_ns = the first time field that parses (ns since the epoch), else
  // `fallback_ns`; node = the first non-empty node field, else `fallback_node()` (called only
  // then); labels = the pod fields and journald's kernel, facility and transport fields present,
  // and the job as k8s.job.name; stream = pod if a pod field is non-empty, else kernel if a
  // kernel marker (journald's _TRANSPORT or SYSLOG_IDENTIFIER, rsyslog's programname) says so and
  // no facility or transport field says it is a process's (classify(), labels.h), else other for a
  // process's record, else `stream`. Appends nothing and returns why for anything but kOk;
  // *detail is set for kNotJson, else left alone.
  Result decode(std::string_view text, std::optional<int64_t> fallback_ns,
                const std::function<std::string_view()>& fallback_node, RecordBatch* batch,
                std::string_view* detail);

  // `text` as one JSON string's value (valid until the next call), or nullopt if it is none.
  std::optional<std::string_view> unquote(std::string_view text);

  // Words for a result other than kOk that complete "a record ...", e.g. "is not JSON".
  static std::string_view cause(Result result);

 private:
  class Fields;
  StreamKind stream_;
  StreamRules rules_;                      // pod labels = fields.pod; kernel labels + programname
  std::vector<std::string> label_fields_;  // fields copied as labels for classify()
  std::unique_ptr<Fields> fields_;
};

// "  trailing newline\n" -> "  trailing newline": drops one "\n" or "\r\n" at the end.
std::string_view trimNewline(std::string_view s);

}  // namespace faultline
