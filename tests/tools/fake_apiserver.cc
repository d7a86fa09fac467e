#include "tests/tools/fake_apiserver.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include <httplib.h>

namespace faultline {
namespace {

using json = nlohmann::json;

int64_t realtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

const char* reasonFor(int code) {
  switch (code) {
    case 400:
      return "BadRequest";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "NotFound";
    case 409:
      return "Conflict";
    case 415:
      return "UnsupportedMediaType";
    case 422:
      return "Invalid";
    case 429:
      return "TooManyRequests";
    case 503:
      return "ServiceUnavailable";
    default:
      return code >= 500 ? "InternalError" : "BadRequest";
  }
}

// metav1.Status as the apiserver writes it (apimachinery pkg/api/errors).
json statusBody(int code, const std::string& message, json details = nullptr) {
  json status = {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
                 {"status", "Failure"}, {"message", message}, {"reason", reasonFor(code)},
                 {"code", code}};
  if (!details.is_null()) {
    status["details"] = std::move(details);
  }
  return status;
}

json nodeNotFound(const std::string& name) {
  return statusBody(404, "nodes \"" + name + "\" not found", {{"name", name}, {"kind", "nodes"}});
}

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

std::string nowRfc3339() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buffer;
}

// core/v1 validateNodeTaints: key and a known effect required, (key, effect) unique.
json invalidTaints(const std::string& name, const json& node) {
  const json taints = node.value(json::json_pointer("/spec/taints"), json());
  if (taints.is_null()) {
    return nullptr;
  }
  auto invalid = [&](const std::string& field, const std::string& cause, const std::string& what) {
    const std::string message = field + ": " + what;
    return statusBody(422, "Node \"" + name + "\" is invalid: " + message,
                      {{"name", name},
                       {"kind", "Node"},
                       {"causes", {{{"reason", cause}, {"message", what}, {"field", field}}}}});
  };
  if (!taints.is_array()) {
    return invalid("spec.taints", "FieldValueInvalid", "Invalid value: must be a list");
  }
  static const std::set<std::string> kEffects = {"NoSchedule", "PreferNoSchedule", "NoExecute"};
  std::set<std::pair<std::string, std::string>> seen;
  for (size_t i = 0; i < taints.size(); ++i) {
    const std::string field = "spec.taints[" + std::to_string(i) + "]";
    const json& taint = taints[i];
    const std::string key = taint.is_object() ? taint.value("key", "") : "";
    const std::string effect = taint.is_object() ? taint.value("effect", "") : "";
    if (key.empty()) {
      return invalid(field + ".key", "FieldValueRequired", "Required value");
    }
    if (kEffects.count(effect) == 0) {
      return invalid(field + ".effect", "FieldValueNotSupported",
                     "Unsupported value: \"" + effect + "\"");
    }
    if (!seen.emplace(key, effect).second) {
      return invalid(
          field, "FieldValueDuplicate",
          "Duplicate value: " + taint.dump() + ": taints must be unique by key and effect pair");
    }
  }
  return nullptr;
}

// Whether `matches` holds for every non-empty comma-separated term of a label or field selector.
bool everyTerm(const std::string& selector,
               const std::function<bool(const std::string& term)>& matches) {
  size_t start = 0;
  while (start <= selector.size()) {
    size_t end = selector.find(',', start);
    if (end == std::string::npos) {
      end = selector.size();
    }
    const std::string term = selector.substr(start, end - start);
    start = end + 1;
    if (!term.empty() && !matches(term)) {
      return false;
    }
  }
  return true;
}

// Equality-based label selector (apimachinery labels.Parse, without set-based terms).
bool selectorMatches(const std::string& selector, const json& labels) {
  return everyTerm(selector, [&](const std::string& term) {
    auto has = [&](const std::string& key) { return labels.is_object() && labels.contains(key); };
    auto value = [&](const std::string& key) {
      return has(key) && labels[key].is_string() ? labels[key].get<std::string>() : "";
    };
    if (term[0] == '!') {
      return !has(term.substr(1));
    }
    if (const size_t ne = term.find("!="); ne != std::string::npos) {
      return !has(term.substr(0, ne)) || value(term.substr(0, ne)) != term.substr(ne + 2);
    }
    if (const size_t eq = term.find('='); eq != std::string::npos) {
      const size_t v = term.compare(eq, 2, "==") == 0 ? eq + 2 : eq + 1;
      return has(term.substr(0, eq)) && value(term.substr(0, eq)) == term.substr(v);
    }
    return has(term);
  });
}

// Field selector of a list (apimachinery fields.ParseSelector): comma-separated path=value,
// path==value or path!=value terms over an object's dotted field path (involvedObject.name); an
// absent field reads as "", as the API server's field sets hold the empty string.
bool fieldSelectorMatches(const std::string& selector, const json& object) {
  return everyTerm(selector, [&](const std::string& term) {
    const size_t ne = term.find("!=");
    const size_t eq = term.find('=');
    if (eq == std::string::npos && ne == std::string::npos) {
      return false;
    }
    const size_t op = ne != std::string::npos ? ne : eq;
    const size_t v = ne != std::string::npos || term.compare(eq, 2, "==") == 0 ? op + 2 : op + 1;
    std::string pointer = "/" + term.substr(0, op);
    std::replace(pointer.begin(), pointer.end(), '.', '/');
    const json field = object.value(json::json_pointer(pointer), json());
    const std::string value = field.is_string() ? field.get<std::string>() : "";
    return (value == term.substr(v)) != (ne != std::string::npos);
  });
}

// List continue tokens as the API server makes them (apiserver storage/etcd3 encodeContinue):
// base64url without padding of {"v":"meta.k8s.io/v1","rv":<list resourceVersion>,"start":
// "<last name>\u0000"}. Clients treat them as opaque.
constexpr const char* kBase64Url =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string encodeContinue(int64_t rv, const std::string& last_name) {
  const std::string raw =
      json({{"v", "meta.k8s.io/v1"}, {"rv", rv}, {"start", last_name + '\0'}}).dump();
  std::string out;
  for (size_t i = 0; i < raw.size(); i += 3) {
    const size_t bytes = std::min<size_t>(3, raw.size() - i);
    uint32_t n = 0;
    for (size_t k = 0; k < 3; ++k) {
      n = (n << 8) | (k < bytes ? static_cast<uint8_t>(raw[i + k]) : 0u);
    }
    for (size_t k = 0; k <= bytes; ++k) {  // 1, 2, 3 bytes: 2, 3, 4 characters
      out += kBase64Url[(n >> (18 - 6 * k)) & 63];
    }
  }
  return out;
}

// The key to continue from ("<last name>\0") of a token encodeContinue made; false if it is not.
bool decodeContinue(const std::string& token, std::string* start) {
  std::string raw;
  uint32_t bits = 0;
  int count = 0;
  for (char c : token) {
    const char* at = c == '\0' ? nullptr : std::strchr(kBase64Url, c);
    if (at == nullptr) {
      return false;
    }
    bits = (bits << 6) | static_cast<uint32_t>(at - kBase64Url);
    if ((count += 6) >= 8) {
      count -= 8;
      raw += static_cast<char>((bits >> count) & 0xff);
    }
  }
  const json decoded = json::parse(raw, nullptr, /*allow_exceptions=*/false);
  if (!decoded.is_object() || decoded.value("v", json()) != "meta.k8s.io/v1" ||
      !decoded.value("start", json()).is_string()) {
    return false;
  }
  *start = decoded["start"];
  return true;
}

const char* kindOf(const std::string& resource) {
  return resource == "events"       ? "Event"
         : resource == "configmaps" ? "ConfigMap"
         : resource == "pods"       ? "Pod"
                                    : "Lease";
}

// The 422 of a PUT of a Lease without metadata.resourceVersion, as apiserver's generic store
// (registry/generic/registry/store.go, Update) gives it when the strategy does not
// AllowUnconditionalUpdate: NewInvalid of group and resource, the version 0 in Go's %#v.
json leaseResourceVersionRequired(const std::string& name) {
  const std::string what = "Invalid value: 0x0: must be specified for an update";
  return statusBody(
      422,
      "leases.coordination.k8s.io \"" + name + "\" is invalid: metadata.resourceVersion: " + what,
      {{"name", name},
       {"group", "coordination.k8s.io"},
       {"kind", "leases"},
       {"causes",
        {{{"reason", "FieldValueInvalid"},
          {"message", what},
          {"field", "metadata.resourceVersion"}}}}});
}

// Media type without parameters such as "; charset=utf-8".
std::string mediaType(const httplib::Request& req) {
  const std::string value = req.get_header_value("Content-Type");
  return value.substr(0, value.find(';'));
}

// Reads a PATCH body of one of the accepted content types into *patch; otherwise answers 415 or
// 400 as the API server does and returns false.
bool readPatch(const httplib::Request& req, httplib::Response& res, bool merge_patch_too,
               json* patch) {
  const std::string type = mediaType(req);
  if (type != "application/strategic-merge-patch+json" &&
      !(merge_patch_too && type == "application/merge-patch+json")) {
    reply(res, 415, statusBody(415, "the body of the request was in an unknown format"));
    return false;
  }
  *patch = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (patch->is_discarded()) {
    reply(res, 400, statusBody(400, "error decoding patch: invalid JSON"));
    return false;
  }
  return true;
}

}  // namespace

