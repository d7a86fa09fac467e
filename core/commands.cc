#include "core/commands.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include <CLI/CLI.hpp>
#include <malloc.h>
#include <spdlog/fmt/ranges.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "core/config.h"
#include "core/pipeline.h"
#include "core/rules_watch.h"
#include "core/serve_loop.h"
#include "core/time.h"
#include "ingest/kafka/kafka_source.h"
#include "ingest/push/push_source.h"
#include "matcher/correlator.h"
#include "sinks/decision_log/decision_log.h"
#include "sinks/kubernetes/taint_sink.h"

namespace faultline {
namespace {

// The rule files of `dir`, or the embedded bank's if `dir` is empty.
std::vector<RuleFile> ruleFiles(const std::string& dir) {
  return dir.empty() ? embeddedRuleFiles() : readRuleDir(dir);
}

std::shared_ptr<const Bank> loadRules(const std::string& dir) {
  return loadBank(ruleFiles(dir));
}

// replay --apply writes the end state of the archive: each node's last decision if it is a
// taint. Live, a fault the archive shows cleared was tainted and untainted hours apart; applied
// in one go the pair would only flip the node's condition, write two Events and count against
// guard.max_new, and the taints it refused would hold back the faults that have not cleared.
class EndState : public DecisionSink {
 public:
  void write(const Decision& d) override {
    if (d.action != Decision::Action::kSuspect) {  // a suspicion changes nothing on the node
      last_.insert_or_assign({d.node, d.dry_run}, d);
    }
  }
  // Writes to `sink` each node's last decision that is a taint, the earliest first: the guard
  // refuses the latest once a limit is reached, as live.
  void applyTo(DecisionSink& sink) const {
    std::vector<const Decision*> taints;
    for (const auto& entry : last_) {
      if (entry.second.action == Decision::Action::kTaint) {
        taints.push_back(&entry.second);
      }
    }
    std::stable_sort(taints.begin(), taints.end(),
                     [](const Decision* a, const Decision* b) { return a->time_ns < b->time_ns; });
    for (const Decision* d : taints) {
      sink.write(*d);
    }
  }

