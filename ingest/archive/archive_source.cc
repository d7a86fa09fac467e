#include "ingest/archive/archive_source.h"

#include <filesystem>
#include <memory>
#include <stdexcept>

#include "ingest/archive/decompress.h"

namespace faultline {
namespace {

constexpr size_t kChunkBytes = 1 << 20;

}  // namespace

std::string nodeFromFileName(const std::string& path) {
  const std::string base = std::filesystem::path(path).filename().string();
  return base.substr(0, base.find('.'));
}

ArchiveSource::ArchiveSource(std::vector<ArchiveInput> inputs, ArchiveOptions options)
    : inputs_(std::move(inputs)), options_(std::move(options)) {}

void ArchiveSource::run(const BatchHandler& handle, std::stop_token stop) {
  for (const ArchiveInput& input : inputs_) {
    if (stop.stop_requested()) {
      return;
    }
    runOne(input, handle, stop);
  }
}

void ArchiveSource::runOne(const ArchiveInput& input, const BatchHandler& handle,
                           const std::stop_token& stop) {
  std::unique_ptr<ByteReader> reader =
      input.from_memory ? openArchiveBytes(input.bytes) : openArchive(input.name);
  ++stats_.files;
  ParseOptions parse = options_.parse;
  if (parse.node.empty()) {
    parse.node = input.name == "-" ? "stdin" : nodeFromFileName(input.name);
  }
  std::unique_ptr<LineParser> parser;
  RecordBatch batch;
  // Each batch holds its own chunk and the one before: a parser may hold a record back across a
  // chunk boundary to join its continuation lines (LineParser::parse).
  std::shared_ptr<std::string> prev;
  std::string carry;  // an incomplete last line, moved to the front of the next chunk
  bool eof = false;
  while (!eof && !stop.stop_requested()) {
    auto chunk = std::make_shared<std::string>(std::move(carry));
    carry.clear();
    const size_t keep = chunk->size();
    chunk->resize(keep + kChunkBytes);
    const size_t got = reader->read(chunk->data() + keep, kChunkBytes);
    chunk->resize(keep + got);
    stats_.bytes_text += got;
    eof = got == 0;
    if (!eof) {
      // Only whole lines go to the parser; the tail waits for the next chunk.
      const size_t last_nl = chunk->rfind('\n');
      const size_t whole = last_nl == std::string::npos ? 0 : last_nl + 1;
      carry.assign(*chunk, whole);
      chunk->resize(whole);
    }
    if (!parser) {
      std::optional<Format> format = options_.format;
      if (!format) {
        format = detectFormat(*chunk);
      }
      if (!format) {
        if (chunk->empty() && !eof) {
          continue;  // no whole line yet
        }
        if (chunk->find_first_not_of(" \t\r\n") == std::string::npos && eof) {
          return;  // empty file
        }
        throw std::runtime_error(input.name + ": unknown log format (use --format)");
      }
      parser = makeParser(*format, parse);
    }
    batch.hold(chunk);
    batch.hold(prev);
    std::string_view text = *chunk;
    while (!text.empty()) {
      const size_t nl = text.find('\n');
      std::string_view line = text.substr(0, nl);
      text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
      if (!line.empty() && line.back() == '\r') {
        line.remove_suffix(1);
      }
      if (line.empty()) {
        continue;
      }
      ++stats_.lines;
      if (!parser->parse(line, &batch)) {
        ++stats_.malformed;
      }
      if (batch.records.size() >= options_.batch_records) {
        stats_.records += batch.records.size();
        handle(batch);
        batch.clear();
        batch.hold(chunk);
        batch.hold(prev);
      }
    }
    prev = std::move(chunk);
  }
  if (parser) {
    parser->finish(&batch);
  }
  stats_.records += batch.records.size();
  stats_.bytes_read += reader->compressedBytes();
  if (!batch.records.empty()) {
    handle(batch);
  }
}

}  // namespace faultline
