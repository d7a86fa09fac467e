// The record every stage passes on: one log line with its event time, node and stream kind.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace faultline {

// Where a line came from. Kernel signatures match only kKernel, so a pod that prints a
// kernel-looking line to its stdout can never trip one.
enum class StreamKind : uint8_t { kKernel = 0, kPod = 1, kOther = 2 };
inline constexpr int kStreamKinds = 3;

std::string_view streamKindName(StreamKind kind);
// "kernel" | "pod" | "other"; returns false for anything else.
bool parseStreamKind(std::string_view name, StreamKind* kind);

struct Label {
  std::string_view name;
  std::string_view value;
};

// One log line. All views point into storage owned by the RecordBatch that holds the record.
struct LogRecord {
  int64_t time_ns = 0;  // event time, nanoseconds since the Unix epoch (UTC)
  std::string_view node;
  std::string_view line;      // the message, without transport envelope (timestamp, host, tag)
  uint32_t labels_begin = 0;  // [labels_begin, labels_end) indexes RecordBatch::labels
  uint32_t labels_end = 0;
  StreamKind stream = StreamKind::kOther;
};

// Labels naming a pod's job, first found wins, the broadest first: JobSet, Kubeflow training
// operators, then a Job's name (the OTel k8sattributes processor, Loki/Promtail relabelling
// conventions, the Job controller). A JobSet's pods carry their child Job's name too, one Job per
// replicated job: taken as the job, one training run's hang was as many one-node jobs, none a
// job's event. The pipeline reads them to learn which nodes ran a job's pods, the matcher to name
// a pod hit's job.
inline constexpr std::string_view kJobLabels[] = {"jobset.sigs.k8s.io/jobset-name",
                                                  "training.kubeflow.org/job-name",
                                                  "k8s.job.name",
                                                  "job_name",
                                                  "job-name",
                                                  "batch.kubernetes.io/job-name"};

// A batch of records and the bytes they point into. Moving a batch keeps every view valid;
// copying is disabled so that bytes are never duplicated by accident.
class RecordBatch {
 public:
  RecordBatch() = default;
  RecordBatch(RecordBatch&&) = default;
  RecordBatch& operator=(RecordBatch&&) = default;
  RecordBatch(const RecordBatch&) = delete;
  RecordBatch& operator=(const RecordBatch&) = delete;
  ~RecordBatch() = default;

  std::vector<LogRecord> records;
  std::vector<Label> labels;

  // Copies `bytes` into the batch's arena; the returned view lives as long as the batch.
  std::string_view copy(std::string_view bytes);
  // Keeps a buffer (a decompressed chunk, a Kafka message, a protobuf body) alive for
  // the batch's lifetime so that records may point into it without a copy. `bytes`: the memory it
  // holds, for memoryBytes(); a buffer held twice is counted once per call.
  void hold(std::shared_ptr<const void> buffer, size_t bytes) {
    held_.push_back(std::move(buffer));
    held_bytes_ += bytes;
  }

  std::string_view label(const LogRecord& rec, std::string_view name) const;
  // The record's job: the value of its first kJobLabels label that is not empty, else "".
  std::string_view job(const LogRecord& rec) const;
  // Memory the batch keeps alive, in bytes: arena chunks, held buffers, record and label arrays.
  // The pipeline queue accounts batches by it (core/batch_queue.h).
  size_t memoryBytes() const;

  void clear();

 private:
  static constexpr size_t kChunkBytes = size_t{64} * 1024;
  std::deque<std::string> arena_;  // chunks never reallocate: capacity is reserved up front
  size_t arena_bytes_ = 0;         // the chunks' capacities: memoryBytes() is called per message
  std::vector<std::shared_ptr<const void>> held_;
  size_t held_bytes_ = 0;
};

// What a decoder of one request or message may add to a batch's record and label arrays: at most
// kPerInputByte times its input bytes, plus kSlackBytes. A stream's or a resource's labels are
// repeated in each of its records, so without a bound a small body (a resource of 200
// attributes over 150,000 records of a few bytes) could fill gigabytes.
class DecodeBound {
 public:
  static constexpr size_t kPerInputByte = 16;
  static constexpr size_t kSlackBytes = size_t{64} << 10;

  // input_bytes: the request or message as decoded (a snappy body: decompressed).
  DecodeBound(const RecordBatch& batch, size_t input_bytes)
      : records_(batch.records.size()),
        labels_(batch.labels.size()),
        input_bytes_(input_bytes),
        max_bytes_(input_bytes * kPerInputByte + kSlackBytes) {}

  // Whether the arrays grew by at most the bound since construction; false once they did not.
  bool holds(const RecordBatch& batch) {
    exceeded_ = exceeded_ || (batch.records.size() - records_) * sizeof(LogRecord) +
                                     (batch.labels.size() - labels_) * sizeof(Label) >
                                 max_bytes_;
    return !exceeded_;
  }
  bool exceeded() const { return exceeded_; }
  // The refusal's reason, once exceeded.
  std::string reason() const {
    return "decodes to more than " + std::to_string(kPerInputByte) + " times its " +
           std::to_string(input_bytes_) + " bytes (labels repeated for each of many records)";
  }

 private:
  size_t records_;
  size_t labels_;
  size_t input_bytes_;
  size_t max_bytes_;
  bool exceeded_ = false;
};

}  // namespace faultline
