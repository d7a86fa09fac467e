#include "matcher/correlator.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

#include "core/time.h"

namespace faultline {
namespace {

// A driver load or reset report printed with the failure itself (NVIDIA/NVSentinel#155 logs
// `NVRM: loading NVIDIA UNIX ...` 130 ms after "fallen off the bus") is not a recovery.
constexpr int64_t kRecoveryGuardNs = 60'000'000'000;
// Whether a recovery signal at signal_ns comes kRecoveryGuardNs or more after a hit at hit_ns
// (record times, within Pipeline::match's range: the sum cannot overflow).
bool pastRecoveryGuard(int64_t hit_ns, int64_t signal_ns) {
  return signal_ns >= hit_ns + kRecoveryGuardNs;
}
// Newest hits kept per (node, rule) for attach, suppress, join and corroborate lookups.
constexpr size_t kRecentPerRule = 8;
// Evidence lines a decision carries at most (a corroborated or attached incident).
constexpr size_t kMaxEvidence = 8;
// Hits read while one is held that a held hit keeps, the earliest stamped (Pending::later): a
// flood of a port's DOWN lines keeps no more.
constexpr size_t kLaterPerHeld = 8;
// Distinct lines kept per node for telling repeats, beyond those of the node's latest second.
constexpr size_t kSeenPerNode = 16;
// How often, in event time, advance() looks for nodes to forget (forgetSilent).
constexpr int64_t kForgetEveryNs = int64_t{3600} * 1'000'000'000;

bool has(const std::vector<std::string>& values, std::string_view v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

using Fields = std::vector<std::pair<std::string, std::string>>;  // Correlator::Fields

// Whether `partial`'s fields named in `entity`, where it has them, are those of `full`: a hit that
// names no GPU or port (a boot) is of every one.
bool agrees(const std::vector<std::string>& entity, const Fields& partial, const Fields& full) {
  return std::all_of(entity.begin(), entity.end(), [&](const std::string& n) {
    const std::string_view mine = fieldOf(partial, n);
    return mine.empty() || mine == fieldOf(full, n);
  });
}

bool ruleApplies(const Rule& rule, const std::vector<std::pair<std::string, std::string>>& f) {
  return std::all_of(rule.where.begin(), rule.where.end(),
                     [&](const auto& cond) { return has(cond.second, fieldOf(f, cond.first)); });
}

std::string entityKey(uint32_t rule_index, const Rule& rule,
                      const std::vector<std::pair<std::string, std::string>>& f) {
  std::string key = std::to_string(rule_index);
  for (const std::string& name : rule.entity) {
    key += '\x1f';
    key += fieldOf(f, name);
  }
  return key;
}

// A duration as the bank writes it: 10m, 24h, 2d, 90s, 500ms.
std::string duration(int64_t ns) {
  for (const auto& [unit, name] : {std::pair<int64_t, const char*>{86400 * kNanosPerSecond, "d"},
                                   {3600 * kNanosPerSecond, "h"},
                                   {60 * kNanosPerSecond, "m"},
                                   {kNanosPerSecond, "s"}}) {
    if (ns % unit == 0) {
      return std::to_string(ns / unit) + name;
    }
  }
  return std::to_string(ns / 1'000'000) + "ms";
}

// " pci=0000:3b:00": the entity's fields with a value. A restored fault names none (its mark does
// not), and shows nothing rather than "pci=".
std::string describe(const std::vector<std::pair<std::string, std::string>>& entity) {
  std::string s;
  for (const auto& [k, v] : entity) {
    if (!v.empty()) {
      s += (s.empty() ? " " : ", ") + k + "=" + v;
    }
  }
  return s;
}

}  // namespace

Correlator::Correlator(std::shared_ptr<const Bank> bank, Taint taint, int64_t max_lag_ns,
                       const std::vector<std::string>& dry_run_rules)
    : bank_(std::move(bank)), taint_(std::move(taint)), max_lag_ns_(max_lag_ns) {
  const size_t n = bank_->rules.size();
  dry_run_.assign(n, false);
  for (const std::string& id : dry_run_rules) {
    const std::optional<uint32_t> ri = bank_->ruleIndex(id);
    if (!ri) {
      throw std::runtime_error("dry_run_rules: no rule '" + id + "' in the bank");
    }
    dry_run_[*ri] = true;
  }
  // An alias rule's aliases name every rule's entities: in dry run beside a real rule, it would
  // change real decisions (all rules in dry run, as kubernetes.dry_run puts them, is fine).
  const bool real = std::count(dry_run_.begin(), dry_run_.end(), false) > 0;
  for (uint32_t i = 0; i < n && real; ++i) {
    if (dry_run_[i] && !bank_->rules[i].alias_from.empty()) {
      throw std::runtime_error("dry_run_rules: '" + bank_->rules[i].id +
                               "' maps aliases (alias_from) for every rule and decides nothing: "
                               "it cannot run in dry run beside real rules");
    }
  }
  rules_by_signature_.resize(bank_->signatures.size());
  corroborates_.resize(n);
  corroborated_by_.resize(n);
  attach_to_.resize(n);
  suppressed_by_.resize(n);
  followed_by_.resize(n);
  real_recovered_by_.resize(n);
  cancels_.resize(n);
  suppresses_.resize(n);
  recovers_.assign(n, false);
  hears_pods_.assign(n, false);
  looked_up_.assign(n, false);
  held_.resize(n);
  held_fronts_.resize(n);
  held_idle_.resize(n);
  reports_.resize(n);
  hang_until_.resize(n);
  where_.resize(bank_->signatures.size());
  int64_t longest = 0;  // of the rules' durations
  for (uint32_t i = 0; i < n; ++i) {
    const Rule& r = bank_->rules[i];
    rules_by_signature_[r.signature].push_back(i);
    // A rule in dry run acts on real rules through none of these: it changes no real decision.
    const auto acts = [&](uint32_t c) { return !dry_run_[c] || dry_run_[i]; };
    for (uint32_t c : r.corroborated_by) {
      if (acts(c)) {
        corroborates_[c].push_back(i);
        corroborated_by_[i].push_back(c);
      }
    }
    for (uint32_t c : r.unless_followed_by) {
      if (acts(c)) {
        cancels_[c].push_back(i);
        followed_by_[i].push_back(c);
      }
    }
    for (uint32_t c : r.suppressed_by) {
      if (acts(c)) {
        suppresses_[c].push_back(i);
        suppressed_by_[i].push_back(c);
      }
    }
    std::copy_if(r.attach_to.begin(), r.attach_to.end(), std::back_inserter(attach_to_[i]), acts);
    std::copy_if(r.recovered_by.begin(), r.recovered_by.end(),
                 std::back_inserter(real_recovered_by_[i]),
                 [&](uint32_t c) { return !dry_run_[c]; });
    if (!r.alias_from.empty()) {
      alias_rules_.push_back(i);
    }
    if (r.cluster_nodes > 0) {
      cluster_rules_.push_back(i);
    }
    if (r.peers_within_ns > 0) {
      peer_rules_.push_back(i);
    }
    for (uint32_t by : r.recovered_by) {
      recovers_[by] = true;
    }
    auto pods = [&](uint32_t ri) {
      return bank_->signatures[bank_->rules[ri].signature].appliesTo(StreamKind::kPod);
    };
    hears_pods_[i] = pods(i) || std::any_of(followed_by_[i].begin(), followed_by_[i].end(), pods) ||
                     std::any_of(r.recovered_by.begin(), r.recovered_by.end(),
                                 [&](uint32_t c) { return acts(c) && pods(c); });
    // The rules findRecent() is asked about, and the recovery signals fault() looks back at.
    for (const std::vector<uint32_t>* rules : {&r.attach_to, &r.suppressed_by, &r.corroborated_by,
                                               &r.unless_followed_by, &r.recovered_by}) {
      for (uint32_t c : *rules) {
        looked_up_[c] = true;
      }
    }
    // suppressedBy() looks for the recovery signals of the rules a hit may be suppressed by.
    for (uint32_t c : r.suppressed_by) {
      for (uint32_t by : bank_->rules[c].recovered_by) {
        looked_up_[by] = true;
      }
    }
    if (r.joins >= 0) {
      looked_up_[static_cast<uint32_t>(r.joins)] = true;
    }
    if (!r.corroborated_by.empty()) {
      looked_up_[i] = true;
    }
    peers_within_ns_ = std::max(peers_within_ns_, r.peers_within_ns);
    if (r.peers_within_ns > 0 && (run_gap_ns_ == 0 || r.peers_within_ns < run_gap_ns_)) {
      run_gap_ns_ = r.peers_within_ns;
    }
    for (const int64_t d :
         {r.window_ns, r.dedup_ns, r.burst_ns, r.attach_within_ns, r.suppress_within_ns,
          r.join_within_ns, r.flap_within_ns, r.cluster_within_ns, r.corroborate_within_ns,
          r.peers_within_ns, r.unless_within_ns, r.stable_ns, r.quiet_ns}) {
      longest = std::max(longest, d);
    }
  }
  forget_after_ns_ = std::max(
      kForgetAfterNs, longest > INT64_MAX - max_lag_ns_ ? INT64_MAX : longest + max_lag_ns_);
  for (uint32_t sig = 0; sig < rules_by_signature_.size(); ++sig) {
    const std::vector<uint32_t>& rules = rules_by_signature_[sig];
    const size_t words = (rules.size() + 63) / 64;
    where_pass_.resize(std::max(where_pass_.size(), words));
    std::vector<WhereField>& fields = where_[sig];
    for (uint32_t ri : rules) {
      for (const auto& cond : bank_->rules[ri].where) {
        if (std::none_of(fields.begin(), fields.end(),
                         [&](const WhereField& f) { return f.name == cond.first; })) {
          fields.push_back({cond.first, {}, {}});
        }
      }
    }
    for (WhereField& field : fields) {
      // Whether rule `ri` accepts `value` (nullptr: a value no condition lists) on this field.
      auto accepts = [&](uint32_t ri, const std::string* value) {
        return std::all_of(
            bank_->rules[ri].where.begin(), bank_->rules[ri].where.end(), [&](const auto& cond) {
              return cond.first != field.name || (value != nullptr && has(cond.second, *value));
            });
      };
      auto mask = [&](const std::string* value) {
        std::vector<uint64_t> bits(words);
        for (size_t k = 0; k < rules.size(); ++k) {
          if (accepts(rules[k], value)) {
            bits[k / 64] |= uint64_t{1} << (k % 64);
          }
        }
        return bits;
      };
      field.other = mask(nullptr);
      for (uint32_t ri : rules) {
        for (const auto& cond : bank_->rules[ri].where) {
          if (cond.first != field.name) {
            continue;
          }
          for (const std::string& value : cond.second) {
            if (std::none_of(field.listed.begin(), field.listed.end(),
                             [&](const auto& l) { return l.first == value; })) {
              field.listed.emplace_back(value, mask(&value));
            }
          }
        }
      }
    }
  }
}

void Correlator::observe(Hit hit, std::vector<Decision>* out) {
  const std::vector<uint32_t>& rules = rules_by_signature_[hit.signature];
  if (rules.empty()) {
    return;
  }
  // Repeats the matcher folded into this hit (Hit::repeats) are repeats as much as those seen here.
  stats_.repeats += hit.repeats;
  if (max_lag_ns_ > 0 && hit.time_ns + max_lag_ns_ < now_ns_) {  // now_ns_ may be INT64_MIN
    ++stats_.late;
  }
  NodeData& node = nodeOf(hit.node);
  hear(node, hit.time_ns, hit.stream == StreamKind::kPod);
  const Signature& sig = bank_->signatures[hit.signature];
  const int64_t second = secondOf(hit.time_ns);
  if (second != node.second) {
    node.second = second;
    if (node.seen.size() > kSeenPerNode) {
      node.seen.clear();  // a bound: lines of earlier seconds are no longer repeats
    }
  }
  // A state line (a port's DOWN, ACTIVE) is never a repeat: DOWN, ACTIVE, DOWN in one second is
  // the state changing twice, and live may read the second DOWN before the ACTIVE. The rules
  // take a state line again as nothing new (a DOWN while one is held, an ACTIVE while recovering).
  if (!sig.state) {
    repeatKey(hit);
    if (int64_t* seen = node.seen.find(repeat_key_)) {
      if (*seen == second) {
        ++stats_.repeats;
        return;
      }
      *seen = second;  // a line seen before, in another second: a flood reuses its key
    } else {
      node.seen[repeat_key_] = second;
    }
  }
  advance(hit.time_ns, out);
  // The hit's evidence, shared by its rules and the node's recent hits; only a rule that joins a
  // head line copies it.
  auto built = std::make_shared<Evidence>(
      Evidence{hit.time_ns, sig.id, std::move(hit.line), std::move(hit.fields)});
  for (uint32_t ai : alias_rules_) {  // a GPU UUID names the PCI address an alias rule mapped
    const Rule& a = bank_->rules[ai];
    if (fieldOf(built->fields, a.alias_to).empty()) {
      if (const std::string* to = node.alias.find(fieldOf(built->fields, a.alias_from))) {
        built->fields.emplace_back(a.alias_to, *to);
      }
    }
  }
  const std::shared_ptr<const Evidence> ev = std::move(built);
  const Fields& fields = ev->fields;
  whereMask(hit.signature, fields);
  for (size_t k = 0; k < rules.size(); ++k) {
    const uint32_t ri = rules[k];
    const Rule& rule = bank_->rules[ri];
    if (!rule.alias_from.empty()) {
      const std::string_view from = fieldOf(fields, rule.alias_from);
      const std::string_view to = fieldOf(fields, rule.alias_to);
      if (!from.empty() && !to.empty()) {
        node.alias[from] = std::string(to);
      }
      continue;
    }
    std::shared_ptr<const Evidence> joined;  // set only by a join: no reference count per rule
    // A head in dry run lends a real rule's hit no fields (it would change a real decision).
    if (rule.joins >= 0 && (!dry_run_[static_cast<uint32_t>(rule.joins)] || dry_run_[ri])) {
      const auto head_rule = static_cast<uint32_t>(rule.joins);
      if (const Evidence* head = findRecent(node, ri, {&head_rule, 1}, {}, fields, hit.time_ns,
                                            rule.join_within_ns, 0)) {
        auto copy = std::make_shared<Evidence>(*ev);
        for (const auto& kv : head->fields) {
          if (fieldOf(copy->fields, kv.first).empty()) {
            copy->fields.push_back(kv);
          }
        }
        joined = std::move(copy);
      }
    }
    if (joined ? !ruleApplies(rule, joined->fields)
               : (where_pass_[k / 64] & (uint64_t{1} << (k % 64))) == 0) {
      continue;
    }
    const std::shared_ptr<const Evidence>& used = joined ? joined : ev;
    observeRule(ri, node, hit.node, used, out);
    if (recovers_[ri]) {
      recovering_.emplace_back(ri, used);
    }
    if (!suppresses_[ri].empty()) {
      suppressing_.emplace_back(ri, used);
    }
  }
  // After the cause's own fault formed: the node stays tainted by it.
  for (const auto& [ri, e] : suppressing_) {
    suppressLate(ri, node, hit.node, *e, out);
  }
  suppressing_.clear();
  // Recovery signals after every rule of the hit, whatever their order in the bank: the up hit
  // that completes a flap fault is also that fault's first recovery signal.
  for (const auto& [ri, e] : recovering_) {
    recover(ri, node, hit.node, e->fields, *e, out);
  }
  recovering_.clear();
  // In time order, as replay reads them: the earliest names the taint.
  std::stable_sort(
      corroborated_after_.begin(), corroborated_after_.end(),
      [](const auto& a, const auto& b) { return a.second.time_ns < b.second.time_ns; });
  for (const auto& [pod_rule, pod] : corroborated_after_) {
    // Replay holds a pod hit stamped after the kernel hit for its cluster window: its closing
    // corroborates it.
    if (!faulted(pod_rule, node, pod.fields) && !heldInWindow(pod_rule, hit.node, pod)) {
      corroborate(pod_rule, node, hit.node, pod.fields, pod, out);
    }
  }
  corroborated_after_.clear();
}

void Correlator::whereMask(uint32_t signature, const Fields& fields) {
  std::fill(where_pass_.begin(), where_pass_.end(), ~uint64_t{0});
  for (const WhereField& field : where_[signature]) {
    const std::string_view value = fieldOf(fields, field.name);
    const std::vector<uint64_t>* bits = &field.other;
    for (const auto& [listed, rules] : field.listed) {
      if (listed == value) {
        bits = &rules;
        break;
      }
    }
    for (size_t w = 0; w < bits->size(); ++w) {
      where_pass_[w] &= (*bits)[w];
    }
  }
}

void Correlator::observeRule(uint32_t ri, NodeData& node, const std::string& node_name,
                             const std::shared_ptr<const Evidence>& shared,
                             std::vector<Decision>* out) {
  const Evidence& ev = *shared;
  const Fields& f = ev.fields;
  const Rule& rule = bank_->rules[ri];
  const int64_t t = ev.time_ns;
  if (looked_up_[ri]) {
    auto recent = std::find_if(node.recent.begin(), node.recent.end(),
                               [&](const Recent& r) { return r.rule == ri; });
    if (recent == node.recent.end()) {
      recent = node.recent.insert(recent, Recent{.rule = ri});
    }
    if (recent->hits.size() < kRecentPerRule) {
      recent->hits.push_back(shared);
      recent->fates.push_back(Fate::kCounted);
    } else {
      // The earliest stamped gives way, the oldest read of them first (in time order, as in
      // replay, the one at `next`): lines stamped hours back (a pod's choosing, a backlog) push
      // out no newer hit a later lookup needs, and one stamped before all is not kept.
      size_t oldest = recent->next;
      for (size_t k = 1; k < kRecentPerRule; ++k) {
        const size_t at = (recent->next + k) % kRecentPerRule;
        oldest = recent->hits[at]->time_ns < recent->hits[oldest]->time_ns ? at : oldest;
      }
      if (t >= recent->hits[oldest]->time_ns) {
        recent->hits[oldest] = shared;
        recent->fates[oldest] = Fate::kCounted;
        recent->next = oldest == recent->next ? (oldest + 1) % kRecentPerRule : recent->next;
      }
    }
    recent->kept_before = std::exchange(recent->kept, shared);
    recent->counted_before = std::exchange(recent->counted, shared);
  }
  if (rule.peers_within_ns > 0) {  // decided once its window has passed (hang())
    wait(ri, node_name, ev);
  }
  for (uint32_t held : cancels_[ri]) {
    const Rule& hr = bank_->rules[held];
    // The held hits this follower ends: of its entity, or of every entity where it names none (a
    // node's shutdown or boot ends a port's DOWN), as followed() finds followers. Not a held hit
    // stamped after it, which replay takes after it (one node's lines spread over partitions
    // arrive out of order).
    std::vector<std::string> keys;
    for (const auto& [key, p] : node.pending) {
      if (p.rule == held && t >= p.evidence.time_ns && agrees(hr.entity, f, p.fields)) {
        keys.push_back(key);
      }
    }
    for (const std::string& key : keys) {
      Pending* p = node.pending.find(key);
      timers_.erase({p->due_ns, node_name, key});
      std::vector<Evidence> later = std::move(p->later);
      node.pending.erase(key);
      // Replay reads those after this follower: the first that no follower ends is held.
      for (auto e = later.begin(); e != later.end(); ++e) {
        if (e->time_ns > t && !followed(held, node, e->fields, e->time_ns)) {
          Pending next{held,
                       e->fields,
                       {},
                       e->time_ns + hr.unless_within_ns,
                       {std::make_move_iterator(e + 1), std::make_move_iterator(later.end())}};
          next.evidence = std::move(*e);
          holdPending(node, node_name, key, std::move(next));
          break;
        }
      }
    }
    // A fault its held hit made when its time passed, live, before this follower came, though
    // stamped within `within` of the hit (the node's lines spread over partitions or topics):
    // replay ended the hit with the follower and made no fault. A follower that recovers the rule
    // (a port's ACTIVE) starts its recovery (recover()); one that does not (a shutdown, a boot)
    // would leave the fault for good: it clears it now. Not a fault held since by later hits.
    if (hr.count <= 1 && !std::count(hr.recovered_by.begin(), hr.recovered_by.end(), ri)) {
      std::vector<std::string> ended;
      for (const auto& [key, flt] : node.faults) {
        if (flt.rule == held && flt.first_ns == flt.last_ns && t >= flt.first_ns &&
            t < flt.first_ns + hr.unless_within_ns && agrees(hr.entity, f, flt.entity)) {
          ended.push_back(key);
        }
      }
      for (const std::string& key : ended) {
        const int64_t hit = node.faults.find(key)->first_ns;
        // At the taint's time, not before it: the follower's stamp is earlier.
        clearFault(node, node_name, key, hit + hr.unless_within_ns,
                   "ended by " + rule.id + " " + duration(t - hit) + " after its hit, read late",
                   out, true);
      }
    }
  }
  // A hit attached to a cause or suppressed by one is that incident's: it counts for nothing and
  // corroborates nothing (a pod rule's fault, quiet: 24h, would hold the node's taint after the
  // incident's own fault has cleared).
  const bool attached =
      !attach_to_[ri].empty() &&
      findRecent(node, ri, attach_to_[ri], rule.entity, f, t, rule.attach_within_ns, 0) != nullptr;
  const bool suppressed = !attached && suppressedBy(node, ri, f, t);
  if (attached || suppressed) {
    note(node, ri, &ev, Fate::kDropped);
  } else {
    for (uint32_t pod_rule : corroborates_[ri]) {
      const Rule& pr = bank_->rules[pod_rule];
      // A storm's kernel hits meet a pod rule already faulted: no lookup, no evidence copied.
      if (pr.entity.empty() && faulted(pod_rule, node, f)) {
        continue;
      }
      // Only a pod hit that counted: one attached to a cause, suppressed, or a repeat inside its
      // rule's dedup or burst makes no fault of its own, whichever of the two lines came first. A
      // pod hit that its suppressed_by rules dropped when it came is no evidence either. As replay
      // meets them: the newest at or before this hit, else the earliest after it.
      auto usable = [&](const Evidence* e) {
        return e != nullptr && !faulted(pod_rule, node, e->fields) &&
               !suppressedBy(node, pod_rule, e->fields, e->time_ns);
      };
      const Evidence* r = findRecent(node, pod_rule, {&pod_rule, 1}, {}, f, t,
                                     pr.corroborate_within_ns, 0, Fate::kCounted);
      if (!usable(r)) {
        r = findRecent(node, pod_rule, {&pod_rule, 1}, {}, f, t + 1, 0,
                       pr.corroborate_within_ns - 1, Fate::kCounted, true);
        if (!usable(r)) {
          continue;
        }
      }
      if (r->time_ns > t) {  // replay reads it after this hit and all that this hit decides
        corroborated_after_.emplace_back(pod_rule, *r);
        continue;
      }
      const Evidence copy = *r;  // fault() may reset the node's recent hits
      fault(pod_rule, node, node_name, copy.fields, {copy, ev}, t,
            "corroborated by " + ev.signature + " within " + duration(pr.corroborate_within_ns),
            out);
    }
  }
  if (attached) {
    ++stats_.attached;
    return;
  }
  if (rule.severity == Severity::kInfo) {
    if (rule.corroborated_by.empty()) {
      return;
    }
    // Suppressed as any rule's hit is: corroborated, it would fault for the incident it belongs to.
    if (suppressed) {
      ++stats_.suppressed;
      return;
    }
    // Evidence that acts only with the node's own support; once it has, its hits hold the fault
    // as any rule's do (recovery.quiet counts from the last).
    const std::string key = entityKey(ri, rule, f);
    if (!holdFault(ri, node, node_name, key, ev, out)) {
      corroborate(ri, node, node_name, f, ev, out);
    }
    return;
  }
  if (suppressed) {
    ++stats_.suppressed;
    return;
  }
  const std::string key = entityKey(ri, rule, f);
  Counter& c = node.counters[key];
  // Within `burst` of the key's newest hit, before or after: a node's streams may arrive apart
  // (a pod's line after a kernel line stamped later), and the order must not decide. Compared,
  // not subtracted: times 1717 and 2222 (Pipeline::match) are further apart than int64 holds.
  const bool in_burst = rule.burst_ns > 0 && c.last_seen_ns != INT64_MIN &&
                        t < c.last_seen_ns + rule.burst_ns && c.last_seen_ns < t + rule.burst_ns;
  c.last_seen_ns = std::max(c.last_seen_ns, t);
  std::vector<Evidence> pair;
  if (!rule.flap_field.empty()) {
    const std::string_view state = fieldOf(f, rule.flap_field);
    if (has(rule.flap_down, state)) {
      c.down_ns = t;
      c.down = ev;
      // Down again: no recovery yet, quiet counts from here.
      holdFault(ri, node, node_name, key, ev, out);
      return;
    }
    if (!has(rule.flap_up, state) || c.down_ns == INT64_MIN ||
        t > c.down_ns + rule.flap_within_ns) {
      return;
    }
    c.down_ns = INT64_MIN;
    if (node.faults.contains(key)) {
      return;  // the port back up is the recovery rule's signal, not a new hit of the fault
    }
    pair.push_back(c.down);
  }
  if (holdFault(ri, node, node_name, key, ev, out)) {  // a fault's: only its timers move
    return;
  }
  if (in_burst || deduplicated(rule, c, f, t)) {
    note(node, ri, &ev, Fate::kRepeat);
    return;
  }
  if (!rule.unless_followed_by.empty()) {
    if (followed(ri, node, f, t)) {  // its follower came first: replay ends it with that
      return;
    }
    Pending* p = node.pending.find(key);
    if (p == nullptr) {
      holdPending(node, node_name, key, Pending{ri, f, ev, t + rule.unless_within_ns, {}});
    } else if (t < p->evidence.time_ns) {
      // Stamped before the held hit, read after it: replay holds this one, and reads that one
      // while this one is held.
      Pending earlier{ri, f, ev, t + rule.unless_within_ns, std::move(p->later)};
      earlier.later.insert(earlier.later.begin(), std::move(p->evidence));
      if (earlier.later.size() > kLaterPerHeld) {
        earlier.later.pop_back();
      }
      timers_.erase({p->due_ns, node_name, key});
      node.pending.erase(key);
      holdPending(node, node_name, key, std::move(earlier));
    } else if (t > p->evidence.time_ns && t < p->due_ns &&
               (p->later.size() < kLaterPerHeld || t < p->later.back().time_ns)) {
      const auto at =
          std::upper_bound(p->later.begin(), p->later.end(), t,
                           [](int64_t time, const Evidence& e) { return time < e.time_ns; });
      p->later.insert(at, ev);
      if (p->later.size() > kLaterPerHeld) {
        p->later.pop_back();
      }
    }
    return;
  }
  const std::string_view job = rule.distinct_jobs ? fieldOf(f, kJobField) : "";
  // A pod without a job counts for no node, in a job's event or not: only corroboration acts on
  // it (count()), at once. Held, every jobless pod's hit would wait in one window that each
  // closing rescans.
  if (rule.cluster_nodes > 0 && !(rule.distinct_jobs && job.empty())) {
    auto it = held_[ri].find(job);
    if (it == held_[ri].end()) {
      it = held_[ri].emplace(std::string(job), HeldJob{}).first;
    }
    // In time order: a lagging node's hit, arriving after later ones, still joins its window.
    std::deque<Held>& hits = it->second.hits;
    if (hits.empty() || t < hits.front().evidence.time_ns) {
      if (!hits.empty()) {
        held_fronts_[ri].erase({hits.front().evidence.time_ns, it->first});
      }
      held_fronts_[ri].emplace(t, it->first);
    }
    hits.insert(std::upper_bound(hits.begin(), hits.end(), t,
                                 [](int64_t at, const Held& h) { return at < h.evidence.time_ns; }),
                Held{node_name, f, ev});
    return;
  }
  if (!pair.empty() && rule.count == 1) {
    fault(ri, node, node_name, f, {pair[0], ev}, t, counted(ri), out);
    return;
  }
  count(ri, node, node_name, f, ev, t, out);
}

bool Correlator::holdFault(uint32_t ri, NodeData& node, const std::string& node_name,
                           const std::string& key, const Evidence& ev, std::vector<Decision>* out) {
  const Rule& rule = bank_->rules[ri];
  const int64_t t = ev.time_ns;
  // Returns whether the hit ended a recovery under way. A recovery signal stamped after the hit
  // may have come before it, as the one it ended did: replay took that after the hit, and it
  // recovers the fault again (recoverAfter).
  auto hold = [&](const std::string& k, Fault& flt) {
    // A hit stamped before the fault's newest (another stream of the node arriving later, a pod's
    // line stamped in the past) came first: the quiet period still runs from the newest.
    flt.last_ns = std::max(flt.last_ns, t);
    flt.first_ns = std::min(flt.first_ns, t);
    flt.noteHit(t);
    const int64_t quiet_due =
        rule.quiet_ns > 0 ? flt.last_ns + rule.quiet_ns : static_cast<int64_t>(INT64_MAX);
    // Live, a node's lines can arrive out of order (spread over partitions read within
    // max_skew of each other): one stamped before the signal came first in replay.
    if (flt.recovering && flt.signalStands(t)) {
      schedule(node_name, k, flt, std::min(flt.recovery.time_ns + rule.stable_ns, quiet_due));
      return false;
    }
    const bool ended = std::exchange(flt.recovering, false);
    schedule(node_name, k, flt, quiet_due);
    return ended;
  };
  // A fault that names no entity (restored after a restart: the mark names none) stands for any:
  // as its rule's recovery signal on any GPU or port clears it, its rule's hit on any holds it.
  if (!rule.entity.empty() && !node.faults.empty()) {
    const std::string any = entityKey(ri, rule, {});
    if (Fault* flt = any != key ? node.faults.find(any) : nullptr;
        flt != nullptr && hold(any, *flt)) {
      recoverAfter(ri, node, node_name, any, t, out);
    }
  }
  if (Fault* flt = node.faults.find(key)) {
    if (hold(key, *flt)) {
      recoverAfter(ri, node, node_name, key, t, out);
    }
    return true;
  }
  // Live, the signal that cleared the fault may come before a hit stamped earlier (lines spread
  // over partitions): replay took the hit first, and it held the fault.
  const Fault* gone = node.cleared.find(key);
  if (gone == nullptr || t >= gone->recovery.time_ns) {
    return false;
  }
  if (gone->signalStands(t)) {
    return true;  // replay's signal cleared it all the same
  }
  const int64_t signal_ns = gone->recovery.time_ns;
  // Within the guard replay's signal recovered nothing: the fault stands, from this hit.
  const std::string reason =
      gone->recovered_by + " " + duration(signal_ns - t) + " after a hit recovers nothing";
  node.cleared.erase(key);
  fault(ri, node, node_name, ev.fields, {ev}, signal_ns, reason, out);
  return true;
}

void Correlator::Fault::noteHit(int64_t t) {
  int64_t& oldest = *std::min_element(hits_ns.begin(), hits_ns.end());
  oldest = std::max(oldest, t);
}

bool Correlator::Fault::signalStands(int64_t t) const {
  return t < recovery.time_ns && (!recovery_guarded || pastRecoveryGuard(t, recovery.time_ns));
}

bool Correlator::deduplicated(const Rule& rule, Counter& c, const Fields& fields, int64_t t) {
  if (!rule.distinct_jobs) {
    // Compared, not subtracted: times 1717 and 2222 (Pipeline::match) are further apart than
    // int64 holds, and a wrapped difference took every later hit for a repeat.
    // No dedup, no repeat: a hit stamped before the last counted one came late (one node's lines
    // spread over partitions), and replay counts it.
    if (rule.dedup_ns > 0 && c.last_counted_ns != INT64_MIN &&
        t < c.last_counted_ns + rule.dedup_ns) {
      return true;
    }
    c.last_counted_ns = std::max(c.last_counted_ns, t);
    return false;
  }
  // Per job: one job's prints must not hide another job's episode on the node, which is what
  // such a rule counts. A pod without a job counts for nothing and acts only when corroborated:
  // no repeat, as one such pod's line would hide another's, which a kernel line corroborates.
  const std::string_view job = fieldOf(fields, kJobField);
  if (job.empty()) {
    return false;
  }
  if (const int64_t* last = c.jobs_counted.find(job);
      last != nullptr && t < *last + rule.dedup_ns) {
    return true;
  }
  c.jobs_counted[job] = t;
  if (c.jobs_counted.size() >= c.jobs_prune_at) {
    FlatMap<int64_t> kept;
    for (const auto& [j, at] : c.jobs_counted) {
      if (t < at + rule.dedup_ns) {
        kept[j] = at;
      }
    }
    c.jobs_counted = std::move(kept);
    c.jobs_prune_at = std::max<size_t>(16, 2 * c.jobs_counted.size());
  }
  return false;
}

void Correlator::count(uint32_t ri, NodeData& node, const std::string& node_name, const Fields& f,
                       const Evidence& ev, int64_t at_ns, std::vector<Decision>* out) {
  const Rule& rule = bank_->rules[ri];
  if (!rule.corroborated_by.empty() && corroborate(ri, node, node_name, f, ev, out)) {
    return;
  }
  const std::string_view job = rule.distinct_jobs ? fieldOf(f, kJobField) : "";
  if (rule.distinct_jobs && job.empty()) {
    return;  // a pod without a job label: only corroboration decides
  }
  Counter& c = node.counters[entityKey(ri, rule, f)];
  // The window spans the counted hits, whichever arrived first (another stream of the node, a
  // backlog), as in replay, which sorts them: a hit more than `window` before the newest counted
  // one does not count with it. (Compared, not subtracted: times 1717 and 2222 are further apart
  // than int64 holds.)
  const int64_t newest = c.times.empty() ? ev.time_ns : std::max(ev.time_ns, c.times.back());
  if (rule.count > 1 && ev.time_ns < newest - rule.window_ns) {
    return;
  }
  const auto stale = std::find_if(c.times.begin(), c.times.end(), [&](int64_t t) {
    return rule.count <= 1 || t >= newest - rule.window_ns;
  });
  c.times.erase(c.times.begin(), stale);
  c.evidence.erase(c.evidence.begin(),
                   c.evidence.end() - static_cast<std::ptrdiff_t>(c.times.size()));
  if (rule.distinct_jobs) {
    // One job implicates its nodes once: its latest episode is the one counted, which stays in
    // the window longest (kept, the earliest would leave it with a later job's yet to come).
    const auto same = std::find_if(c.evidence.begin(), c.evidence.end(), [&](const Evidence& e) {
      return fieldOf(e.fields, kJobField) == job;
    });
    if (same != c.evidence.end()) {
      const auto when = c.times.begin() + (same - c.evidence.begin());
      if (*when >= ev.time_ns) {
        return;
      }
      c.evidence.erase(same);
      c.times.erase(when);
    }
  }
  const auto at = std::upper_bound(c.times.begin(), c.times.end(), ev.time_ns);  // in time order
  c.evidence.insert(c.evidence.begin() + (at - c.times.begin()), ev);
  c.times.insert(at, ev.time_ns);
  if (static_cast<int>(c.times.size()) < rule.count) {
    return;
  }
  std::vector<Evidence> evidence = std::move(c.evidence);
  c.times.clear();
  c.evidence.clear();
  fault(ri, node, node_name, f, std::move(evidence), at_ns, counted(ri), out);
}

std::string Correlator::counted(uint32_t ri) const {
  const Rule& rule = bank_->rules[ri];
  std::string why;
  if (rule.count <= 1) {
    why = rule.flap_field.empty() ? "a fatal hit" : "a flap";
  } else {
    why = std::to_string(rule.count) +
          (rule.distinct_jobs        ? " jobs"
           : rule.flap_field.empty() ? " hits"
                                     : " flaps") +
          " within " + duration(rule.window_ns);
  }
  if (!rule.unless_followed_by.empty()) {
    why += rule.count <= 1 ? " with no" : ", each with no";
    for (size_t i = 0; i < rule.unless_followed_by.size(); ++i) {
      why += (i == 0 ? " " : " or ") + bank_->rules[rule.unless_followed_by[i]].id;
    }
    why += " within " + duration(rule.unless_within_ns);
  }
  return why;
}

bool Correlator::corroborate(uint32_t pod_rule, NodeData& node, const std::string& node_name,
                             const Fields& f, const Evidence& ev, std::vector<Decision>* out) {
  const Rule& rule = bank_->rules[pod_rule];
  // Not a hit attached or suppressed (another incident's); a repeat is still the node's own line.
  // As replay meets them: the newest at or before the hit, else the earliest after it.
  const std::span<const uint32_t> by = corroborated_by_[pod_rule];
  const int64_t within = rule.corroborate_within_ns;
  const Evidence* r = findRecent(node, pod_rule, by, {}, f, ev.time_ns, within, 0, Fate::kRepeat);
  if (r == nullptr) {
    r = findRecent(node, pod_rule, by, {}, f, ev.time_ns, 0, within, Fate::kRepeat, true);
  }
  if (r == nullptr) {
    return false;
  }
  if (!faulted(pod_rule, node, f)) {
    const Evidence kernel = *r;
    fault(pod_rule, node, node_name, f, {ev, kernel}, std::max(ev.time_ns, kernel.time_ns),
          "corroborated by " + kernel.signature + " within " + duration(rule.corroborate_within_ns),
          out);
  }
  return true;
}

void Correlator::fault(uint32_t ri, NodeData& node, const std::string& node_name, const Fields& f,
                       std::vector<Evidence> evidence, int64_t at_ns, std::string reason,
                       std::vector<Decision>* out) {
  const Rule& rule = bank_->rules[ri];
  const std::string key = entityKey(ri, rule, f);
  if (node.faults.contains(key)) {
    return;
  }
  // The fault's last hit is its rule's own newest line: a corroborating line (another rule's)
  // moves neither `quiet` nor the recovery guard.
  const std::string& own = bank_->signatures[rule.signature].id;
  int64_t t = INT64_MIN;
  for (const Evidence& e : evidence) {
    if (e.signature == own) {
      t = std::max(t, e.time_ns);
    }
  }
  Fault& flt = record(ri, node, node_name, key, f, t);
  flt.first_ns = evidence.front().time_ns;
  bool& tainted = dry_run_[ri] ? node.dry_tainted : node.tainted;
  // One taint per node; a later fault must clear too before the node is untainted.
  if (!tainted) {
    tainted = true;
    if (evidence.size() > kMaxEvidence) {
      evidence.erase(evidence.begin(), evidence.end() - static_cast<std::ptrdiff_t>(kMaxEvidence));
    }
    Decision& d = out->emplace_back();
    d.time_ns = at_ns;
    d.node = node_name;
    d.action = Decision::Action::kTaint;
    d.taint = taint_;
    d.rule = rule.id;
    const std::string on = describe(flt.entity);
    d.reason = std::move(reason) + (on.empty() ? "" : " on" + on);
    d.evidence = std::move(evidence);
    d.dry_run = dry_run_[ri];
    noteDecided(node, d.dry_run);
  }
  recoverAfter(ri, node, node_name, key, t, out);
}

void Correlator::recoverAfter(uint32_t ri, NodeData& node, const std::string& node_name,
                              const std::string& key, int64_t t, std::vector<Decision>* out) {
  const Rule& rule = bank_->rules[ri];
  std::vector<std::pair<uint32_t, std::shared_ptr<const Evidence>>> signals;
  const int64_t after = std::max(t, forgotFor(node, ri));
  for (const Recent& r : node.recent) {
    if (std::count(rule.recovered_by.begin(), rule.recovered_by.end(), r.rule)) {
      for (const auto& h : r.hits) {
        if (h->time_ns > after) {
          signals.emplace_back(r.rule, h);
        }
      }
    }
  }
  std::stable_sort(signals.begin(), signals.end(), [](const auto& a, const auto& b) {
    return a.second->time_ns < b.second->time_ns;
  });
  for (const auto& [by, signal] : signals) {
    const Fault* now = node.faults.find(key);
    if (now == nullptr || now->recovering) {
      break;
    }
    recover(by, node, node_name, signal->fields, *signal, out);
  }
}

Correlator::Fault& Correlator::record(uint32_t ri, NodeData& node, const std::string& node_name,
                                      const std::string& key, const Fields& f, int64_t t) {
  const Rule& rule = bank_->rules[ri];
  if (const Pending* p = node.pending.find(key)) {  // e.g. corroborated while held: decided now
    timers_.erase({p->due_ns, node_name, key});
    node.pending.erase(key);
  }
  Fault& flt = node.faults[key];
  flt.rule = ri;
  for (const std::string& name : rule.entity) {
    flt.entity.emplace_back(name, std::string(fieldOf(f, name)));
  }
  flt.last_ns = t;
  flt.first_ns = t;
  flt.noteHit(t);
  schedule(node_name, key, flt, rule.quiet_ns > 0 ? t + rule.quiet_ns : INT64_MAX);
  node.counters.erase(key);
  node.cleared.erase(key);  // its hits from now on hold this fault
  return flt;
}

void Correlator::noteDecided(NodeData& node, bool dry_run) {
  ++decided_;
  if (!dry_run) {  // one in dry run changes nothing on the node: a LIST before it still holds
    node.decided = decided_;
  }
}

std::string Correlator::restore(std::string_view node_name, std::string_view rule_id,
                                int64_t time_ns, int64_t quiet_from_ns, uint64_t seen) {
  const std::optional<uint32_t> found = bank_->ruleIndex(rule_id);
  if (!found) {
    return "no such rule in the bank";
  }
  const uint32_t ri = *found;
  const Rule& rule = bank_->rules[ri];
  if (dry_run_[ri]) {
    return "the rule is in dry run";  // its faults taint no node for real
  }
  NodeData& node = nodeOf(node_name);
  if (node.tainted || node.decided > seen) {
    return "this process decided its taint already";
  }
  hear(node, time_ns);
  node.tainted = true;
  const std::string name(node_name);
  const std::string key = entityKey(ri, rule, {});
  Fault& flt = record(ri, node, name, key, {}, time_ns);
  if (rule.quiet_ns > 0 && quiet_from_ns > time_ns) {
    schedule(name, key, flt, quiet_from_ns + rule.quiet_ns);
  }
  return "";
}

std::string Correlator::lift(std::string_view node_name, uint64_t seen) {
  std::unique_ptr<NodeData>* found = nodes_.find(node_name);
  if (found == nullptr || !(*found)->tainted) {
    return "not tainted here";
  }
  NodeData& node = **found;
  if (node.decided > seen) {
    return "this process decided it since";
  }
  const std::string name(node_name);
  std::vector<std::string> keys;
  for (auto& [key, flt] : node.faults) {
    if (!dry_run_[flt.rule]) {
      keys.emplace_back(key);
    }
  }
  for (const std::string& key : keys) {
    schedule(name, key, *node.faults.find(key), INT64_MAX);
    node.faults.erase(key);
  }
  node.tainted = false;
  return "";
}

void Correlator::recover(uint32_t ri, NodeData& node, const std::string& node_name, const Fields& f,
                         const Evidence& ev, std::vector<Decision>* out) {
  const Rule& by = bank_->rules[ri];
  for (const std::string& name : by.entity) {
    if (fieldOf(f, name).empty()) {
      return;  // e.g. a GPU reset of a UUID no `NVRM: GPU at PCI:` line named
    }
  }
  std::vector<std::string> now;
  for (auto& [key, flt] : node.faults) {
    const Rule& rule = bank_->rules[flt.rule];
    // A flap fault's last hit is a port going down or the up hit that completed it: the port up
    // again is its recovery, however soon (`stable` then guards it). So is the state that would
    // have ended an unless_followed_by hit (a port DOWN that lasted): after the port went down
    // again during the fault, an ACTIVE within the guard would otherwise never recover it.
    const bool state = !rule.flap_field.empty() || std::count(rule.unless_followed_by.begin(),
                                                              rule.unless_followed_by.end(), ri);
    // A signal's rule in dry run (tried out) recovers only rules in dry run: it lifts no real
    // rule's taint, as it corroborates none. A state signal stamped before the fault's newest hit
    // came first in replay, and that hit held the fault again.
    if (!std::count(rule.recovered_by.begin(), rule.recovered_by.end(), ri) ||
        (dry_run_[ri] && !dry_run_[flt.rule]) ||
        (state ? ev.time_ns < flt.last_ns : !pastRecoveryGuard(flt.last_ns, ev.time_ns))) {
      continue;
    }
    if (!agrees(by.entity, flt.entity, f)) {
      continue;
    }
    // The stable period runs from the earliest signal, which the untaint shows: one read later,
    // though stamped earlier (lines spread over partitions), came first in replay.
    if (flt.recovering && ev.time_ns >= flt.recovery.time_ns) {
      continue;
    }
    flt.recovery = ev;
    flt.recovered_by = by.id;
    flt.recovery_guarded = !state;
    if (rule.stable_ns == 0) {
      now.push_back(key);
    } else {
      flt.recovering = true;
      // The quiet period, when it ends first, still clears the fault then (advance()).
      schedule(node_name, key, flt, std::min(ev.time_ns + rule.stable_ns, flt.due_ns));
    }
  }
  // In key order, as the untaint names the fault that cleared last.
  std::sort(now.begin(), now.end());
  for (const std::string& key : now) {
    clearFault(node, node_name, key, ev.time_ns, "", out);
  }
}

void Correlator::clearFault(NodeData& node, const std::string& node_name, const std::string& key,
                            int64_t at_ns, std::string reason, std::vector<Decision>* out,
                            bool retracted) {
  Fault* found = node.faults.find(key);
  if (found == nullptr) {
    return;
  }
  Fault flt = std::move(*found);
  schedule(node_name, key, flt, INT64_MAX);
  node.faults.erase(key);
  if (!flt.recovered_by.empty()) {
    node.cleared[key] = flt;
  }
  const Rule& rule = bank_->rules[flt.rule];
  if (reason.empty()) {
    reason = "recovered by " + flt.recovered_by + ": " + rule.id + describe(flt.entity) +
             (rule.stable_ns > 0 ? " stable since the recovery signal" : "");
  }
  const bool dry = dry_run_[flt.rule];
  bool& tainted = dry ? node.dry_tainted : node.tainted;
  const bool others = std::any_of(node.faults.begin(), node.faults.end(),
                                  [&](const auto& kv) { return dry_run_[kv.second.rule] == dry; });
  if (tainted && others && !dry) {
    if (!retracted) {
      // Replay, without those of the others that a cause or follower read late retracts, was
      // healthy again here (the latest such clear in time, whatever the order read).
      node.healthy_but_for_ns = std::max(node.healthy_but_for_ns, at_ns);
    } else if (std::all_of(node.faults.begin(), node.faults.end(), [&](const auto& kv) {
                 return dry_run_[kv.second.rule] || kv.second.first_ns > node.healthy_but_for_ns;
               })) {
      // The faults left all formed after that clear: replay was healthy again there.
      node.forgot_ns = std::max(node.forgot_ns, node.healthy_but_for_ns);
    }
  }
  if (!tainted || others) {
    return;
  }
  Decision& d = out->emplace_back();
  d.time_ns = at_ns;
  d.node = node_name;
  d.action = Decision::Action::kUntaint;
  d.taint = taint_;
  d.rule = rule.id;
  d.reason = std::move(reason);
  if (!flt.recovered_by.empty()) {
    d.evidence.push_back(flt.recovery);
  }
  d.dry_run = dry;
  noteDecided(node, dry);
  tainted = false;
  // Healthy again: it forgets its recent hits stamped up to now, as replay does (those stamped
  // later but read first, replay had not read yet); after a retraction, only those replay forgot
  // (at the latest clear the retracted faults alone held the taint over). For its real rules, by
  // its real faults alone: a rule in dry run changes no real decision. For its rules in dry run,
  // by all its faults, as if those rules were real. Its counters stay: another GPU's or port's
  // hits counted meanwhile are still below its rule's threshold, within the window (the fault's
  // own key counted none since).
  if (!dry) {
    node.forgot_ns = std::max(node.forgot_ns, retracted ? node.healthy_but_for_ns
                                                        : std::max(at_ns, node.healthy_but_for_ns));
    node.healthy_but_for_ns = INT64_MIN;
  }
  if (node.faults.empty() && !retracted) {
    node.dry_forgot_ns = std::max(node.dry_forgot_ns, at_ns);
  }
}

int64_t Correlator::forgotFor(const NodeData& node, uint32_t asker) const {
  return dry_run_[asker] ? node.dry_forgot_ns : node.forgot_ns;
}

std::span<const uint32_t> Correlator::recoveredBy(uint32_t ri, uint32_t asker) const {
  return dry_run_[asker] ? std::span<const uint32_t>(bank_->rules[ri].recovered_by)
                         : std::span<const uint32_t>(real_recovered_by_[ri]);
}

void Correlator::schedule(const std::string& node_name, const std::string& key, Fault& f,
                          int64_t due_ns) {
  if (f.due_ns == due_ns) {
    return;
  }
  if (f.due_ns == INT64_MAX) {
    f.timer = timers_.emplace(due_ns, node_name, key).first;
  } else if (due_ns == INT64_MAX) {
    timers_.erase(f.timer);
  } else {
    // A hit that moves the quiet timer of an active fault (every hit of a storm) reuses the
    // timer's node: no lookup, no allocation.
    auto moved = timers_.extract(f.timer);
    std::get<0>(moved.value()) = due_ns;
    f.timer = timers_.insert(std::move(moved)).position;
  }
  f.due_ns = due_ns;
}

void Correlator::heard(std::string_view node_name, int64_t time_ns, int64_t pod_ns) {
  if (const auto* found = nodes_.find(node_name)) {  // a node without hits has no timers
    if (time_ns != INT64_MIN) {
      hear(**found, time_ns);
    }
    if (pod_ns != INT64_MIN) {
      hear(**found, pod_ns, true);
    }
  }
}

void Correlator::arrived(std::string_view node_name, int64_t newest_ns, int64_t time_ns,
                         int64_t pod_ns) {
  if (const auto* found = nodes_.find(node_name)) {
    NodeData& node = **found;
    node.heard_ns = std::max(node.heard_ns, newest_ns);
    if ((time_ns != INT64_MIN && speaksForKernel(node, time_ns)) ||
        (pod_ns != INT64_MIN && speaksForKernel(node, pod_ns))) {
      node.kernel_heard_ns = std::max(node.kernel_heard_ns, newest_ns);
    }
  }
}

bool Correlator::heldInWindow(uint32_t ri, std::string_view node_name, const Evidence& ev) const {
  // Only the hits observeRule() holds are there: none of a rule without a window, nor jobless.
  const auto it =
      held_[ri].find(bank_->rules[ri].distinct_jobs ? fieldOf(ev.fields, kJobField) : "");
  return it != held_[ri].end() &&
         std::any_of(it->second.hits.begin(), it->second.hits.end(), [&](const Held& h) {
           return h.node == node_name && h.evidence.time_ns == ev.time_ns;
         });
}

uint32_t Correlator::timerRule(const NodeData& node, const std::string& key) const {
  const Pending* p = node.pending.find(key);
  return p != nullptr ? p->rule : node.faults.find(key)->rule;
}

bool Correlator::speaksForKernel(const NodeData& node, int64_t time_ns) const {
  return node.time_ns < INT64_MIN + max_lag_ns_ || time_ns >= node.time_ns - max_lag_ns_;
}

void Correlator::hear(NodeData& node, int64_t time_ns, bool pod) const {
  int64_t& own = pod ? node.pod_ns : node.time_ns;
  own = std::max(own, time_ns);
  const int64_t heard = std::max({node.heard_ns, now_ns_, time_ns});
  node.heard_ns = heard;
  if (speaksForKernel(node, time_ns)) {
    node.kernel_heard_ns = heard;
  }
}

void Correlator::advance(int64_t now_ns, std::vector<Decision>* out) {
  now_ns_ = std::max(now_ns_, now_ns);
  // The newest time less max_lag: held cluster windows that end before it close, and a node
  // last heard before it is silent.
  const int64_t lagged = now_ns_ < INT64_MIN + max_lag_ns_ ? INT64_MIN : now_ns_ - max_lag_ns_;
  for (;;) {  // from the first timer again each time: deciding adds and removes timers
    auto next = timers_.begin();
    // The earliest timer that is due: before its node's own newest time, or, once the node is
    // silent, before the newest time of all (with max_lag 0, as in replay: before the newest time).
    while (next != timers_.end() && std::get<0>(*next) < now_ns_) {
      const NodeData& node = **nodes_.find(std::get<1>(*next));
      const int64_t at = std::get<0>(*next);
      if (at < node.time_ns || node.heard_ns <= lagged ||
          (at < node.pod_ns && at < node.pod_ns - max_lag_ns_)) {
        break;
      }
      if (at < node.pod_ns || node.kernel_heard_ns <= lagged) {
        const uint32_t ri = timerRule(node, std::get<2>(*next));
        // A pod rule's timer, which its pods' hits hold, by its pods' time. A kernel rule's, of a
        // node whose kernel went silent (its pods not), once max_lag behind the newest time (a
        // line of a kernel lagging less than that still comes before it) if no pod line bears on
        // it, or its pods too lag more than max_lag.
        const bool pod_rule =
            bank_->signatures[bank_->rules[ri].signature].appliesTo(StreamKind::kPod);
        if ((at < node.pod_ns && pod_rule) ||
            (node.kernel_heard_ns <= lagged && at < lagged && !pod_rule &&
             (!hears_pods_[ri] || node.pod_ns <= lagged))) {
          break;
        }
      }
      ++next;
    }
    int64_t due =
        next != timers_.end() && std::get<0>(*next) < now_ns_ ? std::get<0>(*next) : INT64_MAX;
    int held_rule = -1;
    if (const std::optional<uint32_t> ri = earliestHeld();
        ri && heldEnd(*ri) < lagged && heldEnd(*ri) < due) {
      due = heldEnd(*ri);
      held_rule = static_cast<int>(*ri);
    }
    if (const std::optional<uint32_t> ri = earliestReport();
        ri && reportEnd(*ri) < lagged && reportEnd(*ri) < due) {
      hang(*ri, out);
      continue;
    }
    if (due == INT64_MAX) {
      break;
    }
    if (held_rule >= 0) {
      const auto ri = static_cast<uint32_t>(held_rule);
      flushHeld(ri, held_fronts_[ri].begin()->second, out);
      continue;
    }
    const auto [at, node_name, key] = *next;
    NodeData& node = nodeOf(node_name);
    if (Pending* p = node.pending.find(key)) {
      timers_.erase({at, node_name, key});
      const Pending held = std::move(*p);
      node.pending.erase(key);
      count(held.rule, node, node_name, held.fields, held.evidence, at, out);  // it counts now
      continue;
    }
    Fault& flt = *node.faults.find(key);  // a timer's key has a pending hit or a fault
    const Rule& rule = bank_->rules[flt.rule];
    std::string reason;
    if (!flt.recovering || at < flt.recovery.time_ns + rule.stable_ns) {  // quiet ended first
      flt.recovered_by.clear();
      reason = "quiet: no " + rule.id + " hit" + describe(flt.entity) + " for the quiet period";
    }
    clearFault(node, node_name, key, at, std::move(reason), out);
  }
  if (peers_within_ns_ > 0 && now_ns_ >= prune_at_ns_) {
    // After the reports whose window ended before `lagged` were taken: one still waiting came
    // within a window of it, and a job's runs that ended up to a window before it may be its
    // node's or its peers'.
    const int64_t keep_ns = 2 * peers_within_ns_;
    pruneMembers(lagged < INT64_MIN + keep_ns ? INT64_MIN : lagged - keep_ns);
    prune_at_ns_ = now_ns_ > INT64_MAX - peers_within_ns_ ? INT64_MAX : now_ns_ + peers_within_ns_;
  }
  if (hearsNodes() && now_ns_ >= forget_at_ns_ && now_ns_ >= INT64_MIN + forget_after_ns_) {
    forgetSilent(now_ns_ - forget_after_ns_);
    forget_at_ns_ = now_ns_ > INT64_MAX - kForgetEveryNs ? INT64_MAX : now_ns_ + kForgetEveryNs;
  }
}

void Correlator::forgetSilent(int64_t before_ns) {
  std::vector<std::string> gone;
  for (const auto& [name, node] : nodes_) {
    if (node->heard_ns < before_ns && !node->tainted && node->faults.empty() &&
        node->pending.empty()) {
      gone.push_back(name);
    }
  }
  for (const std::string& name : gone) {
    nodes_.erase(name);
  }
}

void Correlator::finish(std::vector<Decision>* out) {
  for (;;) {  // the window that ends first, of equal ends the held one, as advance() takes them
    const std::optional<uint32_t> held = earliestHeld();
    const std::optional<uint32_t> report = earliestReport();
    if (report && (!held || reportEnd(*report) < heldEnd(*held))) {
      hang(*report, out);
    } else if (held) {
      flushHeld(*held, held_fronts_[*held].begin()->second, out);
    } else {
      return;
    }
  }
}

void Correlator::flushHeld(uint32_t ri, std::string job_name, std::vector<Decision>* out) {
  const Rule& rule = bank_->rules[ri];
  const auto held = held_[ri].find(job_name);
  std::deque<Held>& q = held->second.hits;
  const int64_t start = q.front().evidence.time_ns;
  const int64_t end = start + rule.cluster_within_ns;
  held_fronts_[ri].erase({start, job_name});
  std::set<std::string> nodes;
  auto last = q.begin();
  for (; last != q.end() && last->evidence.time_ns <= end; ++last) {
    nodes.insert(last->node);
  }
  const bool job =
      static_cast<int>(nodes.size()) >= rule.cluster_nodes || start < held->second.event_until_ns;
  if (!job) {
    // Only the hits at the window's start are decided: a later one is decided by a window that
    // starts with it, since `nodes` nodes within `within` of it may come after this one's end.
    last = std::find_if(q.begin(), last, [&](const Held& h) { return h.evidence.time_ns > start; });
  }
  std::vector<Held> window(std::make_move_iterator(q.begin()), std::make_move_iterator(last));
  q.erase(q.begin(), last);
  if (job) {
    held->second.event_until_ns = window.back().evidence.time_ns + rule.cluster_within_ns;
    ++stats_.job_events;
  }
  if (!q.empty()) {
    held_fronts_[ri].emplace(q.front().evidence.time_ns, std::move(job_name));
  }
  // Jobs holding nothing whose event ended before this window: windows close in time order, so
  // none of theirs can follow on. Taken from the front of held_idle_, not by a scan of every job
  // at every window (a flood of job labels made each window cost them all). An entry whose job
  // has held hits since, or ended another event, is stale: dropped.
  if (q.empty()) {
    held_idle_[ri].emplace(held->second.event_until_ns, job_name);
  }
  std::set<std::pair<int64_t, std::string>>& idle = held_idle_[ri];
  while (!idle.empty() && idle.begin()->first < start) {
    const auto entry = idle.extract(idle.begin());
    const auto j = held_[ri].find(entry.value().second);
    if (j != held_[ri].end() && j->second.hits.empty() &&
        j->second.event_until_ns == entry.value().first) {
      held_[ri].erase(j);
    }
  }
  for (const Held& h : window) {
    NodeData& node = nodeOf(h.node);
    if (job) {
      // The job's event, not the node's; only the node's own kernel evidence still decides.
      if (!rule.corroborated_by.empty()) {
        corroborate(ri, node, h.node, h.fields, h.evidence, out);
      }
      continue;
    }
    count(ri, node, h.node, h.fields, h.evidence, h.evidence.time_ns, out);
  }
}

void Correlator::repeatKey(const Hit& hit) {
  repeat_key_.assign(std::to_string(hit.signature));
  repeat_key_ += '\x1f';
  repeat_key_ += hit.field(kJobField);  // two jobs' lines in one second are two events
  repeat_key_ += '\x1f';
  repeat_key_ += hit.line;
}

Correlator::NodeData& Correlator::nodeOf(std::string_view name) {
  std::unique_ptr<NodeData>& node = nodes_[name];
  if (!node) {
    node = std::make_unique<NodeData>();
  }
  return *node;
}

bool Correlator::faulted(uint32_t ri, const NodeData& node, const Fields& fields) const {
  return node.faults.contains(entityKey(ri, bank_->rules[ri], fields));
}

void Correlator::note(NodeData& node, uint32_t ri, const Evidence* ev, Fate fate) {
  for (Recent& r : node.recent) {
    if (r.rule == ri) {
      for (size_t k = 0; k < r.hits.size(); ++k) {
        if (r.hits[k].get() == ev) {
          r.fates[k] = fate;
        }
      }
      if (r.counted.get() == ev) {  // the newest hit, pushed by observeRule()
        r.counted = std::move(r.counted_before);
        if (fate == Fate::kDropped) {
          r.kept = std::move(r.kept_before);
        }
      }
    }
  }
}

bool Correlator::followed(uint32_t ri, const NodeData& node, const Fields& fields,
                          int64_t t) const {
  const Rule& rule = bank_->rules[ri];
  // From t + 1 ns: a follower stamped with the hit, and read before it, is of the state before it.
  return findRecent(node, ri, followed_by_[ri], rule.entity, fields, t + 1, 0,
                    rule.unless_within_ns - 1) != nullptr;
}

void Correlator::holdPending(NodeData& node, const std::string& node_name, const std::string& key,
                             Pending pending) {
  timers_.emplace(pending.due_ns, node_name, key);
  node.pending[key] = std::move(pending);
}

const Evidence* Correlator::findRecent(const NodeData& node, uint32_t asker,
                                       std::span<const uint32_t> rules,
                                       const std::vector<std::string>& entity, const Fields& fields,
                                       int64_t time_ns, int64_t before_ns, int64_t after_ns,
                                       Fate least, bool earliest) const {
  const int64_t forgot = forgotFor(node, asker);
  const Evidence* best = nullptr;
  for (uint32_t ri : rules) {
    const auto it = std::find_if(node.recent.begin(), node.recent.end(),
                                 [&](const Recent& r) { return r.rule == ri; });
    if (it == node.recent.end()) {
      continue;
    }
    auto consider = [&](const Evidence& r) {
      if (r.time_ns < time_ns - before_ns || r.time_ns > time_ns + after_ns ||
          r.time_ns <= forgot) {
        return;
      }
      if (agrees(entity, r.fields, fields) &&
          (best == nullptr || (earliest ? r.time_ns < best->time_ns : r.time_ns > best->time_ns))) {
        best = &r;
      }
    };
    for (size_t k = 0; k < it->hits.size(); ++k) {  // oldest first: the earliest wins a tie
      const size_t at = (it->next + k) % it->hits.size();
      if (it->fates[at] >= least) {
        consider(*it->hits[at]);
      }
    }
    // The newest of its fate, which later hits of other fates may have pushed out of `hits`.
    const std::shared_ptr<const Evidence>& newest =
        least == Fate::kCounted ? it->counted : it->kept;
    if (least != Fate::kDropped && newest != nullptr) {
      consider(*newest);
    }
  }
  return best;
}

void Correlator::suppressLate(uint32_t ri, NodeData& node, const std::string& node_name,
                              const Evidence& cause, std::vector<Decision>* out) {
  const Rule& cr = bank_->rules[ri];
  const int64_t c = cause.time_ns;
  for (const uint32_t er : suppresses_[ri]) {
    const Rule& rule = bank_->rules[er];
    const std::string key = entityKey(er, rule, cause.fields);
    Fault* flt = node.faults.find(key);
    // The fault's hits after the cause, within its window, and no recovery of the cause's
    // between them: replay suppressed each (suppressedBy).
    if (flt == nullptr || flt->last_ns <= c || flt->last_ns > c + rule.suppress_within_ns ||
        findRecent(node, er, recoveredBy(ri, er), cr.entity, cause.fields, flt->last_ns,
                   flt->last_ns - c, 0) != nullptr) {
      continue;
    }
    if (flt->first_ns <= c) {
      // It stood before the cause: those hits hold it no more, its last is its newest before the
      // cause (a boot then recovers it, as replay's did). Unknown if four or more came after.
      int64_t before = INT64_MIN;
      for (const int64_t h : flt->hits_ns) {
        before = h <= c ? std::max(before, h) : before;
      }
      if (before != INT64_MIN) {
        std::replace_if(
            flt->hits_ns.begin(), flt->hits_ns.end(), [&](int64_t h) { return h > c; }, INT64_MIN);
        flt->last_ns = before;
        const int64_t quiet_due = rule.quiet_ns > 0 ? before + rule.quiet_ns : INT64_MAX;
        schedule(node_name, key, *flt,
                 flt->recovering ? std::min(flt->recovery.time_ns + rule.stable_ns, quiet_due)
                                 : quiet_due);
      }
      continue;
    }
    ++stats_.suppressed;
    flt->recovered_by.clear();  // no recovery cleared it: a late hit of it is no repeat
    const size_t decided = out->size();
    clearFault(node, node_name, key, c,
               rule.id + describe(flt->entity) + " suppressed by " + cr.id + " " +
                   duration(flt->first_ns - c) + " before it",
               out, true);
    if (out->size() > decided) {
      out->back().evidence.push_back(cause);
    }
  }
}

bool Correlator::suppressedBy(const NodeData& node, uint32_t ri, const Fields& fields,
                              int64_t time_ns) const {
  const Rule& rule = bank_->rules[ri];
  for (const uint32_t c : suppressed_by_[ri]) {
    const Evidence* cause =
        findRecent(node, ri, {&c, 1}, rule.entity, fields, time_ns, rule.suppress_within_ns, 0);
    // A GPU that falls off the bus again after the boot meant to repair it is a new fault.
    const Rule& cr = bank_->rules[c];
    if (cause != nullptr && findRecent(node, ri, recoveredBy(c, ri), cr.entity, cause->fields,
                                       time_ns, time_ns - cause->time_ns, 0) == nullptr) {
      return true;
    }
  }
  return false;
}

void Correlator::member(std::string_view job, std::string_view node, int64_t first_ns,
                        int64_t last_ns) {
  // Merged with every run at most run_gap_ns_ apart: the same runs whatever the order they come in.
  Runs& runs = jobs_[job][node];
  if (runs.empty()) {
    node_jobs_[node].emplace_back(job);
  }
  auto it = runs.begin();
  while (it != runs.end() && it->second < first_ns - run_gap_ns_) {
    ++it;
  }
  auto merged = it;
  while (merged != runs.end() && merged->first <= last_ns + run_gap_ns_) {
    first_ns = std::min(first_ns, merged->first);
    last_ns = std::max(last_ns, merged->second);
    ++merged;
  }
  runs.insert(runs.erase(it, merged), {first_ns, last_ns});
}

void Correlator::pruneMembers(int64_t before_ns) {
  std::vector<std::string> gone;
  std::vector<std::string> empty;
  for (auto& [job, nodes] : jobs_) {
    gone.clear();
    for (auto& [node, runs] : nodes) {
      std::erase_if(runs, [&](const auto& run) { return run.second < before_ns; });
      if (runs.empty()) {
        gone.push_back(node);
      }
    }
    for (const std::string& node : gone) {
      nodes.erase(node);
      std::vector<std::string>& jobs = *node_jobs_.find(node);
      std::erase(jobs, job);
      if (jobs.empty()) {
        node_jobs_.erase(node);
      }
    }
    if (nodes.empty()) {
      empty.push_back(job);
    }
  }
  for (const std::string& job : empty) {
    jobs_.erase(job);
  }
  for (uint32_t ri : peer_rules_) {
    gone.clear();
    for (const auto& [job, until] : hang_until_[ri]) {
      if (until < before_ns) {
        gone.push_back(job);
      }
    }
    for (const std::string& job : gone) {
      hang_until_[ri].erase(job);
    }
  }
}

size_t Correlator::jobRuns() const {
  size_t n = 0;
  for (const auto& [job, nodes] : jobs_) {
    for (const auto& [node, runs] : nodes) {
      n += runs.size();
    }
  }
  return n;
}

void Correlator::absorbMembers(const Correlator& other) {
  for (const auto& [job, nodes] : other.jobs_) {
    for (const auto& [node, runs] : nodes) {
      for (const auto& [first, last] : runs) {
        member(job, node, first, last);
      }
    }
  }
}

namespace {

// The latest time (ns, at most time_ns) a node logged for a job by time_ns, from its runs of it;
// INT64_MIN if none, or if that was more than within_ns before.
int64_t lastLogged(const std::vector<std::pair<int64_t, int64_t>>* runs, int64_t time_ns,
                   int64_t within_ns) {
  int64_t last = INT64_MIN;
  if (runs != nullptr) {
    for (const auto& [first, end] : *runs) {
      if (first <= time_ns) {
        last = std::max(last, std::min(end, time_ns));
      }
    }
  }
  return last >= time_ns - within_ns ? last : INT64_MIN;
}

}  // namespace

std::vector<std::string> Correlator::runningAt(std::string_view node, int64_t time_ns,
                                               int64_t within_ns) const {
  std::vector<std::string> jobs;
  const std::vector<std::string>* of_node = node_jobs_.find(node);
  if (of_node == nullptr) {
    return jobs;
  }
  int64_t latest = INT64_MIN;
  for (const std::string& job : *of_node) {
    const int64_t last = lastLogged(jobs_.find(job)->find(node), time_ns, within_ns);
    if (last != INT64_MIN && last >= latest) {
      if (last > latest) {
        jobs.clear();
        latest = last;
      }
      jobs.push_back(job);
    }
  }
  std::sort(jobs.begin(), jobs.end());
  return jobs;
}

size_t Correlator::waitingReports() const {
  size_t n = 0;
  for (const auto& reports : reports_) {
    n += reports.size();
  }
  return n;
}

void Correlator::wait(uint32_t ri, std::string_view node, const Evidence& ev) {
  const auto [it, added] = reports_[ri].try_emplace({secondOf(ev.time_ns), std::string(node)}, ev);
  if (!added && std::tie(ev.time_ns, ev.line) < std::tie(it->second.time_ns, it->second.line)) {
    it->second = ev;
  }
}

int64_t Correlator::heldEnd(uint32_t ri) const {
  return held_fronts_[ri].begin()->first + bank_->rules[ri].cluster_within_ns;
}

std::optional<uint32_t> Correlator::earliestHeld() const {
  std::optional<uint32_t> earliest;
  for (uint32_t ri : cluster_rules_) {
    if (!held_fronts_[ri].empty() && (!earliest || heldEnd(ri) < heldEnd(*earliest))) {
      earliest = ri;
    }
  }
  return earliest;
}

int64_t Correlator::reportEnd(uint32_t ri) const {
  return reports_[ri].begin()->first.first * kNanosPerSecond + bank_->rules[ri].peers_within_ns - 1;
}

std::optional<uint32_t> Correlator::earliestReport() const {
  std::optional<uint32_t> earliest;
  for (uint32_t ri : peer_rules_) {
    if (!reports_[ri].empty() && (!earliest || reportEnd(ri) < reportEnd(*earliest))) {
      earliest = ri;
    }
  }
  return earliest;
}

void Correlator::hang(uint32_t ri, std::vector<Decision>* out) {
  const Rule& rule = bank_->rules[ri];
  const int64_t within = rule.peers_within_ns;
  auto& reports = reports_[ri];
  const auto& [first_key, first] = *reports.begin();
  const std::string& first_node = first_key.second;
  const int64_t start = first_key.first * kNanosPerSecond;
  const int64_t end = start + within;  // whole seconds (Bank): the window holds those before it
  // The jobs each node was running when the window began, asked once per node. Not later: a pod
  // line that joins a run across the time asked (member()) is then stamped before the window
  // ends, so live has read it when it decides, as replay has.
  std::map<std::string_view, std::vector<std::string>> running;
  auto ran = [&](std::string_view node, const std::string& job) {
    auto it = running.find(node);
    if (it == running.end()) {
      it = running.emplace(node, runningAt(node, start, within)).first;
    }
    return std::binary_search(it->second.begin(), it->second.end(), job);
  };
  std::vector<std::string> jobs =
      running.emplace(first_node, runningAt(first_node, start, within)).first->second;
  std::erase_if(jobs, [&](const std::string& job) {  // a hang of its window is open already
    const int64_t* until = hang_until_[ri].find(job);
    return until != nullptr && *until > start;
  });
  for (const std::string& job : jobs) {
    hang_until_[ri][job] = end;
    std::vector<std::string_view> reporters;  // the first report's node first
    for (auto it = reports.begin(); it != reports.end() && it->first.first * kNanosPerSecond < end;
         ++it) {
      const std::string& node = it->first.second;
      if (std::find(reporters.begin(), reporters.end(), node) == reporters.end() &&
          ran(node, job)) {
        reporters.push_back(node);
      }
    }
    std::vector<std::string> suspects;
    for (const auto& [node, runs] : *jobs_.find(job)) {
      if (std::find(reporters.begin(), reporters.end(), node) == reporters.end() &&
          ran(node, job)) {
        suspects.push_back(node);
      }
    }
    // One node's report says little (it may have left the job, or run another on other cores);
    // and where most of the job is not waiting, its ranks are not all in one hung collective.
    if (reporters.size() < 2 || suspects.size() > reporters.size()) {
      continue;
    }
    std::sort(suspects.begin(), suspects.end());
    for (std::string& node : suspects) {
      Decision& d = out->emplace_back();
      d.time_ns = end;
      d.node = std::move(node);
      d.action = Decision::Action::kSuspect;
      d.rule = rule.id;
      d.reason = "ran job " + job + ", of which " + std::to_string(reporters.size()) +
                 " other node(s) reported a hang within " + duration(within) +
                 " (first: " + first_node + "); this one did not";
      d.evidence.push_back(first);
      d.dry_run = dry_run_[ri];
      ++decided_;  // numbered as the sink counts what it is written (restore's `seen`)
    }
  }
  reports.erase(reports.begin());
}

Correlator::NodeState Correlator::state(std::string_view node) const {
  const auto* found = nodes_.find(node);
  if (found == nullptr) {
    return NodeState::kHealthy;
  }
  const NodeData& n = **found;
  if (n.tainted) {
    // Recovering once every fault that holds the taint is: one that is not keeps the node tainted.
    bool recovering = false;
    for (const auto& [key, flt] : n.faults) {
      if (!dry_run_[flt.rule]) {
        if (!flt.recovering) {
          return NodeState::kTainted;
        }
        recovering = true;
      }
    }
    return recovering ? NodeState::kRecovering : NodeState::kTainted;
  }
  const bool counted = std::any_of(n.counters.begin(), n.counters.end(),
                                   [](const auto& kv) { return !kv.second.times.empty(); });
  const bool held = std::any_of(held_.begin(), held_.end(), [&](const auto& jobs) {
    return std::any_of(jobs.begin(), jobs.end(), [&](const auto& kv) {
      return std::any_of(kv.second.hits.begin(), kv.second.hits.end(),
                         [&](const Held& h) { return h.node == node; });
    });
  });
  return counted || held || !n.pending.empty() ? NodeState::kSuspect : NodeState::kHealthy;
}

}  // namespace faultline
