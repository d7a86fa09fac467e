#!/usr/bin/env bash
# Kafka catch-up of partitions in step by event time (KafkaConfig::max_skew_ns), one core: what
# reading a backlog in step costs against reading it by bytes. Builds nothing: pass the build
# directory (default: build; it needs faultline and tests/tools/mock_kafka).
#
#   bench/kafka_skew.sh [BUILD_DIR]   env: CHATTY (partitions of chatty nodes, 6), NODES (chatty
#                                      nodes per partition, 25), MINUTES (of backlog, 100), RUNS
#                                      (3), CPU (core for faultline, 1), LOAD_CPU (core for the
#                                      broker and kcat, 0), PROPERTIES (more librdkafka
#                                      properties for serve, as YAML flow-map entries, e.g.
#                                      'fetch.wait.max.ms: "500"'), WORK (temp dir)
#
# Topic `skew` holds, as journalctl -o json records (the Kafka json encoding's defaults), a
# backlog of MINUTES ending 10 minutes ago: CHATTY partitions of NODES nodes each logging a line
# every 5 s (about 3.5 MiB per partition with the defaults: the librdkafka mock cluster keeps only
# the last 5 MiB of each), and 3 partitions of 4 quiet nodes each logging a line every 10 s. A
# 1 MiB fetch (max.partition.fetch.bytes) of a chatty partition covers about half an hour of event
# time, of a quiet one the whole backlog: read by bytes, partitions run hours apart. Each run
# starts `faultline serve` pinned to CPU, a new consumer group reading the whole topic, twice:
# with serve's max_skew (half of max_lag 10m: partitions kept within 5 minutes of each other) and
# with max_lag 1d (a skew of 12 h: the backlog read by bytes). It prints, per run, the wall time
# from the first record taken (faultline_records_total, polled every 50 ms) to the last, and
# serve's CPU time meanwhile (/proc/PID/stat); the group's join (the mock's 3 s) is before it.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
chatty=${CHATTY:-6}
nodes=${NODES:-25}
minutes=${MINUTES:-100}
runs=${RUNS:-3}
cpu=${CPU:-1}
load_cpu=${LOAD_CPU:-0}
properties=${PROPERTIES:-}
taskset -cp "$load_cpu" $$ >/dev/null
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
need "$fl" "$build/tests/tools/mock_kafka" curl kcat taskset

taskset -c "$load_cpu" "$build/tests/tools/mock_kafka" --brokers 1 \
  --topic "skew:$((chatty + 3))" --bootstrap-file "$work/bootstrap" >"$work/mock.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do [[ -s $work/bootstrap ]] && break; sleep 0.1; done
brokers=$(cat "$work/bootstrap")

# p<N>.jsonl: partition N's records; 0-2 quiet, 3 on chatty.
start=$((($(date +%s) - (minutes + 10) * 60) / 60 * 60))
awk -v start="$start" -v dir="$work" -v chatty="$chatty" -v nodes="$nodes" -v span=$((minutes * 60)) '
  function rec(p, node, t, msg) {
    printf "{\"__REALTIME_TIMESTAMP\":\"%d000000\",\"_HOSTNAME\":\"%s\",\"_TRANSPORT\":\"kernel\",\"MESSAGE\":\"%s\"}\n", t, node, msg > (dir "/p" p ".jsonl")
  }
  BEGIN {
    for (t = 0; t < span; t += 5) {
      for (c = 0; c < chatty; c++) for (n = 0; n < nodes; n++)
        rec(c + 3, "gpu-c" c "-" n, start + t, "IPv6: ADDRCONF(NETDEV_CHANGE): veth" n ": link becomes ready")
      if (t % 10 == 0) for (p = 0; p < 3; p++) for (n = 0; n < 4; n++)
        rec(p, "gpu-q" p "-" n, start + t, "audit: type=1400 audit(0.0:1): apparmor=\\\"STATUS\\\"")
    }
  }'
for ((p = 0; p < chatty + 3; p++)); do
  taskset -c "$load_cpu" kcat -P -b "$brokers" -t skew -p "$p" <"$work/p$p.jsonl" 2>>"$work/kcat.log"
done
total=$(cat "$work"/p*.jsonl | wc -l)
echo "topic skew: $total records, $((chatty + 3)) partitions, $minutes minutes" >&2

hz=$(getconf CLK_TCK)
group=0
printf '| max_lag | records | wall s | CPU s |\n| --- | ---: | ---: | ---: |\n'
for ((r = 0; r < runs; r++)); do
  for max_lag in 10m 1d; do
    group=$((group + 1))
    cat >"$work/config.yaml" <<YAML
decisions: /dev/null
max_lag: $max_lag
http: {listen: "127.0.0.1:0"}
kafka:
  brokers: "$brokers"
  group_id: skew-$group
  properties: {$properties}
  topics: [{name: skew, encoding: json}]
YAML
    start_serve "$work/config.yaml" "$work/serve-$group.log"
    first="" n=0
    for _ in $(seq 1200); do
      n=$(metric faultline_records_total)  # Kafka's only: nothing is pushed
      if [[ -z $first && ${n:-0} -gt 0 ]]; then
        first=$(date +%s%N) cpu0=$(cpu_ticks)
      fi
      [[ $n == "$total" ]] && break
      sleep 0.05
    done
    [[ $n == "$total" ]] || { echo "kafka_skew: serve took $n records of $total in 60 s" >&2; exit 1; }
    last=$(date +%s%N) cpu1=$(cpu_ticks)
    kill -TERM "$serve_pid"
    wait "$serve_pid" || { echo "kafka_skew: serve exited $? (see $work/serve-$group.log)" >&2; exit 1; }
    awk -v l="$max_lag" -v n="$n" -v w=$((last - first)) -v c=$((cpu1 - cpu0)) -v hz="$hz" \
      'BEGIN { printf "| %s | %d | %.2f | %.2f |\n", l, n, w / 1e9, c / hz }'
  done
done
