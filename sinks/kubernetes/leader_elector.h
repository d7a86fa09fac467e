// Leader election on a coordination.k8s.io/v1 Lease, the algorithm of client-go
// tools/leaderelection (leaderelection.go tryAcquireOrRenew, resourcelock/leaselock.go); Lease
// fields: kubernetes/api coordination/v1/types.go.
//
//   GET  /apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}
//   POST /apis/coordination.k8s.io/v1/namespaces/{ns}/leases          (404 → create; 409 = lost)
//   PUT  /apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}   (with the GET's
//        resourceVersion: renew, or take over an expired Lease; 409 = someone else won)
//
// Lease spec written: holderIdentity, leaseDurationSeconds, acquireTime, renewTime (MicroTime,
// RFC 3339 with 6 fractional digits), leaseTransitions (+1 on each change of holder).
// Expiry of another holder's Lease is judged on our own clock: observedTime (when we last saw
// the spec change) + leaseDurationSeconds, so clock skew between replicas does not matter.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>
#include <yaml-cpp/node/node.h>

#include "sinks/kubernetes/kube_client.h"
#include "sinks/kubernetes/kube_objects.h"

namespace faultline {

struct LeaderElectionConfig {
  std::string lease_namespace;     // YAML `namespace`; default: the pod's service-account namespace
  std::string name = "faultline";  // the Lease's name
  std::string identity;            // default: $POD_NAME, else the host name
  // client-go's (kube-controller-manager's) defaults. Must hold:
  // lease_duration > renew_deadline > 1.2 * retry_period; lease_duration in whole seconds.
  std::chrono::milliseconds lease_duration{15'000};
  std::chrono::milliseconds renew_deadline{10'000};
  std::chrono::milliseconds retry_period{2'000};

  // Keys: namespace, name, identity, lease_duration, renew_deadline, retry_period (durations
  // like "15s", "500ms"). Throws std::runtime_error on a bad duration or ordering.
  static LeaderElectionConfig fromYaml(const YAML::Node& node);
};

// The namespace faultline runs in: /var/run/secrets/kubernetes.io/serviceaccount/namespace,
// else "faultline".
std::string podNamespace();

// Runs the election on its own thread from construction until destruction.
class LeaderElector {
 public:
  // on_change(true) runs on the elector's thread after the Lease was won, on_change(false) after
  // leadership was lost or given up. While may_lead (if given) returns false, a replica that does
  // not lead does not seek the Lease (a Kafka replica still reading its topics' retention).
  // The elector has its own connection to the API server (`kube`, without its rate limit: two
  // requests per retry_period, which a low `qps` would delay past renew_deadline so that no
  // replica kept the Lease), so that a slow taint never delays a renewal. `metrics`, if given,
  // counts its requests (KubeClient) and must outlive the elector.
  LeaderElector(const KubeConfig& kube, LeaderElectionConfig config,
                std::function<void(bool)> on_change = {}, std::function<bool()> may_lead = {},
                Metrics* metrics = nullptr);
  // Stops; a held Lease is released (holderIdentity "", leaseDurationSeconds 1, renewTime and
  // acquireTime now: client-go's ReleaseOnCancel) so that another replica takes over at its
  // next retry instead of after the lease duration.
  ~LeaderElector();
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;
  LeaderElector(LeaderElector&&) = delete;
  LeaderElector& operator=(LeaderElector&&) = delete;

  // True while this replica holds the Lease and renewed it less than renew_deadline ago (counted
  // from when the renewal was sent). Judged at the call, so a leader whose renewals hang stops
  // acting within renew_deadline; a 409 on the Lease (another replica won) ends it at once.
  bool isLeader() const;
  // When isLeader() turns false unless a renewal is sent before: renew_deadline after the last
  // renewal sent (steady clock). Meaningful while isLeader().
  std::chrono::steady_clock::time_point leadingUntil() const;
  // While isLeader(): the term, 1 for the first time this replica won the Lease and one more
  // each time it won it again from another holder (or none: released, created); else 0. Leading
  // again on a Lease that still named it (renewals failed for a while) keeps the term; one that
  // names it after a take-over whose answer was lost (a timeout, a 5xx) does not. A writer
  // that sees the term change knows that another replica may have led in between.
  uint64_t term() const;
  // The identity of another replica that holds the Lease, as this replica's last read of it
  // found it, until that holder's lease_duration runs out, judged as for a take-over (from when
  // this replica saw the last renewal, on its own clock). "" when this replica or no one holds
  // it, when it expired, or when the last read failed (API server unreachable: who leads is
  // unknown).
  std::string otherHolder() const;
  const std::string& identity() const { return config_.identity; }

 private:
  void run();
  // Renews a Lease this replica holds; takes or creates one only if `may_acquire`.
  bool tryAcquireOrRenew(bool may_acquire);
  void release();
  // Records what otherHolder() answers until the next read: `holder` ("" for none) until `until`.
  void seeHolder(const std::string& holder, std::chrono::steady_clock::time_point until);
  std::string leasePath() const;
  // The spec we write: renewing `old` (ours) or taking it over (+1 transition, new acquireTime).
  nlohmann::json leaseSpec(const LeaseRecord& old, bool take_over) const;

  KubeClient client_;
  const LeaderElectionConfig config_;
  std::function<void(bool)> on_change_;
  std::function<bool()> may_lead_;

  // Last Lease record seen and when (steady clock), for the expiry judgement.
  LeaseRecord observed_;
  std::chrono::steady_clock::time_point observed_time_;
  nlohmann::json held_;     // the Lease as last written by us, while leader
  bool took_over_ = false;  // the last acquisition created the Lease or took it from another
  // A take-over (PUT) or creation (POST) got no answer, or a 5xx: it may have landed, so the next
  // Lease that names this replica was taken over, not renewed.
  bool take_over_unanswered_ = false;

  std::atomic<bool> leader_{false};
  std::atomic<uint64_t> term_{0};
  std::atomic<int64_t> renewed_ns_{0};  // steady clock when the last successful renew was sent

  // What otherHolder() answers: set by run()'s thread, read by the push server's.
  mutable std::mutex other_mu_;
  std::string other_holder_;
  std::chrono::steady_clock::time_point other_until_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after everything above is initialised
};

}  // namespace faultline
