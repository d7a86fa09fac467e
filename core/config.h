// The service configuration file (`faultline serve --config FILE`), YAML:
//
//   rules: /etc/faultline/rules      # optional: rule directory; default: the embedded bank
//   rules_reload: 30s                # optional: how often `serve` reads the rule directory
//                                    # again (core/rules_watch.h); 0: never
//   decisions: /dev/stdout           # optional: decision log path; default stdout
//   taint: {key: faultline.dev/faulty, value: "true", effect: NoSchedule}
//   kubernetes: {server: https://..., token_file: ..., ca_file: ..., qps: 5, burst: 10,
//                ...safety keys (sinks/kubernetes/taint_sink.h TaintSinkOptions::fromYaml),
//                leader_election: {...}}   (sinks/kubernetes/leader_elector.h)
//                                    # optional: absent = no API writes; {} = in-cluster config
//   kafka: {brokers: ..., group_id: ..., topics: [...]}   # see ingest/kafka/kafka_source.h
//   http: {listen: "0.0.0.0:3100", ...}   # Loki and OTLP push endpoints, ingest/push/push_source.h
//   queue_bytes: 268435456           # optional: bound of the ingest → pipeline queue (bytes)
//   match_threads: 1                 # optional: match workers (core/serve_loop.h)
//   max_lag: 10m                     # optional: how far one node's log may run behind the
//                                    # newest (matcher/correlator.h, Correlator::advance)
// At least one source (kafka, http) is required by `serve`. An unknown or repeated key (at the top
// level, in taint) is refused with the file and its line, as kafka and http refuse theirs.
#pragma once

#include <optional>
#include <string>

#include "core/decision.h"
#include "core/time.h"
#include "ingest/kafka/kafka_source.h"
#include "ingest/push/push_source.h"
#include "sinks/kubernetes/kube_client.h"
#include "sinks/kubernetes/leader_elector.h"
#include "sinks/kubernetes/taint_sink.h"

namespace faultline {

struct ServiceConfig {
  std::string rules_dir;
  int64_t rules_reload_ns = 30 * kNanosPerSecond;  // 0: the directory is read at start only
  std::string decisions_path;
  Taint taint;
  std::optional<KubeConfig> kubernetes;
  TaintSinkOptions taint_sink;                          // the safety keys of `kubernetes`
  std::optional<LeaderElectionConfig> leader_election;  // kubernetes.leader_election
  std::optional<KafkaConfig> kafka;
  std::optional<PushConfig> http;
  size_t queue_bytes = 256 << 20;              // core/batch_queue.h
  size_t match_threads = 1;                    // Pipeline matchers, core/serve_loop.h
  int64_t max_lag_ns = 600 * kNanosPerSecond;  // Correlator's max_lag, ns of event time
};

// Reads and validates the file. `in_cluster`: a kubernetes section without a server is the pod's
// service account (KubeConfig::fromYaml), else its server stays empty. Throws
// std::runtime_error("FILE:LINE: cause") for a value at fault (yaml_read.h), "FILE: cause" when the
// file cannot be read or is not a mapping.
ServiceConfig loadServiceConfig(const std::string& path, bool in_cluster);

// Validates a taint (key a qualified name, effect one of the three); throws std::runtime_error.
void validateTaint(const Taint& taint);

}  // namespace faultline
