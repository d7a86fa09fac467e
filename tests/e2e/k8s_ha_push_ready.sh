#!/usr/bin/env bash
# The push path with two replicas (deploy/overlays/push): with leader election on, /readyz is 200
# only on the Lease holder, so a Service sends pushes to the one replica that writes. When the
# leader stops (SIGTERM releases the Lease) the other one becomes ready. Also: /metrics counts the
# API requests by verb, resource and status (faultline_kube_requests_total).
# shellcheck source=tests/e2e/lib.sh disable=SC2154  # pid_a, pid_b, port_a, port_b: start_replica sets them
source "$(dirname "$0")/lib.sh"

start_apiserver gpu-1
lease_path=/apis/coordination.k8s.io/v1/namespaces/faultline/leases/faultline

start_replica() {  # $1 = a | b: serve with its own HTTP port; sets port_$1 and pid_$1
  cat >"$tmp/config-$1.yaml" <<YAML
decisions: $tmp/decisions-$1.jsonl
http: {listen: "127.0.0.1:0"}
kubernetes:
  server: "$api"
  namespace: faultline
  leader_election: {lease_duration: 2s, renew_deadline: 1500ms, retry_period: 300ms}
YAML
  POD_NAME="replica-$1" "$FAULTLINE" serve --config "$tmp/config-$1.yaml" 2>>"$tmp/serve-$1.log" &
  pids+=($!)
  declare -g "pid_$1=$!"
  wait_listening "$tmp/serve-$1.log"
  declare -g "port_$1=$port"
}
holder() { curl -fsS "$api$lease_path" 2>/dev/null | jq -r '.spec.holderIdentity // ""'; }
readyz() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/readyz"; }
wait_for() {  # $1 = seconds, $2... = command that must succeed
  local limit=$1
  shift
  for _ in $(seq $((limit * 10))); do "$@" && return 0; sleep 0.1; done
  return 1
}
holder_is() { [[ $(holder) == "$1" ]]; }
ready_is() { [[ $(readyz "$1") == "$2" ]]; }

start_replica a
wait_for 20 holder_is replica-a || fail "replica-a did not take the Lease"
start_replica b
wait_for 20 ready_is "$port_a" 200 || fail "leader replica-a: /readyz $(readyz "$port_a")"
# replica-b is up (it answers /healthz) but not ready: it does not hold the Lease.
[[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port_b/healthz") == 200 ]] ||
  fail "replica-b /healthz"
[[ $(readyz "$port_b") == 503 ]] || fail "follower replica-b: /readyz $(readyz "$port_b"), expected 503"

# A push that reaches the follower anyway (the seconds before its endpoint leaves the Service, a
# shipper's kept-alive connection) is refused while replica-a holds the Lease: a follower's
# lines would never taint, and the leader would never see them. 503 with Retry-After, and the
# connection closed, so that the shipper's retry goes through the Service again, to the leader.
entry="{\"streams\":[{\"stream\":{\"node\":\"gpu-1\",\"transport\":\"kernel\"},\"values\":[[\"$(date +%s%N)\",\"hello\"]]}]}"
headers=$(curl -sS -D - -o "$tmp/follower-body" -H 'Content-Type: application/json' \
  --data-binary "$entry" "http://127.0.0.1:$port_b/loki/api/v1/push" | tr -d '\r')
grep -q '^HTTP/1.1 503' <<<"$headers" || fail "push to follower replica-b: $headers$(cat "$tmp/follower-body")"
grep -qi '^retry-after: [0-9]' <<<"$headers" || fail "push to follower: no Retry-After in $headers"
grep -qi '^connection: close' <<<"$headers" || fail "push to follower: connection kept in $headers"
grep -q 'replica-a' "$tmp/follower-body" || fail "push to follower: reason $(cat "$tmp/follower-body")"
otlp=$(curl -sS -w ' %{http_code}' -H 'Content-Type: application/json' --data-binary \
  '{"resourceLogs":[{"resource":{"attributes":[{"key":"k8s.node.name","value":{"stringValue":"gpu-1"}}]},"scopeLogs":[{"logRecords":[{"body":{"stringValue":"hello"}}]}]}]}' \
  "http://127.0.0.1:$port_b/v1/logs")
[[ $otlp == *'"code":14'*' 503' ]] || fail "OTLP push to follower: $otlp, expected 503 UNAVAILABLE"
curl -fsS "http://127.0.0.1:$port_b/metrics" |
  grep -q '^faultline_push_requests_rejected_total{reason="not_leader"} 2$' ||
  fail "follower refusals not counted: $(curl -fsS "http://127.0.0.1:$port_b/metrics" | grep rejected)"

# A push to the ready replica taints the node.
now=$(date +%s%N)
curl -fsS -H 'Content-Type: application/json' --data-binary \
  "{\"streams\":[{\"stream\":{\"node\":\"gpu-1\",\"transport\":\"kernel\"},\"values\":[[\"$now\",\"NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus\"]]}]}" \
  "http://127.0.0.1:$port_a/loki/api/v1/push" || fail "push to replica-a"
tainted() { curl -fsS "$api/api/v1/nodes/gpu-1" | jq -e '[.spec.taints[]? | select(.key == "faultline.dev/faulty")] | length == 1' >/dev/null; }
wait_for 20 tainted || fail "gpu-1 not tainted"

# API requests by verb, resource and status: the Lease renewals, the node LIST and PATCH, the
# taint's Event and condition. The first renewal comes one retry period (300 ms) after the
# acquisition, the Event and condition after the PATCH the node shows: wait for them all.
series=('verb="PUT",resource="leases",code="200"' 'verb="LIST",resource="nodes",code="200"'
        'verb="PATCH",resource="nodes",code="200"' 'verb="PATCH",resource="nodes/status",code="200"'
        'verb="POST",resource="events",code="201"')
counted() {
  local m
  m=$(curl -fsS "http://127.0.0.1:$port_a/metrics") || return 1
  for s in "${series[@]}"; do grep -qE "^faultline_kube_requests_total\{$s\} [1-9]" <<<"$m" || return 1; done
}
wait_for 30 counted || true  # the loop below names what is missing
metrics=$(curl -fsS "http://127.0.0.1:$port_a/metrics")
for s in "${series[@]}"; do
  grep -qE "^faultline_kube_requests_total\{$s\} [1-9]" <<<"$metrics" ||
    fail "no faultline_kube_requests_total{$s} in: $(grep kube_requests <<<"$metrics")"
done
[[ $(grep -c '^faultline_kube_requests_total{verb="PATCH",resource="nodes",code="200"} 1$' <<<"$metrics") == 1 ]] ||
  fail "one taint PATCH expected: $(grep kube_requests <<<"$metrics")"

# SIGTERM: replica-a releases the Lease; replica-b takes it and becomes ready.
kill -TERM "$pid_a"
wait "$pid_a" || fail "replica-a exited non-zero after SIGTERM"
wait_for 20 holder_is replica-b || fail "replica-b did not take the Lease"
wait_for 20 ready_is "$port_b" 200 || fail "new leader replica-b: /readyz $(readyz "$port_b")"
code=$(curl -sS -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
  --data-binary "$entry" "http://127.0.0.1:$port_b/loki/api/v1/push")
[[ $code == 204 ]] || fail "push to the new leader replica-b: $code"
kill -TERM "$pid_b"
wait "$pid_b" || fail "replica-b exited non-zero after SIGTERM"
echo "PASS"
