#!/usr/bin/env bash
# The OTel collector's kafka exporter encodings, otlp_proto (its default) and otlp_json,
# produced with kcat into a librdkafka mock cluster and consumed by `faultline serve`, which also
# runs its HTTP endpoint (two sources, one pipeline). The protobuf message is built with protoc
# from the repository's .proto files: a journald-receiver record (kvlist body, _TRANSPORT=kernel)
# with Xid 79 for gpu-1 must taint gpu-1; the OTel JS golden vector (npm
# @opentelemetry/exporter-logs-otlp-proto 0.223.1, a pod's record on node-3) and a pod's Xid in
# otlp_json must taint nothing; a kernel Xid in otlp_json for gpu-2 must taint gpu-2. A garbage
# message is counted as malformed and skipped; every message's bytes are counted, and the
# consumer lag comes to 0, then to -1 (unknown) once the brokers are gone.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
taints_decided() { jq -r 'select(.action == "taint") | "\(.node) \(.rule)"' "$1" | sort; }
command -v kcat >/dev/null || fail "kcat not installed"
command -v protoc >/dev/null || fail "protoc not installed"

"$FL_BUILD/tests/tools/mock_kafka" --brokers 1 --topic otlp_logs:1 --topic otlp_json:1 \
  --bootstrap-file "$tmp/bootstrap" >"$tmp/mock.log" 2>&1 &
mock_pid=$!
pids+=("$mock_pid")
start_apiserver gpu-1,gpu-2,node-3
wait_file "$tmp/bootstrap" 20
brokers=$(cat "$tmp/bootstrap")

xid='NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus'
protoc --encode=opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest \
  -I "$FL_SOURCE/ingest/otlp/proto" opentelemetry/proto/collector/logs/v1/logs_service.proto \
  >"$tmp/kernel.pb" <<TXT
resource_logs {
  resource { attributes { key: "k8s.node.name" value { string_value: "gpu-1" } } }
  scope_logs {
    log_records {
      time_unix_nano: 1700000000000000000
      body { kvlist_value {
        values { key: "MESSAGE" value { string_value: "$xid" } }
        values { key: "_TRANSPORT" value { string_value: "kernel" } }
      } }
    }
  }
}
TXT
echo -n 'CuYBCk4KGQoNazhzLm5vZGUubmFtZRIICgZub2RlLTMKFQoJaG9zdC5uYW1lEggKBm5vZGUtMwoYCgxzZXJ2aWNlLm5hbWUSCAoGa2VybmVsEAASkwEKDAoFZG1lc2cSAzEuMBKCAQlAdbpAXCfqGBARGgVFUlJPUio0CjJtY2U6IFtIYXJkd2FyZSBFcnJvcl06IE1hY2hpbmUgY2hlY2sgZXZlbnRzIGxvZ2dlZDIYCgxsb2cuaW9zdHJlYW0SCAoGc3Rkb3V0MhMKDGs4cy5wb2QubmFtZRIDCgFwOABZQHW6QFwn6hg=' |
  base64 -d >"$tmp/otel-js.pb"
printf '\x0a\x05\x0a\x03' >"$tmp/garbage.pb"
# One file = one message.
kcat -P -b "$brokers" -t otlp_logs "$tmp/otel-js.pb" "$tmp/garbage.pb" "$tmp/kernel.pb" 2>>"$tmp/kcat.log"
record() {  # NODE POD-OR-EMPTY: one otlp_json message
  local pod=""
  [[ -n $2 ]] && pod=',{"key":"k8s.pod.name","value":{"stringValue":"'"$2"'"}}'
  echo '{"resourceLogs":[{"resource":{"attributes":[{"key":"k8s.node.name","value":{"stringValue":"'"$1"'"}}'"$pod"',{"key":"transport","value":{"stringValue":"kernel"}}]},"scopeLogs":[{"logRecords":[{"timeUnixNano":"1700000000000000000","body":{"stringValue":"'"$xid"'"}}]}]}]}'
}
{ record node-3 evil-0; record gpu-2 ""; } | kcat -P -b "$brokers" -t otlp_json 2>>"$tmp/kcat.log"

