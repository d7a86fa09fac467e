// A fake Kubernetes API server for tests: just enough of core/v1 Nodes, over plain HTTP on
// 127.0.0.1, for faultline's KubeClient and for a real kubectl (v1.32; kubernetes/api
// core/v1/types.go, kubernetes/kubectl pkg/cmd/taint/taint.go).
//
// API (JSON bodies, errors are metav1.Status objects with kind, status, message, reason, code):
//   GET   /version, /api, /apis, /api/v1        discovery (nodes, events, configmaps, leases)
//   GET   /api/v1/nodes[?labelSelector=S]       NodeList; S is equality-based: comma-separated
//                                               key=value, key==value, key!=value, key, !key
//         [&limit=N[&continue=T]]               pages of N nodes in name order: metadata.continue
//         is set while more remain (remainingItemCount too without a selector), a token the
//         server did not make is 400; continued pages read the current nodes (no snapshot)
//   GET   /api/v1/nodes/{name}                  Node, or 404 NotFound
//   GET   /api/v1/pods                          an empty PodList (kubectl describe node)
//   PATCH /api/v1/nodes/{name}                  Content-Type application/strategic-merge-patch+json
//         or application/merge-patch+json (else 415). Applied as an RFC 7386 merge patch, so
//         lists such as spec.taints are replaced whole (they are atomic on a real server too;
//         list merge keys, e.g. status.conditions, are not modelled). 409 Conflict when the patch
//         carries metadata.resourceVersion and it is not the current one; 422 Invalid when taints
//         repeat a (key, effect) pair or lack a key or a valid effect. A change bumps the
//         resourceVersion (a cluster-wide integer, as a string); a no-op patch does not.
//   PATCH /api/v1/nodes/{name}/status           strategic merge of status only: status.conditions
//         merge by type (patchMergeKey), the rest as a merge patch; resourceVersion as above.
//   Namespaced objects, kinds Event (/api/v1/namespaces/{ns}/events), ConfigMap
//   (/api/v1/namespaces/{ns}/configmaps), Pod (/api/v1/namespaces/{ns}/pods; a test's pod may
//   carry its log as a top-level string "log", which GET .../pods/{name}/log[?tailLines=N]
//   answers as text/plain, the last N lines if N is given, as the kubelet does) and Lease
//   (/apis/coordination.k8s.io/v1/namespaces/{ns}/leases):
//   GET .../{res}[?fieldSelector=F][&labelSelector=S] (list; S as for nodes; F: comma-separated
//   path=value, path==value, path!=value over dotted field paths, an absent field reading as
//   ""), GET /api/v1/events (every namespace's, F too), POST .../{res} (create: 409
//   AlreadyExists on a taken name), and
//   GET | PUT | PATCH (merge) | DELETE .../{res}/{name} (404 NotFound). PUT and PATCH answer 409
//   Conflict when the body's metadata.resourceVersion is set and not the current one. A PUT of a
//   Lease without one (missing, "" or "0") is 422 Invalid ("metadata.resourceVersion: Invalid
//   value: 0x0: must be specified for an update"): the Lease strategy allows no unconditional
//   update, ConfigMap's and Event's do.
// Test control (not recorded in /_test/requests):
//   POST /_test/nodes           body: a Node, at least {"metadata":{"name":"n1"}} → 201, 409 if
//                               it exists; see createNode()
//   GET  /_test/requests        [{method, path, query, content_type, authorization, body,
//                               received_ns}, ...]; received_ns: CLOCK_REALTIME ns when the
//                               handler got the whole request (bench/latency.sh)
//   POST /_test/fail            {"method":"PATCH","path":"/api/v1/nodes/n1","status":409,
//                               "count":1,"after_serving":false} → the next count matching
//                               requests get that status (after_serving: served first, as when
//                               the server applies a write and its answer is lost, e.g. a 504)
//   POST /_test/mutate/{name}   {"patch":{...merge patch...},"after_next_get":false}; see mutate()
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

namespace httplib {
class Server;
struct Response;
}  // namespace httplib

namespace faultline {

class FakeApiServer {
 public:
  // One request received on an API (non-/_test/) path.
  struct Request {
    std::string method;
    std::string path;   // without the query
    std::string query;  // raw text after '?', empty if none
    std::string content_type;
    std::string authorization;
    std::string body;
    int64_t received_ns = 0;  // CLOCK_REALTIME, ns since the epoch
  };

