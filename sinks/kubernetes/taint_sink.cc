#include "sinks/kubernetes/taint_sink.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string_view>
#include <utility>

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include "core/time.h"
#include "core/yaml_read.h"
#include "sinks/kubernetes/kube_objects.h"
#include "sinks/kubernetes/leader_elector.h"

namespace faultline {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxLoggedBody = 512;
constexpr size_t kMaxMessage = 1000;                // Event and condition messages
constexpr const char* kEventNamespace = "default";  // legacy Events of cluster-scoped objects
constexpr const char* kStrategicMerge = "application/strategic-merge-patch+json";
// A node missing from a snapshot older than this is listed again before being refused.
constexpr auto kRelistMissing = std::chrono::seconds(1);
// How long a taint refused as not eligible waits for its node to be listed eligible: GPU Feature
// Discovery labels a node within a minute or two of its join.
constexpr auto kIneligibleHold = std::chrono::minutes(10);
// The longest Retry-After honoured, in seconds (client-go waits what the server says; a proxy may
// say an hour).
constexpr int kMaxRetryAfterS = 60;

// Node names are DNS-1123 subdomains (k8s.io/apimachinery validation IsDNS1123Subdomain):
// at most 253 characters of dot-separated labels [a-z0-9]([-a-z0-9]*[a-z0-9])?. That also makes
// them safe to put in a URL path unescaped.
bool isDns1123Subdomain(std::string_view name) {
  if (name.empty() || name.size() > 253) {
    return false;
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  char prev = '.';
  for (char c : name) {
    if (c == '.') {
      if (!alnum(prev)) {
        return false;
      }
    } else if (c == '-') {
      if (prev == '.') {
        return false;
      }
    } else if (!alnum(c)) {
      return false;
    }
    prev = c;
  }
  return alnum(prev);
}

// metav1.Time marshals as RFC 3339 with whole seconds.
std::string rfc3339Seconds(int64_t time_ns) {
  const std::string full = formatRfc3339(time_ns);  // ...SS.nnnnnnnnnZ
  return full.substr(0, full.find('.')) + "Z";
}

std::string percentEncode(std::string_view s) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// A 401 is retried because the client re-reads a rotated token.
bool retryable(const KubeClient::Response& r) {
  return r.status == 0 || r.status == 401 || r.status == 429 || r.status >= 500;
}

std::string describe(const KubeClient::Response& r) {
  if (r.status == 0) {
    return r.error;
  }
  return "HTTP " + std::to_string(r.status) + " " + r.body.substr(0, kMaxLoggedBody);
}

// `j` as JSON, bytes that are not UTF-8 replaced by U+FFFD: an evidence line is a node's log
// text (a process name cut to 15 bytes may split a character), and nlohmann's default throws on
// such bytes, which on the sink's thread ended the process.
std::string dumpText(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Drops the end of `text` if it is a UTF-8 character cut short: a lead byte in the last three
// bytes that announces more bytes than follow it (RFC 3629 section 3). Bytes that are no UTF-8
// stay, for dumpText to replace.
void dropCutCharacter(std::string* text) {
  for (size_t back = 1; back <= std::min<size_t>(3, text->size()); ++back) {
    const auto c = static_cast<unsigned char>((*text)[text->size() - back]);
    if ((c & 0xC0) == 0x80) {
      continue;  // a continuation byte: its lead is further back
    }
    const size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (length > back) {
      text->resize(text->size() - back);
    }
    return;
  }
}

// An Event's or condition's message as kubectl shows it, cut to kMaxMessage bytes. Control bytes
// (an evidence line's process name, which any pod sets; the \n joining a /dev/kmsg record's lines)
// are spelled \xNN, as dmesg spells them: kubectl describe prints them as they are, where an
// escape sequence acts on the operator's terminal and a newline breaks the table. The cut falls
// before a \xNN or a UTF-8 character it would split (a split character showed as U+FFFD).
std::string readableMessage(std::string_view message) {
  std::string out;
  for (const char ch : message) {
    const auto c = static_cast<unsigned char>(ch);
    const bool control = c < 0x20 || c == 0x7f;
    if (out.size() + (control ? 4 : 1) > kMaxMessage) {
      dropCutCharacter(&out);
      break;
    }
    if (control) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out += ch;
    }
  }
  return out;
}

std::string evidenceText(const Decision& d) {
  if (d.evidence.empty()) {
    return "";
  }
  const Evidence& e = d.evidence.back();
  return e.signature + ": " + e.line;
}

// The node `name` a write answered 200 with, or null when the body is not that Node (a proxy's
// Status, an empty body): the write landed, but the node as it is must be read back.
json answeredNode(const std::string& body, const std::string& name) {
  json node = parseObject(body);
  return stringAt(node, "/metadata/name") == name ? node : json();
}

// The duration at map[key] in whole seconds (at least 1); `fallback` if the key is absent.
std::chrono::seconds secondsAt(const YAML::Node& map, const std::string& where, const char* key,
                               std::chrono::seconds fallback) {
  if (!map[key]) {
    return fallback;
  }
  const int64_t ns = durationAt(map[key], where + key);
  return std::chrono::seconds(std::max<int64_t>(1, ns / kNanosPerSecond));
}

}  // namespace

TaintSinkOptions TaintSinkOptions::fromYaml(const YAML::Node& k) {
  TaintSinkOptions o;
  if (const YAML::Node n = k["eligible"]) {
    o.eligible = stringsAt(n, "kubernetes.eligible", false);
  }
  o.opt_out_label = stringOr(k, "kubernetes.", "opt_out_label", o.opt_out_label);
  if (k["node_list_period"]) {
    o.node_list_period = std::chrono::milliseconds(
        durationAt(k["node_list_period"], "kubernetes.node_list_period") / 1'000'000);
  }
  if (const YAML::Node g = k["guard"]) {
    checkKeys(g, "kubernetes.guard.", {"max_tainted", "max_tainted_percent", "max_new", "window"});
    if (const YAML::Node n = g["max_tainted"]) {
      o.limits.max_tainted = integerAt<int>(n, "kubernetes.guard.max_tainted", 0);
    }
    if (const YAML::Node n = g["max_tainted_percent"]) {
      o.limits.max_tainted_percent = numberAt(n, "kubernetes.guard.max_tainted_percent", 0, 100);
    }
    if (const YAML::Node n = g["max_new"]) {
      o.limits.max_new = integerAt<int>(n, "kubernetes.guard.max_new", 0);
    }
    o.limits.window = secondsAt(g, "kubernetes.guard.", "window", o.limits.window);
  }
  o.breaker_namespace = stringOr(k, "kubernetes.", "namespace", "");
  if (o.breaker_namespace.empty()) {
    o.breaker_namespace = podNamespace();
  }
  o.breaker_configmap = stringOr(k, "kubernetes.", "breaker_configmap", o.breaker_configmap);
  if (const YAML::Node n = k["dry_run"]) {
    o.dry_run = boolAt(n, "kubernetes.dry_run");
  }
  if (const YAML::Node n = k["dry_run_rules"]) {
    o.dry_run_rules = stringsAt(n, "kubernetes.dry_run_rules", false);
  }
  o.reapply_after = secondsAt(k, "kubernetes.", "reapply_after", o.reapply_after);
  o.condition_type = stringOr(k, "kubernetes.", "condition_type", o.condition_type);
  return o;
}

TaintSink::TaintSink(const KubeConfig& config, TaintSinkOptions options, Hooks hooks,
                     Metrics* metrics)
    : client_(config, metrics),
      options_(std::move(options)),
      hooks_(std::move(hooks)),
      worker_([this] { run(); }) {}

TaintSink::~TaintSink() {
  stop();
}

void TaintSink::stop() {
  if (!worker_.joinable()) {
    return;
  }
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  worker_.join();
}

void TaintSink::write(const Decision& decision) {
  {
    std::lock_guard lock(mu_);
    ++written_;
    if (decision.action == Decision::Action::kSuppressed) {
      return;
    }
    if (decision.action == Decision::Action::kSuspect) {
      // An Event, and nothing on the node: held, superseded and deferred by no decision; not a
      // taint's outcome (counters()).
      if (!decision.dry_run) {
        suspects_.push_back(decision);
      }
    } else if (!decision.dry_run && decision.action == Decision::Action::kTaint) {
      believed_[decision.node] = {written_, decision.taint.key, decision.taint.effect};
    } else if (!decision.dry_run) {
      believed_.erase(decision.node);
    }
    if (decision.action != Decision::Action::kSuspect) {
      queue_.push_back({.decision = decision, .led = leaderTerm() != 0});
    }
  }
  work_cv_.notify_one();
}

void TaintSink::flush() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [this] { return queue_.empty() && suspects_.empty() && !busy_; });
}

