// The bounded hand-off between ingest sources (any thread) and the pipeline's match workers.
//
// Capacity is in bytes, as RecordBatch::memoryBytes() accounts a batch (its arena, the buffers it
// holds such as protobuf bodies and Kafka messages, its record and label arrays), so
// memory held by queued and in-process batches stays below
// `max_bytes` whatever the input rate. A batch's bytes are released only after the pipeline has
// processed it (done()), not when it is taken off the queue. When the queue is full, tryPush()
// fails at once (the HTTP endpoints answer 429) and push() waits (the Kafka source, which keeps
// polling its paused consumer meanwhile). A batch larger than the whole capacity is admitted
// when the queue is empty, so that no input can wedge it. Waiting pushers take precedence: while
// one waits, tryPush() fails, so a flood of HTTP requests cannot starve Kafka.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <utility>

#include "core/record.h"

namespace faultline {

class BatchQueue {
 public:
  struct Item {
    RecordBatch batch;
    size_t bytes = 0;            // what the producer accounted; released by done()
    std::function<void()> done;  // called by the match worker once processed; may be empty
    uint64_t seq = 0;            // set by pop(): 0, 1, 2, ... in the order items leave the queue
  };

  explicit BatchQueue(size_t max_bytes) : max_bytes_(max_bytes) {}

  // Enqueues if there is room and nobody waits in push(); else returns false and leaves `item`.
  bool tryPush(Item& item) {
    std::lock_guard lock(mu_);
    if (closed_ || waiting_ > 0 || !fits(item.bytes)) {
      return false;
    }
    enqueue(item);
    return true;
  }

  // Waits for room, then enqueues. Returns false (item left) if the queue is closed first.
  bool push(Item& item) {
    std::unique_lock lock(mu_);
    ++waiting_;
    room_.wait(lock, [&] { return closed_ || fits(item.bytes); });
    --waiting_;
    if (closed_) {
      return false;
    }
    enqueue(item);
    return true;
  }

  // A match worker: the next item, numbered; waits while empty. nullopt once closed and drained.
  std::optional<Item> pop() {
    std::unique_lock lock(mu_);
    ready_.wait(lock, [&] { return closed_ || !items_.empty(); });
    return take();
  }
  // As pop(), without waiting: nullopt while empty.
  std::optional<Item> tryPop() {
    std::lock_guard lock(mu_);
    return take();
  }

  // After processing: clears the batch, runs the item's callback and releases its bytes. The
  // batch goes first: a Kafka batch holds librdkafka messages, which must be destroyed before
  // the source that waits for the callback may destroy its consumer.
  void done(Item& item) {
    item.batch.clear();
    if (item.done) {
      item.done();
    }
    {
      std::lock_guard lock(mu_);
      bytes_ -= item.bytes;
      --held_;
      progress_ = Clock::now();
    }
    room_.notify_all();
  }

  // No more pushes; pop() drains what is queued, then returns nullopt.
  void close() {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
    }
    ready_.notify_all();
    room_.notify_all();
  }

  // Bytes queued or in process, and the number of queued batches (for metrics).
  std::pair<size_t, size_t> depth() const {
    std::lock_guard lock(mu_);
    return {bytes_, items_.size()};
  }
  size_t maxBytes() const { return max_bytes_; }

  using Clock = std::chrono::steady_clock;
  // How long, as of `now`, batches have been queued or in process without one being done: since
  // the last done() or, if later, since the queue took a batch while holding none. Zero while it
  // holds none. A pipeline that holds work and finishes none for long is wedged (serve's
  // /healthz, PushConfig::stall_after), however busy it is otherwise.
  Clock::duration stalled(Clock::time_point now) const {
    std::lock_guard lock(mu_);
    return held_ == 0 ? Clock::duration::zero() : now - progress_;
  }

 private:
  bool fits(size_t bytes) const { return bytes_ == 0 || bytes_ + bytes <= max_bytes_; }
  std::optional<Item> take() {
    if (items_.empty()) {
      return std::nullopt;
    }
    Item item = std::move(items_.front());
    items_.pop_front();
    item.seq = popped_++;
    return item;
  }
  void enqueue(Item& item) {
    if (held_++ == 0) {
      progress_ = Clock::now();
    }
    bytes_ += item.bytes;
    items_.push_back(std::move(item));
    ready_.notify_one();
  }

  const size_t max_bytes_;
  mutable std::mutex mu_;
  std::condition_variable ready_;  // an item was queued or the queue closed
  std::condition_variable room_;   // bytes were released or the queue closed
  std::deque<Item> items_;
  size_t bytes_ = 0;
  size_t held_ = 0;             // batches queued or in process (pushed, not yet done())
  Clock::time_point progress_;  // see stalled()
  int waiting_ = 0;
  uint64_t popped_ = 0;
  bool closed_ = false;
};

// Runs callbacks one at a time in the order of their sequence numbers (0, 1, 2, ...), whichever
// threads give them: the match workers correlate batches in the order pop() numbered them. A
// callback runs without the lock held, so that a worker asking out of turn (tryRun) is answered
// at once and goes on matching instead of waiting for the running turn to end.
class InOrder {
 public:
  // Waits until the callbacks of every smaller `seq` have run, then runs `f`; returns after it.
  // Each seq must be given once.
  template <class F>
  void run(uint64_t seq, F&& f) {
    {
      std::unique_lock lock(mu_);
      turn_.wait(lock, [&] { return next_.load(std::memory_order_relaxed) == seq; });
    }
    f();
    pass(seq);
  }
  // Runs `f` as run() does if every smaller `seq` has run; else returns false at once, even while
  // another callback runs.
  template <class F>
  bool tryRun(uint64_t seq, F&& f) {
    if (next_.load(std::memory_order_acquire) != seq) {
      return false;
    }
    f();
    pass(seq);
    return true;
  }

 private:
  // Ends the turn of `seq`: what its callback wrote happens before the next callback runs (the
  // release store, read by tryRun's acquire load or under the mutex by run).
  void pass(uint64_t seq) {
    {
      std::lock_guard lock(mu_);  // a run() caller between its check and its wait misses nothing
      next_.store(seq + 1, std::memory_order_release);
    }
    turn_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable turn_;
  std::atomic<uint64_t> next_ = 0;
};

}  // namespace faultline
