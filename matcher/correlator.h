// Per-node correlation over event time: turns signature hits into taint and untaint decisions by
// the bank's rules (rule keys: rules/README.md).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "core/decision.h"
#include "matcher/bank.h"
#include "matcher/flat_map.h"
#include "matcher/matcher.h"

namespace faultline {

// Semantics, per rule and per (node, rule, entity) key, where the entity is the rule's `entity`
// fields of the hit (the GPU's PCI address, an HCA port, an NVSwitch link, ...):
//   - a hit whose node, signature, line and job equal those of a hit already observed in the same
//     second of event time (secondOf) is a repeat and changes nothing: a line printed many times
//     at once is one event (replay keeps one of them: Pipeline::collect), but for a state line
//     (a port's DOWN, ACTIVE: Signature::state), which the rules take again as nothing new, and
//     of which DOWN, ACTIVE, DOWN in one second is the state changing twice;
//   - a hit carries the fields of its signature's tables (the Xid catalog's action and class:
//     Hit) and gets, through `alias` rules, a PCI address for a GPU UUID; `joins` fills a
//     continuation line's missing fields from its head line;
//   - it counts only if every `where` field has one of the listed values, it is not attached to
//     a cause (`attach_to`) or suppressed by one (`suppressed_by`, unless a hit of the cause's
//     `recovery.by` rules came between them), it is not inside the dedup
//     window of the key's last counted hit nor within `burst` of the key's previous hit, and,
//     for `flap` rules, it is the up half of a down-then-up pair;
//   - `unless_followed_by` rules hold a hit that would count for their `within`: it counts when
//     that time has passed with no hit of the listed rules on the same entity (a lasting state);
//   - a `suspects_peers` hit reports a hang; a hang's window is whole seconds of event time: the
//     rule's `within` from the start of the earliest report's second not yet decided. Once it has
//     passed, that report starts a hang of each job its node was running then (runningAt(), from
//     member(), at the window's start) with no hang of that window open: the nodes running
//     the job then that reported within the window are its reporters, and the others are decided
//     suspect (the fault is on a worker that is not waiting), when at least two nodes reported
//     it and those that did not do not outnumber them. Whole seconds make a node's reports of one
//     second all fall inside or all outside a window, so one of them (the earliest) is kept and
//     a repeat dropped changes no decision (only which copy its evidence quotes: wait());
//   - `cluster` rules are held until their window has passed: hits on `nodes` or more nodes in
//     one window (of one job, for `distinct_jobs` rules), wherever it starts, are a job's event
//     and count for no node; a hit counts once the window starting with it has passed without;
//     `corroborated_by` decides at once when one of those rules hit the same node within its
//     window, before or after (only a hit that counts, whichever line came first: one attached,
//     suppressed, or inside dedup or burst is corroborated by none; and a hit of those rules
//     that was attached or suppressed corroborates none);
//   - fatal rules fault on the first counted hit, warning rules when `count` counted hits fall
//     within `window`, info rules only when `corroborated_by` (their hits still attach,
//     suppress, corroborate, join and recover);
//   - a node's first fault taints it (one decision); later faults join silently;
//   - a fault clears on a hit of a rule in its `recovery.by` with equal entity fields, at least
//     a minute after the fault's last hit (a driver load printed with the failure is not a
//     reboot; the state that ends the fault's own hits, a `flap` rule's up or an
//     `unless_followed_by` rule's hit, counts however soon), after `recovery.stable` (from the
//     first such hit) with no new hit of the fault's rule, or after `recovery.quiet` without any
//     hit; when the last fault of a tainted node clears, the node gets one untaint decision and is
//     healthy again;
//   - the faults of rules in dry run taint and untaint the node apart from the others, by the
//     same semantics, in decisions marked dry_run: a rule in dry run (a new rule tried out) never
//     holds back a real rule's taint nor names the untaint of a real one; its hits corroborate,
//     recover, suppress, attach, follow and lend joined fields to rules in dry run only (a real
//     rule's fault would taint for real, a real rule's taint would be lifted or held off); a
//     node's real rules forget its recent hits when its real faults have cleared, its rules in
//     dry run when all its faults have (as if they were real); an alias rule cannot be in dry
//     run beside real rules. A real decision is the one the lines without its own would give.
// Hits must arrive in event-time order per node (replay sorts them all; live streams are ordered
// per node). Time moves with the hits, heard() and advance(); nothing depends on the wall clock.
class Correlator {
 public:
  enum class NodeState : uint8_t { kHealthy, kSuspect, kTainted, kRecovering };
  struct Stats {
    uint64_t attached = 0;    // hits attached to their cause, not counted
    uint64_t suppressed = 0;  // hits dropped by suppressed_by
    uint64_t job_events = 0;  // cluster windows that counted for no node (a job's event)
    uint64_t repeats = 0;     // hits that repeated one of the same second, Hit::repeats too
    // Live: hits more than max_lag behind the newest time when they came. Their node may have
    // been found silent and its timers decided without them, or their cluster window closed, so
    // live may decide otherwise than replay.
    uint64_t late = 0;
  };

