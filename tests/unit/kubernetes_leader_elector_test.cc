// LeaderElector against the in-process fake API server: one Lease, several replicas.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include "core/time.h"
#include "sinks/kubernetes/leader_elector.h"
#include "tests/tools/fake_apiserver.h"

namespace faultline {
namespace {

using json = nlohmann::json;
using std::chrono::milliseconds;

class LeaderElectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.start();
    // Each client its own bearer token, so that the server's request log tells whose a request
    // was (Request::authorization "Bearer a" or "Bearer b").
    std::ofstream(tokenFile("a")) << "a";
    std::ofstream(tokenFile("b")) << "b";
    a_client_ = std::make_unique<KubeClient>(kube("a"));
    b_client_ = std::make_unique<KubeClient>(kube("b"));
  }
  void TearDown() override {
    std::filesystem::remove(tokenFile("a"));
    std::filesystem::remove(tokenFile("b"));
  }
  // Replica `who`'s connection: its requests carry "Bearer <who>".
  KubeConfig kube(const std::string& who) const {
    KubeConfig c;
    c.server = server_.url();
    c.qps = 0;
    c.token_file = tokenFile(who);
    return c;
  }
  static std::string tokenFile(const std::string& who) {
    return (std::filesystem::temp_directory_path() /
            ("fl-lease-token-" + who + "-" + std::to_string(getpid())))
        .string();
  }

  // Short timings for test speed, in client-go's proportions.
  static LeaderElectionConfig config(const std::string& identity) {
    LeaderElectionConfig c;
    c.lease_namespace = "faultline";
    c.name = "faultline";
    c.identity = identity;
    c.lease_duration = milliseconds(1000);
    c.renew_deadline = milliseconds(700);
    c.retry_period = milliseconds(100);
    return c;
  }

  // Waits (bounded, not asserted on time) until pred holds.
  template <typename Pred>
  static bool eventually(Pred pred) {
    for (int i = 0; i < 200; ++i) {
      if (pred()) {
        return true;
      }
      std::this_thread::sleep_for(milliseconds(50));
    }
    return pred();
  }

  json lease() { return server_.object("leases", "faultline", "faultline"); }
  // Creates the Lease with this spec, as another writer would; the API status.
  long createLease(const json& spec) {
    return a_client_
        ->post("/apis/coordination.k8s.io/v1/namespaces/faultline/leases",
               json({{"metadata", {{"name", "faultline"}}}, {"spec", spec}}).dump())
        .status;
  }

  // Another writer (b's client) rewrites the Lease's holder and duration: it reads the Lease and
  // PUTs it back with that resourceVersion, read again on a 409 as client-go's RetryOnConflict
  // does (5 tries), since a leader's renewal may land between the read and the PUT. The last
  // PUT's status.
  long overwriteLease(const std::string& holder, int duration_s) {
    long status = 0;
    for (int i = 0; i < 5 && status != 200; ++i) {
      json l = lease();
      l["spec"]["holderIdentity"] = holder;
      l["spec"]["leaseDurationSeconds"] = duration_s;
      status =
          b_client_
              ->put("/apis/coordination.k8s.io/v1/namespaces/faultline/leases/faultline", l.dump())
              .status;
    }
    return status;
  }

  // How many Lease requests with this method the client with this Authorization header sent.
  int requestsOf(const std::string& authorization, const std::string& method) const {
    int n = 0;
    for (const auto& r : server_.requests()) {
      n += r.authorization == authorization && r.method == method &&
                   r.path.find("/leases") != std::string::npos
               ? 1
               : 0;
    }
    return n;
  }

  FakeApiServer server_;
  std::unique_ptr<KubeClient> a_client_;
  std::unique_ptr<KubeClient> b_client_;
};

