// Fuzzes the readers of API-server JSON (sinks/kubernetes/kube_objects.h) with arbitrary
// bodies, read as what each request of the taint sink and the leader elector expects: a NodeList
// page, a Node (with faultline's annotation), the breaker ConfigMap and a Lease.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "sinks/kubernetes/kube_objects.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) {
    return 0;
  }
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  std::map<std::string, nlohmann::json> nodes;
  faultline::NodeListPage page;
  if (faultline::parseNodeList(body, &page)) {
    for (auto& [name, node] : page.nodes) {
      nodes[name] = std::move(node);
    }
  }
  nlohmann::json object = faultline::parseObject(body);
  nodes["object"] = object;  // the body as one Node (GET /api/v1/nodes/{name}, PATCH answers)
  for (const auto& entry : nodes) {
    const nlohmann::json& node = entry.second;
    (void)faultline::nodeTaints(node).dump();
    (void)faultline::taintWithKey(node, "faultline.dev/faulty");
    (void)faultline::hasTaint(node, "faultline.dev/faulty", "NoSchedule");
    (void)faultline::hasLabel(node, "faultline.dev/opt-out", "true");
    if (const auto mark = faultline::taintMark(node)) {
      (void)faultline::hasMarkedTaint(node, *mark);
    }
    (void)faultline::nodeCondition(node, "FaultlineFaulty");
    (void)faultline::stringAt(node, "/metadata/resourceVersion");
  }
  (void)faultline::countTaints(nodes, "faultline.dev/faulty", 0);
  (void)faultline::stringAt(object, "/data/reason");  // the breaker ConfigMap
  (void)faultline::leaseRecord(object);
  (void)object.dump();  // the elector PUTs the Lease it read back
  return 0;
}
