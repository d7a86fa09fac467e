#include "ingest/push/push_source.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <httplib.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include "core/time.h"
#include "ingest/formats/formats.h"
#include "ingest/otlp/otlp.h"
#include "ingest/push/loki.h"

namespace faultline {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw std::runtime_error(path + ": " + what);
}

std::string scalar(const YAML::Node& node, const std::string& path) {
  if (!node.IsScalar()) {
    fail(path, "expected a string");
  }
  return node.Scalar();
}

size_t positive(const YAML::Node& node, const std::string& path) {
  size_t v = 0;
  if (!node.IsScalar() || !YAML::convert<size_t>::decode(node, v) || v == 0) {
    fail(path, "expected a positive integer");
  }
  return v;
}

std::vector<std::string> names(const YAML::Node& node, const std::string& path) {
  if (!node.IsSequence()) {
    fail(path, "expected a list of strings");
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < node.size(); ++i) {
    out.push_back(scalar(node[i], path + "[" + std::to_string(i) + "]"));
  }
  return out;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The media type of a Content-Type header, lower case, without parameters.
std::string mediaType(const std::string& content_type) {
  std::string t = lower(content_type.substr(0, content_type.find(';')));
  while (!t.empty() && t.back() == ' ') {
    t.pop_back();
  }
  return t;
}

// google.rpc.Status (googleapis google/rpc/status.proto: int32 code = 1; string message = 2),
// the body of OTLP/HTTP error answers, encoded by hand: two fields.
std::string rpcStatusProto(int code, const std::string& message) {
  std::string out;
  out.push_back(0x08);  // field 1, varint
  out.push_back(static_cast<char>(code));
  out.push_back(0x12);  // field 2, length-delimited
  for (size_t n = message.size();; n >>= 7) {
    out.push_back(static_cast<char>((n & 0x7f) | (n > 0x7f ? 0x80 : 0)));
    if (n <= 0x7f) {
      break;
    }
  }
  return out + message;
}

// gRPC status codes (grpc/grpc doc/statuscodes.md) for the HTTP statuses we answer.
int rpcCode(int http_status) {
  switch (http_status) {
    case 401:
      return 16;  // UNAUTHENTICATED
    case 413:
    case 429:
      return 8;  // RESOURCE_EXHAUSTED
    default:
      return 3;  // INVALID_ARGUMENT
  }
}

}  // namespace

PushConfig PushConfig::fromYaml(const YAML::Node& node) {
  if (!node.IsMap()) {
    fail("http", "expected a mapping");
  }
  static const std::vector<std::string> kKeys = {"listen", "max_body_bytes", "max_line_bytes",
                                                 "token_file", "labels"};
  for (const auto& kv : node) {
    if (std::find(kKeys.begin(), kKeys.end(), kv.first.Scalar()) == kKeys.end()) {
      fail("http." + kv.first.Scalar(), "unknown key");
    }
  }
  PushConfig config;
  if (const YAML::Node n = node["listen"]) {
    std::string listen = scalar(n, "http.listen");
    const size_t colon = listen.rfind(':');
    int port = -1;
    if (colon != std::string::npos) {
      try {
        size_t used = 0;
        port = std::stoi(listen.substr(colon + 1), &used);
        if (used != listen.size() - colon - 1) {
          port = -1;
        }
      } catch (const std::exception&) {
        port = -1;
      }
    }
    if (port < 0 || port > 65535 || colon == 0) {
      fail("http.listen", "expected host:port, got '" + listen + "'");
    }
    std::string host = listen.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);  // [::]:3100
    }
    config.host = host;
    config.port = port;
  }
  if (const YAML::Node n = node["max_body_bytes"]) {
    config.max_body_bytes = positive(n, "http.max_body_bytes");
  }
  if (const YAML::Node n = node["max_line_bytes"]) {
    config.max_line_bytes = positive(n, "http.max_line_bytes");
  }
  if (const YAML::Node n = node["token_file"]) {
    config.token_file = scalar(n, "http.token_file");
  }
  if (const YAML::Node labels = node["labels"]) {
    if (!labels.IsMap()) {
      fail("http.labels", "expected a mapping");
    }
    for (const auto& kv : labels) {
      const std::string key = kv.first.Scalar();
      const std::string path = "http.labels." + key;
      if (key == "node") {
        config.streams.node_labels = names(kv.second, path);
      } else if (key == "pod") {
        config.streams.pod_labels = names(kv.second, path);
      } else if (key == "kernel") {
        if (!kv.second.IsSequence()) {
          fail(path, "expected a list of {name, value}");
        }
        config.streams.kernel_labels.clear();
        for (size_t i = 0; i < kv.second.size(); ++i) {
          const YAML::Node e = kv.second[i];
          const std::string at = path + "[" + std::to_string(i) + "]";
          if (!e.IsMap() || !e["name"] || !e["value"] || e.size() != 2) {
            fail(at, "expected {name: ..., value: ...}");
          }
          config.streams.kernel_labels.emplace_back(scalar(e["name"], at + ".name"),
                                                    scalar(e["value"], at + ".value"));
        }
      } else {
        fail(path, "unknown key (node, pod, kernel)");
      }
    }
  }
  return config;
}