// The sink's `qps` does not throttle the Lease: two requests per retry_period would wait for the
// rate limit past renew_deadline, and no replica would keep the Lease (a review, 2026-12-02: at
// `qps: 0.2` with the default timings each renewal took about 18 s).
TEST_F(LeaderElectorTest, TheSinksRateLimitDoesNotDelayRenewals) {
  KubeConfig slow = kube("a");
  slow.qps = 1;  // a request a second: each renewal's GET and PUT would take 2 s of 0.7
  slow.burst = 1;
  LeaderElector a(slow, config("replica-a"));
  ASSERT_TRUE(eventually([&] { return a.isLeader(); }));
  const int renewals = requestsOf("Bearer a", "PUT");
  // Three seconds of retry periods (100 ms): leading throughout, renewing at each.
  for (int i = 0; i < 60; ++i) {
    EXPECT_TRUE(a.isLeader()) << "at sample " << i;
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_GT(requestsOf("Bearer a", "PUT"), renewals + 5);
}

TEST_F(LeaderElectorTest, OneLeaderAndTheLeaseFields) {
  LeaderElector a(kube("a"), config("replica-a"));
  ASSERT_TRUE(eventually([&] { return a.isLeader(); }));
  LeaderElector b(kube("b"), config("replica-b"));
  // b sees a valid Lease held by a: it stays a follower across several retry periods, reading
  // the Lease and never writing it.
  const auto b_requests = [&](const std::string& method) {
    int n = 0;
    for (const auto& r : server_.requests()) {
      n += r.authorization == "Bearer b" && r.method == method &&
                   r.path.find("/leases") != std::string::npos
               ? 1
               : 0;
    }
    return n;
  };
  ASSERT_TRUE(eventually([&] { return b_requests("GET") > 10; }));
  EXPECT_TRUE(a.isLeader());
  EXPECT_FALSE(b.isLeader());
  for (const char* write : {"POST", "PUT", "PATCH", "DELETE"}) {
    EXPECT_EQ(b_requests(write), 0) << write;
  }

  const json l = lease();
  EXPECT_EQ(l["apiVersion"], "coordination.k8s.io/v1");
  EXPECT_EQ(l["kind"], "Lease");
  EXPECT_EQ(l["spec"]["holderIdentity"], "replica-a");
  EXPECT_EQ(l["spec"]["leaseDurationSeconds"], 1);
  EXPECT_EQ(l["spec"]["leaseTransitions"], 0);
  for (const char* field : {"acquireTime", "renewTime"}) {
    // MicroTime: 2025-01-01T00:00:00.123456Z
    const std::string t = l["spec"][field];
    int64_t ns = 0;
    size_t consumed = 0;
    EXPECT_TRUE(parseRfc3339(t, &ns, &consumed) && consumed == t.size() && t.size() == 27) << t;
  }
  EXPECT_LT(l["spec"]["acquireTime"].get<std::string>(), l["spec"]["renewTime"].get<std::string>());
}

TEST_F(LeaderElectorTest, ReleasedLeaseIsTakenOver) {
  auto a = std::make_unique<LeaderElector>(kube("a"), config("replica-a"));
  ASSERT_TRUE(eventually([&] { return a->isLeader(); }));
  LeaderElector b(kube("b"), config("replica-b"));
  a.reset();  // releases: holderIdentity "", leaseDurationSeconds 1
  ASSERT_TRUE(eventually([&] { return b.isLeader(); }));
  const json l = lease();
  EXPECT_EQ(l["spec"]["holderIdentity"], "replica-b");
  EXPECT_EQ(l["spec"]["leaseTransitions"], 1);
}

// client-go's ReleaseOnCancel: no holder, 1 s, renewTime and acquireTime at the release.
TEST_F(LeaderElectorTest, ReleaseClearsTheHolderAndStampsTheTime) {
  auto a = std::make_unique<LeaderElector>(kube("a"), config("replica-a"));
  ASSERT_TRUE(eventually([&] { return a->isLeader(); }));
  const std::string renewed = lease()["spec"]["renewTime"];
  a.reset();
  const json spec = lease()["spec"];
  EXPECT_EQ(spec["holderIdentity"], "");
  EXPECT_EQ(spec["leaseDurationSeconds"], 1);
  EXPECT_EQ(spec["leaseTransitions"], 0);
  EXPECT_EQ(spec["acquireTime"], spec["renewTime"]);
  EXPECT_GE(spec["renewTime"].get<std::string>(), renewed);  // same-length MicroTimes
}

// A Lease whose fields have the wrong types (another writer, a proxy) reads as unheld; the
// election goes on.
TEST_F(LeaderElectorTest, LeaseWithFieldsOfTheWrongTypeIsTakenOver) {
  ASSERT_EQ(createLease({{"holderIdentity", 7},
                         {"leaseDurationSeconds", "15"},
                         {"acquireTime", json::array()},
                         {"leaseTransitions", 1e300}}),
            201);
  LeaderElector b(kube("b"), config("replica-b"));
  ASSERT_TRUE(eventually([&] { return b.isLeader(); }));
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "replica-b");
  EXPECT_EQ(lease()["spec"]["leaseTransitions"], 1);
}