TaintSink::Counters TaintSink::counters() const {
  return Counters{applied_.load(),           untainted_.load(),  already_present_.load(),
                  conflicts_retried_.load(), suppressed_.load(), dry_run_.load(),
                  deferred_count_.load(),    failed_.load(),     not_applied_.load()};
}

TaintSink::Waiting TaintSink::waiting() const {
  return Waiting{waiting_deferred_.load(), waiting_refused_.load(), waiting_ineligible_.load()};
}

std::string TaintSink::breakerTripped() const {
  std::lock_guard lock(mu_);
  return breaker_ == Breaker::kClosed ? "" : breaker_reason_;
}

int TaintSink::breakerState() const {
  if (leaderTerm() == 0) {
    return -1;  // a follower reads it only once it leads: what it read before may be stale
  }
  std::lock_guard lock(mu_);
  return breaker_ == Breaker::kClosed ? 0 : breaker_ == Breaker::kUnknown ? -1 : 1;
}

void TaintSink::run() {
  std::unique_lock lock(mu_);
  // The first LIST at once: it restores the taints of an earlier process (Hooks::on_restored),
  // which lines read before it would not find.
  bool started = false;
  while (true) {
    // The maps are this thread's own: their sizes are published for waiting().
    waiting_deferred_ = deferred_.size();
    waiting_refused_ = refused_.size();
    waiting_ineligible_ = ineligible_.size();
    // Wakes at least twice a second to notice leadership and keep the node snapshot fresh.
    if (started) {
      work_cv_.wait_for(lock, std::chrono::milliseconds(500),
                        [this] { return stopping_ || !queue_.empty() || !suspects_.empty(); });
    }
    started = true;
    if (stopping_ && queue_.empty()) {
      not_applied_ = deferred_.size();
      for (const auto& [key, p] : deferred_) {
        spdlog::error("kubernetes: not applied at shutdown: {} of node {} (rule {}), deferred",
                      actionName(p.decision.action), p.decision.node, p.decision.rule);
      }
      for (const auto& [key, r] : refused_) {
        spdlog::error(
            "kubernetes: not applied at shutdown: taint of node {} (rule {}), refused by the "
            "blast-radius guard",
            r.decision.node, r.decision.rule);
      }
      for (const auto& [key, r] : ineligible_) {
        spdlog::warn(
            "kubernetes: not applied at shutdown: taint of node {} (rule {}), refused: the node "
            "is not eligible",
            r.decision.node, r.decision.rule);
      }
      return;
    }
    const uint64_t term = leaderTerm();
    const bool leader = term != 0;
    if (leader && term != term_) {
      // Another leader may have tainted nodes or tripped the breaker since our last LIST (also
      // when this replica lost the Lease and won it again): counting from that snapshot could
      // exceed the limits. List again before the first write.
      have_snapshot_ = false;
      list_tried_.reset();
      const auto oldest = Clock::now() - options_.follower_hold;
      // In a new term (another replica may have led since), a decision deferred before is as old
      // news as a held one: the node may have recovered meanwhile, and its untaint gone to the
      // other leader. Leading again in the same term (an API server outage ended), it is not.
      if (term != led_term_) {
        // Another replica may have tainted nodes meanwhile from lines this one never saw (pushes
        // go to the leader): its correlator must know them to lift them.
        restore_pending_ = true;
        std::erase_if(deferred_, [&](const auto& entry) {
          const Decision& d = entry.second.decision;
          if (entry.second.deferred_since >= oldest) {
            return false;
          }
          givenUp(d, "deferred more than " + std::to_string(options_.follower_hold.count()) +
                         " s ago (follower_hold), before this leadership term");
          return true;
        });
        // So is a refused taint: a reset seen in this term must not taint a node that recovered;
        // nor a LIST that lists its node eligible at last.
        std::erase_if(ineligible_, [&](const auto& entry) {
          if (entry.second.since >= oldest) {
            return false;
          }
          spdlog::warn(
              "kubernetes: dropping the taint of node {} (rule {}) refused as not eligible more "
              "than {} s ago (follower_hold), before this leadership term",
              entry.first.first, entry.second.decision.rule, options_.follower_hold.count());
          return true;
        });
        std::erase_if(refused_, [&](const auto& entry) {
          const Decision& d = entry.second.decision;
          if (entry.second.since >= oldest) {
            return false;
          }
          spdlog::warn(
              "kubernetes: dropping the refused taint of node {} (rule {}): refused more than {} "
              "s ago (follower_hold), before this leadership term",
              d.node, d.rule, options_.follower_hold.count());
          return true;
        });
      }
      led_term_ = term;
      if (!held_.empty()) {
        // Decisions seen as a follower may be ones the old leader never wrote: re-check them, but
        // only the last one for a node and taint key (held or queued), as a later decision
        // supersedes a deferred one: a taint replayed before its untaint tainted a node that had
        // recovered, the old leader having written both.
        std::set<std::pair<std::string, std::string>> later;
        for (const Pending& p : queue_) {
          if (!p.decision.dry_run) {  // a rule in dry run decides apart (Correlator)
            later.insert({p.decision.node, p.decision.taint.key});
          }
        }
        size_t rechecked = 0;
        for (auto it = held_.rbegin(); it != held_.rend(); ++it) {
          const Decision& d = it->second.decision;
          if (it->first < oldest || (!d.dry_run && !later.insert({d.node, d.taint.key}).second)) {
            continue;
          }
          queue_.push_front(std::move(it->second));
          ++rechecked;
        }
        spdlog::info("kubernetes: leading now; re-checking {} decisions seen as a follower",
                     rechecked);
        held_.clear();
      }
    }
    term_ = term;
    if (!suspects_.empty()) {
      // Only the leader writes; a follower's are in the decision log (as at shutdown).
      const std::deque<Decision> suspects = std::exchange(suspects_, {});
      if (leader) {
        busy_ = true;
        lock.unlock();
        refresh();  // a snapshot to find the nodes in (none yet at start or a new term)
        for (const Decision& d : suspects) {
          suspect(d);
        }
        lock.lock();
        busy_ = false;
      }
      if (queue_.empty() && suspects_.empty()) {
        idle_cv_.notify_all();
      }
    }
    if (queue_.empty()) {
      if (leader) {
        // Keeps the snapshot and the breaker current; not a decision, so flush() need not wait.
        lock.unlock();
        refresh();
        lock.lock();
        if (!stopping_ && !deferred_.empty() &&
            Clock::now() - deferred_tried_ >= options_.node_list_period) {
          spdlog::info("kubernetes: handling {} deferred decisions again", deferred_.size());
          for (auto& [key, p] : deferred_) {
            queue_.push_back(std::move(p));
          }
          deferred_.clear();
        }
      }
      continue;
    }
    Pending pending = std::move(queue_.front());
    queue_.pop_front();
    if (!pending.decision.dry_run && pending.decision.action == Decision::Action::kUntaint) {
      decided_marks_.erase(pending.decision.node);  // the correlator holds no fault of it now
    }
    if (!leader) {
      // A later decision for the node and key supersedes a deferred one, as when leading: else,
      // leading again, the sink would replay a taint of a node that recovered meanwhile, or an
      // untaint of a new incident's taint.
      if (!pending.decision.dry_run) {  // a rule in dry run decides apart (Correlator)
        supersede(pending.decision);
      }
      if (pending.led && !pending.decision.dry_run) {
        // Decided while leading, the Lease lost before its turn: deferred as if lost mid-decision
        // (handled when leading again, logged if still pending at shutdown), not held and dropped.
        const Decision& d = pending.decision;
        spdlog::warn("kubernetes: {} of node {} (rule {}) deferred: the Lease was lost before it",
                     actionName(d.action), d.node, d.rule);
        pending.deferred_since = Clock::now();
        defer(std::move(pending));
        if (queue_.empty()) {
          idle_cv_.notify_all();
        }
        continue;
      }
      held_.emplace_back(Clock::now(), std::move(pending));
      while (!held_.empty() && held_.front().first < Clock::now() - options_.follower_hold) {
        held_.pop_front();
      }
      if (queue_.empty()) {
        idle_cv_.notify_all();
      }
      continue;
    }
    busy_ = true;
    handling_ = pending.decision.node;
    lock.unlock();
    handle(pending);
    lock.lock();
    handling_.clear();
    busy_ = false;
    if (queue_.empty()) {
      idle_cv_.notify_all();
    }
  }
}