PushServer::PushServer(PushConfig config, BatchQueue* queue, Metrics* metrics,
                       std::function<bool()> ready)
    : config_(std::move(config)),
      queue_(queue),
      metrics_(metrics),
      ready_(std::move(ready)),
      server_(std::make_unique<httplib::Server>()) {
  using T = Metrics::Type;
  metrics_->declare("faultline_records_total", T::kCounter,
                    "Records accepted, by source and format");
  metrics_->declare("faultline_bytes_total", T::kCounter,
                    "Bytes of request bodies after Content-Encoding, by source and format");
  metrics_->declare("faultline_records_rejected_total", T::kCounter,
                    "OTLP log records without a usable line (partial success)");
  metrics_->declare("faultline_lines_truncated_total", T::kCounter,
                    "Lines cut to max_line_bytes, by source");
  metrics_->declare("faultline_push_requests_rejected_total", T::kCounter,
                    "Push requests answered with an error, by reason");
}

PushServer::~PushServer() {
  stop();
}

void PushServer::start() {
  httplib::Server& s = *server_;
  // An answer with a body goes out in two writes (head, then body); with Nagle's algorithm the
  // second waits for the client's delayed ACK of the first, 40 ms per request on Linux.
  s.set_tcp_nodelay(true);
  // No set_payload_max_length: the handlers enforce max_body_bytes themselves, so that every
  // refusal is answered and counted the same way.
  s.Post("/loki/api/v1/push", [this](const httplib::Request& req, httplib::Response& res,
                                     const httplib::ContentReader& reader) {
    handlePush(Protocol::kLoki, req, res, reader);
  });
  s.Post("/v1/logs", [this](const httplib::Request& req, httplib::Response& res,
                            const httplib::ContentReader& reader) {
    handlePush(Protocol::kOtlp, req, res, reader);
  });
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  s.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    const bool ready = ready_();
    res.status = ready ? 200 : 503;
    res.set_content(ready ? "ready\n" : "not ready\n", "text/plain");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_->render(), "text/plain; version=0.0.4");
  });
  if (config_.port == 0) {
    bound_port_ = s.bind_to_any_port(config_.host);
  } else if (s.bind_to_port(config_.host, config_.port)) {
    bound_port_ = config_.port;
  }
  if (bound_port_ <= 0) {
    throw std::runtime_error("http: cannot listen on " + config_.host + ":" +
                             std::to_string(config_.port));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  spdlog::info("http: push endpoints listening on {}:{}", config_.host, bound_port_);
}

void PushServer::stop() {
  if (thread_.joinable()) {
    server_->stop();
    thread_.join();
  }
}