TEST_F(LeaderElectorTest, ExpiredLeaseOfACrashedLeaderIsTakenOver) {
  // A Lease held by a replica that died without releasing it.
  ASSERT_EQ(
      createLease(
          {{"holderIdentity", "crashed"}, {"leaseDurationSeconds", 1}, {"leaseTransitions", 4}}),
      201);
  LeaderElector b(kube("b"), config("replica-b"));
  ASSERT_TRUE(eventually([&] { return b.isLeader(); }));
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "replica-b");
  EXPECT_EQ(lease()["spec"]["leaseTransitions"], 5);
}

// Whom a follower's pushes belong to (PushServer's leader_elsewhere): the other holder while
// its Lease runs, judged on this replica's clock; no one once it expired unrenewed, nor while
// the Lease cannot be read (who leads is unknown then).
TEST_F(LeaderElectorTest, OtherHolderIsNamedWhileItsLeaseRuns) {
  ASSERT_EQ(createLease({{"holderIdentity", "crashed"}, {"leaseDurationSeconds", 1}}), 201);
  // Not seeking the Lease (as a Kafka replica catching up): only watching it.
  LeaderElector b(kube("b"), config("replica-b"), {}, [] { return false; });
  ASSERT_TRUE(eventually([&] { return b.otherHolder() == "crashed"; }));
  ASSERT_TRUE(eventually([&] { return b.otherHolder().empty(); }));
  EXPECT_FALSE(b.isLeader());
}

TEST_F(LeaderElectorTest, OtherHolderIsTheLeaderAndNoOneWhenTheLeaseCannotBeRead) {
  LeaderElector a(kube("a"), config("replica-a"));
  ASSERT_TRUE(eventually([&] { return a.isLeader(); }));
  LeaderElector b(kube("b"), config("replica-b"));
  ASSERT_TRUE(eventually([&] { return b.otherHolder() == "replica-a"; }));
  EXPECT_EQ(a.otherHolder(), "");
  EXPECT_FALSE(b.isLeader());
  server_.failNext("GET", "/apis/coordination.k8s.io/v1/namespaces/faultline/leases/faultline", 503,
                   1'000'000);
  ASSERT_TRUE(eventually([&] { return b.otherHolder().empty(); }));
}

TEST_F(LeaderElectorTest, LeaderThatCannotRenewStopsWithinTheRenewDeadline) {
  LeaderElector a(kube("a"), config("replica-a"));
  ASSERT_TRUE(eventually([&] { return a.isLeader(); }));
  server_.failNext("PUT", "/apis/coordination.k8s.io/v1/namespaces/faultline/leases/faultline", 500,
                   1000);
  ASSERT_TRUE(eventually([&] { return !a.isLeader(); }));
  // Not leading while renewals fail, although the Lease still names it.
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "replica-a");
}

TEST_F(LeaderElectorTest, StolenLeaseEndsLeadership) {
  LeaderElector a(kube("a"), config("replica-a"));
  ASSERT_TRUE(eventually([&] { return a.isLeader(); }));
  // An operator (or a replica with a skewed view) rewrites the Lease: a's PUTs now conflict.
  ASSERT_EQ(overwriteLease("replica-z", 30), 200);
  ASSERT_TRUE(eventually([&] { return !a.isLeader(); }));
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "replica-z");
}

