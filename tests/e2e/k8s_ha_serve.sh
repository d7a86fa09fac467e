#!/usr/bin/env bash
# Two `faultline serve` replicas, one coordination.k8s.io/v1 Lease (short timings for speed: lease
# duration 2 s, retry period 300 ms), a librdkafka mock cluster and the fake API server. Only
# the Lease holder writes; each replica reads every partition (its own consumer group).
#   SIGTERM of the leader: it releases the Lease (client-go ReleaseOnCancel) and the follower
#     takes over at its next retry: within the lease duration of the release.
#   SIGKILL of the leader: no release; the follower takes over once the Lease expired on its own
#     clock: within lease duration + 2 x 1.2 x retry period of the dead leader's last renewal
#     (README "High availability" says why).
# Handover times are read on the Lease's clock (renewTime, acquireTime from the request log).
# No taint, Event or condition is written twice, although both replicas decide every fault.
# shellcheck source=tests/e2e/lib.sh disable=SC2154  # pid_a, pid_b, port_a, port_b: start_replica sets them
source "$(dirname "$0")/lib.sh"
command -v kcat >/dev/null || fail "kcat not installed"

lease_ms=2000
retry_ms=300
"$FL_BUILD/tests/tools/mock_kafka" --brokers 1 --topic kernel:2 \
  --bootstrap-file "$tmp/bootstrap" >"$tmp/mock.log" 2>&1 &
pids+=($!)
start_apiserver gpu-1,gpu-2,gpu-3
wait_file "$tmp/bootstrap" 20
brokers=$(cat "$tmp/bootstrap")
lease_path=/apis/coordination.k8s.io/v1/namespaces/faultline/leases/faultline

for r in a b; do
  cat >"$tmp/config-$r.yaml" <<YAML
decisions: $tmp/decisions-$r.jsonl
kubernetes:
  server: "$api"
  namespace: faultline
  guard: {max_tainted: 5, max_tainted_percent: 100, max_new: 5}   # 3 nodes: let all be tainted
  leader_election: {lease_duration: ${lease_ms}ms, renew_deadline: 1500ms, retry_period: ${retry_ms}ms}
kafka:
  brokers: "$brokers"
  group_id: faultline-ha
  properties: {session.timeout.ms: "6000"}
  topics:
    - {name: kernel, encoding: raw, stream: kernel}
YAML
done
start_replica() {  # $1 = a | b, $2 = log name; the identity comes from POD_NAME, as in the Deployment
  POD_NAME="replica-$1" "$FAULTLINE" serve --config "$tmp/config-$1.yaml" 2>>"$tmp/$2.log" &
  pids+=($!)
  declare -g "pid_$1=$!"
}
lease() { curl -fsS "$api$lease_path" 2>/dev/null || echo '{}'; }
holder() { lease | jq -r '.spec.holderIdentity // ""'; }
requests() { curl -fsS "$api/_test/requests"; }
count() {  # $1 = method, $2 = path: requests received
  requests | jq --arg m "$1" --arg p "$2" '[.[] | select(.method == $m and .path == $p)] | length'
}
# Lease specs PUT by the replicas, oldest first.
lease_puts() { requests | jq -c --arg p "$lease_path" '[.[] | select(.method == "PUT" and .path == $p) | .body | fromjson | .spec]'; }
# MicroTime difference $2 - $1 in ms.
ms_between() {
  jq -n --arg a "$1" --arg b "$2" '
    def t: capture("(?<s>.*)\\.(?<f>[0-9]+)Z") | ((.s + "Z" | fromdateiso8601) * 1000 + (.f[0:3] | tonumber));
    ($b | t) - ($a | t)'
}
taint_events() {  # $1 = node: FaultlineTaint Events on it
  curl -fsS "$api/api/v1/namespaces/default/events" |
    jq --arg n "$1" '[.items[] | select(.reason == "FaultlineTaint" and .involvedObject.name == $n)] | length'
}
tainted() { curl -fsS "$api/api/v1/nodes/$1" | jq '[.spec.taints[]? | select(.key == "faultline.dev/faulty")] | length == 1'; }
wait_for() {  # $1 = seconds, $2... = command that must succeed
  local limit=$1
  shift
  for _ in $(seq $((limit * 10))); do "$@" && return 0; sleep 0.1; done
  return 1
}
is_true() { [[ $("$@") == true ]]; }
holder_is() { [[ $(holder) == "$1" ]]; }
decided_in() { [[ -s $1 ]] && grep -q "\"node\":\"$2\"" "$1"; }
fault() {  # $1 = node: a fatal Xid line on its kernel stream
  echo "$1:NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus" |
    kcat -P -b "$brokers" -t kernel -K: 2>>"$tmp/kcat.log"
}

start_replica a serve-a
wait_for 20 holder_is replica-a || fail "replica-a did not take the Lease: $(lease)"
start_replica b serve-b

fault gpu-1
wait_for 40 is_true tainted gpu-1 || fail "gpu-1 not tainted"
# Both replicas decided (each reads every partition), only the leader wrote.
wait_for 40 decided_in "$tmp/decisions-b.jsonl" gpu-1 || fail "the follower did not decide gpu-1"
[[ $(holder) == replica-a ]] || fail "the Lease moved while both ran: $(lease)"

