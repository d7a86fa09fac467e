// Applies taint and untaint decisions to Kubernetes nodes, guarded against doing harm.
//
// Requests (kubernetes/api core/v1/types.go; the taint PATCH as kubernetes/kubernetes
// pkg/controller/controller_utils.go PatchNodeTaints):
//   GET   /api/v1/nodes?limit=N&labelSelector=S[&continue=T]
//                                          one paged LIST per eligible selector every
//                                          node_list_period: the node snapshot every check and
//                                          count below reads (no GET per decision). Pages follow
//                                          metadata.continue (client-go's ListPager); any failed
//                                          page keeps the previous snapshot until the next LIST,
//                                          except on becoming leader: the snapshot is dropped and
//                                          taints are deferred until a LIST succeeds.
//   PATCH /api/v1/nodes/{node}?fieldManager=faultline
//         Content-Type: application/strategic-merge-patch+json
//         {"metadata":{"resourceVersion":"<snapshot's>","annotations":{"faultline.dev/taint":A}},
//          "spec":{"taints":[<existing taints unchanged>, <new taint with timeAdded>]}}
//         spec.taints is atomic (core/v1 NodeSpec), so the whole list is sent and the
//         resourceVersion precondition turns a concurrent write into 409 Conflict (then the node
//         is re-read with GET /api/v1/nodes/{node} and the patch recomputed) instead of a lost
//         taint. Untaint (after a GET of the node) sends the list without faultline's taint (the
//         annotation's key and effect) and the annotation as null.
//         A = {"rule","key","effect","time" (decision event time),"applied" (wall clock)},
//         RFC 3339 times, JSON-encoded as the annotation's string value.
//   PATCH /api/v1/nodes/{node}/status      condition `condition_type` (NPD-style; conditions
//         merge by type): status True on taint; False on untaint and on a refused untaint
//         (where faultline set it); Unknown, reason TaintRemovedByHand, when its annotation is
//         found without its taint (not in dry run); skipped when unchanged.
//   POST  /api/v1/namespaces/default/events, PATCH .../events/{name} (count, lastTimestamp on
//         a repeat of the same node, reason and message, among the last kMaxEvents written),
//         core/v1 Event. Also, while leading, one (reason FaultlineSuspect) per kSuspect
//         decision not in dry run whose node is eligible: nothing else is written for it, and it
//         holds back, supersedes or defers no taint (a follower's, or one written while the
//         snapshot is empty, is in the decision log only).
//   GET /api/v1/namespaces/{namespace}/configmaps/{breaker_configmap} after every LIST, and
//   POST /api/v1/namespaces/{namespace}/configmaps on a trip: the breaker. It fails closed:
//   200 → tripped with data.reason; 404 → not tripped, unless this replica's trip is not yet
//   recorded (its POST failed), which stays tripped and is POSTed again (201 or 409 records
//   it); another status or no answer → state unknown (unless tripped) until a GET answers 200
//   or 404. The state is unknown from the start until the first GET.
//
// Per taint decision, in order (a refusal becomes a kSuppressed decision, see Hooks):
//   * dry run (global or the rule's): logged and counted, nothing written;
//   * node not in the snapshot (not eligible or gone), nor in a new LIST when the snapshot is
//     older than 1 s (a node that just joined): suppressed, and held 10 minutes: the first LIST
//     in that time that lists the node takes it up; deferred if that LIST fails;
//   * node labelled opt_out_label=true: suppressed;
//   * taint (same key and effect) already on the node, or faultline's taint as its annotation
//     names it (hasMarkedTaint: another key or effect, written before the config's taint
//     changed): nothing written;
//   * the node's annotation says faultline tainted it for this rule, with a decision time within
//     reapply_after, and the taint is gone: an operator removed it by hand: suppressed;
//   * breaker state unknown (not read yet, or its GET failed): deferred;
//   * breaker tripped, or the taint would exceed a limit (which trips it): suppressed, and kept
//     until the breaker is reset, then queued again (earliest decision first), unless a later
//     decision for the node and key (its untaint: the fault cleared) superseded it meanwhile or
//     is queued;
//   * else PATCH; 409 → re-GET, re-check and retry; 429 (after Retry-After), 5xx, 401 and no
//     response → retry after jittered exponential backoff; 404 and other statuses → failed. A
//     re-read that shows this decision's own mark and taint (an earlier try applied, its answer
//     lost) counts as applied; for an untaint, one with neither mark nor taint as removed. So
//     does the first read of a deferred decision handled again whose PATCH got no answer (none,
//     or a 5xx) before it was deferred.
// Untaint removes faultline's taint only where the annotation says faultline set it and the taint
// is the one it wrote (a taint put back by hand after faultline's was removed, the annotation
// left, is not: kube_objects hasMarkedTaint); elsewhere it is refused (a kSuppressed decision, no
// Event). The taint removed is the one the annotation names (its key and effect), whatever the
// decision's: the config's taint may have changed since faultline wrote it (a rollout), and the
// fault restored from the annotation (Hooks::on_restored) is untainted with the new one.
// A taint or untaint still failing with a retryable answer or a conflict (409) after
// max_attempts (an API server outage, writers that keep changing the node) is deferred, not
// dropped: the correlator will not decide it again, so the sink keeps the
// newest such decision per node and taint key and handles it again every node_list_period while
// it leads, until it is applied or refused, or a later decision for that node and key supersedes
// it (one that arrives while following, too). On leading in a new term (another replica may have
// led: LeaderElector::term()), one first deferred longer ago than follower_hold is dropped,
// logged and counted as failed, as a held decision that old is dropped: the node may have
// recovered meanwhile, its untaint sent to another leader; so is a taint the guard refused that
// long ago (logged; it was counted as suppressed). Leading again in the same term (the Lease
// still named this replica: an API server outage ended) keeps them.
// Deferred decisions and refused taints still pending at shutdown are logged as not applied; once
// Hooks::stopping, an API server that does not answer is not asked again, so that they are logged
// within the shutdown's grace period.
// Only the leader writes: while leader_term() is 0 decisions are held (follower_hold) and
// re-checked when leadership arrives, the last one per node and taint key (a later decision,
// held or queued, supersedes an earlier one), against a new LIST and breaker GET (another leader
// may have written meanwhile); all checks are idempotent, so nothing is written twice. Every
// request first checks that the term is still the one the decision started in: a leader that
// lost the Lease (or lost and won it again) mid-decision stops, and the decision is deferred; so
// is one written while this replica led and still queued when it lost the Lease (on the push path
// no other replica saw its lines): held, it was dropped after follower_hold, or at shutdown,
// without a word.