bool PushServer::authorized(const httplib::Request& req) {
  if (config_.token_file.empty()) {
    return true;
  }
  std::string token;
  {
    std::lock_guard lock(token_mu_);
    struct stat st {};
    if (::stat(config_.token_file.c_str(), &st) != 0) {
      spdlog::warn("http: token file {} is unreadable: every push is refused", config_.token_file);
      return false;
    }
    if (st.st_mtim.tv_sec != token_mtime_.tv_sec || st.st_mtim.tv_nsec != token_mtime_.tv_nsec) {
      std::ifstream in(config_.token_file);
      std::stringstream s;
      s << in.rdbuf();
      token_ = s.str();
      while (!token_.empty() && std::isspace(static_cast<unsigned char>(token_.back()))) {
        token_.pop_back();
      }
      token_mtime_ = st.st_mtim;
    }
    token = token_;
  }
  const std::string header = req.get_header_value("Authorization");
  return !token.empty() && header.size() == 7 + token.size() &&
         lower(header.substr(0, 7)) == "bearer " && header.compare(7, token.size(), token) == 0;
}

void PushServer::reject(Protocol protocol, bool json, int status, const std::string& reason,
                        const std::string& metric_reason, httplib::Response& res) {
  metrics_->add("faultline_push_requests_rejected_total", Metrics::label("reason", metric_reason));
  res.status = status;
  if (status == 429) {
    res.set_header("Retry-After", "1");
  }
  if (status == 401) {
    res.set_header("WWW-Authenticate", "Bearer");
  }
  if (protocol == Protocol::kLoki) {
    res.set_content(reason + "\n", "text/plain");
  } else if (json) {
    const nlohmann::json status_json = {{"code", rpcCode(status)}, {"message", reason}};
    res.set_content(status_json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                    "application/json");
  } else {
    res.set_content(rpcStatusProto(rpcCode(status), reason), "application/x-protobuf");
  }
  spdlog::debug("http: {} {}", status, reason);
}

