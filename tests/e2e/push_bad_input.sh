#!/usr/bin/env bash
# Bad input on the push endpoints, with curl: every refusal has its status, a one-line reason
# and a metric, and the server keeps serving: malformed JSON, protobuf, snappy, gzip and zstd
# (400), a body and decompressed bodies (gzip, snappy, zstd) over max_body_bytes (413, without
# inflating the bomb), an unknown Content-Encoding (415), a missing or stale bearer token (401;
# the token file is re-read when it changes), a chunked body, and a line over max_line_bytes
# (truncated and counted, still matched); then the metrics of the one request accepted (records, bytes, lines,
# hits by signature, decisions by action, queue depth) and of the refusals by reason, and the
# refusals' log lines (once a minute per reason).
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
taints_decided() { jq -r 'select(.action == "taint") | "\(.node) \(.rule)"' "$1" | sort; }
echo -n "s3cret" >"$tmp/token"
cat >"$tmp/config.yaml" <<YAML
decisions: $tmp/decisions.jsonl
http:
  listen: "127.0.0.1:0"
  max_body_bytes: 100000
  max_line_bytes: 200
  token_file: $tmp/token
YAML
start_serve_http "$tmp/config.yaml"
loki="http://127.0.0.1:$port/loki/api/v1/push"
otlp="http://127.0.0.1:$port/v1/logs"
auth=(-H "Authorization: Bearer s3cret")

# expect STATUS REASON-SUBSTRING curl-args...: checks the status and the reason in the body
# ("" checks the status only).
expect() {
  local want=$1 reason=$2
  shift 2
  local got
  got=$(curl -s -o "$tmp/body" -w '%{http_code}' "$@")
  [[ $got == "$want" ]] || fail "curl $*: status $got, expected $want: $(head -c 300 "$tmp/body")"
  [[ -z $reason ]] || grep -aqF -- "$reason" "$tmp/body" || fail "curl $*: reason '$reason' not in: $(head -c 300 "$tmp/body")"
}
json=(-H 'Content-Type: application/json')
proto=(-H 'Content-Type: application/x-protobuf')

expect 400 'not a JSON object' "${auth[@]}" "${json[@]}" --data-binary '{"streams":[' "$loki"
expect 400 'streams[0].values[0][0] is not a string of nanoseconds' "${auth[@]}" "${json[@]}" \
  --data-binary '{"streams":[{"stream":{"a":"b"},"values":[["soon","x"]]}]}' "$loki"
expect 400 'streams[0].stream.a is not a string' "${auth[@]}" "${json[@]}" \
  --data-binary '{"streams":[{"stream":{"a":1},"values":[]}]}' "$loki"
expect 400 'snappy' "${auth[@]}" "${proto[@]}" --data-binary 'definitely not snappy' "$loki"
# JSON sent without a Content-Type (curl's default is a form): Loki reads it as protobuf, and the
# reason says so.
expect 400 "Content-Type 'application/x-www-form-urlencoded': read as snappy" "${auth[@]}" \
  --data-binary '{"streams":[]}' "$loki"
printf '\x0a\x05\x0a\x03' >"$tmp/bad.pb"
expect 400 'protobuf does not parse' "${auth[@]}" "${proto[@]}" --data-binary @"$tmp/bad.pb" "$otlp"
expect 400 'corrupt gzip data' "${auth[@]}" "${json[@]}" -H 'Content-Encoding: gzip' \
  --data-binary 'not gzip at all' "$otlp"
expect 400 'corrupt zstd data' "${auth[@]}" "${json[@]}" -H 'Content-Encoding: zstd' \
  --data-binary 'not zstd at all' "$otlp"
expect 400 'corrupt snappy data' "${auth[@]}" "${json[@]}" -H 'Content-Encoding: snappy' \
  --data-binary 'not snappy at all' "$otlp"
expect 415 'unsupported Content-Encoding' "${auth[@]}" "${json[@]}" -H 'Content-Encoding: br' \
  --data-binary '{}' "$otlp"
# A bytesValue of non-ASCII text is no base64: its record is rejected (OTLP partial success) and
# the service serves on. It crashed the process in yaml-cpp's base64 decoder (found by otlp_fuzz).
expect 200 '"rejectedLogRecords":"1"' "${auth[@]}" "${json[@]}" \
  --data-binary '{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"bytesValue":"d\u00e9j\u00e0"}}]}]}]}' "$otlp"

