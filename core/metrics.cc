#include "core/metrics.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace faultline {

void Metrics::declare(const std::string& name, Type type, const std::string& help) {
  std::lock_guard lock(mu_);
  if (families_.emplace(name, Family{type, help, {}}).second) {
    order_.push_back(name);
  }
}

Metrics::Family& Metrics::family(const std::string& name) {
  const auto it = families_.find(name);
  if (it == families_.end()) {
    throw std::logic_error("metric " + name + " is not declared");
  }
  return it->second;
}

void Metrics::add(const std::string& name, const std::string& labels, uint64_t delta) {
  std::lock_guard lock(mu_);
  family(name).values[labels] += static_cast<double>(delta);
}

void Metrics::set(const std::string& name, const std::string& labels, double value) {
  std::lock_guard lock(mu_);
  family(name).values[labels] = value;
}

void Metrics::onRender(std::function<void(Metrics&)> collect) {
  std::lock_guard lock(mu_);
  collectors_.push_back(std::move(collect));
}

std::string Metrics::render() {
  std::vector<std::function<void(Metrics&)>> collectors;
  {
    std::lock_guard lock(mu_);
    collectors = collectors_;
  }
  for (const auto& collect : collectors) {
    collect(*this);
  }
  std::lock_guard lock(mu_);
  std::string out;
  char number[64];
  for (const std::string& name : order_) {
    const Family& f = families_.at(name);
    out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " +
           (f.type == Type::kCounter ? "counter" : "gauge") + "\n";
    for (const auto& [labels, value] : f.values) {
      if (value == std::floor(value) && std::fabs(value) < 1e15) {
        std::snprintf(number, sizeof(number), "%.0f", value);
      } else {
        // 17 digits read back as the same double: %g's 6 froze a counter past 10^15 for hours.
        std::snprintf(number, sizeof(number), "%.17g", value);
      }
      out += name + (labels.empty() ? "" : "{" + labels + "}") + " " + number + "\n";
    }
  }
  return out;
}

std::string Metrics::label(const std::string& name, const std::string& value) {
  std::string out = name + "=\"";
  for (char c : value) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace faultline