  // max_lag_ns: how far (ns of event time) one node's log may run behind the newest of all and
  // still decide its own timers; 0 in replay, whose hits are sorted by time (see advance()).
  // dry_run_rules: ids of the bank's rules in dry run. Throws std::runtime_error naming an id
  // that is not a rule of the bank (a typo would run the rule for real), or an alias rule's
  // while some rule is not in dry run.
  Correlator(std::shared_ptr<const Bank> bank, Taint taint, int64_t max_lag_ns = 0,
             const std::vector<std::string>& dry_run_rules = {});

  // Appends the decisions `hit` completes (and those of timers that fall due before it). Taken by
  // value: its line and fields become the evidence the correlator keeps, without a copy.
  void observe(Hit hit, std::vector<Decision>* out);
  // Live: `node` sent kernel and host records up to time_ns, and pod records up to pod_ns (ns
  // since the epoch; INT64_MIN: none), in the batch being correlated.
  void heard(std::string_view node, int64_t time_ns, int64_t pod_ns = INT64_MIN);
  // Live, before a batch's hits: `node` has records in the batch, whose newest time of all is
  // newest_ns, its own newest kernel and host record's time_ns and pod record's pod_ns (ns since
  // the epoch; INT64_MIN: none). The node is not silent (advance()) at any hit of the batch,
  // however far another node's hit moves the newest time (for the timers of rules that hear no pod
  // stream, only if its records speak for its kernel's, as advance() says); its own time moves
  // only with its hits and heard(), after them.
  void arrived(std::string_view node, int64_t newest_ns, int64_t time_ns, int64_t pod_ns);
  // Moves event time to `now_ns` (ns since the epoch), the newest of any node, and decides what
  // falls due, in time order. A node's recovery, quiet and unless_followed_by timers fall due by
  // its own newest time (its hits and heard()): a node whose log lags behind the others' (a
  // backlog, a slower Kafka partition) is not decided on the others' time. Its pods' records
  // count for the timers of rules that hear no pod stream only once they are max_lag ahead of its
  // kernel and host records: their stream may run ahead of the kernel's, and a shipper may take
  // their times from a pod's text, so a pod's line must not decide a port DOWN lasting while the
  // node's ACTIVE is on its way. A pod rule's timers, which its pods' hits hold, fall due by
  // their time at once. Only once the node has sent nothing while the newest time moved on by
  // max_lag do its timers fall due by the newest time (a node gone silent). For the timers no pod
  // line bears on (of rules whose signature, followers and recovery signals hear no pod stream),
  // a pod record stamped more than max_lag before the node's newest kernel or host record is
  // nothing sent: it says nothing of how far the kernel's stream has come, and pods that stamp
  // their lines an hour back (local time read as UTC, or a pod's choosing) would keep a node whose
  // kernel went quiet after a port DOWN from ever being silent, the DOWN never decided. Such a
  // node's timers fall due once max_lag behind the newest time, as a kernel that lags less may
  // still be on its way; those of kernel rules a pod line bears on (a pod rule as follower or
  // recovery signal) only once its pods too lag more than max_lag. Held cluster windows and
  // suspects_peers reports wait until the newest time is max_lag past their window's end, so that
  // a lagging node's hits (and its pods' records, for its jobs) still join them. Then forgets the
  // nodes silent for forgetAfterNs().
  void advance(int64_t now_ns, std::vector<Decision>* out);
  // End of input (replay): decides every held cluster window and waiting suspects_peers report,
  // by the end of its window, as advance() takes them (so the decisions come in live's order).
  void finish(std::vector<Decision>* out);
  // Live, after a restart: `node` carries the taint that rule `rule_id` decided at time_ns (ns
  // since the epoch, the decision's event time) in an earlier process, whose state this one never
  // saw. Records that rule's fault with empty entity fields (the mark names none, so the rule's
  // recovery signal on any GPU or port clears it, and its hit on any holds it), its last hit at
  // time_ns (the node heard then), its quiet timer from quiet_from_ns if that is later (live: the
  // service's clock at the restart; the earlier process may have seen hits since the decision, this
  // one did not), and the node as tainted, deciding nothing: the node is then untainted as if
  // fault() had recorded it here. A fault of another rule that had joined the taint is not known.
  // `seen`: how many of this correlator's decisions (in order) the caller's view of the node may
  // reflect. Returns "" if restored, else why not, changing nothing: the node is tainted already
  // here, or this process decided its taint or untaint after the `seen`-th decision (it knows why;
  // a LIST that predates the sink's handling of an untaint decided here still shows the taint; a
  // decision in dry run, which changes nothing on the node, does not count), or the rule is not
  // in the bank or is in dry run.
  std::string restore(std::string_view node, std::string_view rule_id, int64_t time_ns,
                      int64_t quiet_from_ns = INT64_MIN, uint64_t seen = 0);
  // Live: `node` carries no faultline taint (another leader lifted it while this process,
  // following, heard nothing of the node; or the sink refused the taint, or an operator removed
  // it by hand). Forgets its faults of rules not in dry run and its taint, deciding nothing, so
  // that its next fault is decided again.
  // `seen` as for restore(). Returns "" if lifted, else why not, changing nothing: the node is
  // not tainted here, or this process decided it after the `seen`-th decision (not in dry run).
  std::string lift(std::string_view node, uint64_t seen);

