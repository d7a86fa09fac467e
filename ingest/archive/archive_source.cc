#include "ingest/archive/archive_source.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "ingest/archive/decompress.h"

namespace faultline {
namespace {

constexpr size_t kChunkBytes = 1 << 20;
constexpr size_t kBatchRecords = 8192;  // records per batch handed on
// The longest first line a file's format is told from.
constexpr size_t kMaxFirstLine = 16 << 20;

// A read buffer, reused once no batch holds it: allocating and zero-filling 1 MiB per read cost
// more than the parsers. [0, lines) holds whole lines; [lines, filled) is the incomplete last
// line, copied to the front of the next chunk.
struct Chunk {
  std::unique_ptr<char[]> data;
  size_t capacity = 0;
  size_t lines = 0;
  size_t filled = 0;
};

// A chunk with room for `bytes`, taken from `pool` if one is free (held by nobody else).
std::shared_ptr<Chunk> acquire(std::vector<std::shared_ptr<Chunk>>* pool, size_t bytes) {
  std::shared_ptr<Chunk>* free = nullptr;
  for (auto& c : *pool) {
    if (c.use_count() == 1) {
      free = &c;
      break;
    }
  }
  if (free == nullptr) {
    free = &pool->emplace_back(std::make_shared<Chunk>());
  }
  Chunk& c = **free;
  if (c.capacity < bytes) {
    c.data = std::make_unique_for_overwrite<char[]>(bytes);
    c.capacity = bytes;
  }
  c.lines = c.filled = 0;
  return *free;
}

// A name part that says what the file holds, not whose it is: "dmesg", "log", with logrotate's
// dateext "log-20261128", and a sosreport's file of a command's output, named by its command line
// with '_' for spaces: "dmesg_-T", "journalctl_--no-pager_--boot_-k".
bool logWord(std::string_view part) {
  static constexpr std::string_view kWords[] = {
      "log",    "logs",   "txt",        "out",  "dmesg",    "kmsg",  "kern",
      "kernel", "syslog", "journalctl", "json", "messages", "jsonl", "journal"};
  if (const size_t options = part.find("_-"); options != std::string_view::npos) {
    return std::ranges::find(kWords, part.substr(0, options)) != std::end(kWords);
  }
  const std::string_view word = part.substr(0, part.find('-'));
  const std::string_view date = part.substr(std::min(word.size() + 1, part.size()));
  return std::ranges::find(kWords, word) != std::end(kWords) && std::ranges::all_of(date, isDigit);
}

// Whether `text` holds no line but blank ones and journalctl's own (isJournalctlMarker).
bool noLogLines(std::string_view text) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    const size_t start = line.find_first_not_of(" \t\r");
    if (start != std::string_view::npos &&
        !isJournalctlMarker(line.substr(start, line.find_last_not_of(" \t\r") + 1 - start))) {
      return false;
    }
  }
  return true;
}

bool digits(std::string_view part) {
  return !part.empty() && std::ranges::all_of(part, isDigit);
}

// A date as archives name them, maybe with a time after it: 20261128, 2026-11-28,
// 20261128-1330, 2026-11-28-13; a year from 1970 to 2099, a month and a day. Not any run of digits
// and '-': a node named by its address (192-168-1-10) is no date.
bool date(std::string_view part) {
  if (!std::ranges::all_of(part, [](char c) { return isDigit(c) || c == '-'; })) {
    return false;
  }
  std::string ymd(part.substr(0, 8));
  if (part.size() >= 10 && part[4] == '-' && part[7] == '-') {
    ymd = std::string(part.substr(0, 4)) + std::string(part.substr(5, 2)) +
          std::string(part.substr(8, 2));
  }
  if (ymd.size() != 8 || !digits(ymd)) {
    return false;
  }
  const auto number = [&](size_t at, size_t n) { return std::stoi(ymd.substr(at, n)); };
  const int year = number(0, 4);
  const int month = number(4, 2);
  const int day = number(6, 2);
  return year >= 1970 && year <= 2099 && month >= 1 && month <= 12 && day >= 1 && day <= 31;
}

// `base` without the parts log tools add at its end (nodeFromFileName's rule for a file name).
std::string nameWithoutLogParts(const std::string& base) {
  std::vector<std::string_view> parts;
  for (size_t at = 0; at <= base.size();) {
    const size_t dot = std::min(base.find('.', at), base.size());
    parts.emplace_back(std::string_view(base).substr(at, dot - at));
    at = dot + 1;
  }
  size_t n = parts.size();
  if (n > 1 && (parts[n - 1] == "gz" || parts[n - 1] == "zst" || parts[n - 1] == "zstd")) {
    --n;
  }
  if (n > 1 && digits(parts[n - 1]) && logWord(parts[n - 2])) {  // rotated: kern.log.1, dmesg.0
    --n;
  }
  while (n > 1 && (logWord(parts[n - 1]) || date(parts[n - 1]))) {
    --n;
  }
  return base.substr(0, static_cast<size_t>(parts[n - 1].end() - base.data()));
}