# Too large: as sent, after gzip (10 MB of zeros in ~10 KB), and by snappy's length header.
head -c 200000 /dev/zero | tr '\0' ' ' >"$tmp/big.json"
expect 413 '' "${auth[@]}" "${json[@]}" --data-binary @"$tmp/big.json" "$loki"
head -c 10000000 /dev/zero | gzip -c >"$tmp/bomb.gz"
expect 413 'over the limit' "${auth[@]}" "${json[@]}" -H 'Content-Encoding: gzip' \
  --data-binary @"$tmp/bomb.gz" "$loki"
printf '\x80\xad\xe2\x04garbage' >"$tmp/bomb.snappy"  # varint 10,000,000
expect 413 'over the limit' "${auth[@]}" "${proto[@]}" --data-binary @"$tmp/bomb.snappy" "$loki"
head -c 10000000 /dev/zero | zstd -q -c >"$tmp/bomb.zst"
expect 413 'over the limit' "${auth[@]}" "${json[@]}" -H 'Content-Encoding: zstd' \
  --data-binary @"$tmp/bomb.zst" "$otlp"

# Auth: none, wrong, then a rotated token file.
expect 401 'bearer token' "${json[@]}" --data-binary '{"streams":[]}' "$loki"
expect 401 'bearer token' -H 'Authorization: Bearer nope' "${json[@]}" --data-binary '{}' "$otlp"
sleep 1.1  # a new modification time on file systems with 1 s resolution
echo -n "rotated" >"$tmp/token.new" && mv "$tmp/token.new" "$tmp/token"
expect 401 'bearer token' "${auth[@]}" "${json[@]}" --data-binary '{"streams":[]}' "$loki"
auth=(-H "Authorization: Bearer rotated")

