#include "sinks/kubernetes/taint_sink.h"

#include <algorithm>
#include <ctime>
#include <random>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

namespace faultline {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxLoggedBody = 512;

// Node names are DNS-1123 subdomains (k8s.io/apimachinery validation IsDNS1123Subdomain):
// at most 253 characters of dot-separated labels [a-z0-9]([-a-z0-9]*[a-z0-9])?. That also makes
// them safe to put in a URL path unescaped.
bool isDns1123Subdomain(std::string_view name) {
  if (name.empty() || name.size() > 253) {
    return false;
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  char prev = '.';
  for (char c : name) {
    if (c == '.') {
      if (!alnum(prev)) {
        return false;
      }
    } else if (c == '-') {
      if (prev == '.') {
        return false;
      }
    } else if (!alnum(c)) {
      return false;
    }
    prev = c;
  }
  return alnum(prev);
}

// metav1.Time marshals as RFC 3339 with whole seconds.
std::string nowRfc3339Seconds() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

// A 401 is retried because a rotated token is re-read on the next request.
bool retryable(const KubeClient::Response& response) {
  return response.status == 0 || response.status == 401 || response.status == 429 ||
         response.status >= 500;
}

std::string describe(const KubeClient::Response& response) {
  if (response.status == 0) {
    return response.error;
  }
  return "HTTP " + std::to_string(response.status) + " " + response.body.substr(0, kMaxLoggedBody);
}

}  // namespace

TaintSink::TaintSink(const KubeConfig& config, TaintSinkOptions options)
    : client_(config), options_(options), worker_([this] { run(); }) {}

TaintSink::~TaintSink() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  worker_.join();
}

void TaintSink::write(const Decision& decision) {
  if (decision.action != Decision::Action::kTaint) {
    return;  // only taints are written to the API server so far
  }
  {
    std::lock_guard lock(mu_);
    queue_.push_back(decision);
  }
  work_cv_.notify_one();
}

void TaintSink::flush() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

TaintSink::Counters TaintSink::counters() const {
  return Counters{applied_.load(), already_present_.load(), conflicts_retried_.load(),
                  failed_.load()};
}

void TaintSink::run() {
  std::unique_lock lock(mu_);
  while (true) {
    work_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) {
      return;  // stopping and drained
    }
    const Decision decision = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    apply(decision);
    lock.lock();
    busy_ = false;
    if (queue_.empty()) {
      idle_cv_.notify_all();
    }
  }
}

void TaintSink::sleepBeforeRetry(int attempt) {
  static thread_local std::mt19937 rng{std::random_device{}()};
  const auto cap = options_.max_backoff.count();
  auto backoff = options_.initial_backoff.count();
  for (int i = 1; i < attempt && backoff < cap; ++i) {
    backoff *= 2;
  }
  backoff = std::min(backoff, cap);
  // Jitter keeps replicas and nodes that conflicted together from retrying in lockstep.
  std::uniform_int_distribution<decltype(backoff)> jitter(backoff / 2, backoff);
  std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
}

void TaintSink::apply(const Decision& decision) {
  const std::string& node = decision.node;
  const Taint& taint = decision.taint;
  // kubectl's notation: key[=value]:effect.
  const std::string what = taint.key + (taint.value.empty() ? "" : "=" + taint.value) + ":" +
                           taint.effect + " on node " + node;
  if (!isDns1123Subdomain(node)) {
    spdlog::error("kubernetes: not applying taint {}: invalid node name (rule {})", what,
                  decision.rule);
    ++failed_;
    return;
  }
  const std::string path = "/api/v1/nodes/" + node;
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    if (attempt > 1) {
      sleepBeforeRetry(attempt - 1);
    }
    const KubeClient::Response got = client_.get(path);
    if (got.status != 200) {
      if (retryable(got)) {
        spdlog::warn("kubernetes: GET {} failed, will retry: {}", path, describe(got));
        continue;
      }
      spdlog::error("kubernetes: dropping taint {}: GET {}: {}", what, path, describe(got));
      ++failed_;
      return;
    }

    const json current = json::parse(got.body, nullptr, /*allow_exceptions=*/false);
    const json rv = current.is_object()
                        ? current.value(json::json_pointer("/metadata/resourceVersion"), json())
                        : json();
    if (!rv.is_string()) {
      spdlog::error(
          "kubernetes: dropping taint {}: GET {} returned no Node with a resourceVersion: {}", what,
          path, got.body.substr(0, kMaxLoggedBody));
      ++failed_;
      return;
    }
    json taints = current.value(json::json_pointer("/spec/taints"), json::array());
    if (!taints.is_array()) {
      taints = json::array();
    }
    for (const json& existing : taints) {
      if (existing.is_object() && existing.value("key", "") == taint.key &&
          existing.value("effect", "") == taint.effect) {
        spdlog::info("kubernetes: taint {} already present (rule {})", what, decision.rule);
        ++already_present_;
        return;
      }
    }

    json added = {{"key", taint.key}, {"effect", taint.effect}, {"timeAdded", nowRfc3339Seconds()}};
    if (!taint.value.empty()) {
      added["value"] = taint.value;  // omitempty in core/v1 Taint
    }
    taints.push_back(std::move(added));
    const json patch = {{"metadata", {{"resourceVersion", rv}}}, {"spec", {{"taints", taints}}}};
    const KubeClient::Response patched = client_.patch(
        path + "?fieldManager=faultline", "application/strategic-merge-patch+json", patch.dump());
    if (patched.status == 200) {
      spdlog::info("kubernetes: applied taint {} (rule {})", what, decision.rule);
      ++applied_;
      return;
    }
    if (patched.status == 409) {
      spdlog::info("kubernetes: node {} changed since GET (409), retrying", node);
      ++conflicts_retried_;
      continue;
    }
    if (retryable(patched)) {
      spdlog::warn("kubernetes: PATCH {} failed, will retry: {}", path, describe(patched));
      continue;
    }
    spdlog::error("kubernetes: dropping taint {}: PATCH {}: {}", what, path, describe(patched));
    ++failed_;
    return;
  }
  spdlog::error("kubernetes: giving up taint {} after {} attempts", what, options_.max_attempts);
  ++failed_;
}

}  // namespace faultline
