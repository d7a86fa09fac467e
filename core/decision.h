// What the correlator decides about a node, and the interface every sink implements.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace faultline {

// A Kubernetes node taint (core/v1 Taint). effect is NoSchedule, PreferNoSchedule or NoExecute.
struct Taint {
  std::string key = "faultline.dev/faulty";
  std::string value = "true";
  std::string effect = "NoSchedule";
};

// One matched line that supports a decision.
struct Evidence {
  int64_t time_ns = 0;
  std::string signature;  // signature id
  std::string line;
  std::vector<std::pair<std::string, std::string>> fields;  // named capture groups, in order
};

struct Decision {
  enum class Action : uint8_t {
    kTaint,       // add `taint` to the node
    kUntaint,     // the node recovered: remove the taint faultline set
    kSuppressed,  // a taint or untaint the sink refused; `reason` says why
    // a suspects_peers rule points at the node (it ran a job whose other nodes reported a hang,
    // and did not): logged, counted and written as an Event; the node keeps its taints as they are
    kSuspect,
  };
  int64_t time_ns = 0;  // event time of the hit that completed the rule
  std::string node;
  Action action = Action::kTaint;
  Taint taint;
  std::string rule;  // rule id
  // Why, in words: the taint's "3 hits within 1d on pci=0000:3b:00" or "corroborated by
  // infiniband-port-state within 10m", the untaint's recovery, the suppression's limit.
  std::string reason;
  std::vector<Evidence> evidence;
  // The rule runs in dry run (kubernetes.dry_run, dry_run_rules): decided and logged, never
  // applied. Dry-run faults taint and untaint a node of their own (Correlator), so that a rule
  // in dry run never holds back or lifts a real rule's taint.
  bool dry_run = false;
};

// "taint" | "untaint" | "suppressed" | "suspect"
std::string_view actionName(Decision::Action action);

// A stage that receives decisions. write() may run on two threads at once: the match worker whose
// batch is being correlated (core/serve_loop.h) and, for the decision log and counter, the taint
// sink's thread (refused and resumed decisions: TaintSink::Hooks). A sink that talks to the
// network must queue and return quickly. flush() blocks until every decision written so far has
// been handled: written out, applied, given up with a logged reason, or (TaintSink) held or
// deferred.
class DecisionSink {
 public:
  virtual ~DecisionSink() = default;
  virtual void write(const Decision& decision) = 0;
  virtual void flush() {}
};

}  // namespace faultline
