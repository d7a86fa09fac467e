// The interface every ingest source implements.
#pragma once

#include <functional>
#include <stop_token>

#include "core/record.h"

namespace faultline {

// Called with each batch a source reads. When it returns, the batch's records have been matched
// and their decisions handed to the sinks, so the source may acknowledge the input (for Kafka:
// store the offsets for commit). The handler may clear or move from the batch.
using BatchHandler = std::function<void(RecordBatch& batch)>;

class Source {
 public:
  virtual ~Source() = default;
  // Reads until the input ends or `stop` is requested, calling `handle` per batch on the
  // calling thread. Errors in single lines or messages are counted and skipped, never fatal;
  // returns normally at the end. Throws std::runtime_error only when the source cannot start
  // (for example an unreadable file or an invalid Kafka configuration).
  virtual void run(const BatchHandler& handle, std::stop_token stop) = 0;
};

}  // namespace faultline
