#!/usr/bin/env bash
# `match_threads: 2`: batches are matched by two workers at once, and their hits must still reach
# the correlator in the order the batches were queued. Sixteen nodes push their kernel logs at
# once, each in order, 40 lines per Loki JSON request: an Xid 48 on a GPU at 600 s; at 1519 s,
# the last line of a request, the driver names that GPU's UUID; at 1520 s, the first line of the
# next request, a successful reset of that UUID; then quiet. Every node must be tainted and then
# untainted by the reset. A reset correlated before the line naming its UUID names no GPU, and
# the node would keep its taint. (The mechanism's own test: tests/unit/batch_queue_test.cc.)
# First, match_threads out of range (0, 257) or not a number is refused with its reason.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"

# Out of range or not a number: serve refuses to start, naming the file, line and key.
for bad in 0 257 two; do
  printf 'http: {listen: "127.0.0.1:0"}\nmatch_threads: %s\n' "$bad" >"$tmp/bad.yaml"
  if timeout 10 "$FAULTLINE" serve --config "$tmp/bad.yaml" 2>"$tmp/bad.err" </dev/null; then
    fail "serve started with match_threads: $bad"
  fi
  grep -q "bad.yaml:2: match_threads: expected an integer from 1 to 256" "$tmp/bad.err" ||
    fail "match_threads: $bad refused without the reason: $(cat "$tmp/bad.err")"
done

nodes=16
cat >"$tmp/config.yaml" <<YAML
decisions: $tmp/decisions.jsonl
http: {listen: "127.0.0.1:0"}
match_threads: 2
YAML
start_serve_http "$tmp/config.yaml"
url="http://127.0.0.1:$port"

# Node k's lines, one per second of event time from t0, in requests of 40 lines.
t0=1740787200
for k in $(seq -w 0 $((nodes - 1))); do
  uuid="GPU-979426f2-893a-7cbb-c4cf-814720000$k"
  awk -v t0="$t0" -v uuid="$uuid" -v node="gpu-r$k" -v out="$tmp/n$k" 'BEGIN {
    for (t = 0; t < 2400; t++) {
      if (t == 600) {
        xid = t " NVRM: Xid (PCI:0000:a1:00): 48, pid=2222, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0."
        line[n++] = xid
        line[n++] = xid  # printed twice in its second: a repeat
      } else if (t == 601) {
        # no line, so that the UUID line stays the last of its request
      } else if (t == 1519) {
        line[n++] = t " NVRM: GPU at PCI:0000:a1:00: " uuid
      } else if (t == 1520) {
        line[n++] = t " GPU reset executed: " uuid ", success: true"
      } else {
        line[n++] = t " IPv6: ADDRCONF(NETDEV_CHANGE): cali" t ": link becomes ready"
      }
    }
    for (i = 0; i < n; i += 40) {
      file = sprintf("%s.%04d.json", out, i / 40)
      printf "{\"streams\":[{\"stream\":{\"node\":\"%s\",\"transport\":\"kernel\"},\"values\":[", node > file
      for (j = i; j < i + 40 && j < n; j++) {
        split(line[j], parts, " ")
        msg = substr(line[j], length(parts[1]) + 2)
        printf "%s[\"%d%09d\",\"%s\"]", (j > i ? "," : ""), t0 + parts[1], j % 1000, msg > file
      }
      print "]}]}" > file
      close(file)
    }
  }'
done
for k in $(seq -w 0 $((nodes - 1))); do
  (for f in "$tmp"/n"$k".*.json; do
    code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
      --data-binary @"$f" "$url/loki/api/v1/push")
    [[ $code == 204 ]] || { echo "gpu-r$k: $f: HTTP $code" >>"$tmp/push.log"; exit 1; }
  done) &
  pushers+=($!)
done
for p in "${pushers[@]}"; do wait "$p" || fail "a push failed"; done

expected_lines=$((nodes * 2400))
# A worker adds a batch's lines, then its hits, then releases its queue bytes, while the other
# worker goes on: all lines counted is not yet all hits. Poll for the queue's bytes too.
for _ in $(seq 600); do
  m=$(curl -fsS "$url/metrics")
  lines=$(sed -n 's/^faultline_lines_total \([0-9]*\)$/\1/p' <<<"$m")
  [[ $lines == "$expected_lines" ]] && grep -q '^faultline_queue_bytes 0$' <<<"$m" && break
  sleep 0.1
done
[[ $lines == "$expected_lines" ]] || fail "matched $lines of $expected_lines lines"
# Each worker adds its batches' hits by signature: every node's signature lines, the repeated Xid
# line twice (one hit that counts its repeat: Hit::repeats).
hits=$(curl -fsS "$url/metrics" | grep '^faultline_hits_total{' | grep -v ' 0$' | sort)
want_hits=$(printf 'faultline_hits_total{signature="%s"} %d\n' nvidia-gpu-reset "$nodes" \
  nvidia-gpu-uuid "$nodes" nvidia-xid $((2 * nodes)))
[[ $hits == "$want_hits" ]] || fail "hits by signature: $hits"
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "serve exited $?"

got=$(jq -r '"\(.node) \(.action) \(.rule)"' "$tmp/decisions.jsonl" | sort)
want=$(for k in $(seq -w 0 $((nodes - 1))); do
  echo "gpu-r$k taint xid-fatal"
  echo "gpu-r$k untaint xid-fatal"
done | sort)
[[ $got == "$want" ]] || fail "decisions differ from one taint and one untaint per node:
$(diff <(echo "$want") <(echo "$got") | head -20)"
# Per node, the taint comes before the untaint in the log (decisions are written in order).
for k in $(seq -w 0 $((nodes - 1))); do
  order=$(jq -r "select(.node == \"gpu-r$k\") | .action" "$tmp/decisions.jsonl" | paste -sd,)
  [[ $order == "taint,untaint" ]] || fail "gpu-r$k: decisions in order $order"
done
echo "PASS: $nodes nodes pushed at once, two match workers: every node tainted, then untainted"
