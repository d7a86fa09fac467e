#!/usr/bin/env bash
# A replica that led, lost the Lease while it lived, and leads again in a new term, on the push
# path (pushes go to the leader only, so it sees no line while another replica leads): it taints
# gpu-1; another leader (replica-b, played here by hand on the Lease and the node) takes the
# Lease and lifts the taint, gpu-1 having recovered, then releases the Lease. gpu-1 faults again
# once the first replica leads again: it must be tainted again.
# shellcheck source=tests/e2e/lib.sh disable=SC2154  # port: wait_listening sets it
source "$(dirname "$0")/lib.sh"

start_apiserver gpu-1
lease_path=/apis/coordination.k8s.io/v1/namespaces/faultline/leases/faultline
cat >"$tmp/config.yaml" <<YAML
decisions: $tmp/decisions.jsonl
http: {listen: "127.0.0.1:0"}
kubernetes:
  server: "$api"
  namespace: faultline
  node_list_period: 1s
  guard: {max_tainted: 0, max_tainted_percent: 0, max_new: 0}
  leader_election: {lease_duration: 2s, renew_deadline: 1500ms, retry_period: 300ms}
YAML
POD_NAME=replica-a "$FAULTLINE" serve --config "$tmp/config.yaml" 2>"$tmp/serve.log" &
pids+=($!)
serve_pid=$!
wait_listening "$tmp/serve.log"

wait_for() {  # $1 = seconds, $2... = command that must succeed
  local limit=$1
  shift
  for _ in $(seq $((limit * 10))); do "$@" && return 0; sleep 0.1; done
  return 1
}
holder_is() { [[ $(curl -fsS "$api$lease_path" 2>/dev/null | jq -r '.spec.holderIdentity // ""') == "$1" ]]; }
ready_is() { [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz") == "$1" ]]; }
# Writes the Lease's holder and duration as another replica would (PUT with its resourceVersion).
write_lease() {
  curl -fsS "$api$lease_path" | jq -c --arg h "$1" --argjson d "$2" \
    '.spec.holderIdentity = $h | .spec.leaseDurationSeconds = $d' |
    curl -fsS -X PUT -H 'Content-Type: application/json' --data-binary @- "$api$lease_path" >/dev/null
}
push() {  # ns, line
  curl -fsS -H 'Content-Type: application/json' --data-binary \
    "{\"streams\":[{\"stream\":{\"node\":\"gpu-1\",\"transport\":\"kernel\"},\"values\":[[\"$1\",\"$2\"]]}]}" \
    "http://127.0.0.1:$port/loki/api/v1/push" || fail "push to serve"
}
taints() { curl -fsS "$api/api/v1/nodes/gpu-1" | jq -c '[.spec.taints[]? | select(.key == "faultline.dev/faulty")]'; }
tainted() { [[ $(taints) != "[]" ]]; }

m=60000000000
t0=$(($(date +%s%N) - 30 * m))
xid='NVRM: Xid (PCI:0000:44:00): 48, pid=1234, name=python, Ch 00000010, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0.'

wait_for 20 holder_is replica-a || fail "replica-a did not take the Lease"
wait_for 20 ready_is 200 || fail "replica-a not ready"
push "$t0" "$xid"
wait_for 20 tainted || fail "gpu-1 not tainted"

# replica-b takes the Lease (replica-a's next renewal conflicts), lifts gpu-1's taint and
# releases the Lease.
wait_for 30 write_lease replica-b 30 || fail "cannot take the Lease for replica-b"
wait_for 30 ready_is 503 || fail "replica-a still ready after losing the Lease"
curl -fsS -X PATCH -H 'Content-Type: application/merge-patch+json' \
  --data-binary '{"metadata":{"annotations":{"faultline.dev/taint":null}},"spec":{"taints":[]}}' \
  "$api/api/v1/nodes/gpu-1" >/dev/null || fail "cannot lift gpu-1's taint"
write_lease "" 1 || fail "cannot release the Lease"
wait_for 20 holder_is replica-a || fail "replica-a did not take the Lease again"
wait_for 20 ready_is 200 || fail "replica-a not ready again"
# The new term's first node LIST is done once the breaker ConfigMap (read after it) was read.
breaker_reads() {
  curl -fsS "$api/_test/requests" |
    jq '[.[] | select(.method == "GET" and (.path | endswith("/configmaps/faultline-breaker")))] | length'
}
reads=$(breaker_reads)
more_reads() { (($(breaker_reads) > reads)); }
wait_for 20 more_reads || fail "replica-a did not list the nodes in its new term"

# gpu-1 faults again.
push $((t0 + 5 * m)) "$xid"
wait_for 20 tainted || fail "gpu-1 not tainted on its new fault after replica-b lifted the old one: $(jq -c '[.node, .action, .rule]' "$tmp/decisions.jsonl")"
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "serve exited non-zero after SIGTERM"
echo "PASS"