  // Job membership, from pod records: `node` ran a pod of `job` from first_ns to last_ns (ns
  // since the epoch; a run of its pod records, none of them more than jobRunGapNs() apart).
  // Kept per (job, node) as runs, those at most jobRunGapNs() apart merged (whatever the order
  // they come in), for suspects_peers rules, until they ended longer ago than twice the longest
  // such rule's window (Pipeline records none without such rules).
  void member(std::string_view job, std::string_view node, int64_t first_ns, int64_t last_ns);
  // Adds the membership another correlator recorded (replay threads).
  void absorbMembers(const Correlator& other);

  // The longest gap (ns) between a job's pod records on a node that one run spans: the shortest
  // suspects_peers window, so that a pod line that joins a run across a hang's start is stamped
  // within every such rule's window of it (hang()); 0 without such rules: member() is of no use.
  int64_t jobRunGapNs() const { return run_gap_ns_; }
  // Whether advance() reads heard(): max_lag is above 0.
  bool hearsNodes() const { return max_lag_ns_ > 0; }

  // Live (with a max_lag, which heard() needs), how long (ns of event time) a node may send no
  // record before the correlator forgets it; replay, which sees only hits, forgets no node (one
  // without a hit for a week may well be logging, and forgetting it lost its GPU UUID aliases: a
  // later GPU reset named by UUID recovered nothing). The longer of kForgetAfterNs and the bank's
  // longest duration plus max_lag, so that every window, dedup, burst and held cluster hit of the
  // node has ended by then. Nodes that are tainted, or hold a fault or a pending hit, are kept
  // however long they are silent. Forgetting changes no decision but in two cases: a node whose log
  // comes back after that long a silence with older stamps (a week-old backlog) meets none of its
  // hits from before the silence, as a node silent for max_lag already has its timers decided on
  // the others' time; and the node's GPU UUID -> PCI aliases are lost until the driver prints the
  // next `NVRM: GPU at PCI:` line (it does with an Xid), so that a GPU reset naming only a UUID
  // meanwhile recovers nothing. Without it, every node name ever seen would keep its state
  // (BM_CorrelatorNodeState: 3.7 KB for a GPU node's boot) for the service's life, and node churn
  // would grow memory without bound.
  static constexpr int64_t kForgetAfterNs = int64_t{7} * 24 * 3600 * 1'000'000'000;
  int64_t forgetAfterNs() const { return forget_after_ns_; }

  NodeState state(std::string_view node) const;
  const Stats& stats() const { return stats_; }
  size_t nodes() const { return nodes_.size(); }
  // The job runs kept for suspects_peers rules.
  size_t jobRuns() const;
  // The suspects_peers reports waiting for their window: at most one per rule, node and second
  // of event time, for the rule's window plus max_lag.
  size_t waitingReports() const;

