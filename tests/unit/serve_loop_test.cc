// Serve's match workers (runMatchWorker): however many there are, and however their batches
// interleave, the correlator sees the batches in queue order and decides as one worker would.
#include "core/serve_loop.h"

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/commands.h"
#include "core/config.h"
#include "core/time.h"
#include "matcher/bank.h"
#include "tests/unit/helpers.h"

namespace faultline {
namespace {

// 60 batches, alternately of 2000 and 20 records, so that a worker with a short batch finds the
// long one before it still in its turn and goes on to the next. Every batch carries one Xid 79
// of one of 12 nodes, a second later per batch, and the first Xid 79 of a node taints it: a
// batch correlated before an earlier one would give a different time or evidence.
std::vector<Decision> decide(size_t workers) {
  CollectingSink sink;
  Pipeline pipeline(shippedBank(), Taint{}, {&sink}, workers);
  BatchQueue queue(SIZE_MAX);
  for (int b = 0; b < 60; ++b) {
    BatchQueue::Item item;
    RecordBatch& batch = item.batch;
    const int records = b % 2 == 0 ? 2000 : 20;
    const std::string node = "gpu-" + std::to_string(b % 12);
    for (int i = 0; i < records; ++i) {
      const std::string line =
          i == records / 2 ? "NVRM: Xid (PCI:0000:3b:00): 79, pid=" + std::to_string(b) +
                                 ", GPU has fallen off the bus."
                           : "systemd[1]: Started session " + std::to_string(b * 10000 + i) + ".";
      batch.records.push_back({(1000 + b) * kNanosPerSecond + i, batch.copy(node), batch.copy(line),
                               0, 0, StreamKind::kKernel});
    }
    item.bytes = batch.memoryBytes();
    EXPECT_TRUE(queue.tryPush(item));
  }
  queue.close();
  InOrder in_order;
  std::vector<uint64_t> after_seqs;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      runMatchWorker(w, queue, pipeline, in_order,
                     [&](const BatchQueue::Item& item, const BatchMatch&) {
                       std::lock_guard lock(mu);
                       after_seqs.push_back(item.seq);
                     });
    });
  }
  for (std::thread& t : threads) {
    t.join();
  }
  EXPECT_EQ(after_seqs.size(), 60U);  // every batch released once
  EXPECT_EQ(queue.depth().first, 0U);
  return sink.got;
}

TEST(ServeWorkers, AnyNumberDecidesAsOneInQueueOrder) {
  const std::vector<Decision> one = decide(1);
  ASSERT_EQ(one.size(), 12U);  // one taint per node
  for (size_t workers : {2, 3}) {
    const std::vector<Decision> many = decide(workers);
    ASSERT_EQ(many.size(), one.size()) << workers;
    for (size_t i = 0; i < one.size(); ++i) {
      EXPECT_EQ(many[i].node, one[i].node) << workers << " " << i;
      EXPECT_EQ(many[i].rule, one[i].rule) << workers << " " << i;
      EXPECT_EQ(many[i].time_ns, one[i].time_ns) << workers << " " << i;
      ASSERT_FALSE(many[i].evidence.empty());
      EXPECT_EQ(many[i].evidence[0].line, one[i].evidence[0].line) << workers << " " << i;
    }
  }
}

// What `faultline serve --config FILE` says of `text`: "" if it loads, else the refusal with the
// file's path cut to "FILE".
std::string refusal(const std::string& text) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("serve_config_test." + std::to_string(getpid())))
          .string();
  std::ofstream(path) << text;
  std::string what;
  try {
    loadServiceConfig(path, true);
  } catch (const std::runtime_error& e) {
    what = e.what();
    if (what.rfind(path, 0) == 0) {
      what.replace(0, path.size(), "FILE");
    }
  }
  std::filesystem::remove(path);
  return what;
}