// A 409 on the renewal means another replica wrote the Lease: leadership ends at once, not when
// renew_deadline (20 s here, past eventually()'s 10 s) runs out.
TEST_F(LeaderElectorTest, AConflictOnRenewalEndsLeadershipAtOnce) {
  LeaderElectionConfig c = config("replica-a");
  c.lease_duration = milliseconds(30'000);
  c.renew_deadline = milliseconds(20'000);
  std::atomic<int> lost{0};
  LeaderElector a(kube("a"), c, [&](bool leading) { lost += leading ? 0 : 1; });
  ASSERT_TRUE(eventually([&] { return a.isLeader(); }));
  EXPECT_EQ(a.term(), 1u);
  server_.failNext("PUT", "/apis/coordination.k8s.io/v1/namespaces/faultline/leases/faultline",
                   409);
  ASSERT_TRUE(eventually([&] { return lost == 1; }));
  // The Lease still names it, unexpired: it renews at its next retry, in the same term, as no
  // other replica held it meanwhile (what it began, deferred taints, is still its own).
  ASSERT_TRUE(eventually([&] { return a.isLeader(); }));
  EXPECT_EQ(a.term(), 1u);
}

// Leading again after another replica held the Lease is a new term.
TEST_F(LeaderElectorTest, LeadingAgainAfterAnotherHolderIsANewTerm) {
  LeaderElector a(kube("a"), config("replica-a"));
  ASSERT_TRUE(eventually([&] { return a.isLeader(); }));
  EXPECT_EQ(a.term(), 1u);
  // replica-z takes the Lease and dies: a takes over once z's 1 s runs out.
  ASSERT_EQ(overwriteLease("replica-z", 1), 200);
  ASSERT_TRUE(eventually([&] { return a.term() == 2; }));
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "replica-a");
}

// The same when the PUT that takes the Lease over from replica-z lands but its answer is lost (a
// 504, a timeout): a finds itself the holder at its next GET. It won the Lease from another holder,
// so it is a new term; taken for a renewal of its own Lease, it kept term 1, and the taint sink
// kept what it began before z led (deferred taints) and did not learn z's taints.
TEST_F(LeaderElectorTest, ATakeOverWhoseAnswerWasLostIsANewTerm) {
  LeaderElector a(kube("a"), config("replica-a"));
  ASSERT_TRUE(eventually([&] { return a.isLeader(); }));
  EXPECT_EQ(a.term(), 1u);
  ASSERT_EQ(overwriteLease("replica-z", 1), 200);
  ASSERT_TRUE(eventually([&] { return !a.isLeader(); }));
  // a's next PUT is its take-over once z's 1 s runs out: applied, answered 504.
  server_.failNext("PUT", "/apis/coordination.k8s.io/v1/namespaces/faultline/leases/faultline", 504,
                   1, /*after_serving=*/true);
  ASSERT_TRUE(eventually([&] { return a.isLeader(); }));
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "replica-a");
  EXPECT_EQ(lease()["spec"]["leaseTransitions"], 1);
  EXPECT_EQ(a.term(), 2u);
}

// A Lease GET that hangs past the renew deadline: meanwhile replica-b takes the Lease, leads and
// releases it; the GET then answers with the released Lease, which a takes. Another replica led
// in between, so a leads in a new term, although its thread never saw itself lose the Lease.
TEST_F(LeaderElectorTest, TakingTheLeaseAfterAHungRenewalIsANewTerm) {
  LeaderElector a(kube("a"), config("replica-a"));
  ASSERT_TRUE(eventually([&] { return a.isLeader(); }));
  EXPECT_EQ(a.term(), 1u);
  server_.delayNext("GET", "/apis/coordination.k8s.io/v1/namespaces/faultline/leases/faultline",
                    milliseconds(4000));
  ASSERT_TRUE(eventually([&] { return !a.isLeader(); }));
  {
    LeaderElector b(kube("b"), config("replica-b"));
    ASSERT_TRUE(eventually([&] { return b.isLeader(); }));
  }  // b releases the Lease
  ASSERT_TRUE(eventually([&] { return a.isLeader(); }));
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "replica-a");
  EXPECT_EQ(a.term(), 2u);
}
// may_lead false (a Kafka replica still reading its topics' retention): no Lease is created
// while none exists, though the replica keeps reading it; once may_lead turns true, it is.
TEST_F(LeaderElectorTest, NotMayLeadCreatesNoLease) {
  std::atomic<bool> may_lead{false};
  LeaderElector b(kube("b"), config("replica-b"), {}, [&] { return may_lead.load(); });
  ASSERT_TRUE(eventually([&] { return requestsOf("Bearer b", "GET") > 10; }));
  EXPECT_FALSE(b.isLeader());
  EXPECT_TRUE(lease().is_null());
  for (const char* write : {"POST", "PUT", "PATCH", "DELETE"}) {
    EXPECT_EQ(requestsOf("Bearer b", write), 0) << write;
  }
  may_lead = true;
  ASSERT_TRUE(eventually([&] { return b.isLeader(); }));
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "replica-b");
}

