#!/usr/bin/env bash
# A taint set before a restart (a rollout, a crash, a rules change) is lifted after it when the
# node recovers, as without the restart: serve taints a node for an Xid 48, restarts, and the
# driver reload then 11 minutes of log time (xid-fatal's stable period) remove the taint on the
# fake API server. The new process learns of the taint from the node's faultline.dev/taint
# annotation at its first node LIST (TaintSink::Hooks::on_restored). Twice: gpu-1's serve is
# stopped (SIGTERM) and started again; gpu-2's restarts itself on a changed rule directory
# (rules_reload, core/rules_watch.h: the same process executes itself again); gpu-3's is stopped
# and started with another `taint` key and effect in its config. Last, a SIGTERM
# that comes while such a restart shuts the old process down ends the service.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"

start_apiserver gpu-1,gpu-2,gpu-3
cat >"$tmp/config.yaml" <<YAML
decisions: $tmp/decisions.jsonl
rules: $tmp/rules
rules_reload: 200ms
http: {listen: "127.0.0.1:0"}
kubernetes: {server: "$api", namespace: faultline, node_list_period: 1s,
             guard: {max_tainted: 0, max_tainted_percent: 0, max_new: 0}}
YAML
mkdir "$tmp/rules"
cp "$FL_SOURCE"/rules/*.yaml "$tmp/rules/"

start() {  # $1 = run number: serve logging to $tmp/serve-$1.log; sets serve_pid and port
  "$FAULTLINE" serve --config "$tmp/config.yaml" 2>"$tmp/serve-$1.log" &
  serve_pid=$!
  pids+=("$serve_pid")
  wait_listening "$tmp/serve-$1.log"
}
stop() { kill -TERM "$serve_pid"; wait "$serve_pid" || fail "serve exited non-zero after SIGTERM"; }
push() {  # node, ns, line
  curl -fsS -H 'Content-Type: application/json' --data-binary \
    "{\"streams\":[{\"stream\":{\"node\":\"$1\",\"transport\":\"kernel\"},\"values\":[[\"$2\",\"$3\"]]}]}" \
    "http://127.0.0.1:$port/loki/api/v1/push" || fail "push to serve"
}
node=gpu-1
taints() { curl -fsS "$api/api/v1/nodes/$node" | jq -c '[.spec.taints[]? | select(.key == "faultline.dev/faulty")]'; }
wait_for() {  # $1 = seconds, $2... = command that must succeed
  local limit=$1
  shift
  for _ in $(seq $((limit * 10))); do "$@" && return 0; sleep 0.1; done
  return 1
}
tainted() { [[ $(taints) != "[]" ]]; }
untainted() { [[ $(taints) == "[]" ]]; }
# The first LIST is done, and with it the restoring, once the breaker ConfigMap (read after it)
# was read.
listed() {
  curl -fsS "http://127.0.0.1:$port/metrics" >"$tmp/metrics.txt" &&
    grep -qE '^faultline_kube_requests_total\{verb="GET",resource="configmaps",code="404"\} [1-9]' \
      "$tmp/metrics.txt"
}

m=60000000000
t0=$(($(date +%s%N) - 30 * m))
xid='NVRM: Xid (PCI:0000:44:00): 48, pid=1234, name=python, Ch 00000010, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0.'
load='NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.144.03  Mon Dec 30 17:44:08 UTC 2024'

# A run: taints $node, restarts by `$1` (a command), and checks that the taint is lifted on
# recovery, with one untaint decision in $tmp/decisions.jsonl.
restart_untaints() {
  push "$node" "$t0" "$xid"
  wait_for 20 tainted || fail "$node not tainted: $(taints)"
  "$@"
  wait_for 20 listed || fail "serve did not list the nodes after its restart"
  push "$node" $((t0 + 10 * m)) "$load"                      # driver reload: xid-fatal's recovery
  push "$node" $((t0 + 21 * m)) "some unrelated kernel line"  # past its 10m stable period
  wait_for 20 untainted || fail "$node's taint from before the restart not removed: $(taints)"
  grep -q "node $node: taint of rule xid-fatal .* restored" "$tmp"/serve-*.log ||
    fail "no restore of $node logged"
  [[ $(jq -c --arg n "$node" 'select(.action == "untaint" and .node == $n) | .rule' "$tmp/decisions.jsonl") == '"xid-fatal"' ]] ||
    fail "one untaint of $node by xid-fatal expected: $(jq -c '[.node, .action, .rule]' "$tmp/decisions.jsonl")"
}
sigterm_and_start() {
  stop
  start 2
}
# The rules changed (change_bank): the bank loads, and serve executes itself again; its log goes
# on in serve-2.log.
change_rules() {
  local listening
  listening=$(grep -c 'listening on' "$tmp/serve-2.log")
  change_bank "$tmp/rules"
  wait_restart_on_new_rules "$tmp/serve-2.log" "$listening"
  kill -0 "$serve_pid" || fail "serve is gone after its restart"
}

# A rollout with a new config's `taint` (key and effect): the taint written before it, which its
# annotation names, is the one lifted on recovery; the new key's taint is never added.
change_taint_and_start() {
  stop
  echo 'taint: {key: example.com/gpu-faulty, value: "true", effect: NoExecute}' >>"$tmp/config.yaml"
  start 4
}

start 1
restart_untaints sigterm_and_start
node=gpu-2
restart_untaints change_rules
node=gpu-3
restart_untaints change_taint_and_start
[[ $(curl -fsS "$api/api/v1/nodes/$node" | jq -c '.spec.taints // []') == "[]" ]] ||
  fail "$node carries a taint after its untaint: $(curl -fsS "$api/api/v1/nodes/$node" | jq -c .spec.taints)"
stop

# A SIGTERM while a restart on new rules shuts the old process's sinks down ends the service: it
# is not lost to the process executed next. The API server is stopped (SIGSTOP) so that the taint
# sink's node LIST (every node_list_period, 1 s) hangs, and with it that shutdown, until the
# signal has come. The sleep gives the next LIST a second and a half to start; the LIST's own
# timeout (15 s) bounds the time left for the rest.
start 3
wait_for 20 listed || fail "serve did not list the nodes"
kill -STOP "$apiserver_pid"
sleep 2.5
change_bank "$tmp/rules"
wait_for 10 grep -q 'stopped:' "$tmp/serve-3.log" || fail "no stop on new rules"
kill -TERM "$serve_pid"
kill -CONT "$apiserver_pid"
exited() { [[ ! -e /proc/$serve_pid || $(cut -d' ' -f3 "/proc/$serve_pid/stat") == Z ]]; }
wait_for 30 exited ||
  fail "serve still runs 30 s after a SIGTERM during its restart on new rules"
wait "$serve_pid" || fail "serve exited non-zero after a SIGTERM during its restart"
[[ $(grep -c 'loaded .* signatures' "$tmp/serve-3.log") == 1 ]] ||
  fail "serve started again after a SIGTERM during its restart: $(grep loaded "$tmp/serve-3.log")"