 private:
  // Keyed by node and dry run: a rule in dry run taints and untaints a node of its own.
  std::map<std::pair<std::string, bool>, Decision> last_;
};

struct ReplayArgs {
  std::vector<std::string> files;
  std::string format;
  std::string node;
  std::string boot_time;
  std::optional<int> year;
  std::string rules;
  std::string decisions;
  std::vector<std::string> kernel_labels;  // NAME=VALUE
  bool apply = false;
  std::string config;
  KubeConfig kube;       // explicit API server; empty server = in-cluster
  unsigned threads = 0;  // 0: one per core
};

// The archives `files` name: a file as given ("-" too); a directory's regular files, in its
// subdirectories too, sorted, but for hidden ones (.DS_Store, a checkout's .git) and those of
// hidden directories; anything else in it (a link to a directory, a dangling link, a FIFO) is
// skipped with a warning. Throws
// std::runtime_error naming a directory that cannot be listed, or holds no such file: read in part,
// or not at all, it would decide as if the files it hides were healthy nodes'.
std::vector<ArchiveInput> archiveInputs(const std::vector<std::string>& files) {
  namespace fs = std::filesystem;
  std::vector<ArchiveInput> inputs;
  for (const std::string& f : files) {
    std::error_code ec;
    if (f == "-" || !fs::is_directory(f, ec)) {
      inputs.push_back({f, "", false});
      continue;
    }
    std::vector<std::string> found;
    try {
      for (auto it = fs::recursive_directory_iterator(f); it != fs::recursive_directory_iterator();
           ++it) {
        if (it->path().filename().string().starts_with('.')) {
          if (it->is_directory()) {
            it.disable_recursion_pending();
          }
        } else if (it->is_regular_file()) {
          found.push_back(it->path().string());
        } else if (it->is_symlink() || !it->is_directory()) {
          // A link to a directory is not followed: a link back up would read the tree again and
          // again. A dangling link, a FIFO or a socket holds no archive.
          spdlog::warn(
              "replay: skipping {}: not a regular file (links to directories are not "
              "followed)",
              it->path().string());
        }
      }
    } catch (const fs::filesystem_error& e) {
      throw std::runtime_error("cannot list " + e.path1().string() + ": " + e.code().message());
    }
    if (found.empty()) {
      throw std::runtime_error(f + ": a directory without files to replay");
    }
    std::sort(found.begin(), found.end());
    for (std::string& name : found) {
      inputs.push_back({std::move(name), "", false});
    }
  }
  return inputs;
}

// Splits inputs into `n` shares of about equal bytes (largest first to the lightest share), so
// that each thread of a replay reads and matches its own files.
std::vector<std::vector<ArchiveInput>> shareInputs(std::vector<ArchiveInput> inputs, size_t n) {
  auto size = [](const ArchiveInput& in) -> uint64_t {
    std::error_code ec;
    const uint64_t s = in.from_memory ? in.bytes.size() : std::filesystem::file_size(in.name, ec);
    return ec ? 0 : s;
  };
  std::vector<std::pair<uint64_t, size_t>> order;
  for (size_t i = 0; i < inputs.size(); ++i) {
    order.emplace_back(size(inputs[i]), i);
  }
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<std::vector<ArchiveInput>> shares(n);
  std::vector<uint64_t> load(n);
  for (const auto& [bytes, i] : order) {
    const size_t s = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[s] += bytes;
    shares[s].push_back(std::move(inputs[i]));
  }
  return shares;
}

int replay(const ReplayArgs& a) {
  ArchiveOptions opts;
  if (!a.format.empty()) {
    Format f{};
    if (!parseFormatName(a.format, &f)) {
      std::cerr << "faultline: unknown --format " << a.format << "\n";
      return 2;
    }
    opts.format = f;
  }
  opts.parse.node = a.node;
  for (const std::string& kv : a.kernel_labels) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "faultline: --kernel-label wants NAME=VALUE, got " << kv << "\n";
      return 2;
    }
    opts.parse.streams.kernel_labels.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  if (!a.boot_time.empty()) {
    int64_t ns = 0;
    if (!parseRfc3339(a.boot_time, &ns)) {
      std::cerr << "faultline: --boot-time is not an RFC 3339 time: " << a.boot_time << "\n";
      return 2;
    }
    opts.parse.boot_time_ns = ns;
  }
  if (a.year) {
    // int64 nanoseconds since the epoch span 1678..2261, as for RFC 3339 stamps.
    if (*a.year < 1678 || *a.year > 2261) {
      std::cerr << "faultline: --year must be within 1678..2261, got " << *a.year << "\n";
      return 2;
    }
    opts.parse.year = *a.year;
  } else {
    // `Mon DD` syslog stamps carry no year: a file's first is taken not in the future
    // (firstStampYear), unless --year pins it.
    opts.parse.now_ns = nowNanos();
    opts.parse.year = std::stoi(formatRfc3339(*opts.parse.now_ns).substr(0, 4));
  }
  Taint taint;
  std::optional<KubeConfig> kube;
  TaintSinkOptions sink_options;
  std::string rules_dir = a.rules;
  if (!a.config.empty()) {
    // Outside a pod too, where the connection is not the config's: no --apply, or --kube-server.
    const ServiceConfig cfg = loadServiceConfig(a.config, a.apply && a.kube.server.empty());
    taint = cfg.taint;
    kube = cfg.kubernetes;
    sink_options = cfg.taint_sink;
    if (rules_dir.empty()) {
      rules_dir = cfg.rules_dir;
    }
    // The json format reads records as the config's Kafka json topics do: an archive of such a
    // topic then replays as the service read it.
    const KafkaTopicConfig* json_topic = nullptr;
    if (cfg.kafka) {
      for (const KafkaTopicConfig& t : cfg.kafka->topics) {
        if (t.encoding != KafkaEncoding::kJson) {
          continue;
        }
        if (json_topic != nullptr &&
            (t.fields != json_topic->fields || t.stream != json_topic->stream)) {
          std::cerr << "faultline: " << a.config << ": kafka topics " << json_topic->name << " and "
                    << t.name << " read json with different fields or stream: replay "
                    << "each topic's archive with a config of its own\n";
          return 2;
        }
        json_topic = &t;
      }
    }
    if (json_topic != nullptr) {
      opts.parse.json_fields = json_topic->fields;
      opts.parse.json_stream = json_topic->stream;
    }
  }
  if (!a.kube.server.empty()) {
    kube = a.kube;  // the flags name the whole connection
  } else if (a.apply) {
    if (!kube) {
      kube = KubeConfig::inCluster();
    }
    // As the config's token_file and ca_file replace the pod's, these replace either.
    kube->token_file = a.kube.token_file.empty() ? kube->token_file : a.kube.token_file;
    kube->ca_file = a.kube.ca_file.empty() ? kube->ca_file : a.kube.ca_file;
  }
  if (a.apply) {
    kube->checkToken();
  }
  const auto bank = loadRules(rules_dir);
  DecisionLog log(a.decisions);
  EndState end_state;
  std::vector<DecisionSink*> sinks = {&log};
  std::unique_ptr<TaintSink> taints;
  if (a.apply) {
    TaintSink::Hooks hooks;
    hooks.on_suppressed = [&log](const Decision& d) { log.write(d); };
    hooks.on_resumed = [&log](const Decision& d) { log.write(d); };
    taints = std::make_unique<TaintSink>(*kube, sink_options, std::move(hooks));
    sinks.push_back(&end_state);
  }
  std::vector<ArchiveInput> inputs = archiveInputs(a.files);
  if (a.files.empty()) {
    inputs = embeddedSample();
    spdlog::info("no archive given: replaying the embedded sample ({} files)", inputs.size());
  }
  // Each thread reads and matches its share of the files into its own collector; the hits then
  // meet in one pipeline, sorted by event time, so the decisions do not depend on the threads.
  // Standard input is read by one thread.
  const bool stdin_input = std::any_of(inputs.begin(), inputs.end(),
                                       [](const ArchiveInput& in) { return in.name == "-"; });
  const size_t threads =
      stdin_input
          ? 1
          : std::min<size_t>(
                inputs.size(),
                a.threads != 0 ? a.threads : std::max(1U, std::thread::hardware_concurrency()));
  // Numbered by name: hits of one node at one time are then taken in the same order whatever the
  // order of the arguments or the threads.
  std::vector<size_t> by_name(inputs.size());
  std::iota(by_name.begin(), by_name.end(), 0);
  std::stable_sort(by_name.begin(), by_name.end(),
                   [&](size_t x, size_t y) { return inputs[x].name < inputs[y].name; });
  for (size_t k = 0; k < by_name.size(); ++k) {
    inputs[by_name[k]].number = static_cast<uint32_t>(k);
  }
  const auto start = std::chrono::steady_clock::now();
  Pipeline pipeline(bank, taint, sinks, 1, 0, {}, sink_options.dryRunRules(*bank));
  std::vector<std::unique_ptr<Pipeline>> collectors;
  std::vector<std::unique_ptr<ArchiveSource>> sources;
  for (std::vector<ArchiveInput>& share : shareInputs(std::move(inputs), threads)) {
    collectors.push_back(std::make_unique<Pipeline>(bank, taint, std::vector<DecisionSink*>{}));
    sources.push_back(std::make_unique<ArchiveSource>(std::move(share), opts));
  }
  std::vector<std::exception_ptr> errors(threads);
  {
    std::vector<std::jthread> workers;
    for (size_t t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        try {
          sources[t]->run(
              [&](RecordBatch& batch) {
                collectors[t]->collect(batch, sources[t]->current().number);
              },
              std::stop_token());
        } catch (...) {
          errors[t] = std::current_exception();
        }
      });
    }
  }
  for (const std::exception_ptr& e : errors) {
    if (e) {
      std::rethrow_exception(e);
    }
  }
  ArchiveStats s;
  uint64_t hits = 0;
  // A file that fails is reported after the decisions of all that could be read.
  std::vector<ArchiveError> failed;
  std::vector<ArchiveSource::SinceBoot> since_first_stamp;
  for (size_t t = 0; t < threads; ++t) {
    failed.insert(failed.end(), sources[t]->errors().begin(), sources[t]->errors().end());
    since_first_stamp.insert(since_first_stamp.end(), sources[t]->sinceFirstStamp().begin(),
                             sources[t]->sinceFirstStamp().end());
    const ArchiveStats& st = sources[t]->stats();
    s.files += st.files;
    s.records += st.records;
    s.lines += st.lines;
    s.malformed += st.malformed;
    s.bytes_text += st.bytes_text;
    hits += collectors[t]->matcherStats().hits;
    pipeline.absorb(*collectors[t]);
    for (const uint32_t input : sources[t]->newestFirst()) {
      pipeline.newestFirst(input);
    }
  }
  pipeline.finishReplay();
  if (taints) {
    end_state.applyTo(*taints);
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info(
      "replayed {} files with {} threads: {} lines ({} malformed), {:.1f} MB text, {} hits, {} "
      "decisions in {:.3f}s ({:.0f} lines/s, {:.1f} MB/s)",
      s.files, threads, s.lines, s.malformed, static_cast<double>(s.bytes_text) / 1e6, hits,
      pipeline.decisions(), secs, static_cast<double>(s.lines) / secs,
      static_cast<double>(s.bytes_text) / 1e6 / secs);
  if (!since_first_stamp.empty()) {
    // Decisions of one node's log stand, but such a file's times meet no other file's: a pod
    // log's NCCL timeouts, stamped in 2026, find no kernel line of 1970 to corroborate them.
    std::vector<std::string> names;
    // Two such files of one node (dmesg and its rotation dmesg.0: two boots) meet each other's,
    // wrongly: both start at 1970, so a later boot's recovery can come before an earlier boot's
    // fault.
    std::map<std::string, std::vector<std::string>> by_node;
    for (const ArchiveSource::SinceBoot& f : since_first_stamp) {
      names.push_back(f.name);
      if (!f.node.empty()) {
        by_node[f.node].push_back(f.name);
      }
    }
    std::sort(names.begin(), names.end());
    const size_t files = names.size();
    names.resize(std::min<size_t>(files, 5));
    spdlog::warn(
        "{} file(s) stamped in seconds since boot, and no --boot-time: each one's times count "
        "from its first line, at 1970-01-01T00:00:00Z, and meet no other file's (cluster "
        "windows, corroboration): {}{}",
        files, fmt::join(names, ", "), files > names.size() ? ", ..." : "");
    for (auto& [node, of_node] : by_node) {
      if (of_node.size() > 1) {
        std::sort(of_node.begin(), of_node.end());
        spdlog::warn(
            "node {}: {} files stamped since boot overlap, each from 1970-01-01T00:00:00Z ({}): "
            "their boots are read as one, so a recovery at a later boot may precede an earlier "
            "boot's fault; replay each boot's file alone, with its --boot-time if known",
            node, of_node.size(), fmt::join(of_node, ", "));
      }
    }
  }
  std::sort(failed.begin(), failed.end(),
            [](const ArchiveError& x, const ArchiveError& y) { return x.number < y.number; });
  for (const ArchiveError& e : failed) {
    std::cerr << "faultline: " << e.message << "\n";
  }
  if (!failed.empty()) {
    std::cerr << "faultline: replay incomplete: " << failed.size()
              << " file(s) could not be read in full; the decisions come from the lines read\n";
  }
  uint64_t not_applied = 0;
  if (taints) {
    taints->stop();  // its last refusals reach the log before the log's state is read
    const TaintSink::Counters c = taints->counters();
    not_applied = c.failed + c.not_applied;
    if (not_applied != 0) {
      std::cerr << "faultline: --apply incomplete: " << c.failed << " decision(s) failed, "
                << c.not_applied << " deferred (the API server did not answer) and not applied\n";
    }
  }
  return failed.empty() && log.errors() == 0 && not_applied == 0 ? 0 : 2;
}