void PushServer::handlePush(Protocol protocol, const httplib::Request& req, httplib::Response& res,
                            const httplib::ContentReader& reader) {
  const std::string type = mediaType(req.get_header_value("Content-Type"));
  const bool json = type == "application/json";
  // Content-Encoding gzip and deflate (zlib or gzip format) are undone by cpp-httplib as the
  // body streams in (Debian builds it with CPPHTTPLIB_ZLIB_SUPPORT), so the limit below holds for
  // the decompressed bytes and a zip bomb stops at max_body_bytes without being inflated whole.
  // `snappy` is a no-op (some Loki clients set it for their snappy protobuf body, loki#3407).
  const std::string encoding = lower(req.get_header_value("Content-Encoding"));
  const bool inflated = encoding == "gzip" || encoding == "deflate";
  const bool known_encoding =
      inflated || encoding.empty() || encoding == "identity" || encoding == "snappy";
  // Read the body in every case (discarding it when refusing) so that the connection stays
  // usable; never more than max_body_bytes of it is kept.
  const bool allowed = authorized(req);
  const bool room = queue_->depth().first < queue_->maxBytes();
  const bool keep = allowed && room && known_encoding;
  std::string body;
  if (keep && !inflated) {
    // The body arrives in 4 KB pieces: one allocation instead of a doubling series of copies, with
    // room for the JSON decoder's padding. A client's Content-Length is believed only up to
    // max_body_bytes, the stated bound anyway.
    body.reserve(
        std::min<size_t>(req.get_header_value<uint64_t>("Content-Length"), config_.max_body_bytes) +
        kJsonPadding);
  }
  size_t received = 0;
  bool over = false;
  const bool read = reader([&](const char* data, size_t size) {
    received += size;
    if (received > config_.max_body_bytes) {
      over = true;
      return false;
    }
    if (keep) {
      body.append(data, size);
    }
    return true;
  });
  if (!allowed) {
    return reject(protocol, json, 401, "missing or wrong bearer token", "unauthorized", res);
  }
  if (over) {
    return reject(protocol, json, 413,
                  "body (after Content-Encoding) over the limit of " +
                      std::to_string(config_.max_body_bytes) + " bytes",
                  "too_large", res);
  }
  if (!known_encoding) {
    return reject(protocol, json, 415, "unsupported Content-Encoding " + encoding, "encoding", res);
  }
  if (!read) {
    return reject(protocol, json, 400,
                  "body could not be read: corrupt " + (encoding.empty() ? "chunked" : encoding) +
                      " data or the connection closed",
                  "malformed", res);
  }
  if (!room) {
    return reject(protocol, json, 429, "pipeline queue is full; retry later", "queue_full", res);
  }
  if (protocol == Protocol::kOtlp && !json && type != "application/x-protobuf") {
    return reject(protocol, json, 415,
                  "Content-Type must be application/x-protobuf or application/json", "media_type",
                  res);
  }
  std::string error;
  bool too_large = false;

  const size_t body_bytes = body.size();
  // Until the batch is queued (where queue_bytes counts it) or refused; a decoder needs several
  // times its body, and the gate keeps that to max_body_bytes of bodies whatever the number of
  // server threads.
  const ByteGate::Admission decoding = decoding_.admit(body_bytes);
  BatchQueue::Item item;
  RecordBatch& batch = item.batch;
  uint64_t rejected = 0;
  bool ok = false;
  std::string format;
  if (json) {
    body.append(kJsonPadding, '\0');  // so that the request is parsed in place, not copied
  }
  const std::string_view json_body = std::string_view(body).substr(0, body_bytes);
  if (protocol == Protocol::kLoki) {
    const std::string tenant = req.get_header_value("X-Scope-OrgID");
    format = json ? "loki_json" : "loki_proto";
    ok = json ? decodeLokiJson(json_body, body.size(), tenant, config_.streams, &batch, &error)
              : decodeLokiProto(body, config_.max_body_bytes, tenant, config_.streams, &batch,
                                &error, &too_large);
  } else {
    format = json ? "otlp_json" : "otlp_proto";
    if (json) {
      ok =
          decodeOtlpJson(json_body, body.size(), config_.streams, keep_, &batch, &rejected, &error);
    } else {
      auto held = std::make_shared<const std::string>(std::move(body));
      ok = decodeOtlpProto(*held, config_.streams, keep_, &batch, &rejected, &error);
      batch.hold(held, held->capacity());  // the records point into the body
    }
  }
  if (!ok) {
    return reject(protocol, json, too_large ? 413 : 400, error,
                  too_large ? "too_large" : "malformed", res);
  }
  body = std::string();  // records point into the batch's arena or a buffer it holds
  uint64_t truncated = 0;
  const int64_t now = nowNanos();
  for (LogRecord& r : batch.records) {
    if (r.line.size() > config_.max_line_bytes) {
      r.line = r.line.substr(0, config_.max_line_bytes);
      ++truncated;
    }
    if (r.time_ns == 0) {
      r.time_ns = now;  // no event time on the record: the time it arrived
    }
  }
  const size_t records = batch.records.size();
  item.bytes = batch.memoryBytes();
  if (records > 0 && !queue_->tryPush(item)) {
    return reject(protocol, json, 429, "pipeline queue is full; retry later", "queue_full", res);
  }
  const std::string labels =
      Metrics::label("source", "http") + "," + Metrics::label("format", format);
  metrics_->add("faultline_records_total", labels, records);
  metrics_->add("faultline_bytes_total", labels, body_bytes);
  if (truncated > 0) {
    metrics_->add("faultline_lines_truncated_total", Metrics::label("source", "http"), truncated);
  }
  if (protocol == Protocol::kLoki) {
    res.status = 204;
    return;
  }
  if (rejected > 0) {
    metrics_->add("faultline_records_rejected_total", labels, rejected);
  }
  const std::string why = "log records without a string body or MESSAGE";
  res.status = 200;
  if (json) {
    res.set_content(otlpJsonResponse(rejected, why), "application/json");
  } else {
    res.set_content(otlpProtoResponse(rejected, why), "application/x-protobuf");
  }
}

}  // namespace faultline