# Still serving: a chunked body, and a kernel Xid whose line is over max_line_bytes, beside a pod
# entry stamped in year 9999 (a shipper taking times from the pod's text): taken as a minute
# ahead of the clock and counted, the request's kernel stream still decided.
pad=$(head -c 300 /dev/zero | tr '\0' 'x')
body='{"streams":[{"stream":{"pod":"evil-0","node":"gpu-2"},"values":[["253402300799000000000","x"]]},{"stream":{"transport":"kernel","node":"gpu-1"},"values":[["1700000000000000000","NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus '"$pad"'"]]}]}'
expect 204 '' "${auth[@]}" "${json[@]}" -H 'Transfer-Encoding: chunked' --data-binary "$body" "$loki"
wait_file "$tmp/decisions.jsonl" 60
[[ $(taints_decided "$tmp/decisions.jsonl") == "gpu-1 xid-fatal" ]] || fail "decisions: $(cat "$tmp/decisions.jsonl")"
line=$(jq -r '.evidence[0].line' "$tmp/decisions.jsonl")
[[ ${#line} -le 200 ]] || fail "line not truncated to 200 bytes: ${#line}"

# The pipeline publishes its counts after the batch's decisions, and releases the batch's queue
# bytes after that: poll for both.
for _ in $(seq 600); do
  m=$(curl -fsS "http://127.0.0.1:$port/metrics")
  grep -q '^faultline_lines_total 2$' <<<"$m" && grep -q '^faultline_queue_bytes 0$' <<<"$m" && break
  sleep 0.1
done
metrics=$(curl -fsS "http://127.0.0.1:$port/metrics")
# Only the chunked request was accepted: its two records and its bytes, the one ahead, the one
# hit, the decision.
for series in 'faultline_records_total{source="http",format="loki_json"} 2' \
  "faultline_bytes_total{source=\"http\",format=\"loki_json\"} ${#body}" \
  'faultline_lines_total 2' 'faultline_records_ahead_total 1' \
  'faultline_hits_total{signature="nvidia-xid"} 1' \
  'faultline_matcher_set_errors_total 0' \
  'faultline_decisions_total{action="taint"} 1' 'faultline_queue_bytes 0' \
  'faultline_queue_capacity_bytes 268435456' 'faultline_correlator_nodes 1' \
  'faultline_correlator_job_events_total 0' 'faultline_correlator_suppressed_total 0' \
  'faultline_decision_log_errors_total 0'; do
  grep -qxF "$series" <<<"$metrics" || fail "metrics: no '$series' in: $(grep -v '^#' <<<"$metrics")"
done
# Every signature's series is there from the start, at 0 but for the one that hit.
[[ $(grep -c '^faultline_hits_total{' <<<"$metrics") == $("$FAULTLINE" rules test | cut -d' ' -f3) ]] ||
  fail "metrics: not every signature's hits series"
[[ $(grep '^faultline_hits_total{' <<<"$metrics" | grep -vc ' 0$') == 1 ]] ||
  fail "metrics: hits of other signatures"
# So are the decisions' of every action, at 0 but for the taint.
[[ $(grep '^faultline_decisions_total{' <<<"$metrics" | grep -c ' 0$') == 7 ]] ||
  fail "metrics: decisions series: $(grep '^faultline_decisions_total{' <<<"$metrics")"
for reason in 'malformed"} 9' 'too_large"} 4' 'unauthorized"} 3' 'encoding"} 1'; do
  grep -q "faultline_push_requests_rejected_total{reason=\"$reason" <<<"$metrics" ||
    fail "metrics: no $reason: $(grep rejected_total <<<"$metrics")"
done
grep -q '^faultline_lines_truncated_total{source="http"} 1$' <<<"$metrics" || fail "metrics: truncated"
# The operator also sees why in the log, once a minute per reason: the first of the nine malformed
# pushes, with its cause.
[[ $(grep -c 'push refused with 400: ' "$tmp/serve.log") == 1 ]] ||
  fail "log: malformed pushes: $(grep 'push refused' "$tmp/serve.log")"
grep -qF 'a Loki push refused with 400: body is not a JSON object' "$tmp/serve.log" ||
  fail "log: the first malformed push: $(grep 'push refused' "$tmp/serve.log")"
grep -q 'push refused with 401: missing or wrong bearer token' "$tmp/serve.log" ||
  fail "log: unauthorized push: $(grep 'push refused' "$tmp/serve.log")"
# null is an empty list or map, as Go clients write a nil one and Loki answers 204: no record.
expect 204 '' "${auth[@]}" "${json[@]}" --data-binary '{"streams":null}' "$loki"
expect 204 '' "${auth[@]}" "${json[@]}" --data-binary '{"streams":[{"stream":{"node":"gpu-3"},"values":null}]}' "$loki"
grep -qxF 'faultline_records_total{source="http",format="loki_json"} 2' <(curl -fsS "http://127.0.0.1:$port/metrics") ||
  fail "metrics: null streams or values gave records"
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "serve exited non-zero after SIGTERM"

# A decision log that cannot be written (a full disk): the lost line shows in the metrics.
printf 'decisions: /dev/full\nhttp:\n  listen: "127.0.0.1:0"\n' >"$tmp/full.yaml"
mv "$tmp/serve.log" "$tmp/serve-1.log"  # its port is not the new one
start_serve_http "$tmp/full.yaml"
xid='{"streams":[{"stream":{"node":"gpu-9","transport":"kernel"},"values":[["1740787200000000000","NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"]]}]}'
expect 204 '' "${json[@]}" --data-binary "$xid" "http://127.0.0.1:$port/loki/api/v1/push"
for _ in $(seq 600); do
  grep -qx 'faultline_decision_log_errors_total 1' <(curl -fsS "http://127.0.0.1:$port/metrics") && break
  sleep 0.1
done
# Not `curl | grep -q`: under pipefail grep's early exit can fail curl's write, and the check.
grep -qx 'faultline_decision_log_errors_total 1' <<<"$(curl -fsS "http://127.0.0.1:$port/metrics")" ||
  fail "metrics: the failed decision line is not counted: $(curl -fsS "http://127.0.0.1:$port/metrics" | grep decision)"
# A refusal quoting the client's bytes (a label name of 100 KB with a newline, a forged log line
# and a terminal escape) logs them cut and escaped: one line, nothing forged.
long=$(head -c 100000 /dev/zero | tr '\0' 'k')
printf '{"streams":[{"stream":{"%s\\n[faultline] [error] FORGED\\u001b[31m":1},"values":[]}]}' "$long" >"$tmp/hostile.json"
expect 400 'is not a string' "${json[@]}" --data-binary @"$tmp/hostile.json" "http://127.0.0.1:$port/loki/api/v1/push"
refused=$(grep 'push refused with 400' "$tmp/serve.log") || fail "log: the hostile push's refusal"
[[ $(wc -l <<<"$refused") == 1 && ${#refused} -lt 1000 ]] || fail "log: the refusal is not one short line: ${refused:0:300}"
! grep -q '^\[faultline\] \[error\] FORGED' "$tmp/serve.log" || fail "log: a forged line"
kill -TERM "$serve_pid"
wait "$serve_pid" || true
echo "PASS"