// A key the service does not know, or a list where a path belongs, is refused with file, line and
// cause: read as absent it would serve on in silence with another setting (`kubernets:` never
// taints; `rules: [dir]` loads the embedded bank).
// The decisions of rules in dry run are counted apart: they were not applied.
TEST(DecisionCounter, CountsDryRunDecisionsApart) {
  Metrics metrics;
  DecisionCounter counter(&metrics);
  Decision d;
  counter.write(d);
  d.dry_run = true;
  counter.write(d);
  counter.write(d);
  const std::string page = metrics.render();
  EXPECT_NE(page.find("faultline_decisions_total{action=\"taint\"} 1\n"), std::string::npos)
      << page;
  EXPECT_NE(page.find("faultline_decisions_total{action=\"taint\",dry_run=\"true\"} 2\n"),
            std::string::npos)
      << page;
}

TEST(ServeConfig, RefusesUnknownKeysAndNonStringPaths) {
  EXPECT_EQ(refusal("http: {listen: \"127.0.0.1:0\"}\nmatch_threads: 2\nmax_lag: 5m\n"), "");
  EXPECT_EQ(refusal("http: {listen: \"127.0.0.1:0\"}\nmatch_thread: 4\n"),
            "FILE:2: match_thread: unknown key (rules, rules_reload, decisions, taint, kubernetes, "
            "kafka, http, queue_bytes, match_threads, max_lag)");
  EXPECT_EQ(refusal("kubernets: {}\nhttp: {listen: \"127.0.0.1:0\"}\n"),
            "FILE:1: kubernets: unknown key (rules, rules_reload, decisions, taint, kubernetes, "
            "kafka, http, queue_bytes, match_threads, max_lag)");
  EXPECT_EQ(refusal("http: {listen: \"127.0.0.1:0\"}\ntaint: {efect: NoExecute}\n"),
            "FILE:2: taint.efect: unknown key (key, value, effect)");
  EXPECT_EQ(refusal("http: {listen: \"127.0.0.1:0\"}\ntaint: NoExecute\n"),
            "FILE:2: taint: expected a mapping (key, value, effect)");
  EXPECT_EQ(refusal("http: {listen: \"127.0.0.1:0\"}\nrules:\n  - /etc/faultline/rules\n"),
            "FILE:3: rules: expected a string");
  EXPECT_EQ(refusal("decisions: {path: /x}\nhttp: {listen: \"127.0.0.1:0\"}\n"),
            "FILE:1: decisions: expected a string");
  EXPECT_EQ(refusal("http: {listen: \"127.0.0.1:0\"}\ntaint: {effect: [NoExecute]}\n"),
            "FILE:2: taint.effect: expected a string");
  EXPECT_EQ(refusal("http: {listen: \"127.0.0.1:0\"}\nmatch_threads: 2\nmatch_threads: 1\n"),
            "FILE:3: match_threads: repeated key");
  EXPECT_EQ(refusal("http: {listen: \"127.0.0.1:0\"}\ntaint: {key: a.b/c, key: d.e/f}\n"),
            "FILE:2: taint.key: repeated key");
}

// Every section checks its keys the same way (core/yaml_read.h): a typo in kubernetes.guard
// would otherwise lift a limit on how many nodes may be tainted.
TEST(ServeConfig, EverySectionRefusesUnknownAndRepeatedKeys) {
  const std::string k8s = "kubernetes:\n  server: http://127.0.0.1:1\n";
  const std::string http = "http:\n  listen: \"127.0.0.1:0\"\n";
  EXPECT_EQ(refusal(k8s + "  guard: {max_new: 1, window: 10m}\n  leader_election:\n" + http), "");
  EXPECT_EQ(refusal(k8s + "  guard:\n    max_tainted_precent: 5\n" + http),
            "FILE:4: kubernetes.guard.max_tainted_precent: unknown key (max_tainted, "
            "max_tainted_percent, max_new, window)");
  EXPECT_NE(refusal(k8s + "  dryrun: true\n" + http).find("FILE:3: kubernetes.dryrun: unknown key"),
            std::string::npos);
  EXPECT_NE(refusal(k8s + "  leader_election: {lease_duraton: 15s}\n" + http)
                .find("FILE:3: kubernetes.leader_election.lease_duraton: unknown key"),
            std::string::npos);
  EXPECT_EQ(refusal(k8s + "  qps: 5\n  qps: 50\n" + http), "FILE:4: kubernetes.qps: repeated key");
  EXPECT_EQ(refusal(http + "  thread: 4\n"),
            "FILE:3: http.thread: unknown key (listen, probe_listen, max_body_bytes, "
            "max_line_bytes, threads, token_file, labels)");
  EXPECT_EQ(refusal(http + "  labels: {node: [host], node: [nodename]}\n"),
            "FILE:3: http.labels.node: repeated key");
  EXPECT_EQ(refusal("kafka:\n  brokers: 127.0.0.1:1\n  topics: [{name: t, encodng: json}]\n"),
            "FILE:3: kafka.topics[0].encodng: unknown key (name, encoding, stream, node_header, "
            "fields)");
}

