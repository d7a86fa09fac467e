#!/usr/bin/env bash
# Two `faultline serve` replicas, one coordination.k8s.io/v1 Lease (short timings for speed), a
# librdkafka mock cluster and the fake API server: only the Lease holder writes; each replica
# reads every partition (its own consumer group), so when the leader is killed (SIGKILL: no
# release) the follower takes the Lease over once it expires and keeps tainting; no taint,
# Event or condition is written twice; SIGTERM releases the Lease.
source "$(dirname "$0")/lib.sh"
command -v kcat >/dev/null || fail "kcat not installed"

"$FL_BUILD/tests/tools/mock_kafka" --brokers 1 --topic kernel:2 \
  --bootstrap-file "$tmp/bootstrap" >"$tmp/mock.log" 2>&1 &
pids+=($!)
"$FL_BUILD/tests/tools/fake_apiserver" --port 0 --port-file "$tmp/port" --nodes gpu-1,gpu-2 \
  --labels nvidia.com/gpu.present=true 2>"$tmp/apiserver.log" &
pids+=($!)
wait_file "$tmp/bootstrap" 20
wait_file "$tmp/port" 20
brokers=$(cat "$tmp/bootstrap")
api="http://127.0.0.1:$(cat "$tmp/port")"
lease_path=/apis/coordination.k8s.io/v1/namespaces/faultline/leases/faultline

for r in a b; do
  cat >"$tmp/config-$r.yaml" <<YAML
decisions: $tmp/decisions-$r.jsonl
kubernetes:
  server: "$api"
  namespace: faultline
  guard: {max_tainted: 5, max_tainted_percent: 100, max_new: 5}   # 2 nodes: let both be tainted
  leader_election: {lease_duration: 2s, renew_deadline: 1500ms, retry_period: 300ms}
kafka:
  brokers: "$brokers"
  group_id: faultline-ha
  properties: {session.timeout.ms: "6000"}
  topics:
    - {name: kernel, encoding: raw, stream: kernel}
YAML
done
start_replica() {  # $1 = a | b; the identity comes from POD_NAME, as in the Deployment
  POD_NAME="replica-$1" "$FAULTLINE" serve --config "$tmp/config-$1.yaml" 2>>"$tmp/serve-$1.log" &
  pids+=($!)
  eval "pid_$1=$!"
}
lease() { curl -fsS "$api$lease_path" 2>/dev/null || echo '{}'; }
holder() { lease | jq -r '.spec.holderIdentity // ""'; }
requests() { curl -fsS "$api/_test/requests"; }
count() {  # $1 = method, $2 = path: requests received
  requests | jq --arg m "$1" --arg p "$2" '[.[] | select(.method == $m and .path == $p)] | length'
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

start_replica a
wait_for 20 holder_is replica-a || fail "replica-a did not take the Lease: $(lease)"
start_replica b

echo "gpu-1:NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus" |
  kcat -P -b "$brokers" -t kernel -K: 2>>"$tmp/kcat.log"
wait_for 40 is_true tainted gpu-1 || fail "gpu-1 not tainted"
# Both replicas decided (each reads every partition), only the leader wrote.
wait_for 40 decided_in "$tmp/decisions-b.jsonl" gpu-1 || fail "the follower did not decide gpu-1"
[[ $(holder) == replica-a ]] || fail "the Lease moved while both ran: $(lease)"

before=$(lease)
kill -KILL "$pid_a"
wait "$pid_a" 2>/dev/null || true
start=$(date +%s%N)
wait_for 15 holder_is replica-b || fail "replica-b did not take over: $(lease)"
after=$(lease)
# Handover is judged on the Lease's own clock: the new acquireTime minus the dead leader's last
# renewTime is at most the lease duration plus a retry period and request time.
gap_ms=$(jq -n --argjson b "$before" --argjson a "$after" '
  def t: capture("(?<s>.*)\\.(?<f>[0-9]+)Z") | ((.s + "Z" | fromdateiso8601) * 1000 + (.f[0:3] | tonumber));
  ($a.spec.acquireTime | t) - ($b.spec.renewTime | t)')
echo "handover: Lease acquired by replica-b ${gap_ms} ms after replica-a's last renew" \
  "($(( ($(date +%s%N) - start) / 1000000 )) ms after the kill was seen); lease duration 2000 ms"
[[ $(jq -r '.spec.leaseTransitions' <<<"$after") == 1 ]] || fail "leaseTransitions: $after"

# The new leader keeps working.
echo "gpu-2:NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus" |
  kcat -P -b "$brokers" -t kernel -K: 2>>"$tmp/kcat.log"
wait_for 40 is_true tainted gpu-2 || fail "gpu-2 not tainted by the new leader"

# Nothing was written twice: one taint PATCH, one Event, one condition per node, although both
# replicas decided gpu-1 and replica-b re-checked it when it took over.
b_log=$(cat "$tmp/serve-b.log")
grep -q "re-checking" <<<"$b_log" || fail "replica-b did not re-check its follower decisions"
kill -TERM "$pid_b"
wait "$pid_b" || fail "replica-b exited non-zero after SIGTERM"
for n in gpu-1 gpu-2; do
  [[ $(count PATCH "/api/v1/nodes/$n") == 1 ]] || fail "$n: $(count PATCH "/api/v1/nodes/$n") taint PATCHes"
  [[ $(count PATCH "/api/v1/nodes/$n/status") == 1 ]] || fail "$n: condition written $(count PATCH "/api/v1/nodes/$n/status") times"
  [[ $(taint_events "$n") == 1 ]] || fail "$n: $(taint_events "$n") FaultlineTaint Events"
done
# SIGTERM released the Lease for a fast handover.
[[ $(lease | jq -r '.spec.holderIdentity') == "" ]] || fail "Lease not released: $(lease)"
[[ $(lease | jq -r '.spec.leaseDurationSeconds') == 1 ]] || fail "released Lease: $(lease)"
(( gap_ms <= 4000 )) || fail "handover took ${gap_ms} ms on the Lease's clock (lease duration 2000 ms)"
echo "PASS"
