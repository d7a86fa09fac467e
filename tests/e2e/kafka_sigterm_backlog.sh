#!/usr/bin/env bash
# SIGTERM while the service reads a backlog (a rollout while lagging, a new replica reading
# retention): librdkafka holds messages fetched ahead of the batch being handled, and the close
# forwards them to the queue it is served on. Served with rd_kafka_queue_poll_callback, which
# takes no messages, librdkafka asserted and the process aborted (exit 134): no offset committed,
# the member never left its group (3 of 4 runs of this test before the fix). It must exit 0
# having committed what it handled and left the group, and a restart in the same group must read
# exactly the rest: every line once.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
command -v kcat >/dev/null || fail "kcat not installed"
"$FL_BUILD/tests/tools/mock_kafka" --brokers 1 --topic backlog:4 \
  --bootstrap-file "$tmp/bootstrap" >"$tmp/mock.log" 2>&1 &
pids+=($!)
wait_file "$tmp/bootstrap" 20
brokers=$(cat "$tmp/bootstrap")

# 120,000 kernel lines of 8 nodes over 4 partitions (8 MB: the mock cluster keeps about 5 MB a
# partition), which the pipeline takes some 100 ms to read: with 30,000, one run in several read
# them all before its SIGTERM under a loaded ctest.
total=120000
awk -v n="$total" 'BEGIN { for (i = 0; i < n; i++)
  printf "gpu-%d:IPv6: ADDRCONF(NETDEV_CHANGE): cali%d: link becomes ready\n", i % 8 + 1, i }' |
  kcat -P -b "$brokers" -t backlog -K: 2>"$tmp/kcat.log"
cat >"$tmp/config.yaml" <<YAML
decisions: $tmp/decisions.jsonl
http: {listen: "127.0.0.1:0"}
kafka:
  brokers: "$brokers"
  group_id: backlog
  properties: {session.timeout.ms: "6000"}
  # Small batches: SIGTERM comes while most of the backlog is fetched and not yet handled.
  batch_max_messages: 200
  topics:
    - {name: backlog, encoding: raw, stream: kernel}
YAML
lines() { curl -s "127.0.0.1:$port/metrics" | awk '$1 == "faultline_lines_total" { print $2 }'; }
handled() { sed -n 's/.*stopped: \([0-9]*\) lines.*/\1/p' "$1"; }

"$FAULTLINE" serve --config "$tmp/config.yaml" 2>"$tmp/first.log" &
first=$!
pids+=("$first")
wait_listening "$tmp/first.log"
# SIGTERM at once when the first lines are read: the backlog takes the pipeline tens of ms.
read_before=0
for _ in $(seq 6000); do read_before=$(lines); [[ $read_before -gt 0 ]] && break; sleep 0.01; done
kill -TERM "$first"
[[ $read_before -gt 0 ]] || fail "no line of the backlog read in 60 s"
rc=0
wait "$first" || rc=$?
[[ $rc == 0 ]] || fail "SIGTERM during the backlog: exit $rc"
grep -q 'kafka: consumer closed' "$tmp/first.log" || fail "the consumer did not close"
read_first=$(handled "$tmp/first.log")
[[ -n $read_first && $read_first -gt 0 && $read_first -lt $total ]] ||
  fail "first run handled '$read_first' of $total"

"$FAULTLINE" serve --config "$tmp/config.yaml" 2>"$tmp/second.log" &
second=$!
pids+=("$second")
wait_listening "$tmp/second.log"
for _ in $(seq 1200); do [[ $(lines) -ge $((total - read_first)) ]] && break; sleep 0.05; done
sleep 1  # a line read twice would show past the rest
kill -TERM "$second"
wait "$second" || fail "second run: exit $?"
read_second=$(handled "$tmp/second.log")
((read_first + read_second == total)) ||
  fail "read $read_first, then $read_second after the restart: not $total, each line once"
echo "PASS: SIGTERM at $read_first of $total lines, exit 0, the restart read the other $read_second"