// A value of the wrong type or range names its line too, in every section (core/yaml_read.h).
TEST(ServeConfig, EverySectionRefusesBadValuesWithTheirLine) {
  const std::string http = "http:\n  listen: \"127.0.0.1:0\"\n";
  EXPECT_EQ(refusal(http + "queue_bytes: 0\n"), "FILE:3: queue_bytes: expected an integer >= 1");
  EXPECT_EQ(refusal(http + "match_threads: many\n"),
            "FILE:3: match_threads: expected an integer from 1 to 256");
  EXPECT_EQ(refusal(http + "max_lag: 2d\n"),
            "FILE:3: max_lag: expected a duration above 0 and of at most 1d (like 5m)");
  EXPECT_EQ(refusal(http + "max_lag: 0s\n"),
            "FILE:3: max_lag: expected a duration above 0 and of at most 1d (like 5m)");
  EXPECT_EQ(refusal(http + "rules_reload: often\n"),
            "FILE:3: rules_reload: expected a duration like 10m, got 'often'");
  // yaml-cpp reads a quote left open to the end of the file: `dry_run: true` would vanish into
  // the label, and the service taint for real.
  EXPECT_EQ(refusal("kubernetes:\n  opt_out_label: 'faultline.dev/opt-out\n  dry_run: true\n"),
            "FILE:2: a quote opened here is not closed");
  EXPECT_EQ(refusal(http + "decisions: \"/tmp/a \\\" b\"\nrules: 'it''s'\n"), "");
  // yaml-cpp skips a UTF-8 byte order mark, and counts its marks from after it.
  EXPECT_EQ(refusal("\xEF\xBB\xBFkubernetes: {server: \"http://127.0.0.1:1\", dry_run: true}\n"),
            "");
  EXPECT_EQ(refusal("\xEF\xBB\xBFkubernetes:\n  opt_out_label: 'x\n  dry_run: true\n"),
            "FILE:2: a quote opened here is not closed");
  EXPECT_EQ(refusal(http + "rules_reload: 0\n"), "");
  EXPECT_EQ(refusal(http + "rules_reload: 0s\n"), "");
  EXPECT_EQ(refusal(http + "rules_reload: 1m\n"), "");
  EXPECT_EQ(refusal(http + "  threads: -2\n"), "FILE:3: http.threads: expected an integer >= 1");
  EXPECT_EQ(refusal("http:\n  listen: 3100\n"),
            "FILE:2: http.listen: expected host:port, got '3100'");
  EXPECT_EQ(refusal(http + "  labels:\n    node: host\n"),
            "FILE:4: http.labels.node: expected a list of strings");
  EXPECT_EQ(refusal(http + "  labels:\n    kernel: [{name: job}]\n"),
            "FILE:4: http.labels.kernel[0]: expected {name: ..., value: ...}");
  const std::string kafka = "kafka:\n  brokers: 127.0.0.1:1\n";
  EXPECT_EQ(refusal(kafka + "  batch_timeout_ms: -1\n  topics: [{name: t}]\n"),
            "FILE:3: kafka.batch_timeout_ms: expected an integer >= 0");
  EXPECT_EQ(refusal(kafka + "  topics:\n    - name: t\n      encoding: xml\n"),
            "FILE:5: kafka.topics[0].encoding: expected raw, json, otlp_proto or otlp_json, got "
            "'xml'");
  EXPECT_EQ(refusal(kafka + "  topics:\n    - name: t\n      fields: {line: []}\n"),
            "FILE:5: kafka.topics[0].fields.line: expected a non-empty list of strings");
  EXPECT_EQ(refusal(kafka + "  topics:\n    - {name: t}\n    - {name: t}\n"),
            "FILE:5: kafka.topics[1].name: duplicate topic 't'");
  EXPECT_EQ(refusal("kafka:\n  topics: [{name: t}]\n"), "FILE:2: kafka.brokers: required");
  EXPECT_EQ(refusal(kafka), "FILE:2: kafka.topics: expected a non-empty list");
  const std::string k8s = "kubernetes:\n  server: http://127.0.0.1:1\n";
  EXPECT_EQ(refusal(k8s + "  burst: 0\n" + http),
            "FILE:3: kubernetes.burst: expected an integer >= 1");
  EXPECT_EQ(refusal(k8s + "  guard:\n    window: soon\n" + http),
            "FILE:4: kubernetes.guard.window: expected a duration like 10m, got 'soon'");
  EXPECT_EQ(refusal(k8s + "  guard:\n    max_tainted_percent: 150\n" + http),
            "FILE:4: kubernetes.guard.max_tainted_percent: expected a number from 0 to 100, got "
            "'150'");
  EXPECT_EQ(refusal(k8s + "  reapply_after: 0s\n" + http),
            "FILE:3: kubernetes.reapply_after: expected a duration like 10m, got '0s'");
  EXPECT_EQ(refusal(k8s + "  leader_election:\n    lease_duration: 1500ms\n" + http),
            "FILE:4: kubernetes.leader_election.lease_duration: must be whole seconds");
}

