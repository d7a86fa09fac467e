#!/usr/bin/env bash
# A new replica (or a restart) reads an hour and more of backlog from topics whose nodes are
# spread over the partitions by key, as the deploy overlays key by node. A partition of chatty
# nodes covers a few minutes of event time per fetch where one of quiet nodes covers an hour, so
# unless the consumer keeps them in step the quiet partitions run ahead by more than max_lag:
# the chatty partition's quiet nodes (a healthy node's kernel says little) are then found silent
# and a port DOWN is decided lasting on the other partitions' time while its ACTIVE, minutes
# later, is still unread (measured before the fix: the chatty partition at minute 4 of the
# backlog when the quiet ones were at minute 69). The live service must decide what `faultline
# replay` of the same records decides: one real lasting DOWN (gpu-q0, on a quiet partition) and
# nothing for the five nodes whose ports came back within two to four minutes. Twice: the quiet
# nodes on three more partitions of the chatty nodes' topic, then on a topic of their own (kernel
# and pod logs shipped apart: here the quiet nodes' lines are their pods', but gpu-q0's DOWN). The
# producer writes small record batches and the service fetches at most 32 KiB per partition, so
# that a few thousand records show what a busy cluster's 1 MiB fetches do.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
command -v kcat >/dev/null || fail "kcat not installed"
"$FL_BUILD/tests/tools/mock_kafka" --brokers 1 --topic kernel:4 --topic chatty:1 --topic quiet:3 \
  --bootstrap-file "$tmp/bootstrap" >"$tmp/mock.log" 2>&1 &
pids+=($!)
wait_file "$tmp/bootstrap" 20
brokers=$(cat "$tmp/bootstrap")

# journalctl -o json records (replay's journal-json; the Kafka json encoding's defaults), one file
# per partition: q0.jsonl the chatty one, q1-q3.jsonl the quiet ones. On the first, four chatty
# nodes (a line every 5 s) and five nodes whose port goes DOWN and comes back ACTIVE 2-4 minutes
# later; on the others, four quiet nodes each (a line a minute; pod lines for the second run), of
# which gpu-q0's port goes DOWN for good 30 minutes in. 100 minutes, ending 10 minutes ago.
now=$(date +%s)
start=$(((now - 110 * 60) / 60 * 60))
awk -v start="$start" -v dir="$tmp" '
  function rec(file, node, t, msg, pod) {
    printf "{\"__REALTIME_TIMESTAMP\":\"%d000000\",\"_HOSTNAME\":\"%s\",%s\"MESSAGE\":\"%s\"}\n", t, node, pod ? "\"CONTAINER_NAME\":\"trainer\"," : "\"_TRANSPORT\":\"kernel\",", msg > (dir "/" file ".jsonl")
  }
  BEGIN {
    bg = "audit: type=1400 audit(0.0:1): apparmor=\\\"STATUS\\\" operation=\\\"profile_replace\\\" info=\\\"same as current profile, skipping\\\" profile=\\\"unconfined\\\" name=\\\"cri-containerd.apparmor.d\\\" pid=4242 comm=\\\"apparmor_parser\\\""
    down = "mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link DOWN"
    for (t = 0; t < 6000; t += 5) {
      for (n = 0; n < 4; n++) rec("q0", "gpu-c" n, start + t, bg)
      for (v = 0; v < 5; v++) {
        if (t == 60 + v * 60) rec("q0", "gpu-v" v, start + t, down)
        else if (t == 180 + v * 90) rec("q0", "gpu-v" v, start + t, "mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE")
      }
      if (t % 60 == 0) for (p = 1; p < 4; p++) for (n = 0; n < 4; n++) {
        node = "gpu-q" ((p - 1) * 4 + n)
        if (node == "gpu-q0" && t == 1800) { rec("q" p, node, start + t, down); rec("pods" p, node, start + t, down) }
        else { rec("q" p, node, start + t, bg); rec("pods" p, node, start + t, bg, 1) }
      }
    }
  }'
produce() {  # $1 = topic, $2 = partition, $3 = file
  kcat -P -b "$brokers" -X batch.num.messages=20 -t "$1" -p "$2" <"$3" 2>>"$tmp/kcat.log"
}
for p in 0 1 2 3; do produce kernel "$p" "$tmp/q$p.jsonl"; done
produce chatty 0 "$tmp/q0.jsonl"
for p in 1 2 3; do produce quiet $((p - 1)) "$tmp/pods$p.jsonl"; done

# Runs replay of files $2... and serve on topics $1 (comma-separated), and compares.
compare() {
  local topics=$1 total replayed live late listed="" t
  shift
  : >"$tmp/replay.jsonl"  # decision logs are appended to
  "$FAULTLINE" replay --format journal-json --decisions "$tmp/replay.jsonl" "$@" \
    2>"$tmp/replay.log" || fail "replay exited $?"
  total=$(cat "$@" | wc -l)
  for t in ${topics//,/ }; do listed+="${listed:+, }{name: $t, encoding: json}"; done
  cat >"$tmp/config.yaml" <<YAML
decisions: $tmp/live.jsonl
http: {listen: "127.0.0.1:0"}
kafka:
  brokers: "$brokers"
  group_id: skew-${topics//,/-}
  properties: {max.partition.fetch.bytes: "32768"}
  topics: [$listed]
YAML
  : >"$tmp/live.jsonl"
  : >"$tmp/serve.log"
  start_serve_http "$tmp/config.yaml"
  records_taken() {
    curl -fsS "http://127.0.0.1:$port/metrics" |
      sed -n 's/^faultline_records_total{source="kafka",format="all"} //p'
  }
  for _ in $(seq 600); do
    [[ $(records_taken) == "$total" ]] && break
    sleep 0.1
  done
  [[ $(records_taken) == "$total" ]] || fail "$topics: read $(records_taken) records of $total"
  late=$(curl -fsS "http://127.0.0.1:$port/metrics" |
    sed -n 's/^faultline_correlator_late_hits_total //p')
  kill -TERM "$serve_pid"
  wait "$serve_pid" || fail "$topics: serve exited non-zero after SIGTERM"
  replayed=$(jq -r '"\(.node) \(.action) \(.rule) \(.time)"' "$tmp/replay.jsonl" | sort)
  live=$(jq -r '"\(.node) \(.action) \(.rule) \(.time)"' "$tmp/live.jsonl" | sort)
  [[ $replayed == "gpu-q0 taint ib-port-down-lasting "* ]] || fail "$topics: replay decided $replayed"
  [[ $live == "$replayed" ]] ||
    fail "$topics: live decided [$(tr '\n' ';' <<<"$live")], replay [$(tr '\n' ';' <<<"$replayed")]; late hits: $late"
  echo "$topics: $total records, live decided as replay; late hits: $late"
}
compare kernel "$tmp"/q[0-3].jsonl
compare chatty,quiet "$tmp/q0.jsonl" "$tmp"/pods[1-3].jsonl
echo PASS
