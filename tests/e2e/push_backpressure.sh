#!/usr/bin/env bash
# Backpressure end to end: a real `faultline serve` with a 1 MiB queue whose pipeline is stalled,
# flooded by curl clients (Loki JSON and OTLP JSON), answers 429 with Retry-After once the queue
# is full, holds no more than a stated bound of memory, and loses nothing it answered with a 2xx:
# once the stall is released, every record of every 2xx request reaches the pipeline and decides
# exactly once, and no record of a 429 request does.
#
# The stall is a real one: the decision log is a FIFO that nobody reads until the test says so.
# Every record is a kernel Xid 79 of its own node, so each one the pipeline sees is a taint
# decision of a node that names its request; the first request's decisions fill the pipe and the
# pipeline thread blocks in the decision log's write.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
records=200    # per request
requests=100   # per client
pad=$(head -c 1000 /dev/zero | tr '\0' 'x')  # ~1 KB lines: a request is ~220 KB of JSON
queue_bytes=$((1 << 20))
max_body=$((512 << 10))

mkfifo "$tmp/decisions.fifo"
# A reader that never reads: serve can open the log, then stalls. Its own process, so that no
# other one holds the FIFO and killing it (cleanup) cannot leave serve blocked.
sleep 1000 <>"$tmp/decisions.fifo" &
holder=$!
pids+=("$holder")
cat >"$tmp/config.yaml" <<YAML
decisions: $tmp/decisions.fifo
queue_bytes: $queue_bytes
http: {listen: "127.0.0.1:0", max_body_bytes: $max_body}
YAML
start_serve_http "$tmp/config.yaml"
base="http://127.0.0.1:$port"
vm() { sed -n "s/^$1:[[:space:]]*\([0-9]*\) kB$/\1/p" "/proc/$serve_pid/status"; }
baseline_kb=$(vm VmHWM)

# Request bodies: templates whose node names are bp-@REQ@-J, J = 1..records.
xid="NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus $pad"
awk -v n=$records -v line="$xid" 'BEGIN {
  printf "{\"streams\":["
  for (j = 1; j <= n; j++)
    printf "%s{\"stream\":{\"transport\":\"kernel\",\"node\":\"bp-@REQ@-%d\"},\"values\":[[\"%d\",\"%s\"]]}",
      (j > 1 ? "," : ""), j, 1700000000000000000 + j, line
  printf "]}"
}' >"$tmp/loki.tmpl"
awk -v n=$records -v line="$xid" 'BEGIN {
  printf "{\"resourceLogs\":["
  for (j = 1; j <= n; j++)
    printf "%s{\"resource\":{\"attributes\":[{\"key\":\"k8s.node.name\",\"value\":{\"stringValue\":\"bp-@REQ@-%d\"}},{\"key\":\"transport\",\"value\":{\"stringValue\":\"kernel\"}}]},\"scopeLogs\":[{\"logRecords\":[{\"timeUnixNano\":\"%d\",\"body\":{\"stringValue\":\"%s\"}}]}]}",
      (j > 1 ? "," : ""), j, 1700000000000000000 + j, line
  printf "]}"
}' >"$tmp/otlp.tmpl"
declare -A path=([loki]=/loki/api/v1/push [otlp]=/v1/logs)

# send ID KIND: one request; appends "ID KIND STATUS" to $tmp/status.ID-prefix. A 429 without
# Retry-After is recorded as a status of its own.
send() {
  local id=$1 kind=$2 code
  sed "s/@REQ@/$id/g" "$tmp/$kind.tmpl" >"$tmp/body.${id%%-*}"
  code=$(curl -s -o /dev/null -D "$tmp/headers.${id%%-*}" -w '%{http_code}' \
    -H 'Content-Type: application/json' --data-binary @"$tmp/body.${id%%-*}" \
    "$base${path[$kind]}") || code=000
  if [[ $code == 429 ]] && ! grep -qi '^retry-after: *1' "$tmp/headers.${id%%-*}"; then
    code=429-without-retry-after
  fi
  echo "$id $kind $code" >>"$tmp/status.${id%%-*}"
}
client() {
  for ((r = 1; r <= requests; r++)); do send "c$1-$r" "$2"; done
}
client_pids=()
for c in 1 2; do client $c loki & client_pids+=($!); done
for c in 3 4; do client $c otlp & client_pids+=($!); done
for p in "${client_pids[@]}"; do wait "$p"; done
sort "$tmp"/status.c* >"$tmp/statuses"
hwm_kb=$(vm VmHWM)

odd=$(awk '$3 != 204 && $3 != 200 && $3 != 429' "$tmp/statuses")
[[ -z $odd ]] || fail "unexpected answers (want 2xx or 429 with Retry-After): $(head -5 <<<"$odd")"
accepted=$(awk '$3 == 204 || $3 == 200' "$tmp/statuses" | wc -l)
refused=$(awk '$3 == 429' "$tmp/statuses" | wc -l)
echo "stalled: $accepted requests accepted, $refused answered 429"
((refused > 0)) || fail "no 429 although the pipeline was stalled"
((accepted > 0)) || fail "nothing accepted"
# The 2xx requests fit in the queue, which counts the batch the pipeline holds until it is done:
# the rest was refused, not buffered.
body_bytes=$(wc -c <"$tmp/body.c1")  # a Loki body, the smaller kind
((accepted <= queue_bytes / body_bytes)) || fail "$accepted requests accepted by a 1 MiB queue"

