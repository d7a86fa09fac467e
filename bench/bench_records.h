// Kernel log entries wrapped as shippers put them on the wire, shared by micro_bench.cc and
// kafka_load.cc so that both measure the same shapes:
//   - journaldFields(): the fields `journalctl -o json` gives a kernel entry (systemd.journal-
//     fields(7)); values are strings, as journald exports them;
//   - otlpRequest(): the OTel collector's journald receiver, which puts every field of the entry
//     into a kvlist body and takes the time from __REALTIME_TIMESTAMP, after the k8sattributes /
//     resourcedetection processors added the node as resource attributes; one request (or one
//     Kafka otlp_proto message, LogsData being wire-identical) per batch of one node's entries;
//   - fluentBitJson(): Fluent Bit's systemd input through its kafka output (`format json`,
//     `timestamp_key @timestamp`, double seconds), one JSON object per entry.
// Boot and machine ids are derived from the node name, so the same input gives the same bytes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "opentelemetry/proto/collector/logs/v1/logs_service.pb.h"

namespace faultline {

struct KernelEntry {
  std::string_view node;
  int64_t time_ns = 0;  // event time, ns since the epoch
  std::string_view message;
  uint64_t seq = 0;  // the entry's position in the node's journal (for the cursor)
};

inline std::vector<std::pair<std::string, std::string>> journaldFields(const KernelEntry& e) {
  char id[40];
  const size_t h = std::hash<std::string_view>()(e.node);
  std::snprintf(id, sizeof id, "%016zx%016zx", h, h * 31 + 7);
  const std::string boot(id);
  std::snprintf(id, sizeof id, "%016zx%016zx", h * 17 + 3, h ^ 0x5bd1e995);
  const std::string machine(id);
  const int64_t realtime_us = e.time_ns / 1000;
  const int64_t monotonic_us = 100'000'000 + realtime_us % 1'000'000'000'000;  // some uptime
  char cursor[192];
  std::snprintf(cursor, sizeof cursor, "s=%s;i=%llx;b=%s;m=%llx;t=%llx;x=%zx", machine.c_str(),
                static_cast<unsigned long long>(e.seq + 1), boot.c_str(),
                static_cast<unsigned long long>(monotonic_us),
                static_cast<unsigned long long>(realtime_us), h ^ e.seq);
  return {{"__CURSOR", cursor},
          {"__REALTIME_TIMESTAMP", std::to_string(realtime_us)},
          {"__MONOTONIC_TIMESTAMP", std::to_string(monotonic_us)},
          {"_BOOT_ID", boot},
          {"_SOURCE_MONOTONIC_TIMESTAMP", std::to_string(monotonic_us - 3)},
          {"_TRANSPORT", "kernel"},
          {"PRIORITY", "6"},
          {"SYSLOG_FACILITY", "0"},
          {"SYSLOG_IDENTIFIER", "kernel"},
          {"MESSAGE", std::string(e.message)},
          {"_MACHINE_ID", machine},
          {"_HOSTNAME", std::string(e.node)},
          {"_RUNTIME_SCOPE", "system"}};
}

// `entries` must all be of one node (a collector DaemonSet pod exports its own node's logs).
inline opentelemetry::proto::collector::logs::v1::ExportLogsServiceRequest otlpRequest(
    const KernelEntry* entries, size_t n) {
  opentelemetry::proto::collector::logs::v1::ExportLogsServiceRequest req;
  if (n == 0) {
    return req;
  }
  auto* rl = req.add_resource_logs();
  for (const auto& [k, v] : std::initializer_list<std::pair<const char*, std::string>>{
           {"k8s.node.name", std::string(entries[0].node)},
           {"host.name", std::string(entries[0].node)},
           {"os.type", "linux"}}) {
    auto* a = rl->mutable_resource()->add_attributes();
    a->set_key(k);
    a->mutable_value()->set_string_value(v);
  }
  auto* sl = rl->add_scope_logs();
  for (size_t i = 0; i < n; ++i) {
    auto* lr = sl->add_log_records();
    lr->set_time_unix_nano(static_cast<uint64_t>(entries[i].time_ns / 1000 * 1000));
    lr->set_observed_time_unix_nano(static_cast<uint64_t>(entries[i].time_ns + 2'000'000));
    auto* kv = lr->mutable_body()->mutable_kvlist_value();
    for (auto& [k, v] : journaldFields(entries[i])) {
      auto* f = kv->add_values();
      f->set_key(k);
      f->mutable_value()->set_string_value(v);
    }
  }
  return req;
}

// The same request in the OTLP JSON mapping (camelCase keys, 64-bit integers as strings), as the
// collector's otlp_json encoding and file exporter write it. Written by hand: the repository's
// generated OTLP classes declare the strings as bytes, which protobuf's JSON printer would
// base64-encode.
inline std::string otlpJson(const KernelEntry* entries, size_t n) {
  using nlohmann::ordered_json;
  auto attr = [](const std::string& k, const std::string& v) {
    return ordered_json{{"key", k}, {"value", {{"stringValue", v}}}};
  };
  ordered_json records = ordered_json::array();
  for (size_t i = 0; i < n; ++i) {
    ordered_json values = ordered_json::array();
    for (auto& [k, v] : journaldFields(entries[i])) {
      values.push_back(attr(k, v));
    }
    records.push_back({{"timeUnixNano", std::to_string(entries[i].time_ns / 1000 * 1000)},
                       {"observedTimeUnixNano", std::to_string(entries[i].time_ns + 2'000'000)},
                       {"body", {{"kvlistValue", {{"values", std::move(values)}}}}}});
  }
  const std::string node(n == 0 ? std::string_view() : entries[0].node);
  ordered_json resource = {
      {"attributes",
       {attr("k8s.node.name", node), attr("host.name", node), attr("os.type", "linux")}}};
  return ordered_json{{"resourceLogs",
                       {{{"resource", std::move(resource)},
                         {"scopeLogs", {{{"logRecords", std::move(records)}}}}}}}}
      .dump();
}

inline std::string fluentBitJson(const KernelEntry& e) {
  nlohmann::ordered_json j;
  j["@timestamp"] = static_cast<double>(e.time_ns / 1000) / 1e6;
  for (auto& [k, v] : journaldFields(e)) {
    if (k[0] != '_' || k[1] != '_') {  // the systemd input leaves out __CURSOR and the like
      j[k] = v;
    }
  }
  return j.dump();
}

}  // namespace faultline
