// Which labels (Loki labels, OTLP resource/record attributes, journald fields, JSON fields) name
// a record's node and make it a kernel or pod stream.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/record.h"
#include "ingest/formats/name_table.h"

namespace faultline {

// The value of a pod label's field whose value is no string (LabelFilter::marksPod).
inline constexpr std::string_view kNotAString = "(not a string)";

struct StreamRules {
  // First label present wins. Defaults fit the OTel k8sattributes processor, Loki conventions,
  // journald, Vector and Fluent Bit.
  std::vector<std::string> node_labels = {
      "k8s.node.name",   "k8s_node_name", "node",      "node_name",
      "nodename",        "host.name",     "_HOSTNAME", "kubernetes.pod_node_name",
      "kubernetes.host", "hostname",      "host"};
  // A record carrying any of these is a pod stream, whatever else it carries: pod output must
  // never pass for kernel output, nor for a host service's. CONTAINER_NAME is the journald field
  // of a container's output (Docker's and Podman's journald log drivers); pod_name is Fluent
  // Bit's loki output's label for $kubernetes['pod_name'] (its docs' Kubernetes example);
  // container is the Loki label of a container's name (Promtail's and Alloy's Kubernetes
  // discovery, and Grafana's Fluent Bit chart, whose label of the pod's name is `instance`);
  // k8s.pod.uid, k8s.container.name and log.iostream are what the collector's filelog container
  // parser sets beside k8s.pod.name; kubernetes is Fluent Bit's and Vector's map of a pod's
  // metadata where it stays a map (Fluent Bit's OTLP output sends it as a kvlist). Any value of a
  // pod label but "" marks a pod, a map too (LabelFilter::marksPod).
  std::vector<std::string> pod_labels = {
      "k8s.pod.name",       "k8s_pod_name", "pod",       "kubernetes.pod_name",
      "CONTAINER_NAME",     "pod_name",     "container", "k8s.pod.uid",
      "k8s.container.name", "log.iostream", "kubernetes"};
  // label == value marks the kernel stream (journald's _TRANSPORT / SYSLOG_IDENTIFIER, and the
  // names a Promtail or Alloy journal scrape relabels them to).
  std::vector<std::pair<std::string, std::string>> kernel_labels = {
      {"_TRANSPORT", "kernel"},
      {"SYSLOG_IDENTIFIER", "kernel"},
      {"transport", "kernel"},
      {"syslog_identifier", "kernel"}};
  // A record whose label of one of these names (journald's SYSLOG_FACILITY, and the name a
  // Promtail or Alloy journal scrape relabels it to) is not 0 (kern) is no kernel record,
  // whatever its kernel labels say: journald records what a process wrote to /dev/kmsg with
  // _TRANSPORT=kernel, and `logger -t kernel` gives SYSLOG_IDENTIFIER=kernel, each with the
  // process's facility; the kernel alone logs as kern (kernel/printk/printk.c, devkmsg_write).
  std::vector<std::string> facility_labels = {"SYSLOG_FACILITY", "syslog_facility"};
  // Likewise a record whose label of one of these names (journald's _TRANSPORT, relabelled) is
  // not "kernel": journald gives the kernel's records alone that transport, so a
  // SYSLOG_IDENTIFIER=kernel beside another one (syslog: `logger -t kernel`) is a process's.
  std::vector<std::string> transport_labels = {"_TRANSPORT", "transport"};
};

// The label names some stage reads: the rules' node, pod, kernel, facility and transport labels,
// and kJobLabels.
// Decoders of formats that carry many fields per record (a journal entry's, OTLP attributes) keep
// only these: no stage reads the others, and turning them all into labels was most of an OTLP
// record's decoding (bench/README.md, "Only the labels a stage reads").
class LabelFilter {
 public:
  explicit LabelFilter(const StreamRules& rules);

  // Whether a label named `name` is read.
  bool keeps(std::string_view name) const { return names_.find(name) != nullptr; }
  // Whether `name` is one of the rules' pod labels: a decoder keeps such a field whatever its
  // value, as the label {name, kNotAString} if the value is no string (a map, a list), so that
  // classify() takes the record for a pod's.
  bool marksPod(std::string_view name) const {
    const bool* pod = names_.find(name);
    return pod != nullptr && *pod;
  }

 private:
  NameTable<bool> names_;  // kept names; true: a pod label
};

// The node that the labels [begin, end) name: the value of the first label of the first name in
// rules.node_labels whose first label is not empty; "" if none. A view into the labels.
std::string_view nodeOf(const StreamRules& rules, const Label* begin, const Label* end);

// Whether the record's labels [rec.labels_begin, rec.labels_end) name a facility other than 0
// (rules.facility_labels) or a transport other than kernel (rules.transport_labels): a process's
// record, never the kernel's.
bool fromProcess(const StreamRules& rules, const RecordBatch& batch, const LogRecord& rec);

// Sets rec->node (if still empty: nodeOf) and rec->stream from the batch labels
// [rec->labels_begin, rec->labels_end): pod if any label of a pod name (any one of them, if a name
// occurs twice) is non-empty, else kernel if a kernel label matches and the record is not
// fromProcess(), else other.
void classify(const StreamRules& rules, const RecordBatch& batch, LogRecord* rec);

// classify() for a record whose labels are the shipper's (the first `shipper_labels` of its
// range: an OTLP resource's attributes, as the collector's k8sattributes processor sets them; a
// Loki stream's labels) followed by its own, which a process's own JSON can fill (OTLP record
// attributes and body fields from the filelog receiver's json_parser; Loki structured metadata
// from Promtail's json and structured_metadata stages). Only the first `marking_labels` (at least
// the shipper's; with an OTLP kvlist body, the journald receiver's fields after them) may mark
// the kernel stream (rules.kernel_labels): a JSON log file whose lines say `"_TRANSPORT":
// "kernel"` is no kernel log. The node is named by the shipper's labels if they hold a node label
// (node_labels order), else by the record's. When the shipper's labels name a pod, or the
// record's own hold a pod label's map (kNotAString: Fluent Bit's `kubernetes` map, beside which
// Merge_Log puts the pod's own keys), the record's own node and job labels (kJobLabels) are
// dropped from the batch (rec->labels_end moves back; the record's labels must be the batch's
// last): a pod must name neither its node nor its job.
void classifyShipped(const StreamRules& rules, uint32_t shipper_labels, uint32_t marking_labels,
                     RecordBatch* batch, LogRecord* rec);

}  // namespace faultline
