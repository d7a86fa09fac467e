// TaintSink against the in-process fake API server (tests/tools/fake_apiserver.h).
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/time.h"
#include "sinks/kubernetes/taint_sink.h"
#include "tests/tools/fake_apiserver.h"

namespace faultline {
namespace {

using json = nlohmann::json;
using Lines = std::vector<std::string>;

class TaintSinkTest : public ::testing::Test {
 protected:
  void SetUp() override { server_.start(); }

  // Fast retries so that backoff does not slow the tests down.
  TaintSinkOptions options(int max_attempts = 8) {
    TaintSinkOptions o;
    o.max_attempts = max_attempts;
    o.initial_backoff = std::chrono::milliseconds(1);
    o.max_backoff = std::chrono::milliseconds(4);
    return o;
  }

  KubeConfig config() {
    KubeConfig c;
    c.server = server_.url();
    return c;
  }

  static Decision decision(const std::string& node) {
    Decision d;
    d.node = node;
    d.taint = {"faultline.dev/faulty", "true", "NoSchedule"};
    d.rule = "test-rule";
    return d;
  }

  void createNode(const std::string& name, json taints = json::array()) {
    ASSERT_TRUE(server_.createNode({{"metadata", {{"name", name}, {"labels", {{"gpu", "a100"}}}}},
                                    {"spec", {{"taints", std::move(taints)}}}}));
  }

  // "METHOD path" of every request, in order.
  std::vector<std::string> requestLines() {
    std::vector<std::string> lines;
    for (const auto& r : server_.requests()) {
      lines.push_back(r.method + " " + r.path);
    }
    return lines;
  }

