#!/usr/bin/env bash
# Real push clients against `faultline serve`: winston-loki (protobuf + snappy, and JSON) and the
# OpenTelemetry JS log exporters (OTLP/HTTP protobuf and JSON, gzip, chunked bodies) each send a
# kernel-labelled "GPU has fallen off the bus" Xid 79 for their own node, which must be tainted
# through the fake API server; each also sends the same line from a pod on gpu-5, which must
# taint nothing. The JSON clients also send a pod line cut inside an emoji (JSON.stringify writes
# a lone surrogate escape), which must be taken, not refused with the request. The clients are
# the npm project in tests/e2e/node (`npm ci`, see .ci/setup). Last, curl sends gpu-6's kernel
# line as the OTel collector's journald receiver exports it with `compression: zstd`, the body
# compressed by the zstd command.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
taints_decided() { jq -r 'select(.action == "taint") | "\(.node) \(.rule)"' "$1" | sort; }
node_dir=$FL_SOURCE/tests/e2e/node
command -v node >/dev/null || fail "node not installed (.ci/setup installs nodejs)"
[[ -d $node_dir/node_modules ]] || fail "run 'npm ci' in $node_dir (.ci/setup does)"

start_apiserver gpu-1,gpu-2,gpu-3,gpu-4,gpu-5,gpu-6
cat >"$tmp/config.yaml" <<YAML
decisions: $tmp/decisions.jsonl
kubernetes:
  server: "$api"
  guard: {max_tainted: 0, max_tainted_percent: 0, max_new: 0}  # several nodes on purpose
http: {listen: "127.0.0.1:0"}
YAML
start_serve_http "$tmp/config.yaml"
url="http://127.0.0.1:$port"
[[ $(curl -s -o /dev/null -w '%{http_code}' "$url/readyz") == 200 ]] || fail "/readyz not 200"

xid='NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus'
i=0
for client in loki-proto loki-json otlp-proto otlp-json; do
  i=$((i + 1))
  node "$node_dir/send.js" "$client" "$url" "gpu-$i" kernel "$xid" 2>>"$tmp/clients.log" ||
    fail "$client could not send the kernel line"
  node "$node_dir/send.js" "$client" "$url" gpu-5 pod "$xid" 2>>"$tmp/clients.log" ||
    fail "$client could not send the pod line"
  if [[ $client == *json ]]; then
    node "$node_dir/send.js" "$client" "$url" gpu-5 pod-cut "epoch 3 done" 2>>"$tmp/clients.log" ||
      fail "$client could not send a pod line cut inside an emoji: $(tail -3 "$tmp/clients.log")"
  fi
done

jq -cn --arg line "$xid" '{resourceLogs: [{resource: {attributes: [{key: "k8s.node.name",
  value: {stringValue: "gpu-6"}}]}, scopeLogs: [{logRecords: [{timeUnixNano: "1700000000000000000",
  body: {kvlistValue: {values: [{key: "MESSAGE", value: {stringValue: $line}},
  {key: "_TRANSPORT", value: {stringValue: "kernel"}}]}}}]}]}]}' | zstd -q -c >"$tmp/otlp.json.zst"
[[ $(curl -s -o "$tmp/zstd.out" -w '%{http_code}' -H 'Content-Type: application/json' \
  -H 'Content-Encoding: zstd' --data-binary @"$tmp/otlp.json.zst" "$url/v1/logs") == 200 ]] ||
  fail "zstd OTLP JSON not taken: $(cat "$tmp/zstd.out")"

taints() { curl -fsS "$api/api/v1/nodes/$1" | jq -c '[.spec.taints[]? | select(.key == "faultline.dev/faulty")]'; }
for n in 1 2 3 4 6; do
  for _ in $(seq 600); do [[ $(taints "gpu-$n") != "[]" ]] && break; sleep 0.1; done
  [[ $(taints "gpu-$n" | jq -r '.[0].effect') == NoSchedule ]] || fail "gpu-$n not tainted"
done
expected=$(printf 'gpu-%s xid-fatal\n' 1 2 3 4 6)
[[ $(taints_decided "$tmp/decisions.jsonl") == "$expected" ]] || fail "decisions: $(cat "$tmp/decisions.jsonl")"
[[ $(taints gpu-5) == "[]" ]] || fail "gpu-5 tainted by a pod's stdout"

metrics=$(curl -fsS "$url/metrics")
for format_records in loki_proto:2 loki_json:3 otlp_proto:2 otlp_json:4; do
  format=${format_records%:*}
  n=${format_records#*:}
  grep -q "^faultline_records_total{source=\"http\",format=\"$format\"} $n$" <<<"$metrics" ||
    fail "metrics: not $n records for $format: $(grep records_total <<<"$metrics")"
done
grep -q '^faultline_decisions_total{action="taint"} 5$' <<<"$metrics" || fail "metrics: decisions"
# The sink counts a taint just after the API server has it: poll. The page is read whole before
# grep: `curl | grep -q` under pipefail fails when grep exits first and curl meets the closed pipe.
for _ in $(seq 600); do
  metrics=$(curl -fsS "$url/metrics")
  grep -q '^faultline_taint_outcomes_total{outcome="applied"} 5$' <<<"$metrics" && break
  sleep 0.1
done
grep -q '^faultline_taint_outcomes_total{outcome="applied"} 5$' <<<"$metrics" ||
  fail "metrics: taints applied: $(grep taint_outcomes <<<"$metrics")"

kill -TERM "$serve_pid"
wait "$serve_pid" || fail "serve exited non-zero after SIGTERM"
echo "PASS"
