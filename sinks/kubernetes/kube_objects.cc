#include "sinks/kubernetes/kube_objects.h"

#include <algorithm>
#include <limits>

#include "core/time.h"

namespace faultline {
namespace {

using json = nlohmann::json;

// The member at `pointer`, walking objects only, or nullptr. Our pointers name object members
// ("/metadata/name"), never array indices, and hold no escapes.
const json* at(const json& j, std::string_view pointer) {
  const json* node = &j;
  while (!pointer.empty()) {
    pointer.remove_prefix(1);  // '/'
    const size_t end = std::min(pointer.find('/'), pointer.size());
    if (!node->is_object()) {
      return nullptr;
    }
    const auto it = node->find(std::string(pointer.substr(0, end)));
    if (it == node->end()) {
      return nullptr;
    }
    node = &*it;
    pointer.remove_prefix(end);
  }
  return node;
}

std::string stringMember(const json& j, const char* key) {
  if (!j.is_object()) {
    return "";
  }
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// An integer field within [min, 2^31) (Kubernetes int32 fields), else 0.
int64_t int32Member(const json& j, const char* key, int64_t min) {
  if (!j.is_object()) {
    return 0;
  }
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) {
    return 0;
  }
  // is_number_integer() covers unsigned; a uint64 above INT64_MAX must not wrap.
  if (it->is_number_unsigned()) {
    const auto v = it->get<uint64_t>();
    return v >= static_cast<uint64_t>(min) && v <= std::numeric_limits<int32_t>::max()
               ? static_cast<int64_t>(v)
               : 0;
  }
  const auto v = it->get<int64_t>();
  return v >= min && v <= std::numeric_limits<int32_t>::max() ? v : 0;
}

// The taint in spec.taints that `mark` names as faultline wrote it (hasMarkedTaint), or nullptr.
const json* markedTaint(const json& node, const TaintMark& mark) {
  int64_t applied = 0;
  const json* list = at(node, "/spec/taints");
  if (!parseRfc3339(mark.applied, &applied) || list == nullptr || !list->is_array()) {
    return nullptr;
  }
  const auto t = std::find_if(list->begin(), list->end(), [&](const json& x) {
    int64_t added = 0;
    return stringMember(x, "key") == mark.key && stringMember(x, "effect") == mark.effect &&
           parseRfc3339(stringMember(x, "timeAdded"), &added) && added <= applied;
  });
  return t == list->end() ? nullptr : &*t;
}

}  // namespace

json parseObject(std::string_view body) {
  // Returning false drops a value; deeper values are then dropped too (their parent is).
  json parsed = json::parse(
      body.begin(), body.end(),
      [](int depth, json::parse_event_t /*event*/, json& /*value*/) {
        return depth <= kMaxJsonDepth;
      },
      /*allow_exceptions=*/false);
  return parsed.is_object() ? parsed : json();
}

std::string stringAt(const json& j, const char* pointer) {
  const json* v = at(j, pointer);
  return v != nullptr && v->is_string() ? v->get<std::string>() : "";
}

bool parseNodeList(std::string_view body, NodeListPage* page) {
  const json list = parseObject(body);
  const json* items = at(list, "/items");
  if (items == nullptr || !items->is_array()) {
    return false;
  }
  page->nodes.clear();
  for (const json& node : *items) {
    std::string name = stringAt(node, "/metadata/name");
    if (!name.empty()) {
      page->nodes.emplace_back(std::move(name), node);
    }
  }
  page->continue_token = stringAt(list, "/metadata/continue");
  return true;
}

json nodeTaints(const json& node) {
  json taints = json::array();
  const json* list = at(node, "/spec/taints");
  if (list != nullptr && list->is_array()) {
    for (const json& t : *list) {
      if (t.is_object()) {
        taints.push_back(t);
      }
    }
  }
  return taints;
}

const json* taintWithKey(const json& node, const std::string& key) {
  const json* list = at(node, "/spec/taints");
  if (list == nullptr || !list->is_array()) {
    return nullptr;
  }
  const auto t = std::find_if(list->begin(), list->end(),
                              [&](const json& x) { return stringMember(x, "key") == key; });
  return t == list->end() ? nullptr : &*t;
}

bool hasTaint(const json& node, const std::string& key, const std::string& effect) {
  const json* list = at(node, "/spec/taints");
  return list != nullptr && list->is_array() &&
         std::any_of(list->begin(), list->end(), [&](const json& t) {
           return stringMember(t, "key") == key && stringMember(t, "effect") == effect;
         });
}

bool hasLabel(const json& node, const std::string& label, const std::string& value) {
  const json* labels = at(node, "/metadata/labels");
  return labels != nullptr && labels->is_object() && stringMember(*labels, label.c_str()) == value;
}

std::optional<TaintMark> taintMark(const json& node) {
  const json* annotations = at(node, "/metadata/annotations");
  if (annotations == nullptr || !annotations->is_object()) {
    return std::nullopt;
  }
  const auto value = annotations->find(kTaintAnnotation);
  if (value == annotations->end() || !value->is_string()) {
    return std::nullopt;
  }
  const json mark = parseObject(value->get<std::string>());
  if (!mark.is_object()) {
    return std::nullopt;
  }
  TaintMark m{stringMember(mark, "rule"), stringMember(mark, "key"), stringMember(mark, "effect"),
              std::nullopt, stringMember(mark, "applied")};
  int64_t ns = 0;
  if (parseRfc3339(stringMember(mark, "time"), &ns)) {
    m.time_ns = ns;
  }
  return m;
}

bool hasMarkedTaint(const json& node, const TaintMark& mark) {
  return markedTaint(node, mark) != nullptr;
}

TaintCount countTaints(const std::map<std::string, json>& nodes, const std::string& key,
                       int64_t since_ns, const std::map<std::string, int64_t>& added) {
  TaintCount count;
  auto addedSince = [since_ns](const json& t) {
    int64_t time_added = 0;
    return parseRfc3339(stringMember(t, "timeAdded"), &time_added) && time_added >= since_ns;
  };
  for (const auto& [name, node] : nodes) {
    const auto ours = added.find(name);
    bool recent = ours != added.end() && ours->second >= since_ns;  // perhaps lifted since
    // Every taint of the key: faultline's may follow another writer's of another effect.
    bool tainted = false;
    if (const json* list = at(node, "/spec/taints"); list != nullptr && list->is_array()) {
      for (const json& t : *list) {
        if (stringMember(t, "key") == key) {
          tainted = true;
          recent = recent || addedSince(t);
        }
      }
    }
    if (const std::optional<TaintMark> mark = tainted ? std::nullopt : taintMark(node)) {
      if (const json* t = markedTaint(node, *mark)) {  // faultline's, under an earlier config's key
        tainted = true;
        recent = recent || addedSince(*t);
      }
    }
    count.tainted += tainted ? 1 : 0;
    count.recent += recent ? 1 : 0;
  }
  // A node faultline tainted that has since left the list (deleted, replaced, relabelled) still
  // counts: else a rule that taints every node an autoscaler brings up would pass max_new.
  for (const auto& [name, added_ns] : added) {
    count.recent += added_ns >= since_ns && !nodes.contains(name) ? 1 : 0;
  }
  return count;
}

NodeCondition nodeCondition(const json& node, const std::string& type) {
  const json* conditions = at(node, "/status/conditions");
  if (conditions == nullptr || !conditions->is_array()) {
    return {};
  }
  for (const json& c : *conditions) {
    if (stringMember(c, "type") == type) {
      return {true, stringMember(c, "status"), stringMember(c, "reason"),
              stringMember(c, "message"), stringMember(c, "lastTransitionTime")};
    }
  }
  return {};
}

LeaseRecord leaseRecord(const json& lease) {
  const json* spec = at(lease, "/spec");
  if (spec == nullptr || !spec->is_object()) {
    return {};
  }
  return {stringMember(*spec, "holderIdentity"), int32Member(*spec, "leaseDurationSeconds", 1),
          int32Member(*spec, "leaseTransitions", 0), stringMember(*spec, "acquireTime"),
          stringMember(*spec, "renewTime")};
}

}  // namespace faultline