void TaintSink::sleepBeforeRetry(int attempt, int retry_after_s) {
  static thread_local std::mt19937 rng{std::random_device{}()};
  const auto cap = options_.max_backoff.count();
  auto backoff = options_.initial_backoff.count();
  for (int i = 1; i < attempt && backoff < cap; ++i) {
    backoff *= 2;
  }
  backoff = std::min(backoff, cap);
  // Jitter keeps replicas and nodes that conflicted together from retrying in lockstep.
  std::uniform_int_distribution<decltype(backoff)> jitter(backoff / 2, backoff);
  auto wait = std::chrono::milliseconds(jitter(rng));
  // API Priority and Fairness says when to come back; asking earlier only adds load. A proxy's
  // Retry-After of an hour must not stall every decision behind this one, nor the Lease check.
  wait = std::max<std::chrono::milliseconds>(
      wait, std::chrono::seconds(std::min(retry_after_s, kMaxRetryAfterS)));
  // In slices: a shutdown does not wait out a backoff (send() then tries no more).
  const Clock::time_point until = Clock::now() + wait;
  for (Clock::time_point now = Clock::now(); now < until && !stopping(); now = Clock::now()) {
    std::this_thread::sleep_for(
        std::min<Clock::duration>(until - now, std::chrono::milliseconds(100)));
  }
}

uint64_t TaintSink::leaderTerm() const {
  return hooks_.leader_term ? hooks_.leader_term() : 1;
}

KubeClient::Deadline TaintSink::leadingUntil() const {
  return hooks_.leading_until ? hooks_.leading_until() : KubeClient::kNoDeadline;
}

bool TaintSink::stopping() const {
  return hooks_.stopping && hooks_.stopping();
}

KubeClient::Response TaintSink::send(const std::function<KubeClient::Response(Deadline)>& request,
                                     const std::string& what) {
  return send(request, what, options_.max_attempts);
}

KubeClient::Response TaintSink::send(const std::function<KubeClient::Response(Deadline)>& request,
                                     const std::string& what, int attempts) {
  KubeClient::Response r;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    if (attempt > 1) {
      sleepBeforeRetry(attempt - 1, r.retry_after_s);
    }
    // A decision's requests and retries take seconds: the Lease may be lost meanwhile, and
    // another replica may lead. Stop before the next request; the decision is deferred.
    if (leaderTerm() != term_) {
      r = {};
      r.error = "no longer the leader (the Lease was lost)";
      return r;
    }
    // At shutdown an API server that failed a request is not asked again (Hooks::stopping): the
    // decision is deferred, and logged as not applied before the grace period ends.
    if ((attempt > 1 || unanswered_at_stop_) && stopping()) {
      unanswered_at_stop_ = true;
      if (attempt == 1) {
        r = {};
        r.error = "not sent at shutdown: the API server failed a request";
      }
      return r;
    }
    r = request(leadingUntil());
    if (!retryable(r)) {
      return r;
    }
    spdlog::warn("kubernetes: {} failed (try {} of {}): {}", what, attempt, attempts, describe(r));
  }
  return r;
}

KubeClient::Response TaintSink::patchNode(const std::string& path, const json& patch) {
  return send(
      [&](Deadline until) {
        KubeClient::Response r = client_.patch(path + "?fieldManager=faultline", kStrategicMerge,
                                               dumpText(patch), until);
        // The server may have applied a PATCH it did not answer (a timeout, a proxy's 504).
        may_have_landed_ = may_have_landed_ || r.status == 0 || r.status >= 500;
        return r;
      },
      "PATCH " + path);
}

bool TaintSink::refresh() {
  // By the last LIST tried, failed or not: the worker wakes twice a second, and a LIST the server
  // refuses at once (a 403) was sent, and logged, at every wake.
  if (list_tried_ && Clock::now() - *list_tried_ < options_.node_list_period) {
    return have_snapshot_;
  }
  return list() || have_snapshot_;  // a failed LIST keeps the last snapshot
}

bool TaintSink::listPaged(const std::string& selector,
                          const std::function<void(const std::string&, json&)>& take) {
  // Paged like client-go's ListPager: each page is served from the first page's snapshot.
  const std::string first = "/api/v1/nodes?limit=" + std::to_string(options_.node_list_limit) +
                            (selector.empty() ? "" : "&labelSelector=" + percentEncode(selector));
  std::string path = first;
  while (true) {
    const KubeClient::Response r =
        send([&](Deadline until) { return client_.get(path, until); }, "GET " + path);
    NodeListPage page;
    // Also a 410 Gone: the continue token outlived its snapshot; the next refresh starts over.
    if (r.status != 200 || !parseNodeList(r.body, &page)) {
      spdlog::error("kubernetes: cannot list nodes: GET {}: {}", path, describe(r));
      return false;
    }
    for (auto& [name, node] : page.nodes) {
      take(name, node);
    }
    if (page.continue_token.empty()) {
      return true;
    }
    path = first + "&continue=" + percentEncode(page.continue_token);
  }
}

