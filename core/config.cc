#include "core/config.h"

#include <stdexcept>

#include <re2/re2.h>
#include <yaml-cpp/yaml.h>

namespace faultline {

void validateTaint(const Taint& t) {
  // Kubernetes label-name and label-value syntax (apimachinery validation: qualified name).
  static const RE2 kKey(
      R"(([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)");
  static const RE2 kValue(R"(([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?)");
  if (!RE2::FullMatch(t.key, kKey)) {
    throw std::runtime_error("taint key '" + t.key + "' is not a qualified name");
  }
  if (!RE2::FullMatch(t.value, kValue)) {
    throw std::runtime_error("taint value '" + t.value + "' is not a label value");
  }
  if (t.effect != "NoSchedule" && t.effect != "PreferNoSchedule" && t.effect != "NoExecute") {
    throw std::runtime_error("taint effect '" + t.effect +
                             "' is not NoSchedule, PreferNoSchedule or NoExecute");
  }
}

ServiceConfig loadServiceConfig(const std::string& path) {
  try {
    const YAML::Node root = YAML::LoadFile(path);
    if (!root.IsMap()) {
      throw std::runtime_error("the configuration is a YAML map");
    }
    ServiceConfig cfg;
    cfg.rules_dir = root["rules"].as<std::string>("");
    cfg.decisions_path = root["decisions"].as<std::string>("");
    if (const YAML::Node t = root["taint"]) {
      cfg.taint.key = t["key"].as<std::string>(cfg.taint.key);
      cfg.taint.value = t["value"].as<std::string>(cfg.taint.value);
      cfg.taint.effect = t["effect"].as<std::string>(cfg.taint.effect);
    }
    validateTaint(cfg.taint);
    if (const YAML::Node k = root["kubernetes"]) {
      cfg.kubernetes = KubeConfig::fromYaml(k);
      cfg.taint_sink = TaintSinkOptions::fromYaml(k);
      if (const YAML::Node le = k["leader_election"]) {
        cfg.leader_election = LeaderElectionConfig::fromYaml(le);
      }
    }
    if (const YAML::Node k = root["kafka"]) {
      cfg.kafka = KafkaConfig::fromYaml(k);
    }
    if (const YAML::Node h = root["http"]) {
      cfg.http = PushConfig::fromYaml(h);
    }
    if (const YAML::Node q = root["queue_bytes"]) {
      if (!q.IsScalar() || !YAML::convert<size_t>::decode(q, cfg.queue_bytes) ||
          cfg.queue_bytes == 0) {
        throw std::runtime_error("queue_bytes: expected a positive integer");
      }
    }
    if (const YAML::Node t = root["match_threads"]) {
      if (!t.IsScalar() || !YAML::convert<size_t>::decode(t, cfg.match_threads) ||
          cfg.match_threads == 0 || cfg.match_threads > 256) {
        throw std::runtime_error("match_threads: expected an integer from 1 to 256");
      }
    }
    if (const YAML::Node l = root["max_lag"]) {
      if (!l.IsScalar() || !parseDuration(l.Scalar(), &cfg.max_lag_ns) ||
          cfg.max_lag_ns > 86400 * kNanosPerSecond) {
        throw std::runtime_error("max_lag: expected a duration of at most 1d (like 5m)");
      }
    }
    return cfg;
  } catch (const YAML::Exception& e) {
    throw std::runtime_error(path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace faultline