 private:
  using Fields = std::vector<std::pair<std::string, std::string>>;
  struct Counter {
    int64_t last_counted_ns = INT64_MIN;
    // distinct_jobs rules: each job's last counted hit, for the job's own dedup. A lookup per hit
    // however many jobs (a pushed flood of job labels scanned them all, per hit); the jobs past
    // dedup are dropped once the map has doubled since the last drop.
    FlatMap<int64_t> jobs_counted;
    size_t jobs_prune_at = 16;
    int64_t last_seen_ns = INT64_MIN;
    int64_t down_ns = INT64_MIN;  // flap rules: the pending down hit
    Evidence down;
    // Vectors, not deques: fewer than `count` entries, and a deque allocates even when empty and
    // when moved, which every new key and every growth of the node's map paid for.
    std::vector<int64_t> times;      // counted hits inside the window
    std::vector<Evidence> evidence;  // the same hits, as evidence (at most `count`)
  };
  // What became of a hit with its rule: attached to a cause or suppressed by one (that incident's),
  // a repeat inside the dedup or burst of the key's counted hit, or counted.
  enum class Fate : uint8_t { kDropped, kRepeat, kCounted };
  // The newest stamped hits of one rule on one node, read in time order oldest first from `next`
  // once full (out of order, a hit takes the place of the earliest stamped), kept only for the
  // rules findRecent() is asked about (looked_up_). The evidence is shared with observe(): a storm
  // keeps its hits here without copying their lines and fields.
  struct Recent {
    uint32_t rule = 0;
    std::vector<std::shared_ptr<const Evidence>> hits;
    std::vector<Fate> fates;  // of hits, index for index
    size_t next = 0;
    // The newest hit not dropped and the newest counted, however many hits pushed them out of
    // `hits` since (every rank's line of one hang, repeats of the one that counted), and the two
    // before the newest hit, which note() puts back when that hit is not counted.
    std::shared_ptr<const Evidence> kept, counted, kept_before, counted_before;
  };
  // (due, node, key): a fault's recovery or quiet timer, or a pending hit's (same key space: a key
  // has a pending hit only while it has no fault).
  using Timers = std::set<std::tuple<int64_t, std::string, std::string>>;
  struct Fault {
    uint32_t rule = 0;
    Fields entity;
    int64_t first_ns = 0;  // its earliest hit
    int64_t last_ns = 0;
    int64_t due_ns = INT64_MAX;  // recovery (stable) or quiet timer; INT64_MAX: none
    Timers::iterator timer;      // its entry in timers_, while due_ns is not INT64_MAX
    bool recovering = false;
    Evidence recovery;  // the recovery signal, when recovering
    std::string recovered_by;
    bool recovery_guarded = false;  // recover()'s guard applied to that signal
    // The times of its newest-stamped hits (INT64_MIN: none): suppressLate() finds its newest hit
    // before a cause read after hits it suppresses.
    std::array<int64_t, 4> hits_ns = {INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN};
    // Whether a hit at t (ns), read after the recovery signal, leaves the signal's recovery
    // standing, as replay, taking the hit first, would have: stamped before the signal, and
    // beyond recover()'s guard where it applies.
    bool signalStands(int64_t t) const;
    // Keeps t among hits_ns if it is newer than one of them.
    void noteHit(int64_t t);
  };
  struct Pending {  // an unless_followed_by hit waiting for its time to pass
    uint32_t rule = 0;
    Fields fields;
    Evidence evidence;
    int64_t due_ns = 0;
    // The rule's hits on the key read while this one is held, stamped after it and before due_ns,
    // in time order, the earliest kLaterPerHeld: when a follower ends this one, replay, which read
    // them after that follower, would hold the first of them stamped after it.
    std::vector<Evidence> later;
  };
  struct NodeData {
    bool tainted = false;
    bool dry_tainted = false;      // by the faults of rules in dry run
    uint64_t decided = 0;          // the number of its latest taint or untaint not in dry run, or 0
    int64_t time_ns = INT64_MIN;   // its newest hit or heard() time, but for its pods'
    int64_t pod_ns = INT64_MIN;    // its newest pod hit or heard() pod time
    int64_t heard_ns = INT64_MIN;  // the newest time of all (now_ns_) when it was last heard
    // heard_ns, by the records that speak for its kernel (speaksForKernel): never after
    // heard_ns.
    int64_t kernel_heard_ns = INT64_MIN;
    int64_t second = INT64_MIN;  // of the latest hit (secondOf)
    FlatMap<int64_t> seen;       // repeatKey() -> the latest second it was observed in
    FlatMap<Pending> pending;    // key: rule index + entity
    FlatMap<Counter> counters;   // key: rule index + entity
    std::vector<Recent> recent;  // per rule that hit, in first-hit order
    FlatMap<Fault> faults;       // key: rule index + entity
    FlatMap<std::string> alias;  // e.g. GPU UUID -> PCI address
    // Faults a recovery signal cleared, by key, until the key faults again: a hit stamped before
    // the signal may still arrive (holdFault).
    FlatMap<Fault> cleared;
    // The time of the latest clear (in time) that left other real faults holding its taint,
    // since it was last healthy: replay, which never made those of them a cause or follower read
    // late retracts, was healthy again there. INT64_MIN: none.
    int64_t healthy_but_for_ns = INT64_MIN;
    // Its recent hits stamped at or before these are forgotten (it was healthy again then): for
    // lookups of its real rules, and of its rules in dry run (forgotFor).
    int64_t forgot_ns = INT64_MIN;
    int64_t dry_forgot_ns = INT64_MIN;
  };
  struct Held {
    std::string node;
    Fields fields;
    Evidence evidence;
  };
  // A cluster rule's hits of one job (distinct_jobs rules; else of every job, key ""), held until
  // their window ends, and until when that job's event lasts.
  struct HeldJob {
    std::deque<Held> hits;
    int64_t event_until_ns = INT64_MIN;
  };
  using Runs = std::vector<std::pair<int64_t, int64_t>>;  // [first, last] ns, in time order