// may_lead false: the Lease of a leader that died is not taken over, but it is watched, so that
// once may_lead turns true the take-over comes at the next retry: the expiry counts from the
// last renewal seen, not from when may_lead turned true (which would delay it by
// lease_duration, ten retries here).
TEST_F(LeaderElectorTest, NotMayLeadWatchesTheLeaseSoATakeOverIsNotDelayed) {
  ASSERT_EQ(createLease({{"holderIdentity", "crashed"}, {"leaseDurationSeconds", 1}}), 201);
  std::atomic<bool> may_lead{false};
  LeaderElector b(kube("b"), config("replica-b"), {}, [&] { return may_lead.load(); });
  ASSERT_TRUE(eventually([&] { return b.otherHolder() == "crashed"; }));
  ASSERT_TRUE(eventually([&] { return b.otherHolder().empty(); }));  // expired, as b judges it
  const int gets = requestsOf("Bearer b", "GET");
  ASSERT_TRUE(eventually([&] { return requestsOf("Bearer b", "GET") > gets + 3; }));
  EXPECT_FALSE(b.isLeader());
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "crashed");
  for (const char* write : {"POST", "PUT", "PATCH", "DELETE"}) {
    EXPECT_EQ(requestsOf("Bearer b", write), 0) << write;
  }
  const size_t from = server_.requests().size();
  may_lead = true;
  ASSERT_TRUE(eventually([&] { return b.isLeader(); }));
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "replica-b");
  // b's GETs from the switch to its take-over's PUT: the next one (a GET under way at the switch
  // may come first).
  int before_put = 0;
  const auto requests = server_.requests();
  for (size_t i = from; i < requests.size(); ++i) {
    if (requests[i].authorization != "Bearer b") {
      continue;
    }
    if (requests[i].method == "PUT") {
      break;
    }
    before_put += requests[i].method == "GET" ? 1 : 0;
  }
  EXPECT_LE(before_put, 2);
}

// A replica that leads keeps renewing whatever may_lead says: it does not lose the Lease.
TEST_F(LeaderElectorTest, ALeaderKeepsRenewingWhenMayLeadTurnsFalse) {
  std::atomic<bool> may_lead{true};
  std::atomic<int> changes{0};
  LeaderElector a(
      kube("a"), config("replica-a"), [&](bool /*leading*/) { ++changes; },
      [&] { return may_lead.load(); });
  ASSERT_TRUE(eventually([&] { return a.isLeader(); }));
  may_lead = false;
  // Past renew_deadline and lease_duration several times over.
  for (int i = 0; i < 5; ++i) {
    const std::string renewed = lease()["spec"]["renewTime"];
    ASSERT_TRUE(eventually([&] { return lease()["spec"]["renewTime"] != renewed; })) << i;
    std::this_thread::sleep_for(milliseconds(400));
    EXPECT_TRUE(a.isLeader()) << i;
  }
  EXPECT_EQ(lease()["spec"]["holderIdentity"], "replica-a");
  EXPECT_EQ(changes.load(), 1);
  EXPECT_EQ(a.term(), 1u);
}

TEST(LeaderElectionConfigTest, FromYaml) {
  const LeaderElectionConfig c = LeaderElectionConfig::fromYaml(YAML::Load(
      "{namespace: ops, name: fl, identity: me, lease_duration: 20s, renew_deadline: 12s, "
      "retry_period: 3s}"));
  EXPECT_EQ(c.lease_namespace, "ops");
  EXPECT_EQ(c.name, "fl");
  EXPECT_EQ(c.identity, "me");
  EXPECT_EQ(c.lease_duration, milliseconds(20000));
  EXPECT_EQ(c.renew_deadline, milliseconds(12000));
  EXPECT_EQ(c.retry_period, milliseconds(3000));
  EXPECT_FALSE(LeaderElectionConfig::fromYaml(YAML::Load("{}")).identity.empty());
  EXPECT_THROW(LeaderElectionConfig::fromYaml(YAML::Load("{lease_duration: 5s}")),
               std::runtime_error);  // not above the default renew_deadline
  EXPECT_THROW(LeaderElectionConfig::fromYaml(
                   YAML::Load("{lease_duration: 3s, renew_deadline: 2s, retry_period: 2s}")),
               std::runtime_error);
  EXPECT_THROW(LeaderElectionConfig::fromYaml(YAML::Load("{lease_duration: 1500ms, "
                                                         "renew_deadline: 1s, retry_period: 1ms}")),
               std::runtime_error);
}

}  // namespace
}  // namespace faultline
