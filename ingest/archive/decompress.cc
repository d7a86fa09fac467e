#include "ingest/archive/decompress.h"

#include <cstring>
#include <stdexcept>
#include <vector>

#include <zlib.h>
#include <zstd.h>

namespace faultline {
namespace {

// The compressed bytes, from a file or from memory, with the first bytes peekable.
class RawInput {
 public:
  explicit RawInput(const std::string& path) : name_(path) {
    if (path == "-") {
      file_ = stdin;
    } else {
      file_ = std::fopen(path.c_str(), "rb");
      if (file_ == nullptr) {
        throw std::runtime_error(path + ": " + std::strerror(errno));
      }
      owned_ = true;
    }
  }
  RawInput(const std::string* bytes, std::string name) : name_(std::move(name)), memory_(bytes) {}
  RawInput(const RawInput&) = delete;
  RawInput& operator=(const RawInput&) = delete;
  RawInput(RawInput&&) = delete;
  RawInput& operator=(RawInput&&) = delete;
  ~RawInput() {
    if (owned_) {
      std::fclose(file_);
    }
  }

  size_t read(char* out, size_t n) {
    size_t got = 0;
    if (memory_ != nullptr) {
      got = std::min(n, memory_->size() - pos_);
      std::memcpy(out, memory_->data() + pos_, got);
      pos_ += got;
    } else {
      got = std::fread(out, 1, n, file_);
      if (got == 0 && std::ferror(file_) != 0) {
        throw std::runtime_error(name_ + ": read error");
      }
    }
    return got;
  }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::FILE* file_ = nullptr;
  bool owned_ = false;
  const std::string* memory_ = nullptr;
  size_t pos_ = 0;
};

constexpr size_t kInChunk = size_t{256} * 1024;

// Base for the readers: owns the raw input and an input buffer that starts with the peeked
// magic bytes.
class Reader : public ByteReader {
 public:
  Reader(std::unique_ptr<RawInput> raw, std::string peeked)
      : raw_(std::move(raw)), in_(std::move(peeked)) {}

 protected:
  // Refills in_ when drained; false at the end of input.
  bool fill() {
    if (in_pos_ < in_.size()) {
      return true;
    }
    in_.resize(kInChunk);
    in_.resize(raw_->read(in_.data(), kInChunk));
    in_pos_ = 0;
    return !in_.empty();
  }
  // Corrupt input: read() returns the bytes decoded before the error, then throws it (at once if
  // there are none), so that the lines before a corruption are read.
  void fail(std::string error) { pending_error_ = std::move(error); }
  void throwPending() const {
    if (!pending_error_.empty()) {
      throw std::runtime_error(pending_error_);
    }
  }
  std::unique_ptr<RawInput> raw_;
  std::string in_;
  size_t in_pos_ = 0;
  std::string pending_error_;
};

class PlainReader : public Reader {
 public:
  using Reader::Reader;
  // The peeked bytes, then straight from the input, as much as `n` allows: the caller detects the
  // format from the first read, which must not be only the 4 bytes peeked.
  size_t read(char* out, size_t n) override {
    const size_t peeked = std::min(n, in_.size() - in_pos_);
    std::memcpy(out, in_.data() + in_pos_, peeked);
    in_pos_ += peeked;
    return peeked + (peeked < n ? raw_->read(out + peeked, n - peeked) : 0);
  }
};

class GzipReader : public Reader {
 public:
  GzipReader(std::unique_ptr<RawInput> raw, std::string peeked)
      : Reader(std::move(raw), std::move(peeked)) {
    if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) {
      throw std::runtime_error(raw_->name() + ": zlib init failed");
    }
  }
  GzipReader(const GzipReader&) = delete;
  GzipReader& operator=(const GzipReader&) = delete;
  GzipReader(GzipReader&&) = delete;
  GzipReader& operator=(GzipReader&&) = delete;
  ~GzipReader() override { inflateEnd(&z_); }