  // Plain HTTP; with both files given, HTTPS with this PEM certificate (chain) and private key,
  // as a real API server serves (the client checks it against the cluster CA). Throws
  // std::runtime_error if the certificate or key cannot be loaded.
  explicit FakeApiServer(const std::string& tls_cert_file = "",
                         const std::string& tls_key_file = "");
  ~FakeApiServer();  // stops the server
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;
  FakeApiServer(FakeApiServer&&) = delete;
  FakeApiServer& operator=(FakeApiServer&&) = delete;

  // Listens on 127.0.0.1:port (0 = any free port) on background threads and returns the port.
  // Throws std::runtime_error if the port cannot be bound.
  int start(int port = 0);
  // Stops listening and joins the server thread. Idempotent.
  void stop();
  int port() const { return port_; }
  std::string url() const {
    return (tls_ ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port_);
  }

  // The operations behind /_test/, for in-process tests.

  // Creates a node from a (partial) Node that has metadata.name. Fills in apiVersion, kind,
  // metadata.uid, creationTimestamp, resourceVersion, the kubernetes.io/hostname label, empty
  // spec and a Ready condition unless given. False if the name is taken or the node is invalid.
  bool createNode(const nlohmann::json& node);
  // The stored Node, or null if there is none.
  nlohmann::json node(const std::string& name) const;
  // A namespaced object (resource "events", "configmaps" or "leases"), or null.
  nlohmann::json object(const std::string& resource, const std::string& ns,
                        const std::string& name) const;
  // Every stored object of a resource, ordered by namespace and name.
  std::vector<nlohmann::json> objects(const std::string& resource) const;
  // Deletes a namespaced object as an operator would; false if there was none.
  bool deleteObject(const std::string& resource, const std::string& ns, const std::string& name);
  // API requests received so far, oldest first.
  std::vector<Request> requests() const;
  // The next `count` requests with this method and path (no query) get `status` and a Status
  // body (429 also gets Retry-After: 1) instead of being served; with after_serving, they are
  // served and then answered so (a write applied whose answer was lost).
  void failNext(const std::string& method, const std::string& path, int status, int count = 1,
                bool after_serving = false);
  // The next request with this method and path (no query) is served only after `delay`, so its
  // answer shows the state at the end (an API server that holds a request, then answers).
  void delayNext(const std::string& method, const std::string& path,
                 std::chrono::milliseconds delay);
  // Changes a node as a concurrent writer would: applies a JSON merge patch (no precondition) and
  // always bumps the resourceVersion, so {} just bumps it. With after_next_get the change is
  // applied right after the next GET of the node (or LIST that returns it) is answered, which makes
  // the reader's copy stale deterministically. False if the node does not exist or the result would
  // be invalid.
  bool mutate(const std::string& name, const nlohmann::json& patch, bool after_next_get = false);

 private:
  struct Reply {
    int status;
    nlohmann::json body;
  };
  struct Failure {
    std::string method;
    std::string path;
    int status;
    int remaining;
    bool after_serving;
  };

  void installRoutes();
  // Answers a list of `resource` in namespace `ns` (every namespace when empty) whose objects
  // match `field_selector` (fieldSelectorMatches) and `label_selector` (selectorMatches).
  void listObjects(const std::string& resource, const std::string& ns,
                   const std::string& field_selector, httplib::Response& res,
                   const std::string& label_selector = "");
  Reply createNodeLocked(const nlohmann::json& node);
  Reply patchNodeLocked(const std::string& name, const nlohmann::json& patch, bool from_client);
  Reply patchNodeStatusLocked(const std::string& name, const nlohmann::json& patch);
  Reply writeObjectLocked(const std::string& method, const std::string& resource,
                          const std::string& ns, const std::string& name,
                          const nlohmann::json& body);

  bool tls_ = false;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;

  mutable std::mutex mu_;  // guards everything below
  std::map<std::string, nlohmann::json> nodes_;
  // (resource, namespace, name) → object
  std::map<std::tuple<std::string, std::string, std::string>, nlohmann::json> objects_;
  int64_t resource_version_ = 0;  // last one handed out
  int64_t nodes_created_ = 0;     // for uids
  std::vector<Request> requests_;
  std::vector<Failure> failures_;
  struct Delay {
    std::string method;
    std::string path;
    std::chrono::milliseconds delay;
  };
  std::vector<Delay> delays_;
  std::multimap<std::string, nlohmann::json> after_get_;  // node name → pending mutate() patch
};

}  // namespace faultline
