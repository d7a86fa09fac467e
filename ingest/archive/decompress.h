// Streaming readers for plain, gzip (RFC 1952, concatenated members allowed, then trailing zero
// bytes as gzip(1) allows them) and zstd (RFC 8878) input, chosen by the first bytes.
#pragma once

#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>

namespace faultline {

class ByteReader {
 public:
  virtual ~ByteReader() = default;
  // Reads `n` decompressed bytes into `out`, fewer only at the end of input or before corrupt
  // input; returns how many, 0 at the end of input. Throws std::runtime_error on corrupt input
  // (at the call after the one that returned the bytes before it).
  virtual size_t read(char* out, size_t n) = 0;
};

// Opens `path` ("-" = stdin) and picks the decoder from its magic bytes. Throws
// std::runtime_error if the file cannot be opened.
std::unique_ptr<ByteReader> openArchive(const std::string& path);
// The same over bytes in memory; `name` names them in errors.
std::unique_ptr<ByteReader> openArchiveBytes(const std::string& bytes, const std::string& name);

}  // namespace faultline
