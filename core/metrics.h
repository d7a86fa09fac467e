// Service metrics in the Prometheus text exposition format 0.0.4
// (https://prometheus.io/docs/instrumenting/exposition_formats/). Label sets are bounded by the
// configuration (sources, formats, reasons, signatures, actions, statuses), never per node.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace faultline {

class Metrics {
 public:
  enum class Type { kCounter, kGauge };

  // Declares a metric. Metrics are rendered in declaration order; add()/set() of an undeclared
  // name throws std::logic_error.
  void declare(const std::string& name, Type type, const std::string& help);

  // `labels` is the rendered label set without braces, e.g. `source="http",format="loki_proto"`
  // (values escaped with label()), or "" for none. Thread-safe.
  void add(const std::string& name, const std::string& labels, uint64_t delta = 1);
  void set(const std::string& name, const std::string& labels, double value);

  // Runs `collect` before every render(), to set values kept elsewhere (queue depth, Kafka
  // statistics). Called under no lock of this class.
  void onRender(std::function<void(Metrics&)> collect);

  std::string render();

  // name="value" with the value escaped as the format requires (\\, \", \n).
  static std::string label(const std::string& name, const std::string& value);

 private:
  struct Family {
    Type type;
    std::string help;
    std::map<std::string, double> values;  // labels → value
  };
  Family& family(const std::string& name);

  std::mutex mu_;
  std::vector<std::string> order_;
  std::map<std::string, Family> families_;
  std::vector<std::function<void(Metrics&)>> collectors_;
};

}  // namespace faultline
