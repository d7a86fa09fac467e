// KubeClient and KubeConfig against the in-process fake API server.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include "core/metrics.h"
#include "sinks/kubernetes/kube_client.h"
#include "tests/tools/fake_apiserver.h"

namespace faultline {
namespace {

using json = nlohmann::json;

TEST(KubeClientTest, GetAndPatch) {
  FakeApiServer server;
  server.start();
  ASSERT_TRUE(server.createNode({{"metadata", {{"name", "n1"}}}}));
  KubeClient client(KubeConfig{server.url(), "", "", false});

  const KubeClient::Response got = client.get("/api/v1/nodes/n1");
  EXPECT_EQ(got.status, 200);
  EXPECT_TRUE(got.error.empty());
  EXPECT_EQ(json::parse(got.body)["metadata"]["name"], "n1");

  const KubeClient::Response patched =
      client.patch("/api/v1/nodes/n1?fieldManager=faultline", "application/merge-patch+json",
                   R"({"metadata":{"labels":{"a":"b"}}})");
  EXPECT_EQ(patched.status, 200);
  EXPECT_EQ(server.node("n1")["metadata"]["labels"]["a"], "b");
  EXPECT_EQ(server.requests().back().query, "fieldManager=faultline");
  EXPECT_EQ(server.requests().back().content_type, "application/merge-patch+json");

  const KubeClient::Response stale =
      client.patch("/api/v1/nodes/n1", "application/merge-patch+json",
                   R"({"metadata":{"resourceVersion":"1"}})");
  EXPECT_EQ(stale.status, 409);
  EXPECT_EQ(json::parse(stale.body)["reason"], "Conflict");

  EXPECT_EQ(client.get("/api/v1/nodes/n2").status, 404);
}

TEST(KubeClientTest, SendsTheCurrentTokenFromTheFile) {
  FakeApiServer server;
  server.start();
  const std::string token_file =
      (std::filesystem::temp_directory_path() / ("fl-token-" + std::to_string(getpid()))).string();
  std::ofstream(token_file) << "first\n";
  KubeClient client(KubeConfig{server.url(), token_file, "", false});

  client.get("/version");
  std::ofstream(token_file) << "rotated";
  client.get("/version");
  std::filesystem::remove(token_file);
  const KubeClient::Response unreadable = client.get("/version");

  ASSERT_EQ(server.requests().size(), 2u);
  EXPECT_EQ(server.requests()[0].authorization, "Bearer first");
  EXPECT_EQ(server.requests()[1].authorization, "Bearer rotated");
  EXPECT_EQ(unreadable.status, 0);
  EXPECT_NE(unreadable.error.find("token"), std::string::npos);
}

TEST(KubeClientTest, RereadsTheTokenAndRetriesOnceOn401) {
  FakeApiServer server;
  server.start();
  const std::string token_file =
      (std::filesystem::temp_directory_path() / ("fl-token401-" + std::to_string(getpid())))
          .string();
  std::ofstream(token_file) << "old";
  KubeClient client(KubeConfig{server.url(), token_file, "", false});
  ASSERT_EQ(client.get("/version").status, 200);
  // Rotated in place within the file's mtime granularity: same inode, size and mtime, so only
  // the 401 shows the cached token is stale.
  const auto mtime = std::filesystem::last_write_time(token_file);
  std::ofstream(token_file) << "new";
  std::filesystem::last_write_time(token_file, mtime);
  server.failNext("GET", "/version", 401);

  const KubeClient::Response response = client.get("/version");
  std::filesystem::remove(token_file);
  EXPECT_EQ(response.status, 200);
  ASSERT_EQ(server.requests().size(), 3u);
  EXPECT_EQ(server.requests()[1].authorization, "Bearer old");  // answered 401
  EXPECT_EQ(server.requests()[2].authorization, "Bearer new");
}

// A request is neither sent past its deadline nor left waiting for its answer past it.
TEST(KubeClientTest, ARequestEndsAtItsDeadline) {
  FakeApiServer server;
  server.start();
  ASSERT_TRUE(server.createNode({{"metadata", {{"name", "n1"}}}}));
  KubeClient client(KubeConfig{server.url(), "", "", false});

  const KubeClient::Response late =
      client.get("/api/v1/nodes/n1", std::chrono::steady_clock::now() - std::chrono::seconds(1));
  EXPECT_EQ(late.status, 0);
  EXPECT_NE(late.error.find("deadline"), std::string::npos) << late.error;
  EXPECT_TRUE(server.requests().empty());

  // The server holds the PATCH 3 s, then applies it; the client stops waiting at 300 ms.
  server.delayNext("PATCH", "/api/v1/nodes/n1", std::chrono::milliseconds(3000));
  const KubeClient::Response cut = client.patch(
      "/api/v1/nodes/n1", "application/merge-patch+json", R"({"metadata":{"labels":{"a":"b"}}})",
      std::chrono::steady_clock::now() + std::chrono::milliseconds(300));
  EXPECT_EQ(cut.status, 0);
  EXPECT_FALSE(cut.error.empty());
  EXPECT_EQ(server.node("n1").value("/metadata/labels/a"_json_pointer, ""), "")
      << "answered only once the server had applied it";
}

TEST(KubeClientTest, ReportsRetryAfterAndSendsEveryVerb) {
  FakeApiServer server;
  server.start();
  KubeClient client(KubeConfig{server.url(), "", "", false});
  server.failNext("GET", "/version", 429);
  EXPECT_EQ(client.get("/version").retry_after_s, 1);
  EXPECT_EQ(client.get("/version").retry_after_s, 0);

  const std::string cms = "/api/v1/namespaces/faultline/configmaps";
  EXPECT_EQ(client.post(cms, R"({"metadata":{"name":"c"},"data":{"a":"1"}})").status, 201);
  EXPECT_EQ(client.put(cms + "/c", R"({"metadata":{"name":"c"},"data":{"a":"2"}})").status, 200);
  EXPECT_EQ(server.object("configmaps", "faultline", "c")["data"]["a"], "2");
  EXPECT_EQ(client.del(cms + "/c").status, 200);
  EXPECT_EQ(client.get(cms + "/c").status, 404);
  std::vector<std::string> methods;
  for (const auto& r : server.requests()) {
    methods.push_back(r.method);
  }
  EXPECT_EQ(methods, (std::vector<std::string>{"GET", "GET", "POST", "PUT", "DELETE", "GET"}));
}

TEST(KubeClientTest, RateLimiterLetsABurstThrough) {
  FakeApiServer server;
  server.start();
  KubeConfig config{server.url(), "", "", false};
  config.qps = 50;
  config.burst = 3;
  KubeClient client(config);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(client.get("/version").status, 200);  // the rest wait for tokens, none is lost
  }
  EXPECT_EQ(server.requests().size(), 6u);
}

TEST(KubeClientTest, TransportErrorHasNoStatus) {
  FakeApiServer server;
  const int port = server.start();
  server.stop();
  KubeClient client(KubeConfig{"http://127.0.0.1:" + std::to_string(port), "", "", false});

  const KubeClient::Response response = client.get("/version");
  EXPECT_EQ(response.status, 0);
  EXPECT_FALSE(response.error.empty());
}

// Every request sent is counted by verb, resource (never the object's name) and status.
TEST(KubeClientTest, CountsRequestsByVerbResourceAndStatus) {
  FakeApiServer server;
  server.start();
  ASSERT_TRUE(server.createNode({{"metadata", {{"name", "n1"}}}}));
  Metrics metrics;
  KubeClient client(KubeConfig{server.url(), "", "", false}, &metrics);

  EXPECT_EQ(client.get("/api/v1/nodes?labelSelector=a%3Db&limit=500").status, 200);
  EXPECT_EQ(client.get("/api/v1/nodes/n1").status, 200);
  EXPECT_EQ(client.get("/api/v1/nodes/n2").status, 404);
  EXPECT_EQ(client.get("/api/v1/nodes/n3").status, 404);
  EXPECT_EQ(client
                .patch("/api/v1/nodes/n1/status?fieldManager=faultline",
                       "application/strategic-merge-patch+json", R"({"status":{}})")
                .status,
            200);
  const std::string leases = "/apis/coordination.k8s.io/v1/namespaces/faultline/leases";
  const KubeClient::Response created =
      client.post(leases, R"({"metadata":{"name":"l"},"spec":{}})");
  EXPECT_EQ(created.status, 201);
  EXPECT_EQ(client.post(leases, R"({"metadata":{"name":"l"},"spec":{}})").status, 409);
  // The Lease as created, with its resourceVersion: a Lease PUT without one is refused (422).
  EXPECT_EQ(client.put(leases + "/l", created.body).status, 200);
  EXPECT_EQ(client.del("/api/v1/namespaces/faultline/configmaps/c").status, 404);
  server.failNext("GET", "/version", 429);
  EXPECT_EQ(client.get("/version").status, 429);
  server.stop();
  EXPECT_EQ(client.get("/api/v1/namespaces/default/events").status, 0);

  const std::string text = metrics.render();
  for (const std::string line : {
           R"(faultline_kube_requests_total{verb="LIST",resource="nodes",code="200"} 1)",
           R"(faultline_kube_requests_total{verb="GET",resource="nodes",code="200"} 1)",
           R"(faultline_kube_requests_total{verb="GET",resource="nodes",code="404"} 2)",
           R"(faultline_kube_requests_total{verb="PATCH",resource="nodes/status",code="200"} 1)",
           R"(faultline_kube_requests_total{verb="POST",resource="leases",code="201"} 1)",
           R"(faultline_kube_requests_total{verb="POST",resource="leases",code="409"} 1)",
           R"(faultline_kube_requests_total{verb="PUT",resource="leases",code="200"} 1)",
           R"(faultline_kube_requests_total{verb="DELETE",resource="configmaps",code="404"} 1)",
           R"(faultline_kube_requests_total{verb="GET",resource="version",code="429"} 1)",
           R"(faultline_kube_requests_total{verb="LIST",resource="events",code="error"} 1)",
       }) {
    EXPECT_NE(text.find(line + "\n"), std::string::npos) << line << "\nin:\n" << text;
  }
  // Nothing else: 11 requests, 10 series.
  size_t series = 0;
  uint64_t requests = 0;
  for (size_t at = text.find("\nfaultline_kube_requests_total{"); at != std::string::npos;
       at = text.find("\nfaultline_kube_requests_total{", at + 1)) {
    ++series;
    const size_t end = text.find('\n', at + 1);
    requests += std::stoull(text.substr(text.rfind(' ', end) + 1, end - text.rfind(' ', end) - 1));
  }
  EXPECT_EQ(series, 10u) << text;
  EXPECT_EQ(requests, 11u) << text;
}

// A 401 retried with a re-read token is two requests, each counted with its own status.
TEST(KubeClientTest, CountsBothTriesOfA401) {
  FakeApiServer server;
  server.start();
  const std::string token_file =
      (std::filesystem::temp_directory_path() / ("fl-token-m-" + std::to_string(getpid())))
          .string();
  std::ofstream(token_file) << "t";
  Metrics metrics;
  KubeClient client(KubeConfig{server.url(), token_file, "", false}, &metrics);
  server.failNext("GET", "/api/v1/nodes/n1", 401);
  EXPECT_EQ(client.get("/api/v1/nodes/n1").status, 404);
  std::filesystem::remove(token_file);
  EXPECT_EQ(client.get("/api/v1/nodes/n1").status, 0);  // token unreadable: nothing sent

  const std::string text = metrics.render();
  EXPECT_NE(text.find(R"(faultline_kube_requests_total{verb="GET",resource="nodes",code="401"} 1)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"(faultline_kube_requests_total{verb="GET",resource="nodes",code="404"} 1)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find(R"(code="error")"), std::string::npos) << text;
}

TEST(KubeConfigTest, FromYaml) {
  const KubeConfig config = KubeConfig::fromYaml(
      YAML::Load("{server: 'https://k8s.example:6443/', token_file: /t, ca_file: /ca.pem, "
                 "insecure_skip_tls_verify: true}"),
      true);
  EXPECT_EQ(config.server, "https://k8s.example:6443");
  EXPECT_EQ(config.token_file, "/t");
  EXPECT_EQ(config.ca_file, "/ca.pem");
  EXPECT_TRUE(config.insecure_skip_tls_verify);
  EXPECT_EQ(config.qps, 5);
  EXPECT_EQ(config.burst, 10);
  const KubeConfig limited =
      KubeConfig::fromYaml(YAML::Load("{server: 'http://127.0.0.1:1', qps: 20, burst: 40}"), true);
  EXPECT_EQ(limited.qps, 20);
  EXPECT_EQ(limited.burst, 40);
  EXPECT_THROW(KubeConfig::fromYaml(YAML::Load("{server: /}"), true), YAML::ParserException);
  EXPECT_THROW(KubeConfig::fromYaml(YAML::Load("{server: 'k8s.example:6443'}"), true),
               YAML::ParserException);
  EXPECT_THROW(KubeConfig::fromYaml(YAML::Load("{server: 'http://127.0.0.1:1', burst: 0}"), true),
               std::runtime_error);
}

TEST(KubeConfigTest, EmptyServerOutsideAPodThrows) {
  unsetenv("KUBERNETES_SERVICE_HOST");
  EXPECT_THROW(KubeConfig::fromYaml(YAML::Load("{}"), true), std::runtime_error);
  EXPECT_THROW(KubeConfig::inCluster(), std::runtime_error);
  // Replay without a connection of the config's reads its other keys (its Kafka json topics)
  // outside a pod: the deploy configs name no server.
  const KubeConfig settings = KubeConfig::fromYaml(YAML::Load("{qps: 20, token_file: /t}"), false);
  EXPECT_EQ(settings.server, "");
  EXPECT_EQ(settings.token_file, "/t");
  EXPECT_EQ(settings.qps, 20);
}

}  // namespace
}  // namespace faultline
