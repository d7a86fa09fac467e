#!/usr/bin/env bash
# A SIGTERM during an API server outage logs the taints not applied within the pod's grace period
# (terminationGracePeriodSeconds, 30 s in deploy/base), instead of retrying them until the
# SIGKILL, which lost them without a word: each decision's 8 tries waited out the client's 15 s
# timeout. The fake API server is stopped (SIGSTOP: connections are accepted, never answered)
# once serve has listed the nodes; two nodes' taints are then decided, and serve is sent SIGTERM.
# Twice: alone, and with leader election, where the replica loses the Lease (renew_deadline)
# while the first taint waits for an answer: the second, decided while it led, was then held as a
# follower's decision and dropped at shutdown unlogged (the push path's other replica never saw
# its line).
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"

start_apiserver gpu-1,gpu-2,gpu-3,gpu-4
xid='NVRM: Xid (PCI:0000:44:00): 79, pid=1234, name=python, GPU has fallen off the bus.'
run=0
shutdown_in_outage() {  # $1, $2: the nodes; $3: more keys of the kubernetes section
  run=$((run + 1))
  cat >"$tmp/config-$run.yaml" <<YAML
decisions: $tmp/decisions-$run.jsonl
http: {listen: "127.0.0.1:0"}
kubernetes: {server: "$api", namespace: faultline, node_list_period: 1s,
             guard: {max_tainted: 0, max_tainted_percent: 0, max_new: 0}$3}
YAML
  "$FAULTLINE" serve --config "$tmp/config-$run.yaml" 2>"$tmp/serve-$run.log" &
  serve_pid=$!
  pids+=("$serve_pid")
  wait_listening "$tmp/serve-$run.log"
  # The first LIST and breaker read are done: taints wait for nothing but the API server.
  # The scrape whole, then grep: `curl | grep -q` fails under pipefail when grep's early exit
  # leaves curl writing (curl: (23) Failed writing body), though the line was there.
  breaker_read() {
    local metrics
    metrics=$(curl -fsS "http://127.0.0.1:$port/metrics") || return 1
    grep -qE '^faultline_kube_requests_total\{verb="GET",resource="configmaps",code="404"\} [1-9]' \
      <<<"$metrics"
  }
  local read=false
  for _ in $(seq 600); do
    if breaker_read; then read=true && break; fi
    sleep 0.1
  done
  $read || fail "run $run: the breaker was not read in 60 s"
  kill -STOP "$apiserver_pid"
  local t node
  t=$(($(date +%s) * 1000000000))
  for node in "$1" "$2"; do
    curl -fsS -H 'Content-Type: application/json' --data-binary \
      "{\"streams\":[{\"stream\":{\"node\":\"$node\",\"transport\":\"kernel\"},\"values\":[[\"$t\",\"$xid\"]]}]}" \
      "http://127.0.0.1:$port/loki/api/v1/push" || fail "push to serve"
  done
  for _ in $(seq 600); do
    [[ $(jq -s 'length' "$tmp/decisions-$run.jsonl" 2>/dev/null) == 2 ]] && break
    sleep 0.1
  done
  if [[ $(jq -s 'length' "$tmp/decisions-$run.jsonl") != 2 ]]; then
    kill -CONT "$apiserver_pid"
    fail "not two decisions"
  fi
  kill -TERM "$serve_pid"
  for _ in $(seq 300); do kill -0 "$serve_pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$serve_pid" 2>/dev/null; then
    kill -CONT "$apiserver_pid"
    fail "serve still runs 30 s after a SIGTERM during an API server outage (a pod is killed then)"
  fi
  kill -CONT "$apiserver_pid"
  wait "$serve_pid" || fail "serve exited non-zero after a SIGTERM during an API server outage"
  for node in "$1" "$2"; do
    grep -q "not applied at shutdown: taint of node $node (rule xid-fatal), deferred" \
      "$tmp/serve-$run.log" || fail "the taint of $node was not logged as not applied at shutdown"
  done
}
shutdown_in_outage gpu-1 gpu-2 ""
shutdown_in_outage gpu-3 gpu-4 ", leader_election: {identity: replica-a}"
echo "ok: a SIGTERM during an API server outage logged the taints not applied within 30 s," \
  "leading or not"
