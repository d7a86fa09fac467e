// Compresses test and benchmark inputs with zlib, as HTTP clients and log shippers do.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include <zlib.h>

namespace faultline {

// `raw` compressed whole at zlib's default level (6, as Go's compress/gzip): window_bits 15 gives
// zlib format (RFC 1950, HTTP's `deflate`), 15 + 16 gzip format (RFC 1952). Throws
// std::runtime_error if zlib fails.
inline std::string zlibCompress(std::string_view raw, int window_bits) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    throw std::runtime_error("zlib: deflateInit2 failed");
  }
  std::string out(deflateBound(&z, raw.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int result = deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  if (result != Z_STREAM_END) {
    throw std::runtime_error("zlib: deflate did not finish");
  }
  return out;
}

}  // namespace faultline
