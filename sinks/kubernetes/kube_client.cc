#include "sinks/kubernetes/kube_client.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include "core/yaml_read.h"

namespace faultline {
namespace {

constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";
constexpr long kConnectTimeoutMs = 5000;
constexpr long kRequestTimeoutMs = 15000;

bool readFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return false;
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  return !in.bad();
}

// Token files written by the kubelet or by hand often end with a newline.
std::string trimWhitespace(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) {
    return "";
  }
  const auto end = s.find_last_not_of(" \t\r\n");
  return s.substr(begin, end - begin + 1);
}

size_t appendToString(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

// Retry-After in delta-seconds form (RFC 9110 10.2.3), the only form the apiserver sends.
size_t readRetryAfter(char* data, size_t size, size_t count, void* user) {
  const size_t n = size * count;
  constexpr std::string_view kName = "retry-after:";
  if (n > kName.size() && strncasecmp(data, kName.data(), kName.size()) == 0) {
    *static_cast<int*>(user) =
        std::atoi(std::string(data + kName.size(), n - kName.size()).c_str());
  }
  return n;
}

constexpr const char* kRequestsMetric = "faultline_kube_requests_total";

// The verb and resource labels of a request (kube_client.h): /api/v1/nodes/n1/status is
// PATCH nodes/status, GET /apis/coordination.k8s.io/v1/namespaces/ns/leases is LIST leases.
std::string requestLabels(const std::string& method, const std::string& path) {
  std::vector<std::string> parts;
  const std::string_view p = std::string_view(path).substr(0, path.find('?'));
  for (size_t start = 0; start < p.size();) {
    const size_t end = std::min(p.find('/', start), p.size());
    if (end > start) {
      parts.emplace_back(p.substr(start, end - start));
    }
    start = end + 1;
  }
  size_t at = 0;  // the resource segment, after /api/v1 or /apis/GROUP/VERSION
  if (!parts.empty() && parts[0] == "api") {
    at = 2;
  } else if (!parts.empty() && parts[0] == "apis") {
    at = 3;
  }
  std::string resource = parts.empty() ? "" : parts[0];
  bool collection = false;
  if (at > 0 && parts.size() > at) {
    if (parts[at] == "namespaces" && parts.size() > at + 2) {
      at += 2;
    }
    resource = parts[at];
    collection = parts.size() == at + 1;
    if (parts.size() > at + 2) {
      resource += "/" + parts[at + 2];
    }
  }
  return Metrics::label("verb", method == "GET" && collection ? "LIST" : method) + "," +
         Metrics::label("resource", resource);
}

}  // namespace

KubeConfig KubeConfig::inCluster() {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || port == nullptr || *host == '\0' || *port == '\0') {
    throw std::runtime_error(
        "not running in a Kubernetes pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
        "must be set (or configure kubernetes.server)");
  }
  KubeConfig config;
  // Like net.JoinHostPort: an IPv6 literal needs brackets.
  const std::string h = host;
  config.server = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
  config.token_file = std::string(kServiceAccountDir) + "/token";
  config.ca_file = std::string(kServiceAccountDir) + "/ca.crt";
  return config;
}

KubeConfig KubeConfig::fromYaml(const YAML::Node& node, bool in_cluster) {
  const std::string server = stringOr(node, "kubernetes.", "server", "");
  in_cluster = in_cluster && server.empty();
  KubeConfig config = in_cluster ? inCluster() : KubeConfig{};
  if (const YAML::Node n = node["qps"]) {
    config.qps = numberAt(n, "kubernetes.qps", -std::numeric_limits<double>::max(),
                          std::numeric_limits<double>::max());
  }
  if (const YAML::Node n = node["burst"]) {
    config.burst = integerAt<int>(n, "kubernetes.burst", 1);
  }
  if (!server.empty()) {
    config.server = server;
    while (!config.server.empty() && config.server.back() == '/') {
      config.server.pop_back();
    }
    // "/" would leave no server at all, and curl would fail every request, unexplained.
    if (!config.server.starts_with("https://") && !config.server.starts_with("http://")) {
      failAt(node["server"], "kubernetes.server", "expected an http:// or https:// URL");
    }
  }
  // In a pod too: a projected token or a private CA mounted elsewhere than the service account's.
  config.token_file = stringOr(node, "kubernetes.", "token_file", config.token_file);
  config.ca_file = stringOr(node, "kubernetes.", "ca_file", config.ca_file);
  if (const YAML::Node n = node["insecure_skip_tls_verify"]) {
    config.insecure_skip_tls_verify = boolAt(n, "kubernetes.insecure_skip_tls_verify");
  }
  return config;
}

void KubeConfig::checkToken() const {
  if (std::string token; !token_file.empty() && !readFile(token_file, &token)) {
    throw std::runtime_error("cannot read the API token file " + token_file);
  }
}

