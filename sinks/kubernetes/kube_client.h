// Minimal Kubernetes API-server client: GET, POST, PUT, PATCH and DELETE over HTTP(S) with a
// bearer token, a client-side rate limit and Retry-After reporting. Connection settings follow
// client-go rest.InClusterConfig (kubernetes/client-go rest/config.go).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include <curl/curl.h>
#include <yaml-cpp/node/node.h>

#include "core/metrics.h"

namespace faultline {

// Where and how to reach the API server.
struct KubeConfig {
  std::string server;      // base URL without trailing slash, e.g. https://10.0.0.1:443
  std::string token_file;  // bearer token file; empty = no Authorization header
  std::string ca_file;     // PEM CA bundle to verify the server; empty = system store
  bool insecure_skip_tls_verify = false;
  // Client-side rate limit, like client-go's token bucket (rest.Config QPS and Burst): at most
  // `burst` requests at once, refilled at `qps` per second. qps <= 0 disables it.
  double qps = 5;
  int burst = 10;

  // The pod's service account: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT with
  // /var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}. Throws std::runtime_error when
  // either variable is unset (not running in a pod).
  static KubeConfig inCluster();

  // Keys: server, token_file, ca_file, insecure_skip_tls_verify, qps, burst (all optional). A
  // missing or empty server means inCluster(), whose token and CA files token_file and ca_file
  // replace when given; with `in_cluster` false it leaves server empty instead (replay, which
  // connects only with --apply and no --kube-server). Throws YAML::Exception marked at the value's
  // line when a value is not of its type (yaml_read.h), std::runtime_error when not in a pod
  // without a server. The token file is not read here: a caller's flag may replace it
  // (checkToken()).
  static KubeConfig fromYaml(const YAML::Node& node, bool in_cluster);

  // Throws std::runtime_error "cannot read the API token file F" when token_file is set and
  // cannot be read: at start, not at the first taint.
  void checkToken() const;
};

// One connection to the API server, safe to share between threads (requests are serialised).
// The bearer token is cached and re-read when the file changes (inode, size or mtime: the kubelet
// rotates projected tokens by swapping the file) and once more on a 401, which is then retried
// once with the fresh token. Requests time out after 15 s (connect: 5 s), or at their deadline
// when it comes sooner.
//
// With a Metrics, every request sent (each try of a retried one) is counted in
// faultline_kube_requests_total{verb,resource,code}: verb as the API server's
// apiserver_request_total names it (GET, LIST = GET of a collection, POST, PUT, PATCH, DELETE),
// resource the path's resource with its subresource (nodes, nodes/status, events, configmaps,
// leases; the first path segment, e.g. version, for non-resource paths), code the HTTP status or
// "error" when no response arrived (connect, TLS, timeout). A request not sent (the token file
// unreadable, its deadline passed) is not counted. Object names never become labels.
class KubeClient {
 public:
  struct Response {
    long status = 0;        // HTTP status; 0 when no response arrived (see error)
    std::string body;       // response body, usually JSON (an object or a metav1.Status)
    std::string error;      // transport or local error (token unreadable, TLS, timeout); else empty
    int retry_after_s = 0;  // Retry-After header in seconds (429 and 503 from APF), else 0
  };

  // `metrics`, if given, must outlive the client.
  explicit KubeClient(KubeConfig config, Metrics* metrics = nullptr);
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;
  KubeClient(KubeClient&&) = delete;
  KubeClient& operator=(KubeClient&&) = delete;

  // The steady-clock time after which a request is neither sent nor left waiting for its answer
  // (a leader's writes end with its leadership: TaintSink::Hooks::leading_until).
  using Deadline = std::chrono::steady_clock::time_point;
  static constexpr Deadline kNoDeadline = Deadline::max();

  // path is absolute and already URL-encoded, including any query: /api/v1/nodes/n1?x=y.
  // Bodies are JSON; content_type names the patch flavour for PATCH. Past `deadline` (before
  // sending: after the rate limit's wait, which it does not cut short; or while waiting for the
  // answer) the Response has status 0 and an error; a request cut off while waiting for its
  // answer may still be applied by the server.
  Response get(const std::string& path, Deadline deadline = kNoDeadline);
  Response post(const std::string& path, const std::string& body, Deadline deadline = kNoDeadline);
  Response put(const std::string& path, const std::string& body, Deadline deadline = kNoDeadline);
  Response patch(const std::string& path, const std::string& content_type, const std::string& body,
                 Deadline deadline = kNoDeadline);
  Response del(const std::string& path, Deadline deadline = kNoDeadline);

 private:
  Response perform(const char* method, const std::string& path, const std::string* content_type,
                   const std::string* body, Deadline deadline);
  Response performOnce(const char* method, const std::string& path, const std::string* content_type,
                       const std::string* body, Deadline deadline, bool reload);
  // Waits for a token of the rate limiter. Called with mu_ held.
  void waitForRateLimit();
  // Refreshes token_ from the file when it changed (or when forced). Called with mu_ held.
  bool loadToken(bool force, std::string* error);

  const KubeConfig config_;
  Metrics* const metrics_;
  mutable std::mutex mu_;  // guards everything below
  CURL* curl_;
  struct TokenStamp {
    int64_t mtime_s = 0;
    int64_t mtime_ns = 0;
    int64_t size = 0;
    uint64_t inode = 0;
    bool operator==(const TokenStamp&) const = default;
  };
  std::string token_;
  TokenStamp token_stamp_;
  double tokens_;  // rate limiter bucket
  std::chrono::steady_clock::time_point refilled_;
};

}  // namespace faultline