int rulesTest(const std::string& dir) {
  const auto bank = loadRules(dir);  // checks every example (loadBank): a failing one throws
  size_t examples = 0;
  for (const Signature& sig : bank->signatures) {
    examples += sig.match_examples.size() + sig.no_match_examples.size();
  }
  std::cout << "rules test: " << bank->signatures.size() << " signatures, " << bank->rules.size()
            << " rules, " << examples << " example lines, all pass\n";
  return 0;
}

// /readyz: the API server answers (any HTTP status: it is reachable), checked at most every 10 s.
std::function<bool()> sinksReady(const ServiceConfig& cfg, Metrics* metrics) {
  if (!cfg.kubernetes) {
    return [] { return true; };
  }
  struct Probe {
    std::mutex mu;
    KubeClient client;
    int64_t checked_ns = 0;
    bool ok = false;
    Probe(const KubeConfig& c, Metrics* m) : client(c, m) {}
  };
  auto probe = std::make_shared<Probe>(*cfg.kubernetes, metrics);
  return [probe] {
    std::lock_guard lock(probe->mu);
    const int64_t now = nowNanos();
    if (probe->checked_ns == 0 || now - probe->checked_ns > 10 * kNanosPerSecond) {
      probe->ok = probe->client.get("/version").status != 0;
      probe->checked_ns = now;
    }
    return probe->ok;
  };
}