// A value that does not read as its type is refused, never replaced by the default: yaml-cpp's
// as<T>(fallback) took `dry_run: maybe` as false and `max_tainted: 1 node` as 10, so the service
// tainted nodes it was told to hold back from.
TEST(ServeConfig, AValueOfTheWrongTypeIsRefusedNotDefaulted) {
  const std::string k8s = "kubernetes:\n  server: http://127.0.0.1:1\n";
  const std::string http = "http:\n  listen: \"127.0.0.1:0\"\n";
  EXPECT_EQ(refusal(k8s + "  dry_run: maybe\n" + http),
            "FILE:3: kubernetes.dry_run: expected true or false, got 'maybe'");
  EXPECT_EQ(refusal(k8s + "  guard:\n    max_tainted: 1 node\n" + http),
            "FILE:4: kubernetes.guard.max_tainted: expected an integer >= 0");
  EXPECT_EQ(refusal(k8s + "  guard: {max_new: -1}\n" + http),
            "FILE:3: kubernetes.guard.max_new: expected an integer >= 0");
  EXPECT_EQ(
      refusal(k8s + "  qps: 5/s\n" + http).rfind("FILE:3: kubernetes.qps: expected a number", 0),
      0u);
  EXPECT_EQ(refusal(k8s + "  insecure_skip_tls_verify: [true]\n" + http),
            "FILE:3: kubernetes.insecure_skip_tls_verify: expected true or false, got ''");
  EXPECT_EQ(refusal(k8s + "  condition_type: {a: b}\n" + http),
            "FILE:3: kubernetes.condition_type: expected a string");
  EXPECT_EQ(refusal(k8s + "  eligible: \"a=b\"\n" + http),
            "FILE:3: kubernetes.eligible: expected a list of strings");
  EXPECT_EQ(refusal(k8s + "  dry_run_rules: [[xid-fatal]]\n" + http),
            "FILE:3: kubernetes.dry_run_rules[0]: expected a string");
  EXPECT_EQ(refusal(k8s + "  leader_election:\n    name: [a]\n" + http),
            "FILE:4: kubernetes.leader_election.name: expected a string");
  EXPECT_EQ(
      refusal(k8s + "  dry_run: yes\n  qps: 2.5\n  guard: {max_tainted_percent: 12.5}\n" + http),
      "");
  EXPECT_EQ(refusal(http + "taint: {effect: NoScheduled}\n"),
            "FILE:3: taint: taint effect 'NoScheduled' is not NoSchedule, PreferNoSchedule or "
            "NoExecute");
}

