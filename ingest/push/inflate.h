// The Content-Encodings of push request bodies, each undone whole, at once: gzip and deflate with
// libdeflate, three to four times faster than zlib's streaming inflate on OTLP requests
// (bench/README, "Push over Boost.Beast, bodies inflated whole"), which made gzip half of the
// server's CPU; zstd with libzstd; snappy with libsnappy. These are what the OpenTelemetry
// collector's otlphttp exporter sends (`compression:` gzip, zlib, deflate, zstd, snappy;
// config/confighttp/compression.go).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace faultline {

enum class InflateResult { kOk, kTooLarge, kCorrupt };

// Decompresses `in` into *out, with room for `padding` more bytes (out->capacity() is at least
// out->size() + padding: appending simdjson's padding does not copy the body). `in` is in gzip
// format (RFC 1952) when it starts with the magic bytes 1f 8b, in zlib format (RFC 1950; HTTP's
// `deflate`) when it starts with a zlib header, else raw deflate (RFC 1951: how Loki reads
// `deflate`, with Go's compress/flate, so what clients written for Loki send); a zlib-looking
// start that does not inflate as zlib is tried as raw deflate too. Several gzip members in
// sequence are one body, as zlib's gunzip reads them; each member's CRC32 is checked, and a
// header's CRC16 (FHCRC) is skipped unchecked, as libdeflate and Python's gzip module do.
// Never holds more than max_bytes + padding bytes of output, whatever the input claims (a buffer
// that grows is freed before its successor is allocated): the output buffer starts at the size a
// gzip trailer states (ISIZE, RFC 1952 2.3.1) or four times the input, and grows fourfold up to
// max_bytes. Returns kTooLarge if the decompressed body is over max_bytes, kCorrupt if `in` is not
// one whole valid stream (truncated, bad checksum, trailing bytes); *out is then unspecified.
InflateResult inflateBody(std::string_view in, size_t max_bytes, size_t padding, std::string* out);

// As inflateBody, for zstd (RFC 8878): one frame or several in sequence, skippable frames
// skipped, each frame's checksum checked when it has one. Decoded in one call (a frame's window
// needs no memory of its own) into a buffer sized by the frames' headers: their content sizes, or
// for a frame that states none (a streaming encoder's, as the OTel collector's) a bound from its
// blocks, at most 128 KiB each (ZSTD_decompressBound); never past max_bytes.
InflateResult zstdBody(std::string_view in, size_t max_bytes, size_t padding, std::string* out);

// As inflateBody, for snappy: the block format (snappy's format_description.txt), or the framing
// format (framing_format.txt: what the OpenTelemetry collector sent as `snappy` before v0.131,
// and sends as `x-snappy-framed`), told apart by the framing format's stream identifier chunk
// (ff 06 00 00 "sNaPpY"). Framed: every chunk's masked CRC-32C is checked, reserved skippable
// chunks (0x80-0xfe) are skipped, and the decompressed size is summed from the chunks' headers
// before anything is allocated. Both refuse a size over max_bytes before allocating.
InflateResult snappyBody(std::string_view in, size_t max_bytes, size_t padding, std::string* out);

}  // namespace faultline