bool TaintSink::list() {
  list_tried_ = Clock::now();
  std::map<std::string, json> nodes;
  const std::vector<std::string> selectors =
      options_.eligible.empty() ? std::vector<std::string>{""} : options_.eligible;
  for (const std::string& selector : selectors) {
    if (!listPaged(selector,
                   [&](const std::string& name, json& node) { nodes[name] = std::move(node); })) {
      return false;
    }
  }
  nodes_ = std::move(nodes);
  listed_ = Clock::now();
  have_snapshot_ = true;
  {
    std::lock_guard lock(mu_);
    // A decision for the node and key already queued is later and supersedes the refused taint:
    // queued behind an untaint, it would taint a node that recovered.
    const std::set<std::pair<std::string, std::string>> queued = queuedKeys();
    for (auto it = ineligible_.begin(); it != ineligible_.end();) {
      const bool listed = nodes_.contains(it->first.first);
      if (listed && !queued.contains(it->first)) {
        queue_.push_back({.decision = std::move(it->second.decision),
                          .resumed = "taken up once the node was eligible",
                          .led = true});
      } else if (!listed && listed_ - it->second.since < kIneligibleHold) {
        ++it;
        continue;
      } else if (!listed) {
        spdlog::warn(
            "kubernetes: dropping the refused taint of node {} (rule {}): not eligible for {} s",
            it->first.first, it->second.decision.rule,
            std::chrono::duration_cast<std::chrono::seconds>(kIneligibleHold).count());
      }
      it = ineligible_.erase(it);
    }
  }
  // What the correlator must learn from the LIST: in a new term, the taints another leader set or
  // lifted (restore); at every LIST, the nodes it holds tainted that carry no such taint.
  const bool new_term = restore_pending_;
  const bool restoring = new_term && (hooks_.on_restored || hooks_.on_lifted);
  restore_pending_ = false;
  // The LIST predates a decision still pending here: the correlator knows that node better. Not
  // one of a rule in dry run, which changes nothing on the node (Correlator::restore).
  std::set<std::string> pending{handling_};
  uint64_t seen = 0;
  std::map<std::string, Believed> believed;
  {
    std::lock_guard lock(mu_);
    seen = written_;
    believed = believed_;
    for (const Pending& p : queue_) {
      if (!p.decision.dry_run) {
        pending.insert(p.decision.node);
      }
    }
    for (const auto& [at, p] : held_) {
      if (!p.decision.dry_run) {
        pending.insert(p.decision.node);
      }
    }
  }
  for (const auto& [key, p] : deferred_) {
    pending.insert(key.first);
  }
  for (const auto& [key, r] : refused_) {
    pending.insert(key.first);
  }
  for (const auto& [key, r] : ineligible_) {
    pending.insert(key.first);
  }
  // A node the correlator holds tainted without the taint on it (refused: opted out, not
  // eligible, failed; removed by hand; the node deleted) is reported lifted, or none of its
  // later faults would be decided. Its next taint decision is then applied or refused as any (a
  // taint removed by hand is not put back for the same rule within reapply_after). Not a node
  // carrying the configured taint another writer set: it is tainted.
  // Nodes not listed that were read below and still carry the taint: a new term restores them
  // as listed ones.
  std::map<std::string, json> read_unlisted;
  for (const auto& [name, b] : believed) {
    const auto node = nodes_.find(name);
    const auto carries = [&, &b = b](const nlohmann::json& n) {
      const std::optional<TaintMark> mark = taintMark(n);
      return hasTaint(n, b.key, b.effect) || (mark && hasMarkedTaint(n, *mark));
    };
    if (pending.count(name) != 0 || (node != nodes_.end() && carries(node->second))) {
      continue;
    }
    // Not listed: deleted, or no longer eligible (its GPU label gone for a while). The LIST says
    // nothing of its taint, so it is read: one still tainted stays held tainted, or nothing would
    // lift that taint once it recovers. One try: a read that fails is tried at the next LIST, not
    // retried here ahead of every decision. A name handle() refused as no node's goes in no URL.
    json unlisted;
    if (node == nodes_.end() && isDns1123Subdomain(name)) {
      const std::string path = "/api/v1/nodes/" + name;
      const KubeClient::Response got = client_.get(path, leadingUntil());
      unlisted = got.status == 200 ? parseObject(got.body) : json();
      if (got.status != 404 && (!unlisted.is_object() || carries(unlisted))) {
        if (!unlisted.is_object()) {
          spdlog::warn("kubernetes: cannot read node {}, not listed: GET {}: {}", name, path,
                       describe(got));
        } else {
          read_unlisted.emplace(name, std::move(unlisted));
        }
        continue;
      }
    }
    {
      std::lock_guard lock(mu_);
      if (const auto now = believed_.find(name);
          now != believed_.end() && now->second.written <= seen) {
        believed_.erase(now);  // not a taint decided after the LIST's view
      }
    }
    decided_marks_.erase(name);
    if (hooks_.on_lifted && !(restoring && node != nodes_.end())) {  // a listed one: below
      hooks_.on_lifted(name, seen);
    }
    const json& read = node != nodes_.end() ? node->second : unlisted;
    if (read.is_object()) {
      if (const std::optional<TaintMark> mark = taintMark(read)) {
        removedByHand(read, *mark);
      }
    }
  }
  const auto restore = [&](const std::string& name, const json& node) {
    if (pending.count(name) != 0) {
      return;
    }
    const std::optional<TaintMark> mark = taintMark(node);
    if (!mark || !hasMarkedTaint(node, *mark)) {
      decided_marks_.erase(name);
      if (hooks_.on_lifted) {
        hooks_.on_lifted(name, seen);
      }
      if (mark) {
        removedByHand(node, *mark);  // maybe while no process of faultline ran
      }
    } else if (mark->time_ns && hooks_.on_restored) {
      // Another leader lifted the taint decided here and set one of its own: the correlator
      // forgets the fault it holds (whose recovery would lift the new taint), then takes it up.
      const std::pair<std::string, int64_t> marked{mark->rule, *mark->time_ns};
      if (const auto known = decided_marks_.find(name);
          known != decided_marks_.end() && known->second != marked && hooks_.on_lifted) {
        spdlog::info(
            "kubernetes: node {} carries another leader's taint (rule {}) in place of "
            "the one decided here (rule {})",
            name, mark->rule, known->second.first);
        hooks_.on_lifted(name, seen);
      }
      decided_marks_[name] = marked;
      {
        std::lock_guard lock(mu_);
        believed_.try_emplace(name, Believed{seen, mark->key, mark->effect});
      }
      spdlog::info("kubernetes: node {} keeps taint {} of rule {} from before this start", name,
                   mark->key, mark->rule);
      hooks_.on_restored(name, mark->rule, *mark->time_ns, seen);
    }
  };
  // In a new term, faultline's taints on nodes no longer eligible (GPU Feature Discovery drops
  // nvidia.com/gpu.present from a node whose GPU fell off the bus) are found by a LIST of every
  // node, keeping only those: the guard counts them and the correlator takes them up; within the
  // term `believed` keeps them. Else a restart forgot them, and tainted past max_tainted.
  if (new_term && !options_.eligible.empty()) {
    listPaged("", [&](const std::string& name, json& node) {
      const std::optional<TaintMark> mark = taintMark(node);
      if (!nodes_.contains(name) && mark && hasMarkedTaint(node, *mark)) {
        read_unlisted.try_emplace(name, std::move(node));
      }
    });
  }
  if (restoring) {
    for (const auto& [name, node] : nodes_) {
      restore(name, node);
    }
    for (const auto& [name, node] : read_unlisted) {
      restore(name, node);
    }
  }
  unlisted_ = std::move(read_unlisted);

  // The breaker lives in a ConfigMap so that it survives restarts and leader changes; deleting
  // it is the operator's reset.
  const std::string cm = "/api/v1/namespaces/" + options_.breaker_namespace + "/configmaps/" +
                         options_.breaker_configmap;
  // It fails closed: only a 404 clears it, and not a trip whose POST failed.
  const KubeClient::Response r =
      send([&](Deadline until) { return client_.get(cm, until); }, "GET " + cm);
  if (r.status == 200) {
    const std::string reason = stringAt(parseObject(r.body), "/data/reason");
    setBreaker(Breaker::kTripped, reason.empty() ? "tripped (ConfigMap without a reason)" : reason);
  } else if (r.status == 404 && breaker_ == Breaker::kUnrecorded) {
    if (record(breaker_reason_)) {
      setBreaker(Breaker::kTripped, breaker_reason_);
    }
  } else if (r.status == 404) {
    if (breaker_ == Breaker::kTripped) {
      spdlog::warn(
          "kubernetes: breaker reset by an operator (ConfigMap {}/{} deleted); taking up the {} "
          "taints it refused whose faults have not cleared since",
          options_.breaker_namespace, options_.breaker_configmap, refused_.size());
      resumeRefused();
    }
    setBreaker(Breaker::kClosed, "");
  } else if (breaker_ == Breaker::kUnknown || breaker_ == Breaker::kClosed) {
    // A tripped ConfigMap we cannot read must not let taints through.
    spdlog::error(
        "kubernetes: blast-radius breaker state unknown: GET {}: {}; no node is tainted until it "
        "can be read",
        cm, describe(r));
    setBreaker(Breaker::kUnknown,
               "state unknown: GET " + cm + ": " +
                   (r.status == 0 ? r.error : "HTTP " + std::to_string(r.status)));
  }
  return true;
}