// In a pod, token_file and ca_file replace the service account's (a projected token mounted
// elsewhere); they were read only with a server.
TEST(ServeConfig, InAPodTheTokenFileIsTheConfiguredOne) {
  const std::string token =
      (std::filesystem::temp_directory_path() / ("serve_config_token." + std::to_string(getpid())))
          .string();
  std::ofstream(token) << "t\n";
  setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "1", 1);
  const ServiceConfig cfg = [&] {
    const std::string path = token + ".yaml";
    std::ofstream(path) << "kubernetes: {token_file: " << token << ", ca_file: /x/ca.crt}\n"
                        << "http: {listen: \"127.0.0.1:0\"}\n";
    ServiceConfig c = loadServiceConfig(path, true);
    std::filesystem::remove(path);
    return c;
  }();
  // The token is read by checkToken() (serve at start and before a restart, replay --apply), once
  // replay's --kube-token-file has replaced the config's: loading does not read it.
  EXPECT_EQ(
      refusal("kubernetes: {token_file: /nonexistent/token}\nhttp: {listen: \"127.0.0.1:0\"}\n"),
      "");
  KubeConfig unreadable;
  unreadable.token_file = "/nonexistent/token";
  try {
    unreadable.checkToken();
    ADD_FAILURE() << "an unreadable token file passed";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "cannot read the API token file /nonexistent/token");
  }
  if (cfg.kubernetes) {  // asserted below, once the environment is restored
    EXPECT_NO_THROW(cfg.kubernetes->checkToken());
  }
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  std::filesystem::remove(token);
  ASSERT_TRUE(cfg.kubernetes.has_value());
  EXPECT_EQ(cfg.kubernetes->server, "https://127.0.0.1:1");
  EXPECT_EQ(cfg.kubernetes->token_file, token);
  EXPECT_EQ(cfg.kubernetes->ca_file, "/x/ca.crt");
}

TEST(ServeConfig, ATaintKeyTheApiServerRefusesIsRefused) {
  // The key's prefix is a DNS subdomain of at most 253 characters (apimachinery qualified name).
  for (const std::string& key :
       {std::string("faultline..dev/faulty"), std::string("faultline.-dev/faulty"),
        std::string(300, 'a') + "/faulty", std::string("-x/faulty")}) {
    EXPECT_THROW(validateTaint({key, "true", "NoSchedule"}), std::runtime_error) << key;
  }
  EXPECT_NO_THROW(validateTaint({"faultline.dev/faulty", "true", "NoSchedule"}));
  EXPECT_NO_THROW(validateTaint({"a-b.c/x_y.z", "", "NoExecute"}));
}

TEST(ServeConfig, AMissingFileIsRefusedWithItsCause) {
  try {
    loadServiceConfig("/nonexistent/faultline.yaml", true);
    FAIL() << "loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/faultline.yaml: No such file or directory");
  }
}

// Overwrites the stack below its caller, where the frames of a function it called before were.
[[gnu::noinline]] void scribbleStack() {
  volatile unsigned char junk[1 << 16];
  for (volatile unsigned char& b : junk) {
    b = 0x5a;
  }
}

// Runs `faultline serve --config CONFIG`, then raises SIGTERM on a stack written over, and exits
// with serve's code.
[[noreturn]] void signalAfterServe(const std::string& config) {
  std::string args[] = {"faultline", "serve", "--config", config};
  char* argv[] = {args[0].data(), args[1].data(), args[2].data(), args[3].data(), nullptr};
  const int code = runCli(4, argv);
  scribbleStack();
  std::raise(SIGTERM);
  std::_Exit(code);
}

// Serve whose source does not start (its HTTP port taken) exits 2; a SIGTERM as the process
// ends (the kubelet stopping a pod that fails) finds nothing of that serve left to stop. Its
// handler requested the stop of serve's std::stop_source, gone with serve's frame: on the stack
// written over since, it crashed.
TEST(ServeCommand, ASignalAfterAFailedStartTouchesNothingGone) {
  const int taken = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(taken, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(bind(taken, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(taken, 1), 0);
  ASSERT_EQ(getsockname(taken, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string config = testing::TempDir() + "serve_taken_port.yaml";
  std::ofstream(config) << "decisions: /dev/null\nhttp: {listen: \"127.0.0.1:"
                        << ntohs(addr.sin_port) << "\"}\n";
  testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(signalAfterServe(config), testing::ExitedWithCode(2), "");
  close(taken);
  std::filesystem::remove(config);
}

}  // namespace
}  // namespace faultline
