#include "sinks/kubernetes/leader_elector.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <random>
#include <stdexcept>
#include <utility>

#include <spdlog/spdlog.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include "core/time.h"
#include "core/yaml_read.h"
#include "sinks/kubernetes/kube_objects.h"

namespace faultline {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// The Lease's requests pace themselves (retry_period): no rate limit (LeaderElector()).
KubeConfig unthrottled(KubeConfig kube) {
  kube.qps = 0;
  return kube;
}

int64_t steadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// metav1.MicroTime: RFC 3339 with 6 fractional digits.
std::string nowMicroTime() {
  const std::string ns = formatRfc3339(nowNanos());  // ...SS.nnnnnnnnnZ
  return ns.substr(0, ns.size() - 4) + "Z";
}

// The duration at map[key] in ms; `fallback` if the key is absent.
std::chrono::milliseconds millisecondsAt(const YAML::Node& map, const char* key,
                                         std::chrono::milliseconds fallback) {
  if (!map[key]) {
    return fallback;
  }
  return std::chrono::milliseconds(
      durationAt(map[key], std::string("kubernetes.leader_election.") + key) / 1'000'000);
}

// A write without an answer (none, or a 5xx such as a proxy's 504) may have been applied.
bool mayHaveLanded(const KubeClient::Response& r) {
  return r.status == 0 || r.status >= 500;
}

}  // namespace

std::string podNamespace() {
  std::ifstream in("/var/run/secrets/kubernetes.io/serviceaccount/namespace");
  std::string ns;
  if (in >> ns && !ns.empty()) {
    return ns;
  }
  return "faultline";
}

LeaderElectionConfig LeaderElectionConfig::fromYaml(const YAML::Node& node) {
  checkKeys(node, "kubernetes.leader_election.",
            {"namespace", "name", "identity", "lease_duration", "renew_deadline", "retry_period"});
  LeaderElectionConfig c;
  const std::string where = "kubernetes.leader_election.";
  c.lease_namespace = stringOr(node, where, "namespace", "");
  if (c.lease_namespace.empty()) {
    c.lease_namespace = podNamespace();
  }
  c.name = stringOr(node, where, "name", c.name);
  c.identity = stringOr(node, where, "identity", "");
  if (c.identity.empty()) {
    const char* pod = std::getenv("POD_NAME");
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    c.identity = pod != nullptr && *pod != '\0' ? pod : host;
  }
  c.lease_duration = millisecondsAt(node, "lease_duration", c.lease_duration);
  c.renew_deadline = millisecondsAt(node, "renew_deadline", c.renew_deadline);
  c.retry_period = millisecondsAt(node, "retry_period", c.retry_period);
  // client-go NewLeaderElector's checks.
  if (c.lease_duration.count() % 1000 != 0) {
    failAt(node["lease_duration"], "kubernetes.leader_election.lease_duration",
           "must be whole seconds");
  }
  if (c.lease_duration <= c.renew_deadline) {
    failAt(node, "kubernetes.leader_election",
           "lease_duration must be greater than renew_deadline");
  }
  if (static_cast<double>(c.renew_deadline.count()) <=
      1.2 * static_cast<double>(c.retry_period.count())) {
    failAt(node, "kubernetes.leader_election", "renew_deadline must exceed 1.2 * retry_period");
  }
  return c;
}

LeaderElector::LeaderElector(const KubeConfig& kube, LeaderElectionConfig config,
                             std::function<void(bool)> on_change, std::function<bool()> may_lead,
                             Metrics* metrics)
    : client_(unthrottled(kube), metrics),
      config_(std::move(config)),
      on_change_(std::move(on_change)),
      may_lead_(std::move(may_lead)),
      thread_([this] { run(); }) {}

LeaderElector::~LeaderElector() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

Clock::time_point LeaderElector::leadingUntil() const {
  return Clock::time_point(std::chrono::nanoseconds(renewed_ns_.load())) + config_.renew_deadline;
}

