// push_load: pushes kernel log lines to faultline's HTTP endpoints as the agents send them, over
// keep-alive connections, for bench/push_e2e.sh.
//
//   push_load --url http://HOST:PORT --format loki_proto|loki_json|otlp_proto|otlp_json
//             --input FILE [--batch N] [--records R] [--connections C]
//             [--content-encoding identity|gzip|zstd]
//
// FILE holds one "node<TAB>message" per line. Each request carries up to N (default 1000)
// consecutive entries of one node, as a per-node agent batches them, the nodes taking turns:
//   loki_proto  Promtail, Alloy: a PushRequest protobuf in snappy block format with one stream
//               {job="node-journal", node="NODE", transport="kernel"}, the message as the line;
//   loki_json   the same stream in Loki's JSON (winston-loki's JSON mode, curl);
//   otlp_proto, otlp_json  the OTel collector's journald receiver (bench_records.h): every journal
//               field in a kvlist body, the node in resource attributes.
// No Content-Encoding by default (Loki's protobuf is snappy-compressed inside); gzip compresses
// each body at zlib's default level, as the OTel collector's otlphttp exporter does by default
// (Go's compress/gzip, level 6), and sends Content-Encoding: gzip; zstd compresses each body as
// the exporter's `compression: zstd` does by default: zstd's level 1 (confighttp's default level
// -1 is klauspost/compress's SpeedFastest) and no content size in the frame header (its streaming
// encoder writes none for a body over one 128 KiB block). Event times are the wall
// clock at start-up plus 1 µs per line of FILE. Every body is encoded before the clock starts;
// then C threads (default 2), each on its own keep-alive connection, send the requests in turn
// (from the top of FILE again until R records are sent; default: FILE once). A 429 is retried
// after its Retry-After. Once every request is answered, /metrics is polled every 10 ms until
// faultline_lines_total has grown by the records sent.
//
// Prints one line on stdout:
//   FORMAT[+ENCODING] records=R requests=Q retried_429=K body_bytes=B text_bytes=T seconds=S
// B counts the bodies as sent, T the messages alone; S runs from the first request to the poll
// that saw every record matched.
// Exit status: 0; 1 on another refusal, a connection error, or records not all matched within
// 600 s; 2 on bad arguments.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <snappy.h>
#include <zstd.h>

#include "bench/bench_records.h"
#include "loki/push.pb.h"
#include "tests/tools/zlib_compress.h"