// The host named by the sosreport root `root`'s `hostname` file, lowercased; "" when `root` holds
// no sos_commands directory or no such host name.
std::string sosRootHost(const std::filesystem::path& root) {
  std::error_code ec;
  if (!std::filesystem::is_directory(root / "sos_commands", ec)) {
    return "";
  }
  std::ifstream in(root / "hostname");
  std::string host;
  std::getline(in, host);
  while (!host.empty() && std::isspace(static_cast<unsigned char>(host.back())) != 0) {
    host.pop_back();
  }
  std::ranges::transform(host, host.begin(),
                         [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; });
  const bool name = std::ranges::all_of(
      host, [](char c) { return isDigit(c) || (c >= 'a' && c <= 'z') || c == '-' || c == '.'; });
  return name ? host : "";
}

}  // namespace

std::string sosReportHost(const std::string& path) {
  // The file's real directories: "../x" and links into a report name others on their own.
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::weakly_canonical(path, ec);
  if (ec) {
    return "";
  }
  for (std::filesystem::path dir = real.parent_path();; dir = dir.parent_path()) {
    if (std::string host = sosRootHost(dir); !host.empty()) {
      return host;
    }
    if (dir == dir.parent_path()) {
      return "";
    }
  }
}

bool isClusterInfoDumpPodLog(const std::string& path) {
  const std::filesystem::path p(path);
  std::error_code ec;
  return p.filename() == "logs.txt" &&
         std::filesystem::is_regular_file(p.parent_path().parent_path() / "pods.json", ec);
}

std::string nodeFromFileName(const std::string& path) {
  const std::filesystem::path p(path);
  std::string node = nameWithoutLogParts(p.filename().string());
  if (!logWord(node) && !date(node)) {
    return node;
  }
  // A name of log words only, as in per-node trees (gpu-node-01/var/log/dmesg): the node is the
  // nearest directory of the path named otherwise, not "dmesg" for every node of the tree.
  for (std::filesystem::path dir = p.parent_path();; dir = dir.parent_path()) {
    const std::string name = dir.filename().string();
    if (name.empty() || name == "." || name == "..") {
      return node;
    }
    std::string d = nameWithoutLogParts(name);
    // sos_commands: a sosreport's without its hostname file, whose top directory names the host
    // (sosreport-HOST-...).
    if (!logWord(d) && !date(d) && d != "var" && d != "sos_commands") {
      return d;
    }
  }
}

ArchiveSource::ArchiveSource(std::vector<ArchiveInput> inputs, ArchiveOptions options)
    : inputs_(std::move(inputs)), options_(std::move(options)) {}

void ArchiveSource::run(const BatchHandler& handle, std::stop_token stop) {
  for (current_ = 0; current_ < inputs_.size(); ++current_) {
    if (stop.stop_requested()) {
      return;
    }
    try {
      runOne(inputs_[current_], handle, stop);
    } catch (const std::runtime_error& e) {
      errors_.push_back({inputs_[current_].number, e.what()});
    }
  }
}