  // If the node holds a fault under `key`, a new hit `ev` of rule ri, at t = ev.time_ns (ns),
  // holds it: no recovery under way, and its quiet period counts from t, or from the fault's
  // newest hit if that is later (a hit that arrives after a later one). A hit stamped before the
  // recovery signal under way (beyond recover()'s guard, where it applies) leaves the recovery
  // running, as replay, taking the hit first, would have started it. So it does the rule's fault
  // that names no entity (a restored one), whatever the hit's entity.
  // A hit stamped before the signal that cleared the fault of `key` (NodeData::cleared), arriving
  // after it, held that fault in replay: it counts for nothing; within the guard, where replay's
  // signal recovered nothing, the fault stands again, and a taint decision goes to `out`.
  // Returns whether the hit held the fault of `key`, active or cleared.
  bool holdFault(uint32_t ri, NodeData& node, const std::string& node_name, const std::string& key,
                 const Evidence& ev, std::vector<Decision>* out);
  void observeRule(uint32_t ri, NodeData& node, const std::string& node_name,
                   const std::shared_ptr<const Evidence>& ev, std::vector<Decision>* out);
  // Whether a hit of rule `rule` at t (ns since the epoch) falls inside the dedup of its key's
  // last counted hit (for distinct_jobs rules, of its job's); if not, it is noted as counted.
  static bool deduplicated(const Rule& rule, Counter& c, const Fields& fields, int64_t t);
  // Whether an unless_followed_by rule's hit at t (ns since the epoch) on `fields` has its
  // follower among the node's recent hits, stamped after it and within unless_within: the
  // follower came first, though stamped later (one node's lines spread over partitions), and
  // replay, reading it after the hit, ends the hit with it.
  bool followed(uint32_t ri, const NodeData& node, const Fields& fields, int64_t t) const;
  // Holds `pending` under `key` (no hit held there yet) until its due_ns.
  void holdPending(NodeData& node, const std::string& node_name, const std::string& key,
                   Pending pending);
  // Counts the hit `ev`; a fault it completes is decided at event time at_ns.
  void count(uint32_t ri, NodeData& node, const std::string& node_name, const Fields& fields,
             const Evidence& ev, int64_t at_ns, std::vector<Decision>* out);
  // Records rule ri's fault on the entity of `fields`, decided at event time at_ns (ns since the
  // epoch) on `evidence` (in time order); the node's first taints it, with `reason` (why the rule
  // acted, in words) and `evidence`. Recovery signals of the node stamped after the evidence
  // that came before it (recent hits) are then taken, in time order, as recover() takes them.
  void fault(uint32_t ri, NodeData& node, const std::string& node_name, const Fields& fields,
             std::vector<Evidence> evidence, int64_t at_ns, std::string reason,
             std::vector<Decision>* out);
  // Live: takes the node's recent hits of rule ri's recovery signals stamped after t (ns since
  // the epoch), in time order, through recover(), until the fault under `key` recovers or is gone.
  // One node's lines spread over partitions can bring such a signal before a hit of the fault
  // stamped earlier (the fault's first hits, or one that ended the recovery the signal started):
  // replay took it after that hit.
  void recoverAfter(uint32_t ri, NodeData& node, const std::string& node_name,
                    const std::string& key, int64_t t, std::vector<Decision>* out);
  // Adds rule ri's fault under `key` (entityKey of `fields`) with its newest hit at t (ns): its
  // quiet timer set, the key's count, cleared fault and held hit dropped. No decision.
  Fault& record(uint32_t ri, NodeData& node, const std::string& node_name, const std::string& key,
                const Fields& fields, int64_t t);
  // Why rule ri acted on its counted hits, in words: "3 hits within 24h", "2 flaps within 1h",
  // "2 jobs within 1d", "a fatal hit", with "no <rules> within <d>" for unless_followed_by.
  std::string counted(uint32_t ri) const;
  // Pod rule pod_rule's hit `ev` (with its `fields`): faults it, at the later of the two stamps,
  // if a kernel hit of its corroborated_by rules comes within its window: the newest at or before
  // it, else the earliest after it, as replay meets them. Returns whether one does.
  bool corroborate(uint32_t pod_rule, NodeData& node, const std::string& node_name,
                   const Fields& fields, const Evidence& ev, std::vector<Decision>* out);
  // Numbers a taint or untaint decision of `node` (decided_), and marks the node decided by it
  // unless it is in dry run (restore(), lift()).
  void noteDecided(NodeData& node, bool dry_run);
  // Recovery signal `ev` of rule ri (with its `fields`) starts the recovery of the node's faults
  // whose rules it recovers, on the same entity: cleared now, or once their `stable` period
  // passes. Not of a fault hit within recover()'s guard before it, nor, for a port's state, of
  // one hit after it (a hit that came first though stamped later).
  void recover(uint32_t ri, NodeData& node, const std::string& node_name, const Fields& fields,
               const Evidence& ev, std::vector<Decision>* out);
  // Clears the fault at `key` at at_ns; the node's last fault cleared untaints it. `retracted`:
  // replay, reading the lines in time order, never made the fault (its cause or follower was read
  // after it), so the node, healthy again, forgets only the recent hits replay forgot
  // (NodeData::healthy_but_for_ns).
  void clearFault(NodeData& node, const std::string& node_name, const std::string& key,
                  int64_t at_ns, std::string reason, std::vector<Decision>* out,
                  bool retracted = false);
  void schedule(const std::string& node_name, const std::string& key, Fault& f, int64_t due_ns);
  // Decides the first window of rule ri's held hits of job `job_name` (a copy: the index entry
  // that named it goes).
  void flushHeld(uint32_t ri, std::string job_name, std::vector<Decision>* out);
  // Takes suspects_peers rule ri's earliest waiting report, whose window has passed: for each job
  // its node was running then with no hang open, a hang of that window; its kSuspect decisions,
  // at the window's end, in job and node name order.
  void hang(uint32_t ri, std::vector<Decision>* out);
  // Queues `ev`, a report of suspects_peers rule ri by `node`, as its node's report of its second
  // unless an earlier one (by time, then line) waits. (A line repeated in one second reaches it
  // once, the copy read first: observe().)
  void wait(uint32_t ri, std::string_view node, const Evidence& ev);
  // The end (ns) of cluster rule ri's earliest held window (one is held).
  int64_t heldEnd(uint32_t ri) const;
  // The cluster rule whose earliest held window ends first (of equal ends, the rule first in the
  // bank); empty if none holds hits.
  std::optional<uint32_t> earliestHeld() const;
  // The last nanosecond of the window of suspects_peers rule ri's earliest waiting report (one
  // waits): the window holds the seconds before reportEnd + 1.
  int64_t reportEnd(uint32_t ri) const;
  // The suspects_peers rule whose earliest waiting report's window ends first; empty if none waits.
  std::optional<uint32_t> earliestReport() const;
  // The jobs `node` was running at time_ns (ns since the epoch), in name order: of those it
  // logged for within within_ns (ns) before, the one it logged for last (a node that moved on to
  // another job runs that one), or each it logged for then (side by side).
  std::vector<std::string> runningAt(std::string_view node, int64_t time_ns,
                                     int64_t within_ns) const;
  // Forgets the job runs that ended before before_ns (ns since the epoch).
  void pruneMembers(int64_t before_ns);
  // Forgets the nodes last heard before before_ns (ns since the epoch) that hold nothing a later
  // decision needs: no taint, fault or pending hit (forgetAfterNs()).
  void forgetSilent(int64_t before_ns);
  NodeData& nodeOf(std::string_view name);
  // The node sent a record of time_ns (a pod's, if `pod`): its own time, and when it was last
  // heard (now_ns_).
  void hear(NodeData& node, int64_t time_ns, bool pod = false) const;
  // Whether a record of time_ns (ns since the epoch; a kernel, host or pod record) keeps the node
  // heard for the timers of rules that hear no pod stream: stamped no more than max_lag before its
  // newest kernel or host record, the most one of its streams may lag behind another. Records
  // stamped an hour back (a shipper reading local time as UTC) do not.
  bool speaksForKernel(const NodeData& node, int64_t time_ns) const;
  // Whether rule ri's hit `ev` of node_name waits in its cluster window (held_).
  bool heldInWindow(uint32_t ri, std::string_view node_name, const Evidence& ev) const;
  // The rule of the timer under `key`: a pending hit's or a fault's.
  uint32_t timerRule(const NodeData& node, const std::string& key) const;
  // Sets repeat_key_ to the hit's signature, job and line.
  void repeatKey(const Hit& hit);
  // Whether rule `ri` has a fault on the entity of `fields` (fault() would add nothing).
  bool faulted(uint32_t ri, const NodeData& node, const Fields& fields) const;
  // Sets where_pass_ to the rules of the hit's signature whose `where` conditions all hold for
  // `fields`: a bit per rule, in rules_by_signature_ order.
  void whereMask(uint32_t signature, const Fields& fields);
  // The newest (or, if `earliest`, the earliest) recent hit of `rules` on the node from before_ns
  // before time_ns to after_ns after it (ns), with equal `entity` fields where both have them,
  // whose fate is at least `least`, and not forgotten for rule `asker` (forgotFor).
  const Evidence* findRecent(const NodeData& node, uint32_t asker, std::span<const uint32_t> rules,
                             const std::vector<std::string>& entity, const Fields& fields,
                             int64_t time_ns, int64_t before_ns, int64_t after_ns,
                             Fate least = Fate::kDropped, bool earliest = false) const;
  // Live: rule ri's hit `cause` came after the hits of a fault that its window suppresses,
  // though stamped before them (one node's lines spread over partitions): replay read it first
  // and suppressed each (suppressedBy). Clears that fault; if it was the node's last, the untaint
  // decision, naming the cause as evidence, goes to `out`.
  void suppressLate(uint32_t ri, NodeData& node, const std::string& node_name,
                    const Evidence& cause, std::vector<Decision>* out);
  // Whether a hit of rule ri with `fields` at time_ns is dropped by its `suppressed_by`: a hit of
  // one of those rules within its window, with no hit of that rule's `recovery.by` rules since (a
  // boot or a driver reload between them ends that incident).
  bool suppressedBy(const NodeData& node, uint32_t ri, const Fields& fields, int64_t time_ns) const;
  // The time (ns) up to which `node` forgot its recent hits for lookups of rule `asker`
  // (NodeData::forgot_ns or dry_forgot_ns).
  int64_t forgotFor(const NodeData& node, uint32_t asker) const;
  // Rule ri's recovery.by rules that act for rule `asker`: those in dry run only for one in dry
  // run.
  std::span<const uint32_t> recoveredBy(uint32_t ri, uint32_t asker) const;
  // Notes the fate of rule ri's recent hit `ev` (kept only for the rules findRecent() is asked
  // about).
  static void note(NodeData& node, uint32_t ri, const Evidence* ev, Fate fate);