  FakeApiServer server_;
};

json existingTaint() {
  return {{"key", "example.com/existing"}, {"value", "x"}, {"effect", "PreferNoSchedule"}};
}

TEST_F(TaintSinkTest, AddsTaintKeepingExistingOnes) {
  createNode("n1", json::array({existingTaint()}));
  const std::string rv = server_.node("n1")["metadata"]["resourceVersion"];
  TaintSink sink(config(), options());
  sink.write(decision("n1"));
  sink.flush();

  EXPECT_EQ(requestLines(), (Lines{"GET /api/v1/nodes/n1", "PATCH /api/v1/nodes/n1"}));
  const FakeApiServer::Request patch = server_.requests()[1];
  EXPECT_EQ(patch.query, "fieldManager=faultline");
  EXPECT_EQ(patch.content_type, "application/strategic-merge-patch+json");
  const json body = json::parse(patch.body);
  EXPECT_EQ(body["metadata"], json({{"resourceVersion", rv}}));

  const json node = server_.node("n1");
  const json& taints = node["spec"]["taints"];
  ASSERT_EQ(taints.size(), 2u) << node.dump();
  EXPECT_EQ(taints[0], existingTaint());
  EXPECT_EQ(taints[1]["key"], "faultline.dev/faulty");
  EXPECT_EQ(taints[1]["value"], "true");
  EXPECT_EQ(taints[1]["effect"], "NoSchedule");
  // metav1.Time: RFC 3339, whole seconds, UTC.
  const std::string time_added = taints[1]["timeAdded"];
  int64_t ns = 0;
  size_t consumed = 0;
  EXPECT_TRUE(parseRfc3339(time_added, &ns, &consumed) && consumed == time_added.size() &&
              time_added.size() == 20 && time_added.back() == 'Z')
      << time_added;
  EXPECT_EQ(node["metadata"]["labels"]["gpu"], "a100");
  EXPECT_NE(node["metadata"]["resourceVersion"], rv);

  const TaintSink::Counters c = sink.counters();
  EXPECT_EQ(c.applied, 1u);
  EXPECT_EQ(c.already_present + c.conflicts_retried + c.failed, 0u);
}

TEST_F(TaintSinkTest, SameKeyWithOtherEffectIsAnotherTaint) {
  createNode("n1", json::array({{{"key", "faultline.dev/faulty"}, {"effect", "NoExecute"}}}));
  TaintSink sink(config(), options());
  sink.write(decision("n1"));
  sink.flush();

  EXPECT_EQ(sink.counters().applied, 1u);
  EXPECT_EQ(server_.node("n1")["spec"]["taints"].size(), 2u);
}

TEST_F(TaintSinkTest, IdempotentWhenTaintPresent) {
  // Same key and effect, different value: still counts as present.
  createNode(
      "n1",
      json::array(
          {{{"key", "faultline.dev/faulty"}, {"value", "earlier"}, {"effect", "NoSchedule"}}}));
  const json before = server_.node("n1");
  TaintSink sink(config(), options());
  sink.write(decision("n1"));
  sink.write(decision("n1"));
  sink.flush();

  EXPECT_EQ(requestLines(), (Lines{"GET /api/v1/nodes/n1", "GET /api/v1/nodes/n1"}));
  EXPECT_EQ(server_.node("n1"), before);
  EXPECT_EQ(sink.counters().already_present, 2u);
  EXPECT_EQ(sink.counters().applied, 0u);
}

TEST_F(TaintSinkTest, ConflictIsRetriedAndConcurrentWritersTaintKept) {
  createNode("n1", json::array({existingTaint()}));
  const json other = {{"key", "other.example/writer"}, {"effect", "NoExecute"}};
  // Another writer adds its taint right after our first GET, so our first PATCH is stale.
  ASSERT_TRUE(server_.mutate("n1", {{"spec", {{"taints", json::array({existingTaint(), other})}}}},
                             /*after_next_get=*/true));
  TaintSink sink(config(), options());
  sink.write(decision("n1"));
  sink.flush();

  EXPECT_EQ(requestLines(), (Lines{"GET /api/v1/nodes/n1", "PATCH /api/v1/nodes/n1",
                                   "GET /api/v1/nodes/n1", "PATCH /api/v1/nodes/n1"}));
  const json taints = server_.node("n1")["spec"]["taints"];
  ASSERT_EQ(taints.size(), 3u) << taints.dump();
  EXPECT_EQ(taints[0], existingTaint());
  EXPECT_EQ(taints[1], other);
  EXPECT_EQ(taints[2]["key"], "faultline.dev/faulty");
  const TaintSink::Counters c = sink.counters();
  EXPECT_EQ(c.applied, 1u);
  EXPECT_EQ(c.conflicts_retried, 1u);
  EXPECT_EQ(c.failed, 0u);
}

TEST_F(TaintSinkTest, MissingNodeIsDropped) {
  TaintSink sink(config(), options());
  sink.write(decision("gone"));
  sink.flush();

  EXPECT_EQ(requestLines(), (Lines{"GET /api/v1/nodes/gone"}));
  EXPECT_EQ(sink.counters().failed, 1u);
}

TEST_F(TaintSinkTest, ServerErrorsAreRetried) {
  createNode("n1");
  server_.failNext("GET", "/api/v1/nodes/n1", 503);
  server_.failNext("PATCH", "/api/v1/nodes/n1", 500);
  server_.failNext("PATCH", "/api/v1/nodes/n1", 429);
  TaintSink sink(config(), options());
  sink.write(decision("n1"));
  sink.flush();

  EXPECT_EQ(requestLines(),
            (Lines{"GET /api/v1/nodes/n1", "GET /api/v1/nodes/n1", "PATCH /api/v1/nodes/n1",
                   "GET /api/v1/nodes/n1", "PATCH /api/v1/nodes/n1", "GET /api/v1/nodes/n1",
                   "PATCH /api/v1/nodes/n1"}));
  EXPECT_EQ(server_.node("n1")["spec"]["taints"].size(), 1u);
  EXPECT_EQ(sink.counters().applied, 1u);
  EXPECT_EQ(sink.counters().failed, 0u);
}

TEST_F(TaintSinkTest, GivesUpAfterMaxAttempts) {
  createNode("n1");
  server_.failNext("PATCH", "/api/v1/nodes/n1", 500, /*count=*/100);
  TaintSink sink(config(), options(/*max_attempts=*/3));
  sink.write(decision("n1"));
  sink.flush();

  EXPECT_EQ(server_.requests().size(), 6u);
  EXPECT_EQ(sink.counters().failed, 1u);
  EXPECT_EQ(sink.counters().applied, 0u);
}

TEST_F(TaintSinkTest, ClientErrorIsDropped) {
  createNode("n1");
  server_.failNext("PATCH", "/api/v1/nodes/n1", 403);
  TaintSink sink(config(), options());
  sink.write(decision("n1"));
  sink.flush();

  EXPECT_EQ(requestLines(), (Lines{"GET /api/v1/nodes/n1", "PATCH /api/v1/nodes/n1"}));
  EXPECT_EQ(sink.counters().failed, 1u);
}

TEST_F(TaintSinkTest, InvalidTaintIsDroppedOn422) {
  createNode("n1");
  Decision d = decision("n1");
  d.taint.effect = "Sometimes";
  TaintSink sink(config(), options());
  sink.write(d);
  sink.flush();

  EXPECT_EQ(server_.requests().size(), 2u);
  EXPECT_EQ(sink.counters().failed, 1u);
  EXPECT_TRUE(server_.node("n1")["spec"]["taints"].empty());
}

TEST_F(TaintSinkTest, InvalidNodeNameSendsNothing) {
  TaintSink sink(config(), options());
  for (const char* name : {"", "UPPER", "a/b", "../n1", "n1?x=y", "-n1", "n1.", "a..b"}) {
    sink.write(decision(name));
  }
  sink.flush();

  EXPECT_TRUE(server_.requests().empty());
  EXPECT_EQ(sink.counters().failed, 8u);
}

TEST_F(TaintSinkTest, DestructorDrainsTheQueue) {
  for (const char* name : {"n1", "n2.example.com", "gpu-node-3"}) {
    createNode(name);
  }
  {
    TaintSink sink(config(), options());
    for (const char* name : {"n1", "n2.example.com", "gpu-node-3"}) {
      sink.write(decision(name));
    }
  }
  for (const char* name : {"n1", "n2.example.com", "gpu-node-3"}) {
    EXPECT_EQ(server_.node(name)["spec"]["taints"].size(), 1u) << name;
  }
}

}  // namespace
}  // namespace faultline