cat >"$tmp/config.yaml" <<YAML
decisions: $tmp/decisions.jsonl
kubernetes:
  server: "$api"
  guard: {max_tainted: 0, max_tainted_percent: 0, max_new: 0}  # several nodes on purpose
http: {listen: "127.0.0.1:0"}
kafka:
  brokers: "$brokers"
  group_id: faultline-otlp
  properties: {session.timeout.ms: "6000", statistics.interval.ms: "500"}
  topics:
    - {name: otlp_logs, encoding: otlp_proto}
    - {name: otlp_json, encoding: otlp_json}
YAML
start_serve_http "$tmp/config.yaml"
for _ in $(seq 300); do
  [[ -f $tmp/decisions.jsonl && $(taints_decided "$tmp/decisions.jsonl" | wc -l) -ge 2 ]] && break
  sleep 0.1
done
[[ $(taints_decided "$tmp/decisions.jsonl") == $'gpu-1 xid-fatal\ngpu-2 xid-fatal' ]] ||
  fail "decisions: $(cat "$tmp/decisions.jsonl" 2>/dev/null)"
metrics=$(curl -fsS "http://127.0.0.1:$port/metrics")
grep -q '^faultline_kafka_malformed_total{topic="otlp_logs"} 1$' <<<"$metrics" ||
  fail "metrics: the garbage message is not counted: $(grep kafka_ <<<"$metrics")"
grep -q '^faultline_kafka_messages_total{topic="otlp_json"} 2$' <<<"$metrics" || fail "metrics: otlp_json"
# The taints went through: the breaker was read, and is closed.
grep -q '^faultline_breaker_tripped 0$' <<<"$metrics" || fail "metrics: breaker: $(grep breaker <<<"$metrics")"
# Bytes in by source (README "/metrics"), as for push: every message value read, the garbage one
# too (kcat's message of a line is the line without its newline).
bytes=$(($(cat "$tmp/otel-js.pb" "$tmp/garbage.pb" "$tmp/kernel.pb" | wc -c) +
  $(record node-3 evil-0 | wc -c) - 1 + $(record gpu-2 "" | wc -c) - 1))
grep -q "^faultline_bytes_total{source=\"kafka\",format=\"all\"} $bytes\$" <<<"$metrics" ||
  fail "metrics: Kafka bytes, expected $bytes: $(grep -E 'bytes_total|records_total' <<<"$metrics")"
# Every message handled, so no consumer lag, once librdkafka's statistics say so.
lag_settled() {
  metrics=$(curl -fsS "http://127.0.0.1:$port/metrics")
  grep -q '^faultline_kafka_consumer_lag{topic="otlp_logs"} 0$' <<<"$metrics" &&
    grep -q '^faultline_kafka_consumer_lag{topic="otlp_json"} 0$' <<<"$metrics"
}
for _ in $(seq 600); do lag_settled && break; sleep 0.1; done
lag_settled || fail "metrics: consumer lag: $(grep consumer_lag <<<"$metrics")"
# With the brokers gone no partition is read: the lag is unknown, -1, not the 0 it last read.
kill "$mock_pid"
lag_unknown() {
  metrics=$(curl -fsS "http://127.0.0.1:$port/metrics")
  grep -q '^faultline_kafka_consumer_lag{topic="otlp_logs"} -1$' <<<"$metrics"
}
for _ in $(seq 300); do lag_unknown && break; sleep 0.1; done
lag_unknown || fail "metrics: consumer lag with the brokers gone: $(grep consumer_lag <<<"$metrics")"
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "serve exited non-zero after SIGTERM"
[[ $(curl -fsS "$api/api/v1/nodes/node-3" | jq '[.spec.taints[]? | select(.key == "faultline.dev/faulty")] | length') == 0 ]] ||
  fail "node-3 tainted by a pod's record"
echo "PASS"