void ArchiveSource::runOne(const ArchiveInput& input, const BatchHandler& handle,
                           const std::stop_token& stop) {
  if (!input.from_memory && isClusterInfoDumpPodLog(input.name)) {
    // Its first line decides its format: a pod printing a syslog line first made the whole file
    // a host's syslog, and that line the host's kernel.
    throw std::runtime_error(input.name +
                             ": a pod's log from kubectl cluster-info dump: it has no timestamps "
                             "and is the pod's own text; replay `kubectl logs --timestamps` "
                             "output with --node");
  }
  std::unique_ptr<ByteReader> reader =
      input.from_memory ? openArchiveBytes(input.bytes, input.name) : openArchive(input.name);
  ++stats_.files;
  ParseOptions parse = options_.parse;
  std::unique_ptr<LineParser> parser;
  const uint64_t lines_before = stats_.lines;
  const uint64_t records_before = stats_.records;
  RecordBatch batch;
  // A loki-jsonl input's order: the time of its first record, and whether the first record of
  // another time went back (newest first, logcli's default) or on.
  Format format{};        // the file's, once its parser is made
  bool nodeless = false;  // a container log without --node
  std::optional<int64_t> first_time;
  std::optional<bool> newest_first;
  // A record that names no node (no node label or attribute) is dropped and counted malformed, as
  // live (push, Kafka) drops it: decided, it was a fault of a node "", every such record of every
  // machine one node.
  const auto deliver = [&](RecordBatch& b) {
    const size_t parsed = b.records.size();
    std::erase_if(b.records, [](const LogRecord& r) { return r.node.empty(); });
    stats_.malformed += parsed - b.records.size();
    for (size_t i = 0; format == Format::kLokiJsonl && !newest_first && i < b.records.size(); ++i) {
      if (!first_time) {
        first_time = b.records[i].time_ns;
      } else if (b.records[i].time_ns != *first_time) {
        newest_first = b.records[i].time_ns < *first_time;
      }
    }
    stats_.records += b.records.size();
    if (!b.records.empty()) {
      handle(b);
    }
  };
  // Each batch holds its own chunk and the one of the line parsed before it: a parser may hold a
  // record back across a chunk boundary to join its continuation lines (LineParser::parse). A
  // batch is handed over at its chunk's end, so that it holds no more than those two whatever the
  // lines: held until 8192 records, a long stretch without records (malformed lines, a long
  // line) kept every chunk it spans alive.
  std::vector<std::shared_ptr<Chunk>> pool;
  std::shared_ptr<Chunk> prev;  // the chunk of the last line parsed
  std::shared_ptr<Chunk> last;  // the chunk read last: its incomplete line starts the next one
  std::exception_ptr error;     // the file fails midway: what it gave before is still delivered
  bool eof = false;
  while (!eof && !stop.stop_requested()) {
    if (last) {
      // A run of NULs that no line end follows yet (a copytruncate hole, a crash's unwritten
      // blocks, a sparse file) is dropped, not carried: the line after it is what counts, and a
      // hole of hundreds of MB would be held whole.
      const std::string_view tail(last->data.get() + last->lines, last->filled - last->lines);
      last->lines += std::min(tail.find_first_not_of('\0'), tail.size());
    }
    const size_t keep = last ? last->filled - last->lines : 0;
    // A line longer than a chunk is copied into each next one: reading as much again as it holds
    // copies each of its bytes about twice, where a fixed 1 MiB per read copied a 128 MiB line
    // 128 times (5.7 s).
    const size_t step = std::max(kChunkBytes, keep);
    std::shared_ptr<Chunk> chunk = acquire(&pool, keep + step);
    if (keep != 0) {
      std::memcpy(chunk->data.get(), last->data.get() + last->lines, keep);
    }
    size_t got = 0;
    try {
      got = reader->read(chunk->data.get() + keep, step);
    } catch (const std::runtime_error&) {
      error = std::current_exception();
      break;
    }
    if (!last && got >= 3 && std::string_view(chunk->data.get(), 3) == "\xEF\xBB\xBF") {
      // A UTF-8 byte order mark (Windows editors, PowerShell's Out-File) would make the first
      // line malformed: a fault on it missed.
      got -= 3;
      std::memmove(chunk->data.get(), chunk->data.get() + 3, got);
    }
    chunk->filled = keep + got;
    stats_.bytes_text += got;
    eof = got == 0;
    const std::string_view filled(chunk->data.get(), chunk->filled);
    // Only whole lines go to the parser; the tail waits for the next chunk.
    const size_t last_nl = eof ? std::string_view::npos : filled.rfind('\n');
    chunk->lines = eof ? filled.size() : last_nl == std::string_view::npos ? 0 : last_nl + 1;
    last = chunk;
    const std::string_view whole = filled.substr(0, chunk->lines);
    if (!parser) {
      if (filled.size() >= 262 && filled.substr(257, 5) == "ustar") {
        // POSIX tar's magic (ustar at byte 257 of each header): its members' lines would be
        // read as one file's, of one node.
        throw std::runtime_error(input.name + ": a tar archive: extract it and replay its files");
      }
      std::optional<Format> found = options_.format;
      if (!found) {
        found = detectFormat(whole, options_.parse.json_fields.line);
      }
      if (!found) {
        if (whole.empty() && chunk->filled >= kMaxFirstLine &&
            std::any_of(filled.begin(), filled.end(), [](char c) {
              return static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\r';
            })) {
          // A binary file (wtmp, lastlog) has no line end: read on, it would be held whole to
          // tell its format. A text line this long (a collector's one-line OTLP JSON) reads on.
          throw std::runtime_error(input.name +
                                   ": unknown log format (binary: control bytes and no line end "
                                   "in its first " +
                                   std::to_string(kMaxFirstLine >> 20) + " MiB)");
        }
        if (!eof && (whole.empty() || chunk->filled < kChunkBytes)) {
          // No whole line yet, or too little text to tell (a decoder's short read, or bytes
          // before a corruption whose error the next read gives): read on, keeping it all.
          chunk->lines = 0;
          continue;
        }
        if (eof && noLogLines(whole)) {
          return;  // empty, or journalctl's "-- No entries --" of a quiet node
        }
        if (isLogcliDefault(whole)) {
          throw std::runtime_error(
              input.name +
              ": unknown log format: logcli's default output (STAMP {labels} line), whose lines "
              "leave out the labels they share (the node, the kernel's transport); export with "
              "`logcli query --output=jsonl` (format loki-jsonl)");
        }
        throw std::runtime_error(input.name + ": unknown log format (use --format)");
      }
      format = *found;
      // Only a dmesg file names no node in its lines: the file's name does. A container's output
      // names none either, but its file is named after the pod or the container's restart count
      // (/var/log/pods/NS_POD_UID/CONTAINER/0.log), never the node. A json record without a node
      // field is --node's, else dropped, as the live service reads it (a Kafka topic's archive).
      if (format == Format::kDmesg && parse.node.empty()) {
        // Any file of a sosreport is its host's, whatever sos named it (dmesg_-T); the embedded
        // sample's names are no paths of this machine.
        const std::string host = input.from_memory ? "" : sosReportHost(input.name);
        parse.node = input.name == "-" ? "stdin"
                     : !host.empty()   ? host
                                       : nodeFromFileName(input.name);
      }
      nodeless = format == Format::kContainer && parse.node.empty();
      parser = makeParser(format, parse);
    }
    batch.hold(chunk, chunk->capacity);
    batch.hold(prev, prev ? prev->capacity : 0);
    std::string_view text = whole;
    bool parsed = false;
    while (!text.empty()) {
      const size_t nl = text.find('\n');
      std::string_view line = text.substr(0, nl);
      text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
      if (!line.empty() && line.back() == '\r') {
        line.remove_suffix(1);
      }
      // A node that lost power mid-write leaves its log's unwritten last blocks as NUL bytes, and
      // the next boot writes on right after them: the line after the run is whole. A run alone on
      // its line stays malformed.
      if (!line.empty() && line.front() == '\0') {  // one compare per line on the common path
        if (const size_t start = line.find_first_not_of('\0'); start != std::string_view::npos) {
          line.remove_prefix(start);
        }
      }
      if (line.empty() || isJournalctlMarker(line)) {
        continue;
      }
      ++stats_.lines;
      parsed = true;
      if (!parser->parse(line, &batch)) {
        ++stats_.malformed;
      }
      if (batch.records.size() >= kBatchRecords) {
        deliver(batch);
        batch.clear();
        batch.hold(chunk, chunk->capacity);
        batch.hold(prev, prev ? prev->capacity : 0);
      }
    }
    if (parsed) {
      prev = std::move(chunk);
    }
    if (!batch.records.empty()) {
      deliver(batch);
    }
    batch.clear();
  }
  batch.hold(prev, prev ? prev->capacity : 0);  // finish() may give a record held back from it
  if (parser) {
    parser->finish(&batch);
  }
  if (!batch.records.empty()) {
    deliver(batch);
  }
  if (newest_first.value_or(false)) {
    newest_first_.push_back(input.number);
  }
  if (parser && parser->sinceFirstStamp()) {
    // Only a dmesg file's node is the file's: other formats' lines name their hosts.
    since_first_stamp_.push_back({input.name, format == Format::kDmesg ? parse.node : ""});
  }
  if (error) {
    std::rethrow_exception(error);
  }
  // A file of which no line counted (a `--format` it is not in, a Loki export without node
  // labels) would otherwise add "no decision" to the replay's outcome, as a healthy node's would.
  if (nodeless) {
    throw std::runtime_error(input.name +
                             ": a container's log names no node (kubectl logs, /var/log/pods): "
                             "give it with --node");
  }
  if (stats_.lines > lines_before && stats_.records == records_before) {
    // A shipper's JSON keeps its time under a key of its own (Fluent Bit's outputs: `date`).
    const std::string_view hint =
        format == Format::kJson
            ? "; a json record needs a line, a node and a time field: give the shipper's as a "
              "--config Kafka json topic's fields, or the node with --node"
            : "";
    throw std::runtime_error(input.name + ": none of its " +
                             std::to_string(stats_.lines - lines_before) +
                             " lines gave a record (" + std::string(formatName(format)) +
                             ": each one malformed, or naming no node" + std::string(hint) + ")");
  }
}

}  // namespace faultline
