// Reading what the API server sends: core/v1 Node, NodeList and ConfigMap, coordination.k8s.io/v1
// Lease (field names and types: k8s.io/api core/v1 and coordination/v1 types.go), and the
// faultline.dev/taint annotation faultline writes on a node (taint_sink.h).
//
// The API server validates what it stores, but annotations are any string another writer chose,
// and the bytes may come from a proxy or a test server. So every function here takes any input
// and none throws: a missing field or one of the wrong type reads as absent ("", 0, false,
// nullopt), and an out-of-range number as absent too. parseObject() bounds the nesting, so
// nothing parsed through it recurses deeper than kMaxJsonDepth when copied or printed.
// Fuzzed by tests/fuzz/kube_objects_fuzz.cc.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace faultline {

inline constexpr const char* kTaintAnnotation = "faultline.dev/taint";

// Values nested deeper than this are dropped while parsing: Kubernetes objects nest about 12
// levels (managedFields), and copying or printing a JSON value recurses once per level.
inline constexpr int kMaxJsonDepth = 64;

// The body as a JSON object, or null when it is not one (not JSON, or an array, a string, ...).
nlohmann::json parseObject(std::string_view body);

// The string at `pointer`, a path of object members like "/metadata/name" (no array indices,
// no RFC 6901 escapes), or "" when absent or not a string.
std::string stringAt(const nlohmann::json& j, const char* pointer);

// One page of a NodeList: GET /api/v1/nodes?limit=N[&continue=T] (metav1.ListMeta).
struct NodeListPage {
  std::vector<std::pair<std::string, nlohmann::json>> nodes;  // metadata.name, the Node
  std::string continue_token;  // metadata.continue; "" on the last page
};
// False when the body is not an object with an `items` array. Items that are not objects with a
// non-empty string metadata.name are skipped.
bool parseNodeList(std::string_view body, NodeListPage* page);

// spec.taints: the objects in it, in order (anything else dropped); [] when absent.
nlohmann::json nodeTaints(const nlohmann::json& node);
// The first taint in spec.taints with this key, whatever its effect; null if none. Points into
// `node`.
const nlohmann::json* taintWithKey(const nlohmann::json& node, const std::string& key);
// A taint with this key and effect is in spec.taints.
bool hasTaint(const nlohmann::json& node, const std::string& key, const std::string& effect);
// metadata.labels[label] is the string `value`.
bool hasLabel(const nlohmann::json& node, const std::string& label, const std::string& value);

// faultline's annotation on a node: the JSON object {"rule","key","effect","time","applied"}
// as the string value of metadata.annotations["faultline.dev/taint"].
struct TaintMark {
  std::string rule;
  std::string key;
  std::string effect;
  std::optional<int64_t> time_ns;  // "time": the decision's event time, ns since the epoch
  std::string applied;             // "applied": when the taint was written, RFC 3339 as found
};
// nullopt when the annotation is absent or its value is not a JSON object.
std::optional<TaintMark> taintMark(const nlohmann::json& node);
// The mark's taint (its key and effect) is in spec.taints as faultline wrote it: with a timeAdded
// no later than the mark's `applied` (faultline writes both at once). A taint put back by hand
// after faultline's was removed (the mark stays) has none (kubectl writes it for NoExecute only)
// or a later one: it is not faultline's. False too when `applied` is not an RFC 3339 time.
bool hasMarkedTaint(const nlohmann::json& node, const TaintMark& mark);

// The blast-radius guard's counts over eligible nodes (taint_sink.h BlastRadiusLimits). A node
// counts by its taints of this key (any effect), else by faultline's marked taint
// (hasMarkedTaint), whatever its key: the config's taint key may have changed since faultline
// wrote it (a rollout).
struct TaintCount {
  int tainted = 0;  // nodes with a taint of this key or faultline's marked taint
  // nodes one of whose taints so counted has a timeAdded >= since_ns, or whose time in `added`
  // (listed or not) is >= since_ns
  int recent = 0;
};
// `added`: node name -> when faultline last added the taint (ns since the epoch), so that a taint
// lifted since, which `nodes` no longer shows, or of a node no longer in `nodes`, still counts as
// added.
TaintCount countTaints(const std::map<std::string, nlohmann::json>& nodes, const std::string& key,
                       int64_t since_ns, const std::map<std::string, int64_t>& added = {});

// The status.conditions entry of a type (NodeCondition; the first one if repeated).
struct NodeCondition {
  bool present = false;
  std::string status;  // "True", "False", "Unknown"
  std::string reason;
  std::string message;
  std::string last_transition_time;  // RFC 3339 as found
};
NodeCondition nodeCondition(const nlohmann::json& node, const std::string& type);

// A Lease's spec (coordination/v1 LeaseSpec), as leader election reads it. Two records compare
// equal when a holder's renewal did not happen in between (client-go compares the same fields).
struct LeaseRecord {
  std::string holder;        // spec.holderIdentity; "" = released or never held
  int64_t duration_s = 0;    // spec.leaseDurationSeconds, 0 when absent or not in [1, 2^31)
  int64_t transitions = 0;   // spec.leaseTransitions, 0 when absent or not in [0, 2^31)
  std::string acquire_time;  // spec.acquireTime (MicroTime, RFC 3339) as found
  std::string renew_time;    // spec.renewTime as found
  bool operator==(const LeaseRecord&) const = default;
};
LeaseRecord leaseRecord(const nlohmann::json& lease);

}  // namespace faultline