namespace {

using faultline::KernelEntry;

struct Request {
  std::string body;
  size_t records = 0;
  size_t text_bytes = 0;
};

std::string lokiLabels(std::string_view node) {
  return "{job=\"node-journal\", node=\"" + std::string(node) + "\", transport=\"kernel\"}";
}

std::string lokiProto(const KernelEntry* entries, size_t n) {
  logproto::PushRequest req;
  logproto::StreamAdapter* s = req.add_streams();
  s->set_labels(lokiLabels(entries[0].node));
  for (size_t i = 0; i < n; ++i) {
    logproto::EntryAdapter* e = s->add_entries();
    e->mutable_timestamp()->set_seconds(entries[i].time_ns / 1'000'000'000);
    e->mutable_timestamp()->set_nanos(static_cast<int32_t>(entries[i].time_ns % 1'000'000'000));
    e->set_line(std::string(entries[i].message));
  }
  std::string compressed;
  const std::string raw = req.SerializeAsString();
  snappy::Compress(raw.data(), raw.size(), &compressed);
  return compressed;
}

std::string lokiJson(const KernelEntry* entries, size_t n) {
  nlohmann::ordered_json values = nlohmann::ordered_json::array();
  for (size_t i = 0; i < n; ++i) {
    values.push_back({std::to_string(entries[i].time_ns), std::string(entries[i].message)});
  }
  const std::string node(entries[0].node);
  nlohmann::ordered_json stream = {
      {"job", "node-journal"}, {"node", node}, {"transport", "kernel"}};
  return nlohmann::ordered_json{
      {"streams", {{{"stream", std::move(stream)}, {"values", std::move(values)}}}}}
      .dump();
}

// faultline_lines_total from /metrics; -1 if it cannot be read.
long long linesMatched(httplib::Client& metrics) {
  const auto res = metrics.Get("/metrics");
  if (!res || res->status != 200) {
    return -1;
  }
  const std::string key = "\nfaultline_lines_total ";
  const size_t at = res->body.find(key);
  return at == std::string::npos ? 0 : std::atoll(res->body.c_str() + at + key.size());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Pushes kernel log lines to faultline's Loki and OTLP/HTTP endpoints"};
  std::string url;
  std::string format;
  std::string input;
  size_t batch = 1000;
  size_t want_records = 0;
  int connections = 2;
  std::string encoding = "identity";
  app.add_option("--url", url, "http://HOST:PORT of faultline serve")->required();
  app.add_option("--format", format, "loki_proto, loki_json, otlp_proto or otlp_json")
      ->required()
      ->check(CLI::IsMember({"loki_proto", "loki_json", "otlp_proto", "otlp_json"}));
  app.add_option("--input", input, "node<TAB>message lines")->required();
  app.add_option("--batch", batch, "records per request")->check(CLI::PositiveNumber);
  app.add_option("--records", want_records, "records to send (default: the file once)");
  app.add_option("--connections", connections, "keep-alive connections, one thread each")
      ->check(CLI::PositiveNumber);
  app.add_option("--content-encoding", encoding, "identity, gzip or zstd (each body compressed)")
      ->check(CLI::IsMember({"identity", "gzip", "zstd"}));
  CLI11_PARSE(app, argc, argv);

  // The file, grouped by node in order of first appearance.
  std::ifstream in(input);
  if (!in) {
    std::cerr << "push_load: cannot read " << input << "\n";
    return 2;
  }
  std::vector<std::string> node_names;
  std::map<std::string, size_t> node_index;
  std::vector<std::vector<std::string>> messages;
  for (std::string line; std::getline(in, line);) {
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) {
      continue;
    }
    const auto [it, added] = node_index.try_emplace(line.substr(0, tab), node_names.size());
    if (added) {
      node_names.push_back(it->first);
      messages.emplace_back();
    }
    messages[it->second].push_back(line.substr(tab + 1));
  }
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  const int64_t start_ns = int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;

  // Encode every request: node n's chunk k goes before node n+1's chunk k.
  std::vector<Request> requests;
  int64_t line_no = 0;
  for (size_t chunk = 0, left = 1; left > 0; ++chunk) {
    left = 0;
    for (size_t n = 0; n < node_names.size(); ++n) {
      const std::vector<std::string>& lines = messages[n];
      if (chunk * batch >= lines.size()) {
        continue;
      }
      ++left;
      std::vector<KernelEntry> entries;
      Request r;
      for (size_t i = chunk * batch; i < std::min(lines.size(), (chunk + 1) * batch); ++i) {
        entries.push_back({node_names[n], start_ns + 1000 * line_no++, lines[i], i});
        r.text_bytes += lines[i].size();
      }
      r.records = entries.size();
      if (format == "loki_proto") {
        r.body = lokiProto(entries.data(), entries.size());
      } else if (format == "loki_json") {
        r.body = lokiJson(entries.data(), entries.size());
      } else if (format == "otlp_proto") {
        r.body = faultline::otlpRequest(entries.data(), entries.size()).SerializeAsString();
      } else {
        r.body = faultline::otlpJson(entries.data(), entries.size());
      }
      if (encoding == "gzip") {
        r.body = faultline::zlibCompress(r.body, 15 + 16);
      } else if (encoding == "zstd") {
        ZSTD_CCtx* c = ZSTD_createCCtx();
        ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 1);
        ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0);
        std::string packed(ZSTD_compressBound(r.body.size()), '\0');
        packed.resize(
            ZSTD_compress2(c, packed.data(), packed.size(), r.body.data(), r.body.size()));
        ZSTD_freeCCtx(c);
        r.body = std::move(packed);
      }
      requests.push_back(std::move(r));
    }
  }
  if (requests.empty()) {
    std::cerr << "push_load: no node<TAB>message line in " << input << "\n";
    return 2;
  }
  // The sequence of requests to send: the file in turn until want_records.
  std::vector<size_t> order;
  size_t records = 0;
  size_t body_bytes = 0;
  size_t text_bytes = 0;
  do {
    const Request& r = requests[order.size() % requests.size()];
    order.push_back(order.size() % requests.size());
    records += r.records;
    body_bytes += r.body.size();
    text_bytes += r.text_bytes;
  } while (want_records == 0 ? order.size() < requests.size() : records < want_records);

  const bool loki = format.rfind("loki", 0) == 0;
  const std::string path = loki ? "/loki/api/v1/push" : "/v1/logs";
  const std::string type =
      format.find("json") != std::string::npos ? "application/json" : "application/x-protobuf";
  httplib::Headers headers;
  if (encoding != "identity") {
    headers.emplace("Content-Encoding", encoding);
  }
  httplib::Client metrics(url);
  const long long matched_before = linesMatched(metrics);
  if (matched_before < 0) {
    std::cerr << "push_load: no /metrics at " << url << "\n";
    return 1;
  }

  std::atomic<size_t> next{0};
  std::atomic<size_t> retried{0};
  std::atomic<bool> failed{false};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < connections; ++c) {
    threads.emplace_back([&] {
      httplib::Client client(url);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      client.set_read_timeout(60, 0);
      for (size_t i = next++; i < order.size() && !failed; i = next++) {
        const std::string& body = requests[order[i]].body;
        for (;;) {
          const auto res = client.Post(path, headers, body.data(), body.size(), type);
          if (res && (res->status == 200 || res->status == 204)) {
            break;
          }
          if (res && res->status == 429) {
            ++retried;
            const int wait_s = std::atoi(res->get_header_value("Retry-After").c_str());
            std::this_thread::sleep_for(std::chrono::seconds(std::max(wait_s, 1)));
            continue;
          }
          std::cerr << "push_load: request " << i << ": "
                    << (res ? "status " + std::to_string(res->status) + ": " + res->body
                            : "error " + httplib::to_string(res.error()))
                    << "\n";
          failed = true;
          return;
        }
      }
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  if (failed) {
    return 1;
  }
  const auto deadline = t0 + std::chrono::seconds(600);
  long long matched = 0;
  while ((matched = linesMatched(metrics) - matched_before) < static_cast<long long>(records)) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::cerr << "push_load: " << matched << " of " << records << " records matched in 600 s\n";
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "%s%s records=%zu requests=%zu retried_429=%zu body_bytes=%zu text_bytes=%zu "
      "seconds=%.3f\n",
      format.c_str(), encoding == "identity" ? "" : ("+" + encoding).c_str(), records, order.size(),
      retried.load(), body_bytes, text_bytes, seconds);
  return 0;
}
