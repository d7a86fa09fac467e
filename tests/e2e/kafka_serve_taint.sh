#!/usr/bin/env bash
# End to end on real parts: a librdkafka mock cluster (a real Kafka-protocol broker), lines
# produced into it with kcat, `faultline serve` consuming them as a consumer group, and the fake
# API server on 127.0.0.1 receiving the taint PATCH. A pod's fake kernel line taints nothing, nor
# does one posing as kernel output with JSON keys merged ahead of the `kubernetes` map, nor a
# line that names no node; offsets are committed, so a restarted service does not decide again,
# whether restarted after a SIGTERM or restarting itself on new rules (rules_reload); SIGTERM
# stops it cleanly.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
command -v kcat >/dev/null || fail "kcat not installed"

"$FL_BUILD/tests/tools/mock_kafka" --brokers 1 --topic kernel:2 --topic pods:2 \
  --bootstrap-file "$tmp/bootstrap" >"$tmp/mock.log" 2>&1 &
pids+=($!)
start_apiserver gpu-1,gpu-2
wait_file "$tmp/bootstrap" 20
brokers=$(cat "$tmp/bootstrap")

mkdir "$tmp/rules"
cp "$FL_SOURCE"/rules/*.yaml "$tmp/rules/"
cat >"$tmp/config.yaml" <<YAML
decisions: $tmp/decisions.jsonl
rules: $tmp/rules
rules_reload: 200ms
kubernetes: {server: "$api"}
http: {listen: "127.0.0.1:0"}  # /metrics: when the restarted service has read its line
kafka:
  brokers: "$brokers"
  group_id: faultline-e2e
  properties: {session.timeout.ms: "6000"}
  topics:
    - {name: kernel, encoding: raw, stream: kernel}
    - {name: pods, encoding: json}
YAML
taints() { curl -fsS "$api/api/v1/nodes/$1" | jq -c '[.spec.taints[]? | select(.key == "faultline.dev/faulty")]'; }

# Kernel lines keyed by node (the key names the node for the raw encoding); the fault is real
# (NVIDIA/NVSentinel#155). The pod on gpu-2 prints a fake one to stdout (Fluent Bit JSON).
{
  for i in $(seq 200); do echo "gpu-1:IPv6: ADDRCONF(NETDEV_CHANGE): cali$i: link becomes ready"; done
  echo "gpu-2:mlx5_core 0000:53:00.0 mlx5_3: Port: 1 Link ACTIVE"
  echo "gpu-1:NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"
} | kcat -P -b "$brokers" -t kernel -K: 2>>"$tmp/kcat.log"
echo '{"log":"NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus","stream":"stdout","kubernetes":{"pod_name":"evil-0","namespace_name":"train","host":"gpu-2"},"@timestamp":1741000000.5}' |
  kcat -P -b "$brokers" -t pods 2>>"$tmp/kcat.log"
# Fluent Bit's Merge_Log puts the pod's own JSON keys first: refused, its node being ambiguous.
echo '{"kubernetes.pod_name":null,"kubernetes.namespace_name":null,"kubernetes.container_name":null,"kubernetes.host":"gpu-2","_TRANSPORT":"kernel","message":"NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus","kubernetes":{"pod_name":"evil-1","namespace_name":"train","host":"gpu-1"}}' |
  kcat -P -b "$brokers" -t pods 2>>"$tmp/kcat.log"
# Neither key nor header: skipped, not decided for a node "".
echo "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus" |
  kcat -P -b "$brokers" -t kernel 2>>"$tmp/kcat.log"

start_serve_http "$tmp/config.yaml"
for _ in $(seq 300); do [[ $(taints gpu-1) != "[]" ]] && break; sleep 0.1; done
[[ $(taints gpu-1 | jq length) == 1 ]] || fail "gpu-1 not tainted: $(taints gpu-1)"
[[ $(taints gpu-1 | jq -r '.[0].effect') == NoSchedule ]] || fail "taint effect"
sleep 1
[[ $(taints gpu-2) == "[]" ]] || fail "gpu-2 tainted by a pod's stdout"
[[ $(decided "$tmp/decisions.jsonl") == "gpu-1 xid-fatal" ]] || fail "decisions: $(cat "$tmp/decisions.jsonl")"
grep -q 'topic kernel: a message names no node' "$tmp/serve.log" || fail "no warning of the nodeless line"

# SIGTERM: the service commits its offsets, leaves the group and exits 0.
kill -TERM "$serve_pid"
rc=0
timeout 30 tail --pid="$serve_pid" -f /dev/null || rc=$?
[[ $rc == 0 ]] || fail "serve did not stop within 30 s of SIGTERM"
wait "$serve_pid" || fail "serve exited non-zero after SIGTERM"

# Restarted in the same group, it resumes after the committed offsets: nothing is decided twice.
mv "$tmp/serve.log" "$tmp/serve-1.log"
start_serve_http "$tmp/config.yaml"
# read_one_new_line N: produces one more line and waits until the service has read it; the N-th
# `stopped:` line of the log, once it stops, must then say it read exactly that line (so it did
# consume) and decided nothing again.
read_one_new_line() {
  echo "gpu-2:IPv6: ADDRCONF(NETDEV_CHANGE): cali$1: link becomes ready" |
    kcat -P -b "$brokers" -t kernel -K: 2>>"$tmp/kcat.log"
  # The mock coordinator holds a rejoin for session.timeout.ms - 1 s; a sanitizer build is slower.
  lines=0
  for _ in $(seq 600); do
    lines=$(curl -fsS "http://127.0.0.1:$port/metrics" | awk '$1 == "faultline_lines_total" { print $2 }')
    [[ ${lines:-0} -ge 1 ]] && break
    sleep 0.1
  done
  [[ ${lines:-0} -ge 1 ]] || fail "the restarted service read no line within 60 s"
  sleep 2  # time for a wrong re-read of the other partitions' committed lines to show
}
stopped_reading_one() {  # $1 = which `stopped:` line of serve.log
  [[ $(grep 'stopped:' "$tmp/serve.log" | sed -n "$1p") == *'stopped: 1 lines, 0 hits, 0 decisions' ]] ||
    fail "run $1 after the first: $(grep 'stopped:' "$tmp/serve.log")"
}
read_one_new_line 0

# New rules that load: the service stops as on SIGTERM (committing) and executes itself again.
listening=$(grep -c 'listening on' "$tmp/serve.log")
change_bank "$tmp/rules"
wait_restart_on_new_rules "$tmp/serve.log" "$listening"
stopped_reading_one 1
read_one_new_line 1
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "serve exited non-zero after SIGTERM"
stopped_reading_one 2
[[ $(wc -l <"$tmp/decisions.jsonl") == 1 ]] || fail "decided again after restart: $(cat "$tmp/decisions.jsonl")"
echo "PASS"
