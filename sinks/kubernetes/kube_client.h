// Minimal Kubernetes API-server client: GET and PATCH over HTTP(S) with a bearer token.
// Connection settings follow client-go rest.InClusterConfig (kubernetes/client-go
// rest/config.go); see /work/shared/protocols.md section 4.5.
#pragma once

#include <mutex>
#include <string>

#include <curl/curl.h>
#include <yaml-cpp/node/node.h>

namespace faultline {

// Where and how to reach the API server.
struct KubeConfig {
  std::string server;      // base URL without trailing slash, e.g. https://10.0.0.1:443
  std::string token_file;  // bearer token file; empty = no Authorization header
  std::string ca_file;     // PEM CA bundle to verify the server; empty = system store
  bool insecure_skip_tls_verify = false;

  // The pod's service account: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT with
  // /var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}. Throws std::runtime_error when
  // either variable is unset or the token file is unreadable (not running in a pod).
  static KubeConfig inCluster();

  // Keys: server, token_file, ca_file, insecure_skip_tls_verify (all optional). A missing or
  // empty server means inCluster(). Throws YAML::Exception on a value of the wrong type.
  static KubeConfig fromYaml(const YAML::Node& node);
};

// One connection to the API server, safe to share between threads (requests are serialised).
// The token file is re-read on every request so that rotated service-account tokens are picked
// up (client-go re-reads it every minute). Requests time out after 15 s (connect: 5 s).
class KubeClient {
 public:
  struct Response {
    long status = 0;    // HTTP status; 0 when no response arrived (see error)
    std::string body;   // response body, usually JSON (an object or a metav1.Status)
    std::string error;  // transport or local error (token unreadable, TLS, timeout); else empty
  };

  explicit KubeClient(KubeConfig config);
  ~KubeClient();
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  // path is absolute and already URL-encoded, including any query: /api/v1/nodes/n1?x=y.
  Response get(const std::string& path);
  Response patch(const std::string& path, const std::string& content_type, const std::string& body);

 private:
  Response perform(const char* method, const std::string& path, const std::string* content_type,
                   const std::string* body);

  const KubeConfig config_;
  std::mutex mu_;  // guards curl_
  CURL* curl_;
};

}  // namespace faultline
