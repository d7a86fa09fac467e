#include "core/config.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include <re2/re2.h>
#include <yaml-cpp/yaml.h>

#include "core/yaml_read.h"

namespace faultline {

void validateTaint(const Taint& t) {
  // Kubernetes label-name and label-value syntax (apimachinery validation: qualified name, whose
  // prefix is a DNS-1123 subdomain of at most 253 characters).
  static const RE2 kKey(R"((([a-z0-9]([-a-z0-9]*[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?)"
                        R"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)");
  static const RE2 kValue(R"(([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?)");
  const size_t slash = t.key.find('/');
  if (!RE2::FullMatch(t.key, kKey) || (slash != std::string::npos && slash > 253)) {
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

ServiceConfig loadServiceConfig(const std::string& path, bool in_cluster) {
  try {
    std::ifstream in(path);
    if (!in) {
      throw std::runtime_error(std::strerror(errno));
    }
    std::stringstream text;
    text << in.rdbuf();
    const YAML::Node root = loadYaml(text.str());
    if (!root.IsMap()) {
      throw std::runtime_error("the configuration is a YAML map");
    }
    checkKeys(root, "",
              {"rules", "rules_reload", "decisions", "taint", "kubernetes", "kafka", "http",
               "queue_bytes", "match_threads", "max_lag"});
    ServiceConfig cfg;
    cfg.rules_dir = stringOr(root, "", "rules", "");
    if (const YAML::Node r = root["rules_reload"]) {
      int64_t ns = 0;  // "0", or a zero duration ("0s"): never
      cfg.rules_reload_ns =
          r.IsScalar() && (r.Scalar() == "0" || (parseDuration(r.Scalar(), &ns) && ns == 0))
              ? 0
              : durationAt(r, "rules_reload");
    }
    cfg.decisions_path = stringOr(root, "", "decisions", "");
    if (const YAML::Node t = root["taint"]; t && !t.IsNull()) {
      if (!t.IsMap()) {
        throw YAML::ParserException(t.Mark(), "taint: expected a mapping (key, value, effect)");
      }
      checkKeys(t, "taint.", {"key", "value", "effect"});
      cfg.taint.key = stringOr(t, "taint.", "key", cfg.taint.key);
      cfg.taint.value = stringOr(t, "taint.", "value", cfg.taint.value);
      cfg.taint.effect = stringOr(t, "taint.", "effect", cfg.taint.effect);
    }
    try {
      validateTaint(cfg.taint);
    } catch (const std::runtime_error& e) {
      failAt(root["taint"] ? root["taint"] : root, "taint", e.what());
    }
    if (const YAML::Node k = root["kubernetes"]) {
      // Three readers share the section: KubeConfig, TaintSinkOptions, LeaderElectionConfig.
      checkKeys(k, "kubernetes.",
                {"server", "token_file", "ca_file", "insecure_skip_tls_verify", "qps", "burst",
                 "eligible", "opt_out_label", "node_list_period", "guard", "namespace",
                 "breaker_configmap", "dry_run", "dry_run_rules", "reapply_after", "condition_type",
                 "leader_election"});
      cfg.kubernetes = KubeConfig::fromYaml(k, in_cluster);
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
      cfg.queue_bytes = integerAt<size_t>(q, "queue_bytes", 1);
    }
    if (const YAML::Node t = root["match_threads"]) {
      cfg.match_threads = integerAt<size_t>(t, "match_threads", 1, 256);
    }
    if (const YAML::Node l = root["max_lag"]) {
      // Above 0: live, a node's own log decides its timers only with a max_lag, and nodes are
      // forgotten only then (Correlator::hearsNodes).
      if (!l.IsScalar() || !parseDuration(l.Scalar(), &cfg.max_lag_ns) || cfg.max_lag_ns <= 0 ||
          cfg.max_lag_ns > 86400 * kNanosPerSecond) {
        failAt(l, "max_lag", "expected a duration above 0 and of at most 1d (like 5m)");
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