KubeClient::KubeClient(KubeConfig config, Metrics* metrics)
    : config_(std::move(config)),
      metrics_(metrics),
      tokens_(config_.burst),
      refilled_(std::chrono::steady_clock::now()) {
  static std::once_flag global_init;
  std::call_once(global_init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  curl_ = curl_easy_init();
  if (curl_ == nullptr) {
    throw std::runtime_error("curl_easy_init failed");
  }
  if (metrics_ != nullptr) {
    metrics_->declare(kRequestsMetric, Metrics::Type::kCounter,
                      "Kubernetes API requests sent, by verb, resource and HTTP status code "
                      "(\"error\": no response)");
  }
}

KubeClient::~KubeClient() {
  curl_easy_cleanup(curl_);
}

KubeClient::Response KubeClient::get(const std::string& path, Deadline deadline) {
  return perform("GET", path, nullptr, nullptr, deadline);
}

KubeClient::Response KubeClient::post(const std::string& path, const std::string& body,
                                      Deadline deadline) {
  static const std::string kJson = "application/json";
  return perform("POST", path, &kJson, &body, deadline);
}

KubeClient::Response KubeClient::put(const std::string& path, const std::string& body,
                                     Deadline deadline) {
  static const std::string kJson = "application/json";
  return perform("PUT", path, &kJson, &body, deadline);
}

KubeClient::Response KubeClient::patch(const std::string& path, const std::string& content_type,
                                       const std::string& body, Deadline deadline) {
  return perform("PATCH", path, &content_type, &body, deadline);
}

KubeClient::Response KubeClient::del(const std::string& path, Deadline deadline) {
  return perform("DELETE", path, nullptr, nullptr, deadline);
}

void KubeClient::waitForRateLimit() {
  if (config_.qps <= 0) {
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  tokens_ = std::min<double>(
      config_.burst,
      tokens_ + std::chrono::duration<double>(now - refilled_).count() * config_.qps);
  refilled_ = now;
  if (tokens_ < 1) {
    // Requests are serialised, so sleeping under the lock is the queue.
    const auto wait = std::chrono::duration<double>((1 - tokens_) / config_.qps);
    std::this_thread::sleep_for(wait);
    refilled_ = std::chrono::steady_clock::now();
    tokens_ = 1;
  }
  tokens_ -= 1;
}

bool KubeClient::loadToken(bool force, std::string* error) {
  if (config_.token_file.empty()) {
    return true;
  }
  struct stat st {};
  if (stat(config_.token_file.c_str(), &st) != 0) {
    *error = "cannot read token file " + config_.token_file;
    return false;
  }
  // The kubelet swaps a symlink (new inode); a rewrite in place changes size or mtime.
  const TokenStamp stamp{st.st_mtim.tv_sec, st.st_mtim.tv_nsec, st.st_size, st.st_ino};
  if (!force && !token_.empty() && stamp == token_stamp_) {
    return true;
  }
  std::string token;
  if (!readFile(config_.token_file, &token)) {
    *error = "cannot read token file " + config_.token_file;
    return false;
  }
  token_ = trimWhitespace(token);
  token_stamp_ = stamp;
  return true;
}

KubeClient::Response KubeClient::perform(const char* method, const std::string& path,
                                         const std::string* content_type, const std::string* body,
                                         Deadline deadline) {
  std::lock_guard lock(mu_);
  Response response = performOnce(method, path, content_type, body, deadline, /*reload=*/false);
  if (response.status == 401 && !config_.token_file.empty()) {
    // The token may have rotated within the file's mtime granularity: re-read and retry once.
    response = performOnce(method, path, content_type, body, deadline, /*reload=*/true);
  }
  return response;
}

KubeClient::Response KubeClient::performOnce(const char* method, const std::string& path,
                                             const std::string* content_type,
                                             const std::string* body, Deadline deadline,
                                             bool reload) {
  Response response;
  if (!loadToken(reload, &response.error)) {
    return response;
  }
  const std::string& token = token_;
  waitForRateLimit();
  // Whole milliseconds left, rounded down: curl's timeout must not outlast the deadline.
  long timeout_ms = kRequestTimeoutMs;
  if (deadline != kNoDeadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      response.error = "not sent: past its deadline";
      return response;
    }
    timeout_ms = std::min<long>(timeout_ms, static_cast<long>(left.count()));
  }
  // Reset drops the previous request's options but keeps the connection and DNS caches.
  curl_easy_reset(curl_);
  const std::string url = config_.server + path;
  char error_buffer[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl_, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT_MS, kConnectTimeoutMs);
  curl_easy_setopt(curl_, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(curl_, CURLOPT_USERAGENT, "faultline");
  curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, appendToString);
  curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(curl_, CURLOPT_HEADERFUNCTION, readRetryAfter);
  curl_easy_setopt(curl_, CURLOPT_HEADERDATA, &response.retry_after_s);
  if (!config_.ca_file.empty()) {
    curl_easy_setopt(curl_, CURLOPT_CAINFO, config_.ca_file.c_str());
  }
  if (config_.insecure_skip_tls_verify) {
    curl_easy_setopt(curl_, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(curl_, CURLOPT_SSL_VERIFYHOST, 0L);
  }

  curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
  // No "Expect: 100-continue" round trip before sending a body.
  headers = curl_slist_append(headers, "Expect:");
  if (!token.empty()) {
    headers = curl_slist_append(headers, ("Authorization: Bearer " + token).c_str());
  }
  if (body != nullptr) {
    headers = curl_slist_append(headers, ("Content-Type: " + *content_type).c_str());
    curl_easy_setopt(curl_, CURLOPT_POSTFIELDS, body->data());
    curl_easy_setopt(curl_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
  }
  if (std::strcmp(method, "GET") != 0) {
    curl_easy_setopt(curl_, CURLOPT_CUSTOMREQUEST, method);
  }
  curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers);

  const CURLcode code = curl_easy_perform(curl_);
  curl_easy_setopt(curl_, CURLOPT_ERRORBUFFER, nullptr);  // error_buffer dies with this frame
  curl_slist_free_all(headers);
  if (code != CURLE_OK) {
    response.error = error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(code);
    response.body.clear();
  } else {
    curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &response.status);
  }
  if (metrics_ != nullptr) {
    metrics_->add(kRequestsMetric,
                  requestLabels(method, path) + "," +
                      Metrics::label("code", response.status != 0 ? std::to_string(response.status)
                                                                  : std::string("error")));
  }
  return response;
}

}  // namespace faultline
