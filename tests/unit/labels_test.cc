#include "ingest/formats/labels.h"

#include <cstdint>
#include <initializer_list>

#include <gtest/gtest.h>

namespace faultline {
namespace {

// A record whose labels are `labels`, in that order.
LogRecord withLabels(RecordBatch* batch, std::initializer_list<Label> labels) {
  LogRecord rec;
  rec.labels_begin = static_cast<uint32_t>(batch->labels.size());
  batch->labels.insert(batch->labels.end(), labels);
  rec.labels_end = static_cast<uint32_t>(batch->labels.size());
  return rec;
}

TEST(Classify, PodKernelOther) {
  const StreamRules rules;
  RecordBatch batch;
  LogRecord pod = withLabels(&batch, {{"_TRANSPORT", "kernel"}, {"k8s.pod.name", "train-0"}});
  classify(rules, batch, &pod);
  EXPECT_EQ(pod.stream, StreamKind::kPod);
  LogRecord kernel = withLabels(&batch, {{"host.name", "gpu-1"}, {"_TRANSPORT", "kernel"}});
  classify(rules, batch, &kernel);
  EXPECT_EQ(kernel.stream, StreamKind::kKernel);
  EXPECT_EQ(kernel.node, "gpu-1");
  LogRecord other = withLabels(&batch, {{"k8s.pod.name", ""}, {"_TRANSPORT", "journal"}});
  classify(rules, batch, &other);
  EXPECT_EQ(other.stream, StreamKind::kOther);
}

// The stream kind classify() gives a record whose labels are `labels`.
StreamKind streamOf(std::initializer_list<Label> labels) {
  RecordBatch batch;
  LogRecord rec = withLabels(&batch, labels);
  classify(StreamRules(), batch, &rec);
  return rec.stream;
}

// A facility other than 0 (kern) names a process's record: journald's kmsg records of a process's
// writes carry _TRANSPORT=kernel, `logger -t kernel` SYSLOG_IDENTIFIER=kernel.
TEST(Classify, AProcessFacilityIsNoKernelRecord) {
  EXPECT_EQ(streamOf({{"_TRANSPORT", "kernel"}, {"SYSLOG_FACILITY", "1"}}), StreamKind::kOther);
  EXPECT_EQ(streamOf({{"syslog_identifier", "kernel"}, {"syslog_facility", "3"}}),
            StreamKind::kOther);
  EXPECT_EQ(streamOf({{"_TRANSPORT", "kernel"}, {"SYSLOG_FACILITY", "0"}}), StreamKind::kKernel);
}

// journald gives the kernel's records alone _TRANSPORT=kernel: `logger -t kernel` (transport
// syslog) or a service's stdout (transport stdout) under SYSLOG_IDENTIFIER=kernel is a process's
// record, where a journal scrape ships the transport but not the facility.
TEST(Classify, AnotherTransportIsNoKernelRecord) {
  EXPECT_EQ(streamOf({{"syslog_identifier", "kernel"}, {"transport", "syslog"}}),
            StreamKind::kOther);
  EXPECT_EQ(streamOf({{"SYSLOG_IDENTIFIER", "kernel"}, {"_TRANSPORT", "stdout"}}),
            StreamKind::kOther);
  EXPECT_EQ(streamOf({{"syslog_identifier", "kernel"}, {"transport", "kernel"}}),
            StreamKind::kKernel);
  // nothing says otherwise
  EXPECT_EQ(streamOf({{"syslog_identifier", "kernel"}}), StreamKind::kKernel);
}

// A pod name label given twice, empty first (a pod's own field merged ahead of the shipper's):
// the record is still a pod's, never kernel output.
TEST(Classify, AnyLabelOfAPodNameMakesAPod) {
  const StreamRules rules;
  RecordBatch batch;
  LogRecord rec = withLabels(&batch, {{"kubernetes.pod_name", ""},
                                      {"_TRANSPORT", "kernel"},
                                      {"node", "gpu-1"},
                                      {"kubernetes.pod_name", "evil-0"}});
  classify(rules, batch, &rec);
  EXPECT_EQ(rec.stream, StreamKind::kPod);
}

// The collector's filelog container parser sets k8s.pod.uid, k8s.container.name and log.iostream
// beside k8s.pod.name: each makes a pod, should a pod's own JSON fields blank k8s.pod.name.
TEST(Classify, TheContainerParsersAttributesMakeAPod) {
  const StreamRules rules;
  for (const char* name : {"k8s.pod.uid", "k8s.container.name", "log.iostream"}) {
    RecordBatch batch;
    LogRecord rec = withLabels(
        &batch,
        {{"k8s.node.name", "gpu-1"}, {"k8s.pod.name", ""}, {name, "x"}, {"_TRANSPORT", "kernel"}});
    classify(rules, batch, &rec);
    EXPECT_EQ(rec.stream, StreamKind::kPod) << name;
  }
}

// A container's output in the journal (Docker's or Podman's journald log driver: CONTAINER_NAME)
// is a pod's, not a host service's: a container printing `ib0: Lost carrier` is no carrier lost.
TEST(Classify, AContainersJournalOutputIsAPods) {
  const StreamRules rules;
  RecordBatch batch;
  LogRecord rec = withLabels(&batch, {{"_HOSTNAME", "gpu-2"},
                                      {"SYSLOG_IDENTIFIER", "3f2a1b2c3d4e"},
                                      {"CONTAINER_NAME", "k8s_train_train-0_default"}});
  classify(rules, batch, &rec);
  EXPECT_EQ(rec.stream, StreamKind::kPod);
  EXPECT_EQ(rec.node, "gpu-2");
}

// Fluent Bit's loki output, as its docs configure it for Kubernetes (labels
// $kubernetes['namespace_name'], $kubernetes['pod_name'], ...), names the pod `pod_name`: a pod
// printing `ib0: Lost carrier` was an `other` record, read by whole-message host signatures.
TEST(Classify, FluentBitsPodNameMakesAPod) {
  const StreamRules rules;
  RecordBatch batch;
  LogRecord rec = withLabels(
      &batch,
      {{"job", "fluentbit"}, {"host", "gpu-3"}, {"pod_name", "train-0"}, {"namespace_name", "ml"}});
  classify(rules, batch, &rec);
  EXPECT_EQ(rec.stream, StreamKind::kPod);
  EXPECT_EQ(rec.node, "gpu-3");
}

}  // namespace
}  // namespace faultline