uint64_t LeaderElector::term() const {
  // Leadership first: run() counts the term up before it sets leader_, so a term read after
  // seeing leadership is that leadership's or a newer one, never an older one.
  return isLeader() ? term_.load() : 0;
}

std::string LeaderElector::otherHolder() const {
  std::lock_guard lock(other_mu_);
  return Clock::now() < other_until_ ? other_holder_ : std::string();
}

void LeaderElector::seeHolder(const std::string& holder, Clock::time_point until) {
  std::lock_guard lock(other_mu_);
  other_holder_ = holder;
  other_until_ = until;
}

bool LeaderElector::isLeader() const {
  return leader_ &&
         steadyNanos() - renewed_ns_.load() <
             std::chrono::duration_cast<std::chrono::nanoseconds>(config_.renew_deadline).count();
}

std::string LeaderElector::leasePath() const {
  return "/apis/coordination.k8s.io/v1/namespaces/" + config_.lease_namespace + "/leases";
}

json LeaderElector::leaseSpec(const LeaseRecord& old, bool take_over) const {
  const std::string now = nowMicroTime();
  return {{"holderIdentity", config_.identity},
          {"leaseDurationSeconds", config_.lease_duration.count() / 1000},
          {"acquireTime", take_over || old.acquire_time.empty() ? now : old.acquire_time},
          {"renewTime", now},
          // leaseTransitions is an int32 (coordination/v1); saturate rather than wrap.
          {"leaseTransitions",
           take_over ? std::min<int64_t>(old.transitions + 1, std::numeric_limits<int32_t>::max())
                     : old.transitions}};
}

bool LeaderElector::tryAcquireOrRenew(bool may_acquire) {
  const std::string path = leasePath() + "/" + config_.name;
  const KubeClient::Response got = client_.get(path);
  if (got.status != 200) {
    seeHolder("", {});  // none (404), or a failed read: who leads is unknown
  }
  if (got.status == 404 && !may_acquire) {
    return false;
  }
  if (got.status == 404) {
    const json lease = {
        {"apiVersion", "coordination.k8s.io/v1"},
        {"kind", "Lease"},
        {"metadata", {{"name", config_.name}, {"namespace", config_.lease_namespace}}},
        {"spec", leaseSpec(LeaseRecord{}, /*take_over=*/false)}};  // new: no transition yet
    const KubeClient::Response created = client_.post(leasePath(), lease.dump());
    if (created.status == 201) {
      held_ = parseObject(created.body);
      took_over_ = true;
      take_over_unanswered_ = false;
      return true;
    }
    take_over_unanswered_ = take_over_unanswered_ || mayHaveLanded(created);
    if (created.status == 409) {
      held_ = nullptr;  // another replica created it first: not leading, at once
    } else {
      // RBAC, a missing namespace: without this line only /readyz and the request counter show
      // why no replica leads.
      spdlog::warn("leader election: POST {}: HTTP {} {}", leasePath(), created.status,
                   created.error.empty() ? created.body.substr(0, 200) : created.error);
    }
    return false;
  }
  if (got.status != 200) {
    spdlog::warn("leader election: GET {}: HTTP {} {}", path, got.status, got.error);
    return false;
  }
  json lease = parseObject(got.body);
  if (!lease.is_object()) {
    seeHolder("", {});
    spdlog::warn("leader election: GET {}: not a Lease object", path);
    return false;
  }
  const LeaseRecord record = leaseRecord(lease);
  if (!(record == observed_)) {
    observed_ = record;
    observed_time_ = Clock::now();
  }
  const bool mine = record.holder == config_.identity;
  seeHolder(mine ? std::string() : record.holder,
            observed_time_ + std::chrono::seconds(record.duration_s));
  // Not yet allowed to take the Lease (even one that still names this replica, which a
  // restarted container does not lead): only watched, so that its expiry counts from the
  // renewals seen.
  if (!may_acquire || (!record.holder.empty() && !mine &&
                       Clock::now() < observed_time_ + std::chrono::seconds(record.duration_s))) {
    held_ = nullptr;  // held by someone else and not expired: we are not leading, at once
    return false;
  }
  lease["spec"] = leaseSpec(record, /*take_over=*/!mine);
  const KubeClient::Response put = client_.put(path, lease.dump());
  if (put.status != 200) {
    take_over_unanswered_ = take_over_unanswered_ || (!mine && mayHaveLanded(put));
    if (put.status == 409) {
      held_ = nullptr;  // someone else wrote the Lease since our GET: not leading, at once
    } else {
      spdlog::warn("leader election: PUT {}: HTTP {} {}", path, put.status, put.error);
    }
    return false;
  }
  seeHolder("", {});  // taken over: this replica holds it
  held_ = parseObject(put.body);
  // A Lease that names this replica after a take-over whose answer was lost was won from
  // another holder all the same.
  took_over_ = !mine || take_over_unanswered_;
  take_over_unanswered_ = false;
  return true;
}