std::vector<std::string> TaintSinkOptions::dryRunRules(const Bank& bank) const {
  if (!dry_run) {
    return dry_run_rules;
  }
  std::vector<std::string> all;
  for (const Rule& r : bank.rules) {
    all.push_back(r.id);
  }
  return all;
}

void TaintSink::handle(const Pending& pending) {
  const Decision& d = pending.decision;
  may_have_landed_ = pending.may_have_landed;
  resumed_ = pending.resumed;
  if (d.dry_run) {
    spdlog::info("kubernetes: dry run: would {} node {} (rule {})", actionName(d.action), d.node,
                 d.rule);
    ++dry_run_;
    return;
  }
  if (!isDns1123Subdomain(d.node)) {
    givenUp(d, "invalid node name");
    return;
  }
  supersede(d);
  const Outcome outcome = d.action == Decision::Action::kTaint ? taint(d) : untaint(d);
  if (outcome == Outcome::kRetry) {
    // Handled while leading: if the Lease is lost before its next turn, it is deferred again, not
    // held as a follower's (which a term begun after follower_hold drops).
    defer({.decision = d,
           .may_have_landed = may_have_landed_,
           .deferred_since = pending.deferred_since,
           .resumed = resumed_,
           .led = true});
    spdlog::warn("kubernetes: {} of node {} (rule {}) deferred; handled again in {} ms",
                 actionName(d.action), d.node, d.rule, options_.node_list_period.count());
  }
}

void TaintSink::defer(Pending pending) {
  if (deferred_.empty()) {
    deferred_tried_ = Clock::now();
  }
  if (pending.deferred_since == Clock::time_point{}) {
    pending.deferred_since = Clock::now();
  }
  const std::pair key{pending.decision.node, pending.decision.taint.key};
  deferred_[key] = std::move(pending);
  ++deferred_count_;
}

TaintSink::Outcome TaintSink::requestFailed(const Decision& d, const std::string& action,
                                            const std::string& request,
                                            const KubeClient::Response& r) {
  if (retryable(r)) {
    spdlog::error("kubernetes: cannot yet {}: {}: {}", action, request, describe(r));
    return Outcome::kRetry;
  }
  givenUp(d, request + ": " + describe(r));
  return Outcome::kDone;
}

void TaintSink::givenUp(const Decision& d, const std::string& why) {
  spdlog::error("kubernetes: giving up {} of node '{}' (rule {}): {}", actionName(d.action), d.node,
                d.rule, why);
  ++failed_;
  Decision s = d;
  s.action = Decision::Action::kSuppressed;
  s.reason = "not applied, given up (" + std::string(actionName(d.action)) + "): " + why;
  if (hooks_.on_suppressed) {
    hooks_.on_suppressed(s);
  }
}

void TaintSink::suppress(const Decision& d, const std::string& reason) {
  spdlog::warn("kubernetes: suppressed taint of node {} (rule {}): {}", d.node, d.rule, reason);
  ++suppressed_;
  Decision s = d;
  s.action = Decision::Action::kSuppressed;
  s.reason = reason;
  if (hooks_.on_suppressed) {
    hooks_.on_suppressed(s);
  }
  if (nodes_.count(d.node) != 0) {
    event(d.node, "Warning", "FaultlineSuppressed",
          "rule " + d.rule + ": taint refused: " + reason + "; " + evidenceText(d));
  }
}

void TaintSink::suspect(const Decision& d) {
  if (nodes_.count(d.node) != 0) {  // an eligible node, as the last LIST saw it
    event(d.node, "Warning", "FaultlineSuspect",
          "rule " + d.rule + ": " + d.reason + "; " + evidenceText(d));
  }
}