# --- SIGTERM: the leader releases the Lease on its way out ---
kill -TERM "$pid_a"
start=$(date +%s%N)
wait_for 40 holder_is replica-b || fail "replica-b did not take over after SIGTERM: $(lease)"
seen_ms=$(( ($(date +%s%N) - start) / 1000000 ))
wait "$pid_a" || fail "replica-a exited non-zero after SIGTERM"
puts=$(lease_puts)
release=$(jq -c '[.[] | select(.holderIdentity == "")] | last' <<<"$puts")
[[ $release != null ]] || fail "replica-a did not release the Lease: $puts"
jq -e '.leaseDurationSeconds == 1 and .renewTime == .acquireTime' <<<"$release" >/dev/null ||
  fail "release is not client-go's ReleaseOnCancel: $release"
after=$(lease)
term_ms=$(ms_between "$(jq -r .renewTime <<<"$release")" "$(jq -r .spec.acquireTime <<<"$after")")
echo "SIGTERM handover: replica-b acquired the Lease ${term_ms} ms after replica-a released it" \
  "(${seen_ms} ms after the signal, including replica-a's drain); lease duration ${lease_ms} ms"
(( term_ms >= 0 && term_ms <= lease_ms )) ||
  fail "SIGTERM handover took ${term_ms} ms on the Lease's clock, over the lease duration"
[[ $(jq -r '.spec.leaseTransitions' <<<"$after") == 1 ]] || fail "leaseTransitions: $after"

# replica-a comes back as the follower; the new leader writes the next fault.
start_replica a serve-a2
fault gpu-2
wait_for 40 is_true tainted gpu-2 || fail "gpu-2 not tainted by replica-b"
wait_for 40 decided_in "$tmp/decisions-a.jsonl" gpu-2 || fail "the restarted follower did not decide gpu-2"
[[ $(holder) == replica-b ]] || fail "the Lease moved from replica-b: $(lease)"
# The node's condition and Event follow its taint: killed before them, replica-b would leave them
# to replica-a, whose re-check finds the taint present and writes the condition, not the Event.
is_one() { [[ $("$@") == 1 ]]; }
wait_for 40 is_one count PATCH /api/v1/nodes/gpu-2/status || fail "replica-b wrote no condition on gpu-2"
wait_for 40 is_one taint_events gpu-2 || fail "replica-b wrote no Event on gpu-2"

# --- SIGKILL: no release; the Lease expires on the follower's clock ---
kill -KILL "$pid_b"
wait "$pid_b" 2>/dev/null || true
wait_for 40 holder_is replica-a || fail "replica-a did not take over after SIGKILL: $(lease)"
last_renew=$(lease_puts | jq -r '[.[] | select(.holderIdentity == "replica-b") | .renewTime] | max')
after=$(lease)
kill_ms=$(ms_between "$last_renew" "$(jq -r .spec.acquireTime <<<"$after")")
# The follower notices the last renewal at its next retry (up to 1.2 x retry later), counts the
# lease duration from then, and checks again at most 1.2 x retry after it expired; plus the time
# of a GET and a PUT, for which 500 ms is allowed.
kill_bound=$(( lease_ms + 2 * retry_ms * 12 / 10 + 500 ))
echo "SIGKILL handover: replica-a acquired the Lease ${kill_ms} ms after replica-b's last renewal;" \
  "bound ${kill_bound} ms (lease duration ${lease_ms} + 2 x 1.2 x retry ${retry_ms} + 500 for requests)"
(( kill_ms >= lease_ms && kill_ms <= kill_bound )) ||
  fail "SIGKILL handover took ${kill_ms} ms on the Lease's clock (bound ${lease_ms}..${kill_bound})"
[[ $(jq -r '.spec.leaseTransitions' <<<"$after") == 2 ]] || fail "leaseTransitions: $after"

# The new leader keeps working.
fault gpu-3
wait_for 40 is_true tainted gpu-3 || fail "gpu-3 not tainted by the new leader"
grep -q "re-checking" "$tmp/serve-a2.log" || fail "replica-a did not re-check its follower decisions"

kill -TERM "$pid_a"
wait "$pid_a" || fail "replica-a exited non-zero after SIGTERM"
# Nothing was written twice: one taint PATCH, one Event, one condition per node, although both
# replicas decided every fault and each new leader re-checked what it decided as a follower.
for n in gpu-1 gpu-2 gpu-3; do
  [[ $(count PATCH "/api/v1/nodes/$n") == 1 ]] || fail "$n: $(count PATCH "/api/v1/nodes/$n") taint PATCHes"
  [[ $(count PATCH "/api/v1/nodes/$n/status") == 1 ]] || fail "$n: condition written $(count PATCH "/api/v1/nodes/$n/status") times"
  [[ $(taint_events "$n") == 1 ]] || fail "$n: $(taint_events "$n") FaultlineTaint Events"
done
[[ $(holder) == "" ]] || fail "the last replica did not release the Lease: $(lease)"
echo "PASS"