  size_t read(char* out, size_t n) override {
    throwPending();
    z_.next_out = reinterpret_cast<Bytef*>(out);
    z_.avail_out = static_cast<uInt>(n);
    // Fills `out` whole, across members: a call that returned one small member's bytes made the
    // caller tell the file's format from them alone.
    while (z_.avail_out > 0) {
      if (!fill()) {
        if (!member_ended_) {
          fail(raw_->name() + ": gzip stream truncated");
        }
        break;
      }
      if (member_ended_ && (padded_ || in_[in_pos_] == '\0')) {
        // Zeros after a complete member (tape padding) end the data, as gzip(1) reads them.
        if (in_.find_first_not_of('\0', in_pos_) != std::string::npos) {
          fail(raw_->name() + ": corrupt gzip data (non-zero bytes after the trailing zeros)");
          break;
        }
        padded_ = true;
        in_pos_ = in_.size();
        continue;
      }
      z_.next_in = reinterpret_cast<Bytef*>(in_.data() + in_pos_);
      z_.avail_in = static_cast<uInt>(in_.size() - in_pos_);
      const int rc = inflate(&z_, Z_NO_FLUSH);
      in_pos_ = in_.size() - z_.avail_in;
      if (rc == Z_STREAM_END) {
        member_ended_ = true;
        inflateReset(&z_);  // gzip files may hold several members, read them all
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        fail(raw_->name() + ": corrupt gzip data (" +
             (z_.msg != nullptr ? z_.msg : "inflate error") + ")");
        break;  // return what this call decoded before the error
      } else {
        member_ended_ = false;
      }
    }
    if (z_.avail_out == n) {
      throwPending();
    }
    return n - z_.avail_out;
  }

 private:
  z_stream z_{};
  bool member_ended_ = false;
  bool padded_ = false;  // zeros followed the last member: only zeros may follow
};

class ZstdReader : public Reader {
 public:
  ZstdReader(std::unique_ptr<RawInput> raw, std::string peeked)
      : Reader(std::move(raw), std::move(peeked)), ctx_(ZSTD_createDStream()) {}
  ZstdReader(const ZstdReader&) = delete;
  ZstdReader& operator=(const ZstdReader&) = delete;
  ZstdReader(ZstdReader&&) = delete;
  ZstdReader& operator=(ZstdReader&&) = delete;
  ~ZstdReader() override { ZSTD_freeDStream(ctx_); }

  // libzstd reports an error without the bytes the same call decoded (ZSTD_decompressStream
  // leaves pos as it was), so each call is given at most the input of one block: the size it
  // asks for next, less the next block's header it asks for with a block's body. An error then
  // comes in a call of its own, after the blocks before it are returned.
  size_t read(char* out, size_t n) override {
    throwPending();
    ZSTD_outBuffer ob{out, n, 0};
    while (ob.pos < n) {
      if (!fill()) {
        if (frame_open_) {
          fail(raw_->name() + ": zstd stream truncated");
        }
        break;
      }
      const size_t step = next_in_ > kBlockHeaderBytes ? next_in_ - kBlockHeaderBytes : next_in_;
      ZSTD_inBuffer ib{in_.data(), std::min(in_.size(), in_pos_ + step), in_pos_};
      const size_t rc = ZSTD_decompressStream(ctx_, &ob, &ib);
      in_pos_ = ib.pos;
      if (ZSTD_isError(rc) != 0) {
        fail(raw_->name() + ": corrupt zstd data (" + ZSTD_getErrorName(rc) + ")");
        break;
      }
      frame_open_ = rc != 0;
      next_in_ = frame_open_ ? rc : 1;  // 0: a frame ended; the next one's size is not known yet
    }
    if (ob.pos == 0) {
      throwPending();
    }
    return ob.pos;
  }

 private:
  static constexpr size_t kBlockHeaderBytes = 3;  // RFC 8878 section 3.1.1.2
  ZSTD_DStream* ctx_;
  bool frame_open_ = false;
  size_t next_in_ = 1;  // the input size ZSTD_decompressStream asked for last
};

std::unique_ptr<ByteReader> open(std::unique_ptr<RawInput> raw) {
  std::string magic(4, '\0');
  size_t got = 0;
  while (got < magic.size()) {
    const size_t n = raw->read(magic.data() + got, magic.size() - got);
    if (n == 0) {
      break;
    }
    got += n;
  }
  magic.resize(got);
  const auto* m = reinterpret_cast<const unsigned char*>(magic.data());
  if (got >= 2 && m[0] == 0x1f && m[1] == 0x8b) {
    return std::make_unique<GzipReader>(std::move(raw), std::move(magic));
  }
  // A zstd frame, or a skippable frame (RFC 8878 section 3.1.2, magic 0x184D2A50..5F), which
  // pzstd writes before each frame.
  if (got >= 4 && ((m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f && m[3] == 0xfd) ||
                   ((m[0] & 0xf0) == 0x50 && m[1] == 0x2a && m[2] == 0x4d && m[3] == 0x18))) {
    return std::make_unique<ZstdReader>(std::move(raw), std::move(magic));
  }
  return std::make_unique<PlainReader>(std::move(raw), std::move(magic));
}

}  // namespace

std::unique_ptr<ByteReader> openArchive(const std::string& path) {
  return open(std::make_unique<RawInput>(path));
}

std::unique_ptr<ByteReader> openArchiveBytes(const std::string& bytes, const std::string& name) {
  return open(std::make_unique<RawInput>(&bytes, name));
}

}  // namespace faultline