std::string TaintSink::guard(const Decision& d) {
  const std::string cm = options_.breaker_namespace + "/" + options_.breaker_configmap;
  switch (breaker_) {
    case Breaker::kTripped:
      return "blast-radius breaker is tripped (" + breaker_reason_ + "); delete ConfigMap " + cm +
             " to reset it";
    case Breaker::kUnrecorded:
      return "blast-radius breaker is tripped (" + breaker_reason_ +
             "); not yet recorded in ConfigMap " + cm + " (retrying at the next LIST)";
    case Breaker::kUnknown:  // taint() defers the decision before asking
    case Breaker::kClosed:
      break;
  }
  const BlastRadiusLimits& l = options_.limits;
  const int64_t window_start =
      nowNanos() - static_cast<int64_t>(l.window.count()) * kNanosPerSecond;
  std::erase_if(added_, [&](const auto& kv) { return kv.second < window_start; });
  const TaintCount count = countTaints(nodes_, d.taint.key, window_start, added_);
  // Nodes held tainted that the LIST no longer shows, still tainted when read (list()), count as
  // tainted eligible nodes: GPU Feature Discovery unlabels a node whose GPUs fell off the bus, and
  // a fault across the fleet would otherwise taint past the limits as its nodes left the LIST.
  // (Their recent taints are in added_, which count.recent has.)
  const int unlisted = countTaints(unlisted_, d.taint.key, window_start, {}).tainted;
  // A node that carries the key already (with another effect) is among count.tainted: tainting
  // it adds no tainted node.
  const auto self = nodes_.find(d.node);
  const bool counted = self != nodes_.end() && taintWithKey(self->second, d.taint.key) != nullptr;
  // A deferred taint whose PATCH got no answer (a timeout, a 5xx) may have landed: counted as
  // tainted and new until its retry reads the node, else a brownout of the API server would
  // taint past the limits unseen until the next LIST.
  int unanswered = 0;
  for (const auto& entry : deferred_) {
    const std::string& node = entry.first.first;
    const auto carries = [&](const std::map<std::string, json>& nodes) {
      const auto it = nodes.find(node);
      return it != nodes.end() && taintWithKey(it->second, d.taint.key) != nullptr;
    };
    const Pending& p = entry.second;
    if (p.may_have_landed && p.decision.action == Decision::Action::kTaint &&
        entry.first.second == d.taint.key && node != d.node && !carries(nodes_) &&
        !carries(unlisted_)) {
      ++unanswered;
    }
  }
  const int tainted = count.tainted + unlisted + unanswered + (counted ? 0 : 1);  // with this taint
  const int recent = count.recent + unanswered;
  const int eligible = static_cast<int>(nodes_.size() + unlisted_.size());
  std::string reason;
  if (l.max_tainted > 0 && tainted > l.max_tainted) {
    reason = "would taint " + std::to_string(tainted) + " nodes, over max_tainted " +
             std::to_string(l.max_tainted);
  } else if (l.max_tainted_percent > 0) {
    const int allowed =
        std::max(1, static_cast<int>(std::floor(eligible * l.max_tainted_percent / 100)));
    if (tainted > allowed) {
      reason = "would taint " + std::to_string(tainted) + " of " + std::to_string(eligible) +
               " eligible nodes, over max_tainted_percent " +
               fmt::format("{:g}", l.max_tainted_percent) + " (" + std::to_string(allowed) +
               " nodes)";
    }
  }
  if (reason.empty() && l.max_new > 0 && recent + 1 > l.max_new) {
    reason = "would make " + std::to_string(recent + 1) + " new taints within " +
             std::to_string(l.window.count()) + "s, over max_new " + std::to_string(l.max_new);
  }
  if (!reason.empty()) {
    trip(reason);
  }
  return reason;
}

void TaintSink::trip(const std::string& reason) {
  setBreaker(Breaker::kUnrecorded, reason);
  spdlog::error(
      "kubernetes: blast-radius breaker TRIPPED: {}; no node is tainted until an "
      "operator deletes ConfigMap {}/{}",
      reason, options_.breaker_namespace, options_.breaker_configmap);
  if (record(reason)) {
    setBreaker(Breaker::kTripped, reason);
  }
}

bool TaintSink::record(const std::string& reason) {
  const json cm = {
      {"apiVersion", "v1"},
      {"kind", "ConfigMap"},
      {"metadata",
       {{"name", options_.breaker_configmap}, {"namespace", options_.breaker_namespace}}},
      {"data", {{"reason", reason}, {"time", rfc3339Seconds(nowNanos())}}}};
  const std::string path = "/api/v1/namespaces/" + options_.breaker_namespace + "/configmaps";
  const KubeClient::Response r =
      send([&](Deadline until) { return client_.post(path, cm.dump(), until); }, "POST " + path);
  if (r.status == 201 || r.status == 409) {
    return true;
  }
  // Until it is recorded, a 404 for the ConfigMap is no operator's reset: stay tripped.
  spdlog::error(
      "kubernetes: cannot record the tripped breaker: {}; it stays tripped, retried at the next "
      "LIST",
      describe(r));
  return false;
}

void TaintSink::removedByHand(const json& node, const TaintMark& mark) {
  if (options_.dry_run || std::find(options_.dry_run_rules.begin(), options_.dry_run_rules.end(),
                                    mark.rule) != options_.dry_run_rules.end()) {
    return;  // dry run writes nothing
  }
  // The correlator forgets the fault, so its recovery is not seen: the condition would say
  // faulty until the node's next fault.
  condition(node, "Unknown", "TaintRemovedByHand",
            "faultline's taint " + mark.key + ":" + mark.effect + " (rule " + mark.rule +
                ") was removed by hand: the node's fault is no longer tracked");
}

void TaintSink::supersede(const Decision& d) {
  const std::pair key{d.node, d.taint.key};
  deferred_.erase(key);
  refused_.erase(key);
  ineligible_.erase(key);
}

std::set<std::pair<std::string, std::string>> TaintSink::queuedKeys() const {
  std::set<std::pair<std::string, std::string>> queued;
  for (const Pending& p : queue_) {
    if (!p.decision.dry_run) {  // a rule in dry run decides apart (Correlator)
      queued.insert({p.decision.node, p.decision.taint.key});
    }
  }
  return queued;
}

void TaintSink::resumeRefused() {
  std::vector<Decision> refused;
  for (auto& [key, r] : refused_) {
    refused.push_back(std::move(r.decision));
  }
  refused_.clear();
  // The earliest fault first: the guard may refuse again once a limit is reached.
  std::stable_sort(refused.begin(), refused.end(),
                   [](const Decision& a, const Decision& b) { return a.time_ns < b.time_ns; });
  std::lock_guard lock(mu_);
  // A decision for the node and key already queued is later and supersedes the refused taint,
  // which queued behind it would taint a node whose untaint was just handled.
  const std::set<std::pair<std::string, std::string>> queued = queuedKeys();
  for (Decision& d : refused) {
    if (!queued.contains({d.node, d.taint.key})) {
      queue_.push_back(
          {.decision = std::move(d), .resumed = "taken up at the breaker reset", .led = true});
    }
  }
}

void TaintSink::setBreaker(Breaker state, std::string reason) {
  std::lock_guard lock(mu_);
  breaker_ = state;
  breaker_reason_ = std::move(reason);
}