void LeaderElector::release() {
  if (!held_.is_object()) {
    return;
  }
  // client-go's ReleaseOnCancel: no holder, a 1 s duration and both times now, so a follower
  // takes over at its next retry; the resourceVersion of our last write guards against
  // releasing a Lease someone else has taken meanwhile (409).
  json lease = held_;
  if (!lease["spec"].is_object()) {
    lease["spec"] = json::object();
  }
  const std::string now = nowMicroTime();
  lease["spec"]["holderIdentity"] = "";
  lease["spec"]["leaseDurationSeconds"] = 1;
  lease["spec"]["acquireTime"] = now;
  lease["spec"]["renewTime"] = now;
  const KubeClient::Response put = client_.put(leasePath() + "/" + config_.name, lease.dump());
  spdlog::info("leader election: {} released Lease {}/{} (HTTP {})", config_.identity,
               config_.lease_namespace, config_.name, put.status);
}

void LeaderElector::run() {
  std::mt19937 rng{std::random_device{}()};
  // client-go JitterFactor 1.2: waits are drawn from [retry, 1.2 * retry].
  std::uniform_real_distribution<double> jitter(1.0, 1.2);
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    // A renewal counts from when it was sent: its answer may come late, and a follower counts
    // the Lease's expiry from when it saw the renewal.
    const int64_t sent_ns = steadyNanos();
    const bool renewed = tryAcquireOrRenew(leader_ || !may_lead_ || may_lead_());
    const bool was = leader_;
    if (renewed) {
      // A new term when another replica may have held the Lease since this one's last: a Lease
      // that still named this replica (renewals failed for a while, an API server outage) was
      // held by no one else, so what this replica began (deferred taints) is still its own. Also
      // when leader_ is still set: a request that hung past the renew deadline kept this thread
      // from noticing the loss while another replica led.
      if (term_ == 0 || took_over_) {
        ++term_;  // before renewed_ns_ and leader_ (see term())
        if (was) {
          spdlog::info("leader election: {} acquired Lease {}/{} again after losing it unseen",
                       config_.identity, config_.lease_namespace, config_.name);
        }
      }
      renewed_ns_ = sent_ns;
      leader_ = true;
    } else if (!held_.is_object() || !isLeader()) {
      leader_ = false;
    }
    if (leader_ != was) {
      spdlog::info("leader election: {} {} Lease {}/{}", config_.identity,
                   leader_ ? "acquired" : "lost", config_.lease_namespace, config_.name);
      if (!leader_) {
        held_ = nullptr;
      }
      if (on_change_) {
        on_change_(leader_);
      }
    }
    lock.lock();
    cv_.wait_for(
        lock,
        std::chrono::duration_cast<std::chrono::milliseconds>(config_.retry_period * jitter(rng)),
        [this] { return stopping_; });
  }
  lock.unlock();
  if (leader_) {
    leader_ = false;
    release();
    if (on_change_) {
      on_change_(false);
    }
  }
}

}  // namespace faultline
