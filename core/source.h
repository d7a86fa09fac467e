// The interface every ingest source implements.
#pragma once

#include <functional>
#include <stop_token>

#include "core/record.h"

namespace faultline {

// Called with each batch a source reads. A source may acknowledge its input once it returns (for
// Kafka: store the offsets for commit), so a live handler returns only after the batch's
// decisions reached the sinks. The handler may clear or move from the batch.
using BatchHandler = std::function<void(RecordBatch& batch)>;

class Source {
 public:
  virtual ~Source() = default;
  // Reads until the input ends or `stop` is requested, calling `handle` once per batch, one at a
  // time (KafkaSource on a thread of its own, to keep polling while it blocks). Errors in single
  // lines or messages are counted and skipped, never fatal; returns normally at the end.
  // KafkaSource throws std::runtime_error when it cannot start and rethrows what `handle`
  // throws; ArchiveSource records a file it cannot read (a std::runtime_error from its reader or
  // parser) in its errors() and reads on.
  virtual void run(const BatchHandler& handle, std::stop_token stop) = 0;
};

}  // namespace faultline