TaintSink::Outcome TaintSink::taint(const Decision& d) {
  const std::string what = d.taint.key + (d.taint.value.empty() ? "" : "=" + d.taint.value) + ":" +
                           d.taint.effect + " on node " + d.node;
  if (!refresh()) {
    spdlog::error("kubernetes: cannot taint {} yet: no node list from the API server", what);
    return Outcome::kRetry;
  }
  auto found = nodes_.find(d.node);
  if (found == nodes_.end() && Clock::now() - listed_ >= kRelistMissing) {
    // A node that joined since the last LIST (a new GPU node's faults tend to come early). A failed
    // LIST keeps the snapshot.
    if (!list()) {
      spdlog::error(
          "kubernetes: cannot taint {} yet: node {} is not in the last node list, and "
          "the API server did not answer a new one",
          what, d.node);
      return Outcome::kRetry;
    }
    found = nodes_.find(d.node);
  }
  if (found == nodes_.end()) {
    suppress(d,
             "node is not eligible (no label matching the eligible selectors) or does not exist");
    ineligible_[{d.node, d.taint.key}] = {Clock::now(), d};
    return Outcome::kDone;
  }
  json node = found->second;
  bool guarded = false;
  const std::string path = "/api/v1/nodes/" + d.node;
  const std::string message =
      "rule " + d.rule + (d.reason.empty() ? "" : " (" + d.reason + ")") + ": " + evidenceText(d);
  // The taint is on the node: its event and condition follow.
  auto applied = [&](const json& tainted) {
    spdlog::info("kubernetes: applied taint {} (rule {})", what, d.rule);
    ++applied_;
    nodes_[d.node] = tainted;
    added_[d.node] = nowNanos();
    decided_marks_[d.node] = {d.rule, d.time_ns};          // the mark it wrote
    condition(tainted, "True", "FaultDetected", message);  // first: an Event is tried once
    event(d.node, "Warning", "FaultlineTaint", "tainted " + what + " by " + message);
    if (!resumed_.empty() && hooks_.on_resumed) {
      Decision r = d;
      r.reason = resumed_ + (d.reason.empty() ? "" : ": " + d.reason);
      hooks_.on_resumed(r);
    }
    return Outcome::kDone;
  };
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    if (hasLabel(node, options_.opt_out_label, "true")) {
      suppress(d, "node opted out (label " + options_.opt_out_label + "=true)");
      return Outcome::kDone;
    }
    const std::optional<TaintMark> mark = taintMark(node);
    if (hasTaint(node, d.taint.key, d.taint.effect)) {
      // Re-read after a 409, or a deferred taint's first read after a PATCH without an answer,
      // marked with this very decision: an earlier try of ours was applied and its answer lost (a
      // 504, a timeout). A mark with this decision's rule and time can only be this decision's.
      if ((attempt > 1 || may_have_landed_) && mark && mark->rule == d.rule &&
          mark->key == d.taint.key && mark->effect == d.taint.effect && mark->time_ns &&
          *mark->time_ns == d.time_ns) {
        return applied(node);
      }
      spdlog::info("kubernetes: taint {} already present (rule {})", what, d.rule);
      ++already_present_;
      // Put back by hand after faultline's was removed (its mark still on the node), the taint
      // left the condition Unknown (TaintRemovedByHand); or faultline's taint went on without its
      // condition (that write failed): this fault makes it True, as if faultline had tainted. Not
      // for another writer's taint, whose removal nothing would see.
      if (const NodeCondition c = nodeCondition(node, options_.condition_type);
          mark && c.status != "True") {
        condition(node, "True", "FaultDetected", message);
      }
      return Outcome::kDone;
    }
    if (mark && hasMarkedTaint(node, *mark)) {
      // faultline's taint under an earlier config's key or effect (a rollout changed `taint`): the
      // node is tainted, and a new mark would leave that taint to no untaint.
      spdlog::info("kubernetes: taint {} not added: faultline's taint {}:{} (rule {}) is on it",
                   what, mark->key, mark->effect, mark->rule);
      ++already_present_;
      return Outcome::kDone;
    }
    // The distance between the two event times, in uint64 so that no annotation overflows it.
    const uint64_t since_mark =
        !mark || !mark->time_ns ? 0
        : d.time_ns > *mark->time_ns
            ? static_cast<uint64_t>(d.time_ns) - static_cast<uint64_t>(*mark->time_ns)
            : static_cast<uint64_t>(*mark->time_ns) - static_cast<uint64_t>(d.time_ns);
    if (mark && mark->rule == d.rule && mark->time_ns &&
        since_mark < static_cast<uint64_t>(options_.reapply_after.count()) * kNanosPerSecond) {
      suppress(d, "faultline's taint was removed by hand after " +
                      (mark->applied.empty() ? "?" : mark->applied) + "; rule " + d.rule +
                      " taints it again only " + std::to_string(options_.reapply_after.count()) +
                      " s after the fault of that taint (reapply_after)");
      return Outcome::kDone;
    }
    if (!guarded) {
      if (breaker_ == Breaker::kUnknown) {
        // Fail closed, yet keep the fault: an API server that cannot answer is no refusal.
        spdlog::error("kubernetes: cannot taint {} yet: blast-radius breaker {}", what,
                      breaker_reason_);
        return Outcome::kRetry;
      }
      if (const std::string refused = guard(d); !refused.empty()) {
        suppress(d, refused);
        refused_[{d.node, d.taint.key}] = {Clock::now(), d};  // taken up again at a reset
        return Outcome::kDone;
      }
      guarded = true;
    }

    json taints = nodeTaints(node);
    // One reading for the taint's timeAdded and the mark's applied: hasMarkedTaint compares them.
    const std::string now = rfc3339Seconds(nowNanos());
    json added = {{"key", d.taint.key}, {"effect", d.taint.effect}, {"timeAdded", now}};
    if (!d.taint.value.empty()) {
      added["value"] = d.taint.value;  // omitempty in core/v1 Taint
    }
    taints.push_back(std::move(added));
    const json mark_new = {{"rule", d.rule},
                           {"key", d.taint.key},
                           {"effect", d.taint.effect},
                           {"time", formatRfc3339(d.time_ns)},
                           {"applied", now}};
    const json patch = {{"metadata",
                         {{"resourceVersion", stringAt(node, "/metadata/resourceVersion")},
                          {"annotations", {{kTaintAnnotation, mark_new.dump()}}}}},
                        {"spec", {{"taints", taints}}}};
    const KubeClient::Response patched = patchNode(path, patch);
    if (patched.status == 200) {
      if (json tainted = answeredNode(patched.body, d.node); tainted.is_object()) {
        return applied(tainted);
      }
      // Re-read: the node shows this decision's mark and taint, counted as applied below.
      spdlog::warn("kubernetes: PATCH {} answered 200 without the node, re-reading", path);
      may_have_landed_ = true;  // it did: deferred after the last try, its retry must know
    } else if (patched.status != 409) {
      return requestFailed(d, "taint " + what, "PATCH " + path, patched);
    } else {
      spdlog::info("kubernetes: node {} changed since it was read (409), re-reading", d.node);
      ++conflicts_retried_;
    }
    const KubeClient::Response got =
        send([&](Deadline until) { return client_.get(path, until); }, "GET " + path);
    node = got.status == 200 ? parseObject(got.body) : json();
    if (!node.is_object()) {
      if (!retryable(got)) {
        nodes_.erase(d.node);  // unreadable for good (a 404: gone): out of the snapshot
      }
      return requestFailed(d, "taint " + what, "GET " + path, got);
    }
    nodes_[d.node] = node;
  }
  // Writers that keep changing the node (a conflict each try) are no refusal: deferred, as an
  // outage is, and tried again.
  spdlog::warn("kubernetes: cannot yet taint {}: {} tries met a conflict or no node", what,
               options_.max_attempts);
  return Outcome::kRetry;
}