  std::shared_ptr<const Bank> bank_;
  Taint taint_;
  std::vector<std::vector<uint32_t>> rules_by_signature_;
  std::vector<std::vector<uint32_t>> corroborates_;  // rule -> the rules it corroborates
  // rule -> the rules whose hits corroborate it: its corroborated_by but, for a rule not in dry
  // run, those in dry run (a rule tried out taints no node for real, through another rule neither)
  std::vector<std::vector<uint32_t>> corroborated_by_;
  // rule -> its attach_to, suppressed_by and unless_followed_by rules, but so for a rule not in
  // dry run: a rule tried out changes no real decision
  std::vector<std::vector<uint32_t>> attach_to_, suppressed_by_, followed_by_;
  std::vector<std::vector<uint32_t>> real_recovered_by_;  // rule -> its recovery.by not in dry run
  std::vector<std::vector<uint32_t>> cancels_;     // rule -> rules whose pending hits it ends
  std::vector<std::vector<uint32_t>> suppresses_;  // rule -> rules it is in the suppressed_by of
  std::vector<bool> recovers_;                     // rule is named in some recovery.by
  // rule's signature, or that of one of its unless_followed_by or recovery.by rules, hears pods:
  // its node's kernel silence decides its timers only once the node's pods lag too (advance())
  std::vector<bool> hears_pods_;
  std::vector<bool> dry_run_;  // rule is in dry run
  // rule is named in some attach_to, suppressed_by, joins or corroborated_by, or is corroborated
  std::vector<bool> looked_up_;
  std::vector<uint32_t> alias_rules_;
  std::vector<uint32_t> cluster_rules_;       // advance() looks at their held hits on every hit
  FlatMap<std::unique_ptr<NodeData>> nodes_;  // a pointer each: NodeData& outlives inserts
  uint64_t decided_ = 0;                      // decisions made, dry run too
  // cluster rules: job -> its held hits; ordered so that replay flushes equal ends alike
  std::vector<std::map<std::string, HeldJob, std::less<>>> held_;
  // cluster rules: (time of the first held hit, job) of each job holding hits, earliest first, so
  // that advance(), on every hit, looks at one entry per rule however many jobs hold hits
  std::vector<std::set<std::pair<int64_t, std::string>>> held_fronts_;
  // cluster rules: (event end, job) of each job left holding no hits, earliest first; flushHeld
  // drops the jobs whose event ended before the window it closes
  std::vector<std::set<std::pair<int64_t, std::string>>> held_idle_;
  std::vector<uint32_t> peer_rules_;  // the suspects_peers rules
  // suspects_peers rules: (second of event time, node) -> the node's earliest report of that
  // second (wait()), waiting for its window to pass (advance())
  std::vector<std::map<std::pair<int64_t, std::string>, Evidence>> reports_;
  // suspects_peers rules: job -> the end of its latest hang's window (ns, a whole second, not in
  // the window)
  std::vector<FlatMap<int64_t>> hang_until_;
  // job -> node -> its runs; those that ended longer ago than twice the longest suspects_peers
  // window (peers_within_ns_) are pruned every such window of event time
  FlatMap<FlatMap<Runs>> jobs_;
  FlatMap<std::vector<std::string>> node_jobs_;  // node -> the jobs it has runs of in jobs_
  int64_t peers_within_ns_ = 0;                  // the longest suspects_peers window
  int64_t run_gap_ns_ = 0;                       // jobRunGapNs()
  int64_t prune_at_ns_ = INT64_MIN;
  int64_t forget_after_ns_ = kForgetAfterNs;
  int64_t forget_at_ns_ = INT64_MIN;  // advance() looks for silent nodes once an hour of event time
  Timers timers_;
  int64_t max_lag_ns_ = 0;
  int64_t now_ns_ = INT64_MIN;
  std::string repeat_key_;  // reused: a hit builds no string to look itself up
  // observe(): the hit's rules in some recovery.by, with the evidence each saw; reused
  std::vector<std::pair<uint32_t, std::shared_ptr<const Evidence>>> recovering_;
  // observe(): the hit's rules in some suppressed_by, with the evidence each saw; reused
  std::vector<std::pair<uint32_t, std::shared_ptr<const Evidence>>> suppressing_;
  // observe(): pod hits stamped after the kernel hit that corroborates them, by pod rule, to be
  // taken as replay reads them, after the kernel hit; reused
  std::vector<std::pair<uint32_t, Evidence>> corroborated_after_;
  // A signature's `where` conditions by field, each field once: a hit looks each field up once and
  // gets a bit per rule (rules_by_signature_ order), not a test per rule and condition (the 8
  // rules of nvidia-xid all test `class`). A rule's bit is set for a value that every condition
  // of the rule on that field lists; with no condition on the field, for any value.
  struct WhereField {
    std::string_view name;
    std::vector<std::pair<std::string_view, std::vector<uint64_t>>> listed;  // value -> rules
    std::vector<uint64_t> other;  // a value no rule lists: the rules without a condition here
  };
  std::vector<std::vector<WhereField>> where_;  // by signature
  std::vector<uint64_t> where_pass_;            // observe(): whereMask()'s result
  Stats stats_;
};

}  // namespace faultline