metrics=$(curl -fsS "$base/metrics")
metric() { awk -v m="$1" '$1 == m { print $2 }' <<<"$metrics"; }
[[ $(metric 'faultline_push_requests_rejected_total{reason="queue_full"}') == "$refused" ]] ||
  fail "metrics: queue_full refusals: $(grep rejected_total <<<"$metrics")"
queued=$(metric faultline_queue_bytes)
((queued > 0 && queued <= queue_bytes)) ||
  fail "metrics: queue depth $queued bytes with a bound of $queue_bytes"
[[ $(metric faultline_queue_capacity_bytes) == "$queue_bytes" ]] || fail "metrics: queue capacity"
stalled_lines=$(metric faultline_lines_total)
((${stalled_lines:-0} < accepted * records)) || fail "the pipeline was not stalled"

# Memory: buffering what the clients offered would take more than twice the allowed growth. The
# server may hold the queue (for these JSON bodies of long lines a batch holds about what the
# queue counts: bench/README.md) and, per server thread (4 here), a body being read
# and its JSON parse tree: 4 × max_body_bytes each; plus 16 MiB for allocator arenas and slack.
offered=$(($(wc -l <"$tmp/statuses") * body_bytes))
bound_kb=$((baseline_kb + (queue_bytes + 4 * 4 * max_body) / 1024 + 16 * 1024))
echo "memory: VmHWM ${baseline_kb} kB at start, ${hwm_kb} kB after the flood; bound ${bound_kb} kB;" \
  "clients offered $((offered >> 20)) MiB"
((offered / 1024 > 2 * (bound_kb - baseline_kb))) || fail "the flood is too small to test the bound"
if asan_build; then
  echo "memory: bound not checked under AddressSanitizer (its quarantine keeps freed memory)"
else
  ((hwm_kb <= bound_kb)) || fail "VmHWM ${hwm_kb} kB over the bound of ${bound_kb} kB"
fi

# Release the stall: everything accepted reaches the pipeline, and new pushes are accepted again.
cat <"$tmp/decisions.fifo" >"$tmp/decisions.jsonl" &
reader=$!
pids+=("$reader")
for _ in $(seq 100); do
  [[ $(readlink "/proc/$reader/fd/0") == "$tmp/decisions.fifo" ]] && break
  sleep 0.1
done
kill "$holder"
# wait_lines N: waits up to 30 s for the pipeline to have matched N lines.
wait_lines() {
  local seen
  for _ in $(seq 300); do
    seen=$(curl -fsS "$base/metrics" | awk '$1 == "faultline_lines_total" { print $2 }')
    [[ $seen == "$1" ]] && return 0
    sleep 0.1
  done
  fail "the pipeline matched ${seen:-no} lines, $1 were accepted"
}
wait_lines $((accepted * records))
send c5-1 loki
send c5-2 otlp
[[ $(awk '{ print $3 }' "$tmp/status.c5" | tr '\n' ' ') == "204 200 " ]] ||
  fail "not accepted after the stall: $(cat "$tmp/status.c5")"
cat "$tmp/status.c5" >>"$tmp/statuses"
accepted=$((accepted + 2))
want_lines=$((accepted * records))
wait_lines "$want_lines"
metrics=$(curl -fsS "$base/metrics")
for kind in loki otlp; do
  want=$(($(awk -v k=$kind '$2 == k && ($3 == 204 || $3 == 200)' "$tmp/statuses" | wc -l) * records))
  [[ $(metric "faultline_records_total{source=\"http\",format=\"${kind}_json\"}") == "$want" ]] ||
    fail "metrics: records of $kind: $(grep records_total <<<"$metrics")"
done
[[ $(metric 'faultline_decisions_total{action="taint"}') == "$want_lines" ]] ||
  fail "metrics: decisions: $(grep decisions_total <<<"$metrics")"

kill -TERM "$serve_pid"
wait "$serve_pid" || fail "serve exited non-zero after SIGTERM"
wait "$reader"
# Exactly the nodes of the 2xx requests were decided, each once.
awk '$3 == 204 || $3 == 200 { for (j = 1; j <= n; j++) print "bp-" $1 "-" j }' n=$records \
  "$tmp/statuses" | sort >"$tmp/want"
jq -r 'select(.action == "taint" and .rule == "xid-fatal") | .node' "$tmp/decisions.jsonl" | sort >"$tmp/got"
cmp -s "$tmp/want" "$tmp/got" ||
  fail "decided nodes differ from the accepted ones: $(diff "$tmp/want" "$tmp/got" | head -5)"
echo "PASS: $accepted requests ($want_lines records) accepted and decided once each, $refused refused"