FakeApiServer::FakeApiServer(const std::string& tls_cert_file, const std::string& tls_key_file)
    : tls_(!tls_cert_file.empty() && !tls_key_file.empty()) {
  if (tls_) {
    auto ssl = std::make_unique<httplib::SSLServer>(tls_cert_file.c_str(), tls_key_file.c_str());
    if (!ssl->is_valid()) {
      throw std::runtime_error("fake apiserver: cannot load TLS certificate " + tls_cert_file +
                               " and key " + tls_key_file);
    }
    server_ = std::move(ssl);
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  installRoutes();
}

FakeApiServer::~FakeApiServer() {
  stop();
}

int FakeApiServer::start(int port) {
  port_ = port == 0 ? server_->bind_to_any_port("127.0.0.1")
                    : (server_->bind_to_port("127.0.0.1", port) ? port : -1);
  if (port_ <= 0) {
    throw std::runtime_error("fake apiserver: cannot listen on 127.0.0.1:" + std::to_string(port));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // httplib's stop() is a no-op until the accept loop runs, so a quick stop() would hang.
  while (!server_->is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return port_;
}

void FakeApiServer::stop() {
  if (thread_.joinable()) {
    server_->stop();
    thread_.join();
  }
}

bool FakeApiServer::createNode(const json& node) {
  std::lock_guard lock(mu_);
  return createNodeLocked(node).status == 201;
}

json FakeApiServer::node(const std::string& name) const {
  std::lock_guard lock(mu_);
  const auto it = nodes_.find(name);
  return it == nodes_.end() ? json() : it->second;
}

json FakeApiServer::object(const std::string& resource, const std::string& ns,
                           const std::string& name) const {
  std::lock_guard lock(mu_);
  const auto it = objects_.find({resource, ns, name});
  return it == objects_.end() ? json() : it->second;
}

std::vector<json> FakeApiServer::objects(const std::string& resource) const {
  std::lock_guard lock(mu_);
  std::vector<json> out;
  for (const auto& [key, object] : objects_) {
    if (std::get<0>(key) == resource) {
      out.push_back(object);
    }
  }
  return out;
}

bool FakeApiServer::deleteObject(const std::string& resource, const std::string& ns,
                                 const std::string& name) {
  std::lock_guard lock(mu_);
  return objects_.erase({resource, ns, name}) == 1;
}

std::vector<FakeApiServer::Request> FakeApiServer::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

void FakeApiServer::failNext(const std::string& method, const std::string& path, int status,
                             int count, bool after_serving) {
  std::lock_guard lock(mu_);
  failures_.push_back({method, path, status, count, after_serving});
}

void FakeApiServer::delayNext(const std::string& method, const std::string& path,
                              std::chrono::milliseconds delay) {
  std::lock_guard lock(mu_);
  delays_.push_back({method, path, delay});
}

bool FakeApiServer::mutate(const std::string& name, const json& patch, bool after_next_get) {
  std::lock_guard lock(mu_);
  if (nodes_.count(name) == 0) {
    return false;
  }
  if (after_next_get) {
    after_get_.emplace(name, patch);
    return true;
  }
  return patchNodeLocked(name, patch, /*from_client=*/false).status == 200;
}

FakeApiServer::Reply FakeApiServer::createNodeLocked(const json& node) {
  const std::string name = node.is_object()
                               ? node.value(json::json_pointer("/metadata/name"), std::string())
                               : std::string();
  if (name.empty()) {
    return {400, statusBody(400, "metadata.name is required")};
  }
  if (nodes_.count(name) != 0) {
    return {409, statusBody(409, "nodes \"" + name + "\" already exists",
                            {{"name", name}, {"kind", "nodes"}})};
  }
  json created = {{"apiVersion", "v1"},
                  {"kind", "Node"},
                  {"metadata", {{"name", name}, {"labels", {{"kubernetes.io/hostname", name}}}}},
                  {"spec", json::object()},
                  {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
  created.merge_patch(node);
  if (json error = invalidTaints(name, created); !error.is_null()) {
    return {422, error};
  }
  char uid[48];
  std::snprintf(uid, sizeof uid, "00000000-0000-4000-8000-%012lld",
                static_cast<long long>(++nodes_created_));
  created["metadata"]["uid"] = uid;
  created["metadata"]["creationTimestamp"] = nowRfc3339();
  created["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
  nodes_[name] = created;
  return {201, created};
}

FakeApiServer::Reply FakeApiServer::patchNodeLocked(const std::string& name, const json& patch,
                                                    bool from_client) {
  const auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    return {404, nodeNotFound(name)};
  }
  if (!patch.is_object()) {
    return {400, statusBody(400, "the patch must be a JSON object")};
  }
  json& stored = it->second;
  const json& current_rv = stored["metadata"]["resourceVersion"];
  const json wanted_rv = patch.value(json::json_pointer("/metadata/resourceVersion"), json());
  if (from_client && !wanted_rv.is_null() && wanted_rv != current_rv) {
    return {409, statusBody(409,
                            "Operation cannot be fulfilled on nodes \"" + name +
                                "\": the object has been modified; please apply your changes to "
                                "the latest version and try again",
                            {{"name", name}, {"kind", "nodes"}})};
  }
  json updated = stored;
  updated.merge_patch(patch);
  // Identity and bookkeeping fields are the server's, whatever the patch says.
  for (const char* field : {"name", "uid", "creationTimestamp", "resourceVersion"}) {
    updated["metadata"][field] = stored["metadata"][field];
  }
  if (json error = invalidTaints(name, updated); !error.is_null()) {
    return {422, error};
  }
  if (updated != stored || !from_client) {
    updated["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
    stored = std::move(updated);
  }
  return {200, stored};
}

FakeApiServer::Reply FakeApiServer::patchNodeStatusLocked(const std::string& name,
                                                          const json& patch) {
  const auto it = nodes_.find(name);
  if (it == nodes_.end()) {
    return {404, nodeNotFound(name)};
  }
  if (!patch.is_object()) {
    return {400, statusBody(400, "the patch must be a JSON object")};
  }
  json& stored = it->second;
  const json wanted_rv = patch.value(json::json_pointer("/metadata/resourceVersion"), json());
  if (!wanted_rv.is_null() && wanted_rv != stored["metadata"]["resourceVersion"]) {
    return {409, statusBody(409,
                            "Operation cannot be fulfilled on nodes \"" + name +
                                "\": the object has been modified",
                            {{"name", name}, {"kind", "nodes"}})};
  }
  json updated = stored;
  json status = patch.value("status", json::object());
  if (status.is_object() && status.contains("conditions")) {
    // NodeStatus.Conditions: patchStrategy merge, patchMergeKey type.
    const json conditions = status["conditions"];
    status.erase("conditions");
    json& merged = updated["status"]["conditions"];
    if (!merged.is_array()) {
      merged = json::array();
    }
    for (const json& c : conditions.is_array() ? conditions : json::array()) {
      if (!c.is_object() || !c.contains("type")) {
        return {422, statusBody(422, "status.conditions: every condition needs a type")};
      }
      auto same = std::find_if(merged.begin(), merged.end(),
                               [&](const json& m) { return m.value("type", "") == c["type"]; });
      if (same == merged.end()) {
        merged.push_back(c);
      } else {
        same->merge_patch(c);
      }
    }
  }
  updated["status"].merge_patch(status);
  if (updated != stored) {
    updated["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
    stored = std::move(updated);
  }
  return {200, stored};
}

FakeApiServer::Reply FakeApiServer::writeObjectLocked(const std::string& method,
                                                      const std::string& resource,
                                                      const std::string& ns,
                                                      const std::string& name, const json& body) {
  const std::string kind = kindOf(resource);
  auto notFound = [&](const std::string& n) {
    return Reply{404, statusBody(404, resource + " \"" + n + "\" not found",
                                 {{"name", n}, {"kind", resource}})};
  };
  if (method != "DELETE" && !body.is_object()) {
    return {400, statusBody(400, "the body must be a JSON object")};
  }
  if (method == "POST") {
    const std::string n = body.value(json::json_pointer("/metadata/name"), std::string());
    if (n.empty()) {
      return {422, statusBody(422, kind + " is invalid: metadata.name: Required value")};
    }
    if (objects_.count({resource, ns, n}) != 0) {
      return {409, statusBody(409, resource + " \"" + n + "\" already exists",
                              {{"name", n}, {"kind", resource}})};
    }
    json created = body;
    created["metadata"]["namespace"] = ns;
    created["metadata"]["uid"] = "obj-" + std::to_string(resource_version_ + 1);
    created["metadata"]["creationTimestamp"] = nowRfc3339();
    created["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
    objects_[{resource, ns, n}] = created;
    return {201, created};
  }
  const auto it = objects_.find({resource, ns, name});
  if (it == objects_.end()) {
    return notFound(name);
  }
  if (method == "DELETE") {
    objects_.erase(it);
    return {200, statusBody(200, "deleted")};
  }
  json& stored = it->second;
  const json wanted_rv = body.value(json::json_pointer("/metadata/resourceVersion"), json());
  // The Lease strategy does not AllowUnconditionalUpdate (ConfigMap's and Event's do): a PUT
  // must name the version it replaces ("0" reads as none). A PATCH needs none.
  const bool unversioned =
      wanted_rv.is_null() || wanted_rv == "0" ||
      (wanted_rv.is_string() && wanted_rv.get_ref<const std::string&>().empty());
  if (method == "PUT" && resource == "leases" && unversioned) {
    return {422, leaseResourceVersionRequired(name)};
  }
  if (!wanted_rv.is_null() && wanted_rv != stored["metadata"]["resourceVersion"]) {
    return {409, statusBody(409,
                            "Operation cannot be fulfilled on " + resource + " \"" + name +
                                "\": the object has been modified; please apply your changes "
                                "to the latest version and try again",
                            {{"name", name}, {"kind", resource}})};
  }
  json updated = method == "PUT" ? body : stored;
  if (method == "PATCH") {
    updated.merge_patch(body);
  }
  for (const char* field : {"name", "namespace", "uid", "creationTimestamp", "resourceVersion"}) {
    updated["metadata"][field] = stored["metadata"][field];
  }
  if (updated != stored) {
    updated["metadata"]["resourceVersion"] = std::to_string(++resource_version_);
    stored = std::move(updated);
  }
  return {200, stored};
}

void FakeApiServer::listObjects(const std::string& resource, const std::string& ns,
                                const std::string& field_selector, httplib::Response& res,
                                const std::string& label_selector) {
  json body = {{"kind", std::string(kindOf(resource)) + "List"},
               {"apiVersion", resource == "leases" ? "coordination.k8s.io/v1" : "v1"},
               {"metadata", json::object()},
               {"items", json::array()}};
  std::lock_guard lock(mu_);
  for (const auto& [key, object] : objects_) {
    if (std::get<0>(key) == resource && (ns.empty() || std::get<1>(key) == ns) &&
        fieldSelectorMatches(field_selector, object) &&
        selectorMatches(label_selector,
                        object.value(json::json_pointer("/metadata/labels"), json()))) {
      body["items"].push_back(object);
    }
  }
  reply(res, 200, body);
}

void FakeApiServer::installRoutes() {
  httplib::Server& s = *server_;
  // Without it, headers and body written separately wait out the client's delayed ACK (40 ms).
  s.set_tcp_nodelay(true);
  // Wraps an API handler: records the request, then serves an injected failure if one matches.
  auto api = [this](const httplib::Server::Handler& handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      int injected = 0;
      bool served = false;
      std::chrono::milliseconds delay{0};
      {
        std::lock_guard lock(mu_);
        const size_t q = req.target.find('?');
        requests_.push_back({req.method, req.path,
                             q == std::string::npos ? "" : req.target.substr(q + 1),
                             req.get_header_value("Content-Type"),
                             req.get_header_value("Authorization"), req.body, realtimeNs()});
        for (auto it = failures_.begin(); it != failures_.end(); ++it) {
          if (it->method == req.method && it->path == req.path) {
            injected = it->status;
            served = it->after_serving;
            if (--it->remaining <= 0) {
              failures_.erase(it);
            }
            break;
          }
        }
        for (auto it = delays_.begin(); it != delays_.end(); ++it) {
          if (it->method == req.method && it->path == req.path) {
            delay = it->delay;
            delays_.erase(it);
            break;
          }
        }
      }
      std::this_thread::sleep_for(delay);  // without the lock: other requests are served
      if (injected == 0 || served) {
        handler(req, res);
      }
      if (injected != 0) {
        res = httplib::Response();
        if (injected == 429) {
          res.set_header("Retry-After", "1");
        }
        reply(res, injected, statusBody(injected, "injected by /_test/fail"));
      }
    };
  };

  s.Get("/version", api([](const httplib::Request&, httplib::Response& res) {
          reply(res, 200,
                {{"major", "1"},
                 {"minor", "32"},
                 {"gitVersion", "v1.32.0-faultline-fake"},
                 {"platform", "linux/amd64"}});
        }));
  s.Get("/api", api([](const httplib::Request&, httplib::Response& res) {
          reply(res, 200,
                {{"kind", "APIVersions"},
                 {"versions", {"v1"}},
                 {"serverAddressByClientCIDRs",
                  {{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", "127.0.0.1"}}}}});
        }));
  s.Get("/apis", api([](const httplib::Request&, httplib::Response& res) {
          const json version = {{"groupVersion", "coordination.k8s.io/v1"}, {"version", "v1"}};
          reply(res, 200,
                {{"kind", "APIGroupList"},
                 {"apiVersion", "v1"},
                 {"groups",
                  {{{"name", "coordination.k8s.io"},
                    {"versions", {version}},
                    {"preferredVersion", version}}}}});
        }));
  s.Get("/apis/coordination.k8s.io/v1", api([](const httplib::Request&, httplib::Response& res) {
          reply(res, 200,
                {{"kind", "APIResourceList"},
                 {"groupVersion", "coordination.k8s.io/v1"},
                 {"resources",
                  {{{"name", "leases"},
                    {"singularName", "lease"},
                    {"namespaced", true},
                    {"kind", "Lease"},
                    {"verbs", {"create", "delete", "get", "list", "patch", "update"}}}}}});
        }));
  s.Get("/api/v1", api([](const httplib::Request&, httplib::Response& res) {
          reply(res, 200,
                {{"kind", "APIResourceList"},
                 {"groupVersion", "v1"},
                 {"resources",
                  {{{"name", "nodes"},
                    {"singularName", "node"},
                    {"namespaced", false},
                    {"kind", "Node"},
                    {"verbs", {"get", "list", "patch"}},
                    {"shortNames", {"no"}}},
                   {{"name", "nodes/status"},
                    {"singularName", ""},
                    {"namespaced", false},
                    {"kind", "Node"},
                    {"verbs", {"get", "patch"}}},
                   {{"name", "events"},
                    {"singularName", "event"},
                    {"namespaced", true},
                    {"kind", "Event"},
                    {"verbs", {"create", "delete", "get", "list", "patch", "update"}},
                    {"shortNames", {"ev"}}},
                   {{"name", "pods"},
                    {"singularName", "pod"},
                    {"namespaced", true},
                    {"kind", "Pod"},
                    {"verbs", {"create", "get", "list"}},
                    {"shortNames", {"po"}}},
                   {{"name", "pods/log"},
                    {"singularName", ""},
                    {"namespaced", true},
                    {"kind", "Pod"},
                    {"verbs", {"get"}}},
                   {{"name", "configmaps"},
                    {"singularName", "configmap"},
                    {"namespaced", true},
                    {"kind", "ConfigMap"},
                    {"verbs", {"create", "delete", "get", "list", "patch", "update"}},
                    {"shortNames", {"cm"}}}}}});
        }));
  s.Get(
      "/api/v1/nodes", api([this](const httplib::Request& req, httplib::Response& res) {
        const std::string selector = req.get_param_value("labelSelector");
        // Paging (limit, continue) as the API server does it, in name order. Unlike a real
        // server, a continued page is read from the current nodes rather than from the first
        // page's snapshot.
        int64_t limit = 0;
        if (const std::string l = req.get_param_value("limit"); !l.empty()) {
          size_t used = 0;
          try {
            limit = std::stoll(l, &used);
          } catch (const std::exception&) {
            used = 0;
          }
          if (used != l.size() || limit < 0) {
            reply(res, 400, statusBody(400, "limit: Invalid value: \"" + l + "\""));
            return;
          }
        }
        std::string start;
        if (req.has_param("continue") && !decodeContinue(req.get_param_value("continue"), &start)) {
          reply(res, 400, statusBody(400, "continue key is not valid"));
          return;
        }
        std::lock_guard lock(mu_);
        json list = {{"kind", "NodeList"},
                     {"apiVersion", "v1"},
                     {"metadata", {{"resourceVersion", std::to_string(resource_version_)}}},
                     {"items", json::array()}};
        int64_t remaining = 0;
        for (auto it = nodes_.lower_bound(start); it != nodes_.end(); ++it) {
          const json& node = it->second;
          if (!selectorMatches(selector,
                               node.value(json::json_pointer("/metadata/labels"), json()))) {
            continue;
          }
          if (limit > 0 && static_cast<int64_t>(list["items"].size()) == limit) {
            ++remaining;
            continue;
          }
          list["items"].push_back(node);
        }
        if (remaining > 0) {
          list["metadata"]["continue"] =
              encodeContinue(resource_version_, list["items"].back()["metadata"]["name"]);
          if (selector.empty()) {
            list["metadata"]["remainingItemCount"] = remaining;  // only without a selector
          }
        }
        reply(res, 200, list);
        // As for GET: the listed copies are now stale.
        for (const json& item : list["items"]) {
          const std::string name = item["metadata"]["name"];
          const auto [first, last] = after_get_.equal_range(name);
          for (auto pending = first; pending != last; ++pending) {
            patchNodeLocked(name, pending->second, /*from_client=*/false);
          }
          after_get_.erase(first, last);
        }
      }));
  s.Get("/api/v1/nodes/([^/]+)", api([this](const httplib::Request& req, httplib::Response& res) {
          const std::string name = req.matches[1];
          std::lock_guard lock(mu_);
          const auto it = nodes_.find(name);
          if (it == nodes_.end()) {
            reply(res, 404, nodeNotFound(name));
            return;
          }
          reply(res, 200, it->second);
          // The body above is already fixed, so the reader holds the old version.
          const auto [first, last] = after_get_.equal_range(name);
          for (auto pending = first; pending != last; ++pending) {
            patchNodeLocked(name, pending->second, /*from_client=*/false);
          }
          after_get_.erase(first, last);
        }));
  s.Patch("/api/v1/nodes/([^/]+)", api([this](const httplib::Request& req, httplib::Response& res) {
            json patch;
            if (!readPatch(req, res, /*merge_patch_too=*/true, &patch)) {
              return;
            }
            std::lock_guard lock(mu_);
            const Reply r = patchNodeLocked(req.matches[1], patch, /*from_client=*/true);
            reply(res, r.status, r.body);
          }));

  s.Patch("/api/v1/nodes/([^/]+)/status",
          api([this](const httplib::Request& req, httplib::Response& res) {
            json patch;
            if (!readPatch(req, res, /*merge_patch_too=*/false, &patch)) {
              return;
            }
            std::lock_guard lock(mu_);
            const Reply r = patchNodeStatusLocked(req.matches[1], patch);
            reply(res, r.status, r.body);
          }));

  // Every namespace's Events (kubectl describe node, get events -A), and no pods (describe node
  // lists the node's).
  s.Get("/api/v1/events", api([this](const httplib::Request& req, httplib::Response& res) {
          listObjects("events", "", req.get_param_value("fieldSelector"), res);
        }));
  s.Get("/api/v1/pods", api([](const httplib::Request&, httplib::Response& res) {
          reply(res, 200,
                {{"kind", "PodList"},
                 {"apiVersion", "v1"},
                 {"metadata", json::object()},
                 {"items", json::array()}});
        }));

  // Namespaced objects: events and configmaps in core/v1, leases in coordination.k8s.io/v1.
  // A pod's log: its "log" (test data, no Pod field) as text, the last tailLines lines if given.
  s.Get("/api/v1/namespaces/([^/]+)/pods/([^/]+)/log",
        api([this](const httplib::Request& req, httplib::Response& res) {
          const json pod = object("pods", req.matches[1], req.matches[2]);
          if (pod.is_null()) {
            const std::string name = req.matches[2];
            reply(res, 404,
                  statusBody(404, "pods \"" + name + "\" not found",
                             {{"name", name}, {"kind", "pods"}}));
            return;
          }
          std::vector<std::string> lines;
          std::istringstream in(pod.value("log", ""));
          for (std::string line; std::getline(in, line);) {
            lines.push_back(line);
          }
          size_t first = 0;
          if (const std::string tail = req.get_param_value("tailLines"); !tail.empty()) {
            first = lines.size() - std::min<size_t>(lines.size(), std::stoul(tail));
          }
          std::string log;
          for (size_t i = first; i < lines.size(); ++i) {
            log += lines[i] + "\n";
          }
          res.set_content(log, "text/plain");
        }));

  for (const std::string prefix : {"/api/v1/namespaces/([^/]+)/(events|configmaps|pods)",
                                   "/apis/coordination.k8s.io/v1/namespaces/([^/]+)/(leases)"}) {
    auto list = [this](const httplib::Request& req, httplib::Response& res) {
      listObjects(req.matches[2], req.matches[1], req.get_param_value("fieldSelector"), res,
                  req.get_param_value("labelSelector"));
    };
    auto write = [this](const httplib::Request& req, httplib::Response& res) {
      const json body =
          req.body.empty() ? json() : json::parse(req.body, nullptr, /*allow_exceptions=*/false);
      if (body.is_discarded()) {
        reply(res, 400, statusBody(400, "invalid JSON"));
        return;
      }
      std::lock_guard lock(mu_);
      const Reply r = writeObjectLocked(req.method, req.matches[2], req.matches[1],
                                        req.matches.size() > 3 ? req.matches[3].str() : "", body);
      reply(res, r.status, r.body);
    };
    auto get = [this](const httplib::Request& req, httplib::Response& res) {
      const json found = object(req.matches[2], req.matches[1], req.matches[3]);
      if (found.is_null()) {
        const std::string name = req.matches[3];
        reply(res, 404,
              statusBody(404, req.matches[2].str() + " \"" + name + "\" not found",
                         {{"name", name}, {"kind", req.matches[2].str()}}));
        return;
      }
      reply(res, 200, found);
    };
    s.Get(prefix, api(list));
    s.Post(prefix, api(write));
    s.Get(prefix + "/([^/]+)", api(get));
    s.Put(prefix + "/([^/]+)", api(write));
    s.Patch(prefix + "/([^/]+)", api(write));
    s.Delete(prefix + "/([^/]+)", api(write));
  }

  s.Post("/_test/nodes", [this](const httplib::Request& req, httplib::Response& res) {
    const json node = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    std::lock_guard lock(mu_);
    const Reply r = createNodeLocked(node);
    reply(res, r.status, r.body);
  });
  s.Get("/_test/requests", [this](const httplib::Request&, httplib::Response& res) {
    json list = json::array();
    for (const Request& r : requests()) {
      list.push_back({{"method", r.method},
                      {"path", r.path},
                      {"query", r.query},
                      {"content_type", r.content_type},
                      {"authorization", r.authorization},
                      {"body", r.body},
                      {"received_ns", r.received_ns}});
    }
    reply(res, 200, list);
  });
  s.Post("/_test/fail", [this](const httplib::Request& req, httplib::Response& res) {
    const json spec = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (!spec.is_object() || !spec.contains("method") || !spec.contains("path") ||
        !spec.contains("status")) {
      reply(res, 400, statusBody(400, R"(want {"method","path","status"[,"count"]})"));
      return;
    }
    failNext(spec["method"], spec["path"], spec["status"], spec.value("count", 1),
             spec.value("after_serving", false));
    reply(res, 200, spec);
  });
  s.Post("/_test/mutate/([^/]+)", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.matches[1];
    const json spec = req.body.empty() ? json::object()
                                       : json::parse(req.body, nullptr, /*allow_exceptions=*/false);
    if (!spec.is_object()) {
      reply(res, 400, statusBody(400, R"(want {"patch":{...},"after_next_get":bool})"));
      return;
    }
    if (node(name).is_null()) {
      reply(res, 404, nodeNotFound(name));
      return;
    }
    if (!mutate(name, spec.value("patch", json::object()), spec.value("after_next_get", false))) {
      reply(res, 422, statusBody(422, "the change would make the node invalid"));
      return;
    }
    reply(res, 200, node(name));
  });

  // Unrouted paths get a Status body like the apiserver's, not an empty 404.
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.body.empty()) {
      reply(res, res.status, statusBody(res.status, "the server could not find " + req.path));
    }
  });
  // A malformed value in a /_test/ body (e.g. a string status) is the caller's fault.
  s.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown error";
        try {
          std::rethrow_exception(std::move(ep));
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        reply(res, 400, statusBody(400, what));
      });
}

}  // namespace faultline
