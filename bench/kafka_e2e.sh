#!/usr/bin/env bash
# Kafka to decisions, end to end, one core. Builds nothing: pass the build directory (default:
# build; it needs faultline, bench/kafka_load and tests/tools/mock_kafka).
#
#   bench/kafka_e2e.sh [BUILD_DIR]   env: LINES (2000000), NODES (64), ENCODINGS ("raw json
#                                     otlp_proto"), CPU (core for faultline, 1), LOAD_CPU (core
#                                     for the broker and the producer, 0), MATCH_THREADS (1:
#                                     serve's match workers), QUEUE_BYTES (268435456),
#                                     PREFETCH_KB (librdkafka queued.max.messages.kbytes; unset:
#                                     faultline's default, 90112),
#                                     PROPERTIES (more librdkafka properties for serve, as YAML
#                                     flow-map entries, e.g. 'fetch.wait.max.ms: "10"'),
#                                     WORK (temp dir)
#
# The corpus is bench/make_corpus.py's (seeded, real-format kernel lines of NODES nodes, one
# fault per 100,000 lines), its messages interleaved across nodes. For each encoding a fresh
# librdkafka mock cluster (one broker, topic `bench`) is filled by bench/kafka_load as the
# collectors send (raw: one line per message, node in a header; json: one Fluent Bit record per
# message; otlp_proto: journald-receiver batches of 1000 records of one node per message). The
# mock keeps only the last 5 MiB of each partition (rdkafka_mock.c), so the topic gets enough
# partitions for about 3 MiB each, filled round-robin; lines the mock dropped anyway would show
# as missing at the end. Then `faultline serve` starts pinned to CPU with only that topic and an
# HTTP listener for /metrics, which is polled every 50 ms: the rate is the lines matched
# (faultline_lines_total) from the first poll that sees any to the last change, over that wall
# time and over the CPU time faultline used meanwhile (/proc/PID/stat; the broker runs on
# LOAD_CPU, so the wall rate includes waiting for it). Two baselines read the whole topic on the
# same core without decoding: `kcat -C` (how fast the broker alone hands the messages out) and
# `kcat -G`, a consumer group member like faultline, its time less that of another group's join
# and first message (its lines per CPU-second, in brackets, are about what librdkafka costs
# alone; kcat takes one message per poll call, faultline up to 256, so it is a reference, not a
# floor); the mock returns one message set per partition per fetch.
# Peak RSS is VmHWM. Hits are compared with `faultline replay` of the same corpus files.
# With LINES in the millions faultline has a backlog, and librdkafka 2.0.2 pauses fetching for
# about a second whenever its pre-fetch queue is full (queued.min.messages, faultline's default
# 200,000 messages, or PREFETCH_KB): the wall rate then shows that pause, the CPU-second rate
# does not (bench/README.md, "Kafka catch-up and the pre-fetch queue").
#
# What bounds memory on this path: librdkafka's pre-fetch queue (queued.max.messages.kbytes,
# overshot by at most one fetch, fetch.max.bytes, faultline's default 24 MiB), plus the one batch
# the Kafka source is decoding or the pipeline is matching (the source waits for the pipeline
# before it polls again; a batch closes at kafka.batch_max_messages 10000 messages or records, at
# kafka.batch_max_bytes 16 MiB with the message that reaches it, or batch_timeout_ms 100 ms after
# its first message), plus queue_bytes for the push endpoints (unused here).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
lines=${LINES:-2000000}
nodes=${NODES:-64}
encodings=${ENCODINGS:-raw json otlp_proto}
cpu=${CPU:-1}
load_cpu=${LOAD_CPU:-0}
match_threads=${MATCH_THREADS:-1}
# The script's own polling (curl, awk every 50 ms) runs on LOAD_CPU, not on faultline's core.
taskset -cp "$load_cpu" $$ >/dev/null
queue_bytes=${QUEUE_BYTES:-268435456}
prefetch_kb=${PREFETCH_KB:-}
properties=${PROPERTIES:-}
serve_properties=${prefetch_kb:+queued.max.messages.kbytes: \"$prefetch_kb\"}
serve_properties+=${properties:+${serve_properties:+, }$properties}
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
load=$build/bench/kafka_load
need "$fl" "$load" "$build/tests/tools/mock_kafka" curl kcat python3 taskset

make_lines "$lines" "$nodes"
total=$(wc -l <"$work/lines.tsv")
text_mb=$(cut -f2- "$work/lines.tsv" | wc -c | awk '{printf "%.1f", $1 / 1e6}')
faults=$(($(wc -l <"$work/corpus/faults.tsv") - 1))
# The hits to expect: `faultline replay` of the same files.
expected_hits=$("$fl" replay --year 2025 --decisions /dev/null "$work"/corpus/*.dmesg \
  "$work"/corpus/*.syslog 2>&1 | sed -n 's/.* \([0-9]*\) hits, .*/\1/p')

hz=$(getconf CLK_TCK)
rows=()
for enc in $encodings; do
  case $enc in raw) per_line=130 ;; json) per_line=450 ;; *) per_line=700 ;; esac  # wire bytes, generous
  partitions=$(((total * per_line) / (3 << 20) + 1))
  start_mock "$enc" "$partitions"
  echo "$enc: producing $total lines into $partitions partitions ..." >&2
  produced=$(taskset -c "$load_cpu" "$load" --brokers "$brokers" --topic bench --encoding "$enc" \
    --partitions "$partitions" --input "$work/lines.tsv" 2>&1 | tail -1)
  echo "  $produced" >&2
  msgs=$(sed -E 's/.* in ([0-9]+) messages, ([0-9]+) bytes.*/\1/' <<<"$produced")
  wire_mb=$(sed -E 's/.* in ([0-9]+) messages, ([0-9]+) bytes.*/\2/' <<<"$produced" | awk '{printf "%.1f", $1 / 1e6}')

  # Baselines on the same core, reading every message and decoding none: kcat as a plain
  # consumer of every partition (how fast the mock broker hands them out) and as a member of a
  # consumer group like faultline (less the time a group takes to join and get its first message).
  t_kcat=$EPOCHREALTIME
  kcat_msgs=$(taskset -c "$cpu" kcat -C -b "$brokers" -t bench -o beginning -e -q -f '%o\n' | wc -l)
  kcat_lps=$(awk -v a="$EPOCHREALTIME" -v b="$t_kcat" -v n="$total" 'BEGIN { printf "%.0f", n / (a - b) }')
  [[ $kcat_msgs == "$msgs" ]] || echo "kafka_e2e.sh: $enc: kcat -C read $kcat_msgs of $msgs messages" >&2
  t_join=$EPOCHREALTIME  # a group's join and first message, to take off the next run's time
  taskset -c "$cpu" kcat -b "$brokers" -G "kcat-join-$enc" -o beginning -c 1 -q -f '' bench 2>/dev/null
  t_group=$EPOCHREALTIME
  # Its CPU time too: about what librdkafka alone costs per line (with faultline's default fetch
  # size, which costs librdkafka less than its own).
  TIMEFORMAT='%U %S'
  { time kcat_g_msgs=$(taskset -c "$cpu" kcat -b "$brokers" -G "kcat-$enc" -o beginning -e -q \
    -X fetch.max.bytes=25165824 -f '%o\n' bench 2>/dev/null | wc -l); } 2>"$work/kcat-cpu-$enc"
  kcat_g_cpu_lps=$(awk -v n="$total" '{ s = $1 + $2; printf "%.0f", (s > 0 ? n / s : 0) }' \
    "$work/kcat-cpu-$enc")
  kcat_g_s=$(awk -v a="$EPOCHREALTIME" -v b="$t_group" -v j="$t_group" -v i="$t_join" \
    'BEGIN { print (a - b) - (j - i) }')
  kcat_g_lps=$(awk -v s="$kcat_g_s" -v n="$total" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')
  [[ $kcat_g_msgs == "$msgs" ]] || echo "kafka_e2e.sh: $enc: kcat -G read $kcat_g_msgs of $msgs messages" >&2

  cat >"$work/config-$enc.yaml" <<YAML
decisions: $work/decisions-$enc.jsonl
http: {listen: "127.0.0.1:0"}
queue_bytes: $queue_bytes
match_threads: $match_threads
kafka:
  brokers: "$brokers"
  group_id: bench-$enc
  properties: {$serve_properties}
  topics:
    - {name: bench, encoding: $enc, stream: kernel}
YAML
  start_serve "$work/config-$enc.yaml" "$work/serve-$enc.log"
  rss_idle=$(awk '/^VmRSS/ { print $2 }' "/proc/$serve_pid/status")
  wait_lines 1  # the group join takes a few seconds
  t0=$EPOCHREALTIME c0=$(cpu_ticks) l0=$(metric faultline_lines_total)
  # Until all are matched, or nothing moved for 3 s (lines lost); t1 and c1: at the last change.
  t1=$t0 c1=$c0 seen=$l0
  while [[ $seen -lt $total ]] && awk -v a="$EPOCHREALTIME" -v b="$t1" 'BEGIN { exit !(a - b < 3) }'; do
    sleep 0.05
    now=$(metric faultline_lines_total)
    if [[ $now != "$seen" ]]; then
      t1=$EPOCHREALTIME c1=$(cpu_ticks) seen=$now
    fi
  done
  hits=$(metric faultline_hits_total)
  rss_peak=$(awk '/^VmHWM/ { print $2 }' "/proc/$serve_pid/status")
  kill -TERM "$serve_pid"
  wait "$serve_pid" || { echo "kafka_e2e.sh: serve exited non-zero (see $work/serve-$enc.log)" >&2; exit 1; }
  kill -TERM "$mock_pid"
  wait "$mock_pid" || true
  [[ $seen -ge $total ]] || echo "kafka_e2e.sh: $enc: only $seen of $total lines matched" >&2
  decisions=$(wc -l <"$work/decisions-$enc.jsonl")
  read -r wall_lps cpu_lps wall_s cpu_s < <(awk -v n="$((seen - l0))" -v t0="$t0" -v t1="$t1" \
    -v c="$((c1 - c0))" -v hz="$hz" 'BEGIN {
      printf "%.0f %.0f %.2f %.2f\n", n / (t1 - t0), (c > 0 ? n / (c / hz) : 0), t1 - t0, c / hz }')
  note=""
  [[ $hits == "$expected_hits" ]] || note=" (replay: $expected_hits)"
  rows+=("| $enc | $seen | $msgs / $partitions | $wire_mb | $kcat_lps | $kcat_g_lps ($kcat_g_cpu_lps) | $wall_lps | $cpu_lps | ${wall_s}s / ${cpu_s}s | $hits$note / $decisions | $((rss_idle / 1024)) / $((rss_peak / 1024)) |")
done

echo
echo "faultline serve ($match_threads match threads) from Kafka (librdkafka mock cluster, 1 broker), pinned to CPU $cpu;"
echo "broker and producer on CPU $load_cpu ($(nproc --all) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "Corpus: $total lines of $nodes nodes, $text_mb MB of message text, $faults faults injected ($expected_hits hits in \`faultline replay\` of the same files)."
echo "Bounds: queue_bytes $queue_bytes, queued.max.messages.kbytes ${prefetch_kb:-90112}, kafka.batch_max_messages 10000, batch_max_bytes 16 MiB, batch_timeout_ms 100.${properties:+ Properties: $properties.}"
echo
echo "| encoding | lines matched | messages / partitions | MB on the wire | kcat -C lines/s | kcat -G lines/s (per CPU-second) | faultline lines/s (wall) | faultline lines/s per CPU-second | wall / CPU time | hits / decisions | RSS idle / peak (MiB) |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
