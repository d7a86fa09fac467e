// The service configuration file (`faultline serve --config FILE`), YAML:
//
//   rules: /etc/faultline/rules      # optional: rule directory; default: the embedded bank
//   decisions: /dev/stdout           # optional: decision log path; default stdout
//   taint: {key: faultline.dev/faulty, value: "true", effect: NoSchedule}
//   kubernetes: {server: https://..., token_file: ..., ca_file: ...}
//                                    # optional: absent = no API writes; {} = in-cluster config
//   kafka: {brokers: ..., group_id: ..., topics: [...]}   # see ingest/kafka/kafka_source.h
#pragma once

#include <optional>
#include <string>

#include "core/decision.h"
#include "ingest/kafka/kafka_source.h"
#include "sinks/kubernetes/kube_client.h"

namespace faultline {

struct ServiceConfig {
  std::string rules_dir;
  std::string decisions_path;
  Taint taint;
  std::optional<KubeConfig> kubernetes;
  std::optional<KafkaConfig> kafka;
};

// Reads and validates the file. Throws std::runtime_error("FILE: cause") on any problem.
ServiceConfig loadServiceConfig(const std::string& path);

// Validates a taint (key a qualified name, effect one of the three); throws std::runtime_error.
void validateTaint(const Taint& taint);

}  // namespace faultline
