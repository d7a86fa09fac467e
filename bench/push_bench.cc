// Decode-only throughput of the push formats on one core: a request of 1000 kernel lines (10
// nodes × 100 lines, ~90 bytes each) as each client sends it, decoded into a RecordBatch the way
// the HTTP endpoint does (without the HTTP server, the queue and the matcher). Bytes/s count
// the body as sent (Loki protobuf: snappy-compressed).
#include <string>
#include <string_view>

#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>
#include <snappy.h>

#include "ingest/formats/formats.h"
#include "ingest/otlp/otlp.h"
#include "ingest/push/loki.h"
#include "loki/push.pb.h"
#include "opentelemetry/proto/collector/logs/v1/logs_service.pb.h"

namespace faultline {
namespace {

constexpr int kNodes = 10;
constexpr int kLinesPerNode = 100;
constexpr int64_t kStartNs = 1'700'000'000'000'000'000;

std::string line(int node, int i) {
  static const char* kLines[] = {
      "mlx5_core 0000:53:00.0 mlx5_3: Port: 1 Link ACTIVE",
      "IPv6: ADDRCONF(NETDEV_CHANGE): cali%d: link becomes ready",
      "EXT4-fs (nvme0n1p1): mounted filesystem with ordered data mode. Opts: (null)",
      "NVRM: Xid (PCI:0000:44:00): 13, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0)",
      "systemd[1]: Started Session %d of User root.",
  };
  char buf[160];
  std::snprintf(buf, sizeof(buf), kLines[(node + i) % 5], i);
  return std::string(buf) + " seq=" + std::to_string(node * kLinesPerNode + i);
}

std::string nodeName(int n) {
  return "gpu-node-" + std::to_string(n);
}

std::string lokiProtoBody() {
  logproto::PushRequest req;
  for (int n = 0; n < kNodes; ++n) {
    logproto::StreamAdapter* s = req.add_streams();
    s->set_labels("{job=\"node-journal\", transport=\"kernel\", node=\"" + nodeName(n) + "\"}");
    for (int i = 0; i < kLinesPerNode; ++i) {
      logproto::EntryAdapter* e = s->add_entries();
      e->mutable_timestamp()->set_seconds(kStartNs / 1'000'000'000 + i);
      e->set_line(line(n, i));
    }
  }
  std::string compressed;
  const std::string raw = req.SerializeAsString();
  snappy::Compress(raw.data(), raw.size(), &compressed);
  return compressed;
}

std::string lokiJsonBody() {
  nlohmann::json streams = nlohmann::json::array();
  for (int n = 0; n < kNodes; ++n) {
    nlohmann::json values = nlohmann::json::array();
    for (int i = 0; i < kLinesPerNode; ++i) {
      values.push_back({std::to_string(kStartNs + i), line(n, i)});
    }
    streams.push_back(
        {{"stream", {{"job", "node-journal"}, {"transport", "kernel"}, {"node", nodeName(n)}}},
         {"values", values}});
  }
  return nlohmann::json{{"streams", streams}}.dump();
}

opentelemetry::proto::collector::logs::v1::ExportLogsServiceRequest otlpRequest() {
  opentelemetry::proto::collector::logs::v1::ExportLogsServiceRequest req;
  for (int n = 0; n < kNodes; ++n) {
    auto* rl = req.add_resource_logs();
    auto* attr = rl->mutable_resource()->add_attributes();
    attr->set_key("k8s.node.name");
    attr->mutable_value()->set_string_value(nodeName(n));
    auto* transport = rl->mutable_resource()->add_attributes();
    transport->set_key("transport");
    transport->mutable_value()->set_string_value("kernel");
    auto* sl = rl->add_scope_logs();
    for (int i = 0; i < kLinesPerNode; ++i) {
      auto* lr = sl->add_log_records();
      lr->set_time_unix_nano(kStartNs + i);
      lr->mutable_body()->set_string_value(line(n, i));
    }
  }
  return req;
}

std::string otlpJsonBody() {
  nlohmann::json resource_logs = nlohmann::json::array();
  for (int n = 0; n < kNodes; ++n) {
    nlohmann::json records = nlohmann::json::array();
    for (int i = 0; i < kLinesPerNode; ++i) {
      records.push_back({{"timeUnixNano", std::to_string(kStartNs + i)},
                         {"body", {{"stringValue", line(n, i)}}}});
    }
    resource_logs.push_back(
        {{"resource",
          {{"attributes",
            {{{"key", "k8s.node.name"}, {"value", {{"stringValue", nodeName(n)}}}},
             {{"key", "transport"}, {"value", {{"stringValue", "kernel"}}}}}}}},
         {"scopeLogs", {{{"logRecords", records}}}}});
  }
  return nlohmann::json{{"resourceLogs", resource_logs}}.dump();
}

template <typename Decode>
void run(benchmark::State& state, const std::string& body, Decode decode) {
  const StreamRules rules;
  size_t records = 0;
  for (auto _ : state) {
    RecordBatch batch;
    if (!decode(body, rules, &batch)) {
      state.SkipWithError("decode failed");
      return;
    }
    records = batch.records.size();
    benchmark::DoNotOptimize(batch.records.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * records));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * body.size()));
  state.counters["body_bytes"] = static_cast<double>(body.size());
}

void BM_LokiProtoSnappy(benchmark::State& state) {
  run(state, lokiProtoBody(), [](const std::string& b, const StreamRules& r, RecordBatch* batch) {
    std::string error;
    bool too_large = false;
    return decodeLokiProto(b, 64 << 20, "tenant", r, batch, &error, &too_large);
  });
}
// A JSON body is followed by kJsonPadding bytes, so that it is parsed in place as the endpoint
// parses it.
std::string padded(const std::string& body) {
  return body + std::string(kJsonPadding, '\0');
}

void BM_LokiJson(benchmark::State& state) {
  const std::string body = lokiJsonBody();
  const std::string buffer = padded(body);
  run(state, body, [&](const std::string& b, const StreamRules& r, RecordBatch* batch) {
    std::string error;
    return decodeLokiJson(std::string_view(buffer).substr(0, b.size()), buffer.size(), "tenant", r,
                          batch, &error);
  });
}
void BM_OtlpProto(benchmark::State& state) {
  const LabelFilter keep{StreamRules()};
  run(state, otlpRequest().SerializeAsString(),
      [&](const std::string& b, const StreamRules& r, RecordBatch* batch) {
        std::string error;
        uint64_t rejected = 0;
        return decodeOtlpProto(b, r, keep, batch, &rejected, &error);
      });
}
void BM_OtlpJson(benchmark::State& state) {
  const LabelFilter keep{StreamRules()};
  const std::string body = otlpJsonBody();
  const std::string buffer = padded(body);
  run(state, body, [&](const std::string& b, const StreamRules& r, RecordBatch* batch) {
    std::string error;
    uint64_t rejected = 0;
    return decodeOtlpJson(std::string_view(buffer).substr(0, b.size()), buffer.size(), r, keep,
                          batch, &rejected, &error);
  });
}

BENCHMARK(BM_LokiProtoSnappy);
BENCHMARK(BM_LokiJson);
BENCHMARK(BM_OtlpProto);
BENCHMARK(BM_OtlpJson);

}  // namespace
}  // namespace faultline

BENCHMARK_MAIN();