std::stop_source* g_stop = nullptr;
// Set by SIGTERM or SIGINT: the service is to exit, even if new rules also stopped it. Atomic,
// not volatile sig_atomic_t: the taint sink's thread reads it (TaintSink::Hooks::stopping), and
// the handler may run on any thread; a lock-free atomic is also safe in a signal handler.
std::atomic<bool> g_signalled{false};
static_assert(std::atomic<bool>::is_always_lock_free);
extern "C" void onSignal(int /*sig*/) {
  g_signalled = true;
  if (g_stop != nullptr) {
    g_stop->request_stop();  // lock-free: sets an atomic flag and runs no callbacks here
  }
}

// serve()'s return when the rule directory changed to files that load: runCli executes the binary
// again, which loads them.
constexpr int kRestartOnNewRules = -1;

// The signals that stop serve (onSignal).
const sigset_t kStopSignals = [] {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGTERM);
  sigaddset(&s, SIGINT);
  return s;
}();

// Reads the rule directory again every `period` until `token` is stopped (RulesWatch): files that
// do not load are logged and shown in faultline_rules_last_reload_successful, and change nothing;
// files that load as another bank are put in *new_files, set `new_rules` and stop the service, to
// be started again on them.
void watchRules(RulesWatch watch, const std::string& dir, std::chrono::nanoseconds period,
                Metrics& metrics, std::atomic<bool>& new_rules, std::vector<RuleFile>* new_files,
                std::stop_source& stop, const std::stop_token& token) {
  std::mutex mu;
  std::condition_variable_any stopped;  // only a stop request wakes it before the period ends
  std::unique_lock lock(mu);
  for (;;) {
    stopped.wait_for(lock, token, period, [] { return false; });
    if (token.stop_requested()) {
      return;
    }
    const RulesWatch::Check c = watch.check();
    if (!c.changed) {
      continue;
    }
    // The gauge is set before the line is logged: who reads the line finds the gauge set.
    switch (c.state) {
      case RulesWatch::State::kRefused:
        metrics.set("faultline_rules_last_reload_successful", "", 0);
        spdlog::error("rules: {} changed and does not load; the running bank stays:\n{}", dir,
                      watch.message());
        break;
      case RulesWatch::State::kRunning:
        metrics.set("faultline_rules_last_reload_successful", "", 1);
        if (watch.message().empty()) {
          spdlog::info("rules: {} holds the running bank again", dir);
        } else {
          spdlog::info("rules: {} changed, {}: the running bank stays", dir, watch.message());
        }
        break;
      case RulesWatch::State::kNew:
        spdlog::warn("rules: {} changed and loads ({}): restarting on it", dir, watch.message());
        *new_files = watch.files();
        new_rules = true;
        stop.request_stop();
        return;
    }
  }
}

