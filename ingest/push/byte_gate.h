// Bounds the bytes of work in progress across threads: the push server decodes at most
// max_body_bytes of request bodies at once, because a decoder needs up to 15 times its body
// (simdjson's parser: README, "Push: Loki and OTLP/HTTP"), and without a bound that memory would
// grow with the number of server threads rather than with one request.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>

namespace faultline {

class ByteGate {
 public:
  // `max_bytes`: how many bytes may be admitted at once.
  explicit ByteGate(size_t max_bytes) : max_bytes_(max_bytes) {}

  // What admit() let in; gives it back when destroyed.
  class Admission {
   public:
    Admission(ByteGate* gate, size_t bytes) : gate_(gate), bytes_(bytes) {}
    Admission(const Admission&) = delete;
    Admission& operator=(const Admission&) = delete;
    Admission(Admission&& other) noexcept
        : gate_(std::exchange(other.gate_, nullptr)), bytes_(other.bytes_) {}
    Admission& operator=(Admission&&) = delete;
    ~Admission() {
      if (gate_ != nullptr) {
        gate_->release(bytes_);
      }
    }

   private:
    ByteGate* gate_;
    size_t bytes_;
  };

  // Waits until `bytes` (a size in bytes) fit beside what is admitted, then admits them until the
  // Admission is destroyed. Callers are admitted in the order they called, so a large item is not
  // starved by a stream of small ones; an item larger than max_bytes is admitted alone.
  [[nodiscard]] Admission admit(size_t bytes) {
    std::unique_lock lock(mu_);
    const uint64_t ticket = next_ticket_++;
    changed_.wait(
        lock, [&] { return ticket == serving_ && (used_ == 0 || used_ + bytes <= max_bytes_); });
    ++serving_;
    used_ += bytes;
    lock.unlock();
    changed_.notify_all();  // the next caller may fit too
    return {this, bytes};
  }

 private:
  void release(size_t bytes) {
    {
      std::lock_guard lock(mu_);
      used_ -= bytes;
    }
    changed_.notify_all();
  }

  const size_t max_bytes_;
  std::mutex mu_;
  std::condition_variable changed_;
  size_t used_ = 0;
  uint64_t next_ticket_ = 0;  // the next caller's place in line
  uint64_t serving_ = 0;      // the place in line admitted next
};

}  // namespace faultline