#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/node/node.h>

#include "core/decision.h"
#include "matcher/bank.h"
#include "sinks/kubernetes/kube_client.h"
#include "sinks/kubernetes/kube_objects.h"

namespace faultline {

// The blast-radius guard. A limit of 0 is off. Counts are of eligible nodes carrying a taint
// with the decision's key, or faultline's taint under another key (as its annotation names it,
// written before the config's taint changed: kube_objects countTaints), as the last LIST saw them
// plus faultline's own writes since (a taint of a node that carries the key already, with another
// effect, adds no node); max_new also counts the taints this process added to nodes no longer
// listed.
struct BlastRadiusLimits {
  int max_tainted = 10;             // nodes tainted at once
  double max_tainted_percent = 10;  // of eligible nodes, rounded down but at least 1 node
  // taints added inside `window` (timeAdded, or when added here if lifted since or no longer
  // listed)
  int max_new = 3;
  std::chrono::seconds window{600};
};

struct TaintSinkOptions {
  // Tries per request; still failing retryably after them, or meeting a conflict (409) on every
  // try, the decision is deferred (handled again every node_list_period); any other failure is
  // final at its first answer.
  int max_attempts = 8;
  // Backoff before try n+1 is drawn uniformly from [b/2, b], b = min(initial * 2^(n-1), max),
  // and is at least a 429's Retry-After (of at most 60 s).
  std::chrono::milliseconds initial_backoff{200};
  std::chrono::milliseconds max_backoff{10'000};

  // Eligible nodes: the union of these equality label selectors; empty = every node.
  std::vector<std::string> eligible = {"nvidia.com/gpu.present=true",
                                       "aws.amazon.com/neuron.present=true"};
  std::string opt_out_label = "faultline.dev/opt-out";  // value "true" opts a node out
  std::chrono::milliseconds node_list_period{30'000};
  int node_list_limit = 500;  // nodes per LIST page (`limit`), client-go's pager default
  BlastRadiusLimits limits;
  std::string breaker_namespace = "faultline";
  std::string breaker_configmap = "faultline-breaker";
  bool dry_run = false;
  std::vector<std::string> dry_run_rules;
  std::chrono::seconds reapply_after{24 * 3600};  // a hand-removed taint's incident lasts this
  std::string condition_type = "FaultlineFaulty";
  std::chrono::seconds follower_hold{60};  // decisions a follower keeps for a takeover

  // Reads the safety keys of the service config's `kubernetes` section: eligible, opt_out_label,
  // node_list_period, guard {max_tainted, max_tainted_percent, max_new, window}, namespace
  // (breaker ConfigMap; default: the pod's namespace), breaker_configmap, dry_run,
  // dry_run_rules, reapply_after, condition_type. Throws std::runtime_error on a bad value.
  static TaintSinkOptions fromYaml(const YAML::Node& kubernetes);

  // The ids of the rules in dry run, for the correlator (Pipeline), which marks their decisions
  // dry_run: every rule of the bank with dry_run, else dry_run_rules.
  std::vector<std::string> dryRunRules(const Bank& bank) const;
};

class TaintSink : public DecisionSink {
 public:
  // The Events kept to aggregate repeats (PATCH count and lastTimestamp), as client-go's
  // EventCorrelator keeps an LRU cache of 4096: past it, the least recently written is forgotten.
  static constexpr size_t kMaxEvents = 4096;
  struct Hooks {
    // Receives every refused decision, and every one given up (givenUp(): its reason starts "not
    // applied, given up"), as kSuppressed with its reason, on the sink's thread.
    std::function<void(const Decision&)> on_suppressed;
    // Receives each refused taint applied after an operator reset the breaker, or once its node
    // was listed eligible, its reason starting "taken up at the breaker reset" or "taken up once
    // the node was eligible", on the sink's thread: the decision log shows the taint after its
    // refusal.
    std::function<void(const Decision&)> on_resumed;
    // While this replica may write: its leadership term (LeaderElector::term()), which changes
    // each time it wins the Lease; 0 while another replica leads: nothing is written. Empty =
    // always leading, term 1.
    std::function<uint64_t()> leader_term;
    // While leader_term() is not 0: when that leadership ends unless it is renewed in time
    // (LeaderElector::leadingUntil(), steady clock). No request is sent after it, and none is
    // left waiting for its answer past it (a follower may take over lease_duration after the
    // last renewal it saw: the margin over renew_deadline covers a request the API server is
    // still applying). Empty = no end.
    std::function<KubeClient::Deadline()> leading_until;
    // After the sink's first successful LIST, and after the first one of each later leadership
    // term (leader_term changed: another replica may have led), for each listed node (and each
    // node held tainted here that is not listed but still carries a taint, read with a GET) whose
    // faultline.dev/taint annotation has a time and whose taint (the annotation's key and effect)
    // is still on it as faultline wrote it (hasMarkedTaint: not put back by hand): the node, the
    // annotation's rule and its time (the decision's event time, ns since the epoch). Taints an
    // earlier process or another leader set (before a rollout, a crash, while this replica
    // followed), which serve's correlator must know to lift them when the node recovers
    // (Pipeline::restoreTaint). Other LISTs show this replica's own marks.
    // `seen`: how many decisions were written to the sink before the LIST's view was taken (every
    // one of them handled before the LIST, or pending: a node with a decision pending here, queued,
    // held, deferred or refused, is not reported, as the LIST predates it, unless the decision is
    // a rule's in dry run, which changes nothing on the node); the correlator ignores
    // a node it decided after that many (Correlator::restore). On the sink's thread.
    std::function<void(const std::string& node, const std::string& rule, int64_t time_ns,
                       uint64_t seen)>
        on_restored;
    // With the same LISTs, for each listed node without faultline's taint as it wrote it (or
    // without its mark) and no decision pending here: another leader may have lifted a taint this
    // replica decided (Pipeline::liftTaint), the correlator must forget it to taint the node's next
    // fault. Also just before on_restored for a node whose mark is not the one this replica wrote
    // (or restored) on it: another leader lifted that taint and set its own, which the recovery
    // of the fault the correlator holds must not lift. And at every LIST, for each node whose last
    // decision written here was a taint, with no decision pending, that carries neither that
    // taint nor faultline's marked one (a node not listed, no longer eligible, is read with a
    // GET; one the GET answers 404 is gone): the taint was refused (opt-out, not eligible once
    // its take-up is given up, failed) or removed by hand since, or the node deleted, and the
    // correlator, holding the node tainted, would decide none of its later faults. A node not
    // listed that still carries the taint stays held tainted, so its recovery lifts it.
    std::function<void(const std::string& node, uint64_t seen)> on_lifted;
    // True once the service is to exit (SIGTERM, SIGINT). Its grace period is short (30 s,
    // deploy/), and a decision's tries against an API server that does not answer (8, each up to
    // the client's 15 s timeout) held the exit for minutes, until a SIGKILL lost the decision
    // unlogged. From then on a request that fails retryably is not tried again (a backoff under
    // way is cut short) and none is sent after it: the decisions left are deferred, and logged as
    // not applied at shutdown. Empty = never.
    std::function<bool()> stopping;
  };
  struct Counters {
    uint64_t applied = 0;            // taints written
    uint64_t untainted = 0;          // taints removed
    uint64_t already_present = 0;    // nothing to do
    uint64_t conflicts_retried = 0;  // 409 answers to our node PATCH
    uint64_t suppressed = 0;         // refused: limit, breaker, opt-out, hand-removed, eligible
    uint64_t dry_run = 0;            // decided, not written
    uint64_t deferred = 0;           // API server unavailable: to be handled again later
    uint64_t failed = 0;             // given up (4xx answers, invalid node name, old deferred)
    uint64_t not_applied = 0;        // deferred when the sink stopped (stop()): logged, lost
  };

  // `metrics`, if given, counts the sink's API requests (KubeClient) and must outlive the sink.
  explicit TaintSink(const KubeConfig& config, TaintSinkOptions options = {}, Hooks hooks = {},
                     Metrics* metrics = nullptr);
  TaintSink(const TaintSink&) = delete;
  TaintSink& operator=(const TaintSink&) = delete;
  TaintSink(TaintSink&&) = delete;
  TaintSink& operator=(TaintSink&&) = delete;
  // Drains the queue (including each request's retries), logs the deferred decisions not
  // applied (Counters::not_applied), then stops the worker. Once; later calls do nothing.
  void stop();
  // Calls stop().
  ~TaintSink() override;

  // Queues the decision and returns at once. Suppressed decisions from elsewhere are ignored.
  void write(const Decision& decision) override;
  // Blocks until every decision written before the call has been handled (or held by a
  // follower, or deferred).
  void flush() override;

  Counters counters() const;
  // Decisions waiting now, as of the worker's last turn (at most half a second old).
  struct Waiting {
    uint64_t deferred = 0;    // the API server did not take them yet: handled again
    uint64_t refused = 0;     // refused by the guard or breaker, until a reset or supersession
    uint64_t ineligible = 0;  // refused as the node was not listed eligible, until it is
  };
  Waiting waiting() const;
  // The breaker's reason while it is tripped, why its state is unknown while it is, else "".
  std::string breakerTripped() const;
  // The breaker for /metrics: 1 tripped (its ConfigMap written or not yet), 0 closed, -1 state
  // unknown (the ConfigMap not read yet or unreadable: no taint is applied; and on a follower,
  // which reads it once it leads: a value read while it led may be stale).
  int breakerState() const;

 private:
  // kUnrecorded: tripped here, but the ConfigMap could not be created yet.
  enum class Breaker { kUnknown, kClosed, kTripped, kUnrecorded };

  // What became of a decision: kRetry when the API server gave retryable answers only.
  enum class Outcome { kDone, kRetry };

  // A decision queued, held while following, or deferred.
  struct Pending {
    Decision decision;
    // An earlier handling's PATCH of the node got no answer (none, or a 5xx): it may have landed,
    // so a node that shows the decision done shows this decision's own write.
    bool may_have_landed = false;
    // When it was first deferred (zero until then): a new term drops it after follower_hold.
    std::chrono::steady_clock::time_point deferred_since{};
    // A refused taint queued again: why ("taken up at the breaker reset", "taken up once the
    // node was eligible"), else empty.
    std::string resumed;
    // Written while this replica led: if it no longer does at the decision's turn, the decision
    // is deferred, as one whose Lease was lost mid-decision, not held as a follower's.
    bool led = false;
  };

  void run();
  // Keeps `pending` to be handled again (the newest per node and taint key), its deferred_since
  // set if it was not deferred before. On the worker thread.
  void defer(Pending pending);
  uint64_t leaderTerm() const;
  KubeClient::Deadline leadingUntil() const;  // Hooks::leading_until, else none
  bool stopping() const;                      // Hooks::stopping
  void handle(const Pending& pending);
  Outcome taint(const Decision& decision);
  Outcome untaint(const Decision& decision);
  // A request of `action` ("taint X on node N") for decision `d` that failed after its tries:
  // logged; kRetry when the answer may change (retryable()), else givenUp() and kDone.
  Outcome requestFailed(const Decision& d, const std::string& action, const std::string& request,
                        const KubeClient::Response& r);
  // Decision `d` is dropped unapplied for `why`: logged, counted as failed, and handed to
  // Hooks::on_suppressed as a kSuppressed decision whose reason says so, so that the decision
  // log, which holds `d`, shows it was not applied.
  void givenUp(const Decision& d, const std::string& why);
  void suppress(const Decision& decision, const std::string& reason);
  // A kSuspect decision: an Event (FaultlineSuspect) on its node if the last LIST saw it eligible.
  void suspect(const Decision& decision);
  // Refreshes the node snapshot and the breaker when older than node_list_period or when there
  // is no snapshot (at start, on becoming leader), unless a LIST failed less than
  // node_list_period ago. False if there is still no snapshot.
  bool refresh();
  // Lists the eligible nodes into the snapshot (in a new term, also every node for faultline's
  // taints on nodes no longer eligible, into unlisted_), then reads the breaker; false if a LIST
  // page of eligible nodes failed (the last snapshot stays).
  bool list();
  // One paged LIST of the nodes `selector` selects ("": every node): take(name, node) for each.
  // False, logged, if a page failed.
  bool listPaged(const std::string& selector,
                 const std::function<void(const std::string&, nlohmann::json&)>& take);
  // "" if the taint is within the limits, else the reason it is not (and the breaker trips).
  std::string guard(const Decision& decision);
  void trip(const std::string& reason);
  // `d` supersedes what is kept of an earlier decision for its node and taint key: a deferred
  // decision, a refused taint.
  void supersede(const Decision& d);
  // faultline's mark on `node` without its taint: removed by hand. Sets the condition Unknown
  // (TaintRemovedByHand), unless the mark's rule runs in dry run.
  void removedByHand(const nlohmann::json& node, const TaintMark& mark);
  // An operator reset the breaker: queues the taints it refused, earliest decision first, to be
  // handled again (through the guard: they may trip it again), but for a node and key with a
  // decision in the queue already.
  void resumeRefused();
  // The node and taint key of each decision in queue_ but those of rules in dry run. mu_ held.
  std::set<std::pair<std::string, std::string>> queuedKeys() const;
  // POSTs the breaker ConfigMap; true once it exists (201, or 409 AlreadyExists).
  bool record(const std::string& reason);
  void setBreaker(Breaker state, std::string reason);
  // Records an Event on the node, tried once: an API server shedding load (429) held the worker
  // for the retries' backoff, about 20 s per decision, while later decisions waited. A lost Event
  // is logged; the node's condition says the same.
  void event(const std::string& node, const std::string& type, const std::string& reason,
             const std::string& message);
  // Sets the node's condition_type to `status` ("True": faulty, "False": recovered, "Unknown":
  // no longer tracked), writing nothing when it is so already (or absent and not "True").
  void condition(const nlohmann::json& node, std::string_view status, const std::string& reason,
                 const std::string& message);
  using Deadline = KubeClient::Deadline;
  // Sends `request` (given the leadership's end, Hooks::leading_until) up to `attempts` times,
  // with backoff while the answers are retryable; stops, deferring, when the term changed or at
  // shutdown.
  KubeClient::Response send(const std::function<KubeClient::Response(Deadline)>& request,
                            const std::string& what, int attempts);
  // send() with options_.max_attempts: every request but an Event's (event()).
  KubeClient::Response send(const std::function<KubeClient::Response(Deadline)>& request,
                            const std::string& what);
  // send()s a PATCH of the node object; a try without an answer sets may_have_landed_.
  KubeClient::Response patchNode(const std::string& path, const nlohmann::json& patch);
  void sleepBeforeRetry(int attempt, int retry_after_s);

  KubeClient client_;
  const TaintSinkOptions options_;
  const Hooks hooks_;

  // Worker-thread state.
  std::map<std::string, nlohmann::json> nodes_;  // the eligible nodes, by name
  // Nodes held tainted that the last LIST did not show, as read then, that carried a taint: the
  // guard counts them (guard()).
  std::map<std::string, nlohmann::json> unlisted_;
  // node -> when this process last added its taint (ns since the epoch), within guard.window:
  // max_new counts a taint lifted since, which nodes_ no longer shows.
  std::map<std::string, int64_t> added_;
  std::chrono::steady_clock::time_point listed_{};
  // The last LIST, failed or not; none at start and in a new term. Not the clock's epoch: the
  // steady clock counts from boot, and "at the epoch" would be less than node_list_period ago
  // on a host up for less than that.
  std::optional<std::chrono::steady_clock::time_point> list_tried_;
  bool have_snapshot_ = false;  // nodes_ was listed since this replica last became leader
  // The next LIST calls Hooks::on_restored: set in each new term (the first one included).
  bool restore_pending_ = false;
  uint64_t term_ = 0;      // the leadership term the worker acts in; 0: following
  uint64_t led_term_ = 0;  // the last term the worker acted in
  // Since stopping(), a request failed retryably: send() sends no more.
  bool unanswered_at_stop_ = false;
  // The decision being handled's Pending::may_have_landed, then set by patchNode().
  bool may_have_landed_ = false;
  std::string resumed_;   // the decision being handled's Pending::resumed
  std::string handling_;  // the node of the decision being handled, else ""
  struct EventRecord {
    std::string name;
    int count = 0;
    uint64_t used = 0;  // events_used_ when last written
  };
  // node + reason + message → its Event, for the repeats' PATCH; at most kMaxEvents, the least
  // recently written dropped first (its repeat then POSTs a new Event).
  std::unordered_map<std::string, EventRecord> events_;
  uint64_t events_used_ = 0;
  std::map<std::pair<std::string, std::string>, Pending> deferred_;  // by node, taint key
  // Taints the guard refused, by node and taint key, until a later decision for the node and key
  // supersedes them (an untaint: the fault cleared), the breaker is reset (resumeRefused()), or a
  // new term finds them refused longer ago than follower_hold.
  struct Refused {
    std::chrono::steady_clock::time_point since;
    Decision decision;
  };
  std::map<std::pair<std::string, std::string>, Refused> refused_;
  // Taints refused because the node was not in the LIST of eligible nodes, by node and taint key:
  // GPU Feature Discovery labels a new node after its first kernel lines shipped, and a GPU that
  // fell off the bus prints nothing more. Taken up at the first LIST within kIneligibleHold that
  // shows the node, else dropped (the correlator then learns the node carries no taint);
  // superseded as refused_ is.
  std::map<std::pair<std::string, std::string>, Refused> ineligible_;
  // node -> the rule and event time of the mark of faultline's taint this replica wrote on it or
  // restored (a later rule's taint of the tainted node writes none), until an untaint decided or
  // a LIST without faultline's taint: a new term's LIST that shows another mark (another leader
  // lifted that taint and set its own) reports the node lifted, then restored.
  std::map<std::string, std::pair<std::string, int64_t>> decided_marks_;
  std::chrono::steady_clock::time_point deferred_tried_{};

  std::atomic<uint64_t> applied_{0};
  std::atomic<uint64_t> untainted_{0};
  std::atomic<uint64_t> already_present_{0};
  std::atomic<uint64_t> conflicts_retried_{0};
  std::atomic<uint64_t> suppressed_{0};
  std::atomic<uint64_t> dry_run_{0};
  std::atomic<uint64_t> deferred_count_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<uint64_t> not_applied_{0};
  // deferred_, refused_ and ineligible_ sizes, as the worker last saw them (waiting()).
  std::atomic<uint64_t> waiting_deferred_{0};
  std::atomic<uint64_t> waiting_refused_{0};
  std::atomic<uint64_t> waiting_ineligible_{0};

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // queue_ gained an entry or stopping_ was set
  std::condition_variable idle_cv_;  // queue_ is empty and nothing is in flight
  std::deque<Pending> queue_;
  std::deque<Decision> suspects_;  // kSuspect decisions: an Event each (suspect())
  std::deque<std::pair<std::chrono::steady_clock::time_point, Pending>> held_;  // follower
  Breaker breaker_ = Breaker::kUnknown;  // set by the worker only: it reads without mu_
  std::string breaker_reason_ = "state unknown: not read yet";  // unless kClosed
  bool busy_ = false;
  bool stopping_ = false;
  uint64_t written_ = 0;  // write() calls, suppressed decisions included (Hooks::on_restored)
  // The nodes whose last decision written (not in dry run) is a taint, which the correlator holds
  // tainted: the written_ count of that decision and its taint's key and effect. A LIST that
  // shows one without that taint or faultline's marked one reports it lifted (Hooks::on_lifted).
  struct Believed {
    uint64_t written = 0;
    std::string key;
    std::string effect;
  };
  std::map<std::string, Believed> believed_;
  std::thread worker_;  // last: starts after everything above is initialised
};

}  // namespace faultline