// Executes this binary again with the same arguments and environment: the process keeps its pid,
// so a container is not restarted. Returns only if that fails, having logged why.
void execAgain(char** argv) {
  spdlog::default_logger()->flush();
  std::fflush(nullptr);
  ::execv("/proc/self/exe", argv);
  spdlog::error("executing /proc/self/exe again: {}", std::strerror(errno));
}

// Returns kRestartOnNewRules with the files to restart on in *restart_files.
int serve(const std::string& config_path, std::vector<RuleFile>* restart_files) {
  const ServiceConfig cfg = loadServiceConfig(config_path, true);
  if (cfg.kubernetes) {
    cfg.kubernetes->checkToken();
  }
  if (!cfg.kafka && !cfg.http) {
    std::cerr << "faultline: " << config_path << ": no source configured (kafka, http)\n";
    return 2;
  }
  // After a restart on new rules, the files the watch loaded (handOverRuleFiles).
  std::optional<std::vector<RuleFile>> handed = takeHandedOverRuleFiles();
  std::vector<RuleFile> rule_files = handed ? std::move(*handed) : ruleFiles(cfg.rules_dir);
  const auto bank = loadBank(rule_files);
  spdlog::info("loaded {} signatures and {} rules from {}{}", bank->signatures.size(),
               bank->rules.size(), cfg.rules_dir.empty() ? "the embedded bank" : cfg.rules_dir,
               handed ? ", as the restart found them" : "");
  DecisionLog log(cfg.decisions_path);
  Metrics metrics;
  DecisionCounter counter(&metrics);
  // The offsets of a batch whose decision line failed are stored all the same (the taint went on
  // to the Kubernetes API): the failure must show where operators look.
  metrics.declare("faultline_decision_log_errors_total", Metrics::Type::kCounter,
                  "Decision log writes that failed (a full disk): a decision line may be lost");
  metrics.onRender([&log](Metrics& m) {
    m.set("faultline_decision_log_errors_total", "", static_cast<double>(log.errors()));
  });
  // Before the taint sink, whose first LIST restores taints into it (on_restored): it outlives
  // the sink's thread.
  Pipeline pipeline(bank, cfg.taint, {&log, &counter}, cfg.match_threads, cfg.max_lag_ns, nowNanos,
                    cfg.taint_sink.dryRunRules(*bank));
  // A new consumer group reads its topics' retention: faults long cleared, whose decisions a
  // leader would write again (a healthy node tainted, the breaker tripped by old faults). The
  // replica seeks the Lease once it has caught up; meanwhile its decisions are held as a
  // follower's, and the last one per node is checked when it leads.
  std::atomic<bool> kafka_caught_up = false;
  std::unique_ptr<LeaderElector> elector;
  std::unique_ptr<TaintSink> taints;
  if (cfg.kubernetes) {
    TaintSink::Hooks hooks;
    // A refused taint is a decision too: logged and counted (faultline_decisions_total).
    hooks.on_suppressed = [&log, &counter](const Decision& d) {
      log.write(d);
      counter.write(d);
    };
    hooks.on_resumed = [&log](const Decision& d) { log.write(d); };  // counted when decided
    if (cfg.leader_election) {
      std::function<bool()> may_lead;
      if (cfg.kafka) {
        may_lead = [&kafka_caught_up] { return kafka_caught_up.load(); };
      }
      elector = std::make_unique<LeaderElector>(*cfg.kubernetes, *cfg.leader_election,
                                                std::function<void(bool)>{}, std::move(may_lead),
                                                &metrics);
      hooks.leader_term = [e = elector.get()] { return e->term(); };
      hooks.leading_until = [e = elector.get()] { return e->leadingUntil(); };
    }
    // Taints set before this start: the correlator lifts them when their nodes recover.
    hooks.on_restored = [&pipeline](const std::string& node, const std::string& rule,
                                    int64_t time_ns, uint64_t seen) {
      pipeline.restoreTaint(node, rule, time_ns, seen);
    };
    hooks.on_lifted = [&pipeline](const std::string& node, uint64_t seen) {
      pipeline.liftTaint(node, seen);
    };
    // So that a SIGTERM during an API server outage logs the decisions left within the pod's
    // grace period rather than retrying them until the SIGKILL. Not on a restart on new rules,
    // which no SIGKILL follows: it tries them as when running.
    hooks.stopping = [] { return g_signalled.load(); };
    taints =
        std::make_unique<TaintSink>(*cfg.kubernetes, cfg.taint_sink, std::move(hooks), &metrics);
    pipeline.addSink(taints.get());
  } else {
    spdlog::warn("no kubernetes section: decisions are logged, no taint is applied");
  }
  if (taints) {
    metrics.declare("faultline_taint_outcomes_total", Metrics::Type::kCounter,
                    "Kubernetes taint sink outcomes (sinks/kubernetes/taint_sink.h Counters)");
    metrics.declare("faultline_breaker_tripped", Metrics::Type::kGauge,
                    "The blast-radius breaker: 1 tripped (no taint until it is reset), 0 closed, "
                    "-1 state unknown (its ConfigMap not read, as by a follower, or unreadable: "
                    "no taint meanwhile)");
    metrics.declare("faultline_leader", Metrics::Type::kGauge,
                    "1 while this replica leads (it writes taints; always, without leader "
                    "election), 0 while it follows: tells a leader's breaker state -1 (unreadable, "
                    "no taint) from a follower's");
    metrics.declare("faultline_taint_waiting", Metrics::Type::kGauge,
                    "Taint decisions waiting, by state: deferred (the API server did not take "
                    "them yet), refused (guard or breaker, until a reset), ineligible (the node "
                    "not listed eligible yet)");
    metrics.onRender([t = taints.get(), e = elector.get()](Metrics& m) {
      m.set("faultline_leader", "", e == nullptr || e->isLeader() ? 1 : 0);
      const TaintSink::Waiting w = t->waiting();
      for (const auto& [state, n] :
           {std::pair{"deferred", w.deferred}, std::pair{"refused", w.refused},
            std::pair{"ineligible", w.ineligible}}) {
        m.set("faultline_taint_waiting", Metrics::label("state", state), static_cast<double>(n));
      }
      m.set("faultline_breaker_tripped", "", t->breakerState());
      const TaintSink::Counters c = t->counters();
      for (const auto& [outcome, n] :
           {std::pair{"applied", c.applied}, std::pair{"untainted", c.untainted},
            std::pair{"already_present", c.already_present},
            std::pair{"conflicts_retried", c.conflicts_retried},
            std::pair{"suppressed", c.suppressed}, std::pair{"dry_run", c.dry_run},
            std::pair{"deferred", c.deferred}, std::pair{"failed", c.failed}}) {
        m.set("faultline_taint_outcomes_total", Metrics::label("outcome", outcome),
              static_cast<double>(n));
      }
    });
  }
  // Only with leader election, where it gates the Lease and readiness: the check walks every
  // partition between batches until caught up.
  ServeSources sources{.kafka = cfg.kafka,
                       .http = cfg.http,
                       .queue_bytes = cfg.queue_bytes,
                       .kafka_caught_up = elector ? &kafka_caught_up : nullptr};
  if (sources.kafka) {
    // Partitions read in step within half of max_lag: none's nodes are found silent because
    // another partition of the backlog was fetched ahead (KafkaConfig::max_skew_ns).
    sources.kafka->max_skew_ns = cfg.max_lag_ns / 2;
  }
  if (elector && sources.kafka) {
    // Every replica reads every partition (its own consumer group), so a follower holds the
    // same correlation windows as the leader and takes over without a gap (README "Deploy").
    sources.kafka->group_id += "-" + elector->identity();
  }
  if (elector && sources.http) {
    // Pushes that reach a follower (before its endpoint leaves the Service) go to the leader on
    // retry. Taken when no one else holds the Lease, or when this replica cannot read it: a
    // refusal then would only fill the shippers' finite retry buffers.
    sources.leader_elsewhere = [e = elector.get()] {
      return e->isLeader() ? "" : e->otherHolder();
    };
  }
  std::stop_source stop;
  // g_stop is cleared on every way out of serve, exceptions included, before `stop` is gone: a
  // SIGTERM after that (the process ending on a source that did not start) must not touch it.
  struct ClearStop {
    ClearStop(const ClearStop&) = delete;
    ClearStop& operator=(const ClearStop&) = delete;
    ClearStop(ClearStop&&) = delete;
    ClearStop& operator=(ClearStop&&) = delete;
    ClearStop() = default;
    ~ClearStop() { g_stop = nullptr; }
  } clear_stop;
  g_stop = &stop;
  std::signal(SIGTERM, onSignal);
  std::signal(SIGINT, onSignal);
  // runCli blocks them before serve, and a restart on new rules executes this binary with them
  // blocked: one sent meanwhile is pending, and is taken here.
  pthread_sigmask(SIG_UNBLOCK, &kStopSignals, nullptr);
  std::function<bool()> ready = sinksReady(cfg, &metrics);
  if (elector && sources.http && !sources.kafka) {
    // A Service sends pushes to ready pods only: so to the leader, the one replica that writes.
    // A follower's lines would be matched but never tainted (README "Deploy"). With Kafka every
    // replica consumes every partition, so a follower is ready to take over once caught up.
    ready = [sinks = std::move(ready), e = elector.get()] { return e->isLeader() && sinks(); };
  } else if (elector && sources.kafka) {
    // Ready once caught up, so that a rolling update replaces the next old replica only when this
    // one could lead: else every caught-up replica could be gone while the new ones read the
    // topics' retention, and none would lead meanwhile.
    ready = [sinks = std::move(ready), &kafka_caught_up] { return kafka_caught_up && sinks(); };
  }
  std::atomic<bool> new_rules = false;
  std::jthread rules_watch;
  if (!cfg.rules_dir.empty() && cfg.rules_reload_ns > 0) {
    metrics.declare("faultline_rules_last_reload_successful", Metrics::Type::kGauge,
                    "1 while the rule directory holds the bank this process runs, 0 while it "
                    "holds files that do not load (the log says why)");
    metrics.set("faultline_rules_last_reload_successful", "", 1);
    rules_watch = std::jthread([&, files = std::move(rule_files)](const std::stop_token& token) {
      // The restart reads the configuration again, and refuses to start if it no longer loads,
      // if the correlator refuses the bank with it (a dry_run_rules id the bank lacks), or if it
      // cannot open its decisions file or listen where it says: such a bank is refused here,
      // where the running service goes on.
      auto runnable = [&config_path, &cfg](const std::shared_ptr<const Bank>& b) {
        const ServiceConfig next = loadServiceConfig(config_path, true);
        if (next.kubernetes) {
          next.kubernetes->checkToken();
        }
        const Correlator correlator(b, next.taint, next.max_lag_ns,
                                    next.taint_sink.dryRunRules(*b));
        if (next.decisions_path != cfg.decisions_path) {
          const DecisionLog opened(next.decisions_path);
        }
        if (next.http) {
          checkListen(*next.http, cfg.http ? &*cfg.http : nullptr);
        }
      };
      watchRules(RulesWatch(cfg.rules_dir, files, runnable), cfg.rules_dir,
                 std::chrono::nanoseconds(cfg.rules_reload_ns), metrics, new_rules, restart_files,
                 stop, token);
    });
  }
  runServe(sources, pipeline, metrics, ready, stop.get_token());
  if (rules_watch.joinable()) {
    rules_watch.request_stop();
    rules_watch.join();
  }
  uint64_t lines = 0;
  uint64_t hits = 0;
  for (size_t w = 0; w < pipeline.matchers(); ++w) {
    lines += pipeline.matcherStats(w).lines;
    hits += pipeline.matcherStats(w).hits;
  }
  spdlog::info("stopped: {} lines, {} hits, {} decisions", lines, hits, pipeline.decisions());
  return new_rules && !g_signalled ? kRestartOnNewRules : 0;
}

}  // namespace