TaintSink::Outcome TaintSink::untaint(const Decision& d) {
  const std::string path = "/api/v1/nodes/" + d.node;
  // The taint to remove: the one faultline's mark names, once read. The decision carries the
  // config's taint, which a rollout may have changed since faultline wrote the node's.
  std::string key = d.taint.key;
  std::string effect = d.taint.effect;
  bool had_taint = true;  // false: removed by hand before, only faultline's mark left to clear
  // The taint is off the node: its event and condition follow.
  auto removed = [&](const json& untainted) {
    spdlog::info("kubernetes: removed taint {} from node {} ({})", key, d.node, d.reason);
    ++untainted_;
    if (nodes_.count(d.node) != 0) {
      nodes_[d.node] = untainted;
    }
    unlisted_.erase(d.node);  // no longer tainted: not counted by the guard
    const std::string message = "rule " + d.rule + ": " + d.reason;
    condition(untainted, "False", "Recovered", message);
    event(d.node, "Normal", "FaultlineUntaint",
          (had_taint ? "removed taint " + key : "taint " + key + " was removed by hand before") +
              ": " + message);
    return Outcome::kDone;
  };
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    const KubeClient::Response got =
        send([&](Deadline until) { return client_.get(path, until); }, "GET " + path);
    const json node = got.status == 200 ? parseObject(got.body) : json();
    if (!node.is_object()) {
      return requestFailed(d, "untaint node " + d.node, "GET " + path, got);
    }
    const std::optional<TaintMark> mark = taintMark(node);
    // Re-read after a 409, or a deferred untaint's first read after a PATCH without an answer,
    // with neither the mark nor the taint: an earlier try of ours was applied and its answer lost
    // (a 504, a timeout).
    if ((attempt > 1 || may_have_landed_) && !mark && !hasTaint(node, key, effect)) {
      return removed(node);
    }
    const bool marked = mark && !mark->key.empty() && !mark->effect.empty();
    if (marked) {
      key = mark->key;
      effect = mark->effect;
    }
    // A mark whose taint was removed by hand stays: a taint put back since is the operator's.
    const bool put_back = marked && hasTaint(node, key, effect) && !hasMarkedTaint(node, *mark);
    if (!marked || put_back) {
      // A node without the taint is one whose taint was refused (opted out, not eligible, the
      // guard): saying faultline did not set its taint would send an operator after none.
      const bool absent = !marked && !hasTaint(node, key, effect);
      const std::string why =
          absent ? "the node has no " + key + ":" + effect + " taint"
                 : "faultline did not set the node's " + key + " taint (" +
                       (put_back ? "it was put back by hand after faultline's was removed"
                                 : std::string("no ") + kTaintAnnotation + " annotation for it") +
                       ")";
      spdlog::warn("kubernetes: not untainting node {}: {}", d.node, why);
      ++suppressed_;
      // A refused decision like a refused taint (no Event: the node's taint is not faultline's).
      Decision s = d;
      s.action = Decision::Action::kSuppressed;
      s.reason = "untaint refused: " + why;
      if (hooks_.on_suppressed) {
        hooks_.on_suppressed(s);
      }
      // faultline's verdict, which it set True with its taint, is that the node recovered: the
      // condition says so, though a taint not faultline's stays (nothing is written where
      // faultline set no condition).
      condition(node, "False", "Recovered", "rule " + d.rule + ": " + d.reason);
      return Outcome::kDone;
    }
    had_taint = hasTaint(node, key, effect);
    json kept = json::array();
    for (const json& t : nodeTaints(node)) {
      if (!(stringAt(t, "/key") == key && stringAt(t, "/effect") == effect)) {
        kept.push_back(t);
      }
    }
    const json patch = {{"metadata",
                         {{"resourceVersion", stringAt(node, "/metadata/resourceVersion")},
                          {"annotations", {{kTaintAnnotation, nullptr}}}}},
                        {"spec", {{"taints", kept}}}};
    const KubeClient::Response patched = patchNode(path, patch);
    if (patched.status == 200) {
      if (json untainted = answeredNode(patched.body, d.node); untainted.is_object()) {
        return removed(untainted);
      }
      // Re-read: the node shows neither mark nor taint, counted as removed above.
      spdlog::warn("kubernetes: PATCH {} answered 200 without the node, re-reading", path);
      may_have_landed_ = true;  // it did: deferred after the last try, its retry must know
    } else if (patched.status != 409) {
      return requestFailed(d, "untaint node " + d.node, "PATCH " + path, patched);
    } else {
      ++conflicts_retried_;
    }
  }
  spdlog::warn("kubernetes: cannot yet untaint node {}: {} tries met a conflict or no node", d.node,
               options_.max_attempts);
  return Outcome::kRetry;
}

void TaintSink::event(const std::string& node, const std::string& type, const std::string& reason,
                      const std::string& message) {
  const std::string path = std::string("/api/v1/namespaces/") + kEventNamespace + "/events";
  const std::string now = rfc3339Seconds(nowNanos());
  const std::string text = readableMessage(message);
  // Aggregated like client-go's EventCorrelator: a repeat bumps count and lastTimestamp.
  const std::string key = node + '\n' + reason + '\n' + text;
  const auto it = events_.find(key);
  if (it != events_.end()) {
    const json patch = {{"count", it->second.count + 1}, {"lastTimestamp", now}};
    const KubeClient::Response r = send(
        [&](Deadline until) {
          return client_.patch(path + "/" + it->second.name, kStrategicMerge, patch.dump(), until);
        },
        "PATCH event", 1);
    if (r.status == 200) {
      ++it->second.count;
      it->second.used = ++events_used_;
      return;
    }
    events_.erase(it);  // expired (404) or unwritable: start a new one
  }
  const auto known = nodes_.find(node);
  const std::string uid = known != nodes_.end() ? stringAt(known->second, "/metadata/uid") : "";
  const std::string name = node + "." + fmt::format("{:x}", nowNanos());
  const json ev = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", name}, {"namespace", kEventNamespace}}},
      {"involvedObject",
       {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", node}, {"uid", uid.empty() ? node : uid}}},
      {"reason", reason},
      {"message", text},
      {"type", type},
      {"source", {{"component", "faultline"}}},
      {"reportingComponent", "faultline"},
      {"firstTimestamp", now},
      {"lastTimestamp", now},
      {"count", 1}};
  const KubeClient::Response r = send(
      [&](Deadline until) { return client_.post(path, dumpText(ev), until); }, "POST event", 1);
  if (r.status == 201) {
    if (events_.size() >= kMaxEvents) {
      // Nearly every decision's message is new (its evidence line): without a bound the map
      // would grow for the service's life.
      events_.erase(
          std::ranges::min_element(events_, {}, [](const auto& e) { return e.second.used; }));
    }
    events_[key] = {name, 1, ++events_used_};
  } else {
    spdlog::warn("kubernetes: cannot record Event {} on node {}: {}", reason, node, describe(r));
  }
}

void TaintSink::condition(const json& node, std::string_view status, const std::string& reason,
                          const std::string& message) {
  const std::string text = readableMessage(message);
  const NodeCondition current = nodeCondition(node, options_.condition_type);
  if (!current.present
          ? status != "True"
          : current.status == status && current.reason == reason && current.message == text) {
    return;  // no write when nothing changes (or nothing to clear)
  }
  const std::string now = rfc3339Seconds(nowNanos());
  // lastTransitionTime moves only when the status does.
  const std::string transition =
      current.present && current.status == status && !current.last_transition_time.empty()
          ? current.last_transition_time
          : now;
  const json patch = {{"status",
                       {{"conditions",
                         {{{"type", options_.condition_type},
                           {"status", status},
                           {"reason", reason},
                           {"message", text},
                           {"lastHeartbeatTime", now},
                           {"lastTransitionTime", transition}}}}}}};
  const std::string name = stringAt(node, "/metadata/name");
  const std::string path = "/api/v1/nodes/" + name + "/status";
  const KubeClient::Response r = send(
      [&](Deadline until) {
        return client_.patch(path + "?fieldManager=faultline", kStrategicMerge, dumpText(patch),
                             until);
      },
      "PATCH " + path);
  if (r.status != 200) {
    spdlog::warn("kubernetes: cannot set condition {} on node {}: {}", options_.condition_type,
                 name, describe(r));
  } else if (json patched = answeredNode(r.body, name);
             patched.is_object() && nodes_.count(name) != 0) {
    nodes_[name] = std::move(patched);
  }
}

}  // namespace faultline