void keepFreedMemory() {
  // Batches of a few hundred KiB (a push body's decoding, over 10 MiB for a large OTLP JSON one)
  // are allocated and freed thousands of times a second, often on different threads. With glibc's
  // defaults an arena gives its free top back to the kernel once it passes 128 KiB, and larger
  // blocks are mapped one by one until a freed one raises both thresholds, so each batch faulted
  // the same pages in again, and on two CPUs each unmap also stopped the other CPU to flush its
  // TLB. Starting at the ceiling glibc's own adjustment reaches cut serve's page faults 3 to 25
  // times and raised lines per CPU-second by up to a quarter (bench/README.md, "Memory reuse").
  // Freed memory stays mapped for the next batch, so resident memory falls back more slowly after
  // a flood.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

int runCli(int argc, char** argv) {
  CLI::App app{"faultline: finds faulty GPU/accelerator nodes in kernel and pod logs"};
  app.require_subcommand(1);

  ReplayArgs ra;
  CLI::App* rp = app.add_subcommand(
      "replay", "Replay archived logs (plain, .gz, .zst; - for stdin) through the engine");
  rp->add_option("files", ra.files,
                 "Archive files, and directories of them (hidden files skipped); none: the "
                 "embedded sample");
  rp->add_option("--format", ra.format,
                 "Force a format: dmesg, syslog, journal-json, otlp-json, loki-jsonl, container, "
                 "json");
  rp->add_option(
      "--node", ra.node,
      "Node of dmesg and container files, and of json records naming none (dmesg default: file "
      "name without extensions, log words, dates)");
  rp->add_option("--boot-time", ra.boot_time,
                 "Boot time (RFC 3339) for [uptime] stamps (dmesg, journalctl -o short-monotonic); "
                 "default: first line = epoch");
  rp->add_option(
      "--year", ra.year,
      "Year of each file's first syslog 'Mon DD' or dmesg --reltime '[MonDD HH:MM]' stamp, "
      "1678..2261 (default: the latest of next, this and last year that puts the stamp no more "
      "than a day in the future); a later stamp whose month goes back over 6 months (Dec -> "
      "Jan) is in the next year");
  rp->add_option("--rules", ra.rules, "Rule directory (default: the embedded bank)");
  rp->add_option("--decisions", ra.decisions, "Decision log file (default: stdout)");
  // One NAME=VALUE per --kernel-label: CLI11 lets a list option take every argument after it, so
  // `--kernel-label a=b FILE` took the file for a label.
  rp->add_option("--kernel-label", ra.kernel_labels,
                 "NAME=VALUE: records with this label are kernel streams (repeatable)")
      ->allow_extra_args(false);
  rp->add_flag("--apply", ra.apply, "Also apply taints through the Kubernetes API");
  rp->add_option("--kube-server", ra.kube.server, "API server URL (default: in-cluster)");
  rp->add_option("--kube-token-file", ra.kube.token_file, "Bearer token file");
  rp->add_option("--kube-ca-file", ra.kube.ca_file, "CA bundle to verify the API server");
  rp->add_option("--config", ra.config,
                 "Service config for taint and kubernetes settings, and its Kafka json topics' "
                 "fields and stream for the json format");
  rp->add_option("--threads", ra.threads,
                 "Threads reading and matching files (default 0: one per core, at most one per "
                 "file); decisions do not depend on it");

  std::string config;
  CLI::App* sv = app.add_subcommand("serve", "Run the live service");
  sv->add_option("--config", config, "Service configuration (YAML)")->required();

  std::string rules_dir;
  CLI::App* rules = app.add_subcommand("rules", "Signature bank tools");
  rules->require_subcommand(1);
  CLI::App* rt = rules->add_subcommand("test", "Check every example line of the bank");
  rt->add_option("dir", rules_dir, "Rule directory (default: the embedded bank)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11's own codes (104 a bad value, 106 a missing option, ...) are not runCli's: a usage
    // error exits 2 like any refused configuration; --help still exits 0.
    return app.exit(e) == 0 ? 0 : 2;
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("faultline"));
  try {
    if (rp->parsed()) {
      return replay(ra);
    }
    if (sv->parsed()) {
      // Executed again as /proc/self/exe (execAgain), the process is named "exe" in ps, pgrep and
      // process exporters: it takes its name from argv[0] again (at most 15 bytes).
      prctl(PR_SET_NAME, std::filesystem::path(argv[0]).filename().c_str());
      // Until serve installs its handler (after loading the bank and starting the sinks), a
      // SIGTERM stays pending, as on a restart: with the default action a container's pid 1
      // drops it, and the pod would wait for SIGKILL.
      pthread_sigmask(SIG_BLOCK, &kStopSignals, nullptr);
      std::vector<RuleFile> restart_files;
      if (const int code = serve(config, &restart_files); code != kRestartOnNewRules) {
        return code;
      }
      // serve chose to restart before its sinks shut down; a SIGTERM during that shutdown (a
      // taint sink's request, the Lease's release) only set g_signalled. Blocked from here, a
      // later one stays pending across execv until the new process has its handler: with the
      // default action it would end that process half-started or, as a container's pid 1, be
      // dropped.
      pthread_sigmask(SIG_BLOCK, &kStopSignals, nullptr);
      if (g_signalled) {
        return 0;
      }
      if (std::string error; !handOverRuleFiles(restart_files, &error)) {
        spdlog::warn("rules: cannot hand the new files over ({}): the restart reads them again",
                     error);
      }
      execAgain(argv);
      return 1;
    }
    return rulesTest(rules_dir);
  } catch (const BankError& e) {
    std::cerr << "faultline: the rule bank does not load:\n" << e.what();
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "faultline: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace faultline
