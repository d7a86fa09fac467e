#!/usr/bin/env bash
# HTTP push to matched lines, end to end, one core for faultline. Builds nothing: pass the build
# directory (default: build, Release; it needs faultline and bench/push_load).
#
#   bench/push_e2e.sh [BUILD_DIR]   env: LINES (200000: the corpus), RECORDS (1000000 per format:
#                                    the corpus is sent in turn until then), NODES (16), FORMATS
#                                    ("loki_proto loki_json otlp_proto otlp_json"), CPU (core for
#                                    faultline, 0), LOAD_CPU (core for the client, 1),
#                                    CONNECTIONS (2), BATCH (1000: records per request),
#                                    QUEUE_BYTES (268435456), MAX_BODY_BYTES (67108864),
#                                    MATCH_THREADS (1: serve's match workers), WORK (temp dir),
#                                    INPUT (a node<TAB>message file to send instead of the corpus),
#                                    CONTENT_ENCODING (identity; gzip: bodies gzipped as the OTel
#                                    collector's otlphttp exporter sends them by default; zstd:
#                                    as its `compression: zstd` sends them)
#
# The corpus is bench/make_corpus.py's (seeded, real-format kernel lines of NODES nodes, one fault
# per 100,000 lines), the messages without their dmesg / syslog envelope. For each format a fresh
# `faultline serve` (http section only, decisions to a file) runs pinned to CPU, and
# bench/push_load, pinned to LOAD_CPU, sends it the corpus as the agents do: requests of BATCH
# records of one node (Loki protobuf + snappy and Loki JSON with the stream's labels; OTLP
# protobuf and JSON shaped as the OTel collector's journald receiver exports them), every body
# encoded beforehand, over CONNECTIONS keep-alive connections, 429s retried after Retry-After.
# The time runs from the first request until /metrics shows every record matched
# (faultline_lines_total); records/s and MB/s are over that wall time, MB/s for the bodies as sent
# and for the message text alone (MB = 10^6 bytes); "per CPU-second" divides by the CPU time
# faultline used meanwhile (/proc/PID/stat). Peak RSS is faultline's VmHWM.
#
# What bounds memory: the queue (queue_bytes, default 256 MiB, accounted as decoded bytes) plus,
# per HTTP server thread, the request being read and decoded (each at most http.max_body_bytes);
# a client faster than the matcher gets 429 once the queue is full (the "429 retried" column).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
load=$build/bench/push_load
need "$fl" "$load" curl python3 taskset
lines=${LINES:-200000}
records=${RECORDS:-1000000}
nodes=${NODES:-16}
formats=${FORMATS:-loki_proto loki_json otlp_proto otlp_json}
cpu=${CPU:-0}
load_cpu=${LOAD_CPU:-1}
match_threads=${MATCH_THREADS:-1}
connections=${CONNECTIONS:-2}
batch=${BATCH:-1000}
max_body_bytes=${MAX_BODY_BYTES:-67108864}
queue_bytes=${QUEUE_BYTES:-268435456}
content_encoding=${CONTENT_ENCODING:-identity}

if [[ -n ${INPUT:-} ]]; then
  cp "$INPUT" "$work/lines.tsv"
  corpus="$INPUT: $(wc -l <"$work/lines.tsv") lines"
else
  make_lines "$lines" "$nodes"
  faults=$(($(wc -l <"$work/corpus/faults.tsv") - 1))
  corpus="$(wc -l <"$work/lines.tsv") lines of $nodes nodes, $faults faults injected"
fi

hz=$(getconf CLK_TCK)
rows=()
for format in $formats; do
  cat >"$work/config-$format.yaml" <<YAML
decisions: $work/decisions-$format.jsonl
http: {listen: "127.0.0.1:0", max_body_bytes: $max_body_bytes}
queue_bytes: $queue_bytes
match_threads: $match_threads
YAML
  start_serve "$work/config-$format.yaml" "$work/serve-$format.log"
  rss_idle=$(awk '/^VmRSS/ { print $2 }' "/proc/$serve_pid/status")
  echo "$format: pushing $records records ..." >&2
  c0=$(cpu_ticks)
  out=$(taskset -c "$load_cpu" "$load" --url "http://127.0.0.1:$port" --format "$format" \
    --input "$work/lines.tsv" --records "$records" --connections "$connections" --batch "$batch" \
    --content-encoding "$content_encoding")
  c1=$(cpu_ticks)
  echo "  $out" >&2
  rss_peak=$(awk '/^VmHWM/ { print $2 }' "/proc/$serve_pid/status")
  hits=$(metric faultline_hits_total)
  kill -TERM "$serve_pid"
  wait "$serve_pid" || { echo "push_e2e.sh: serve exited non-zero (see $work/serve-$format.log)" >&2; exit 1; }
  decisions=$(wc -l <"$work/decisions-$format.jsonl")
  field() { sed -E "s/.* $1=([0-9.]+).*/\1/" <<<"$out"; }
  label=$format
  [[ $content_encoding == identity ]] || label+=" + $content_encoding"
  rows+=("$(awk -v f="$label" -v n="$(field records)" -v q="$(field requests)" \
    -v r="$(field retried_429)" -v b="$(field body_bytes)" -v t="$(field text_bytes)" \
    -v s="$(field seconds)" -v c="$((c1 - c0))" -v hz="$hz" -v hits="$hits" -v d="$decisions" \
    -v idle="$rss_idle" -v peak="$rss_peak" 'BEGIN {
      printf "| %s | %d | %d | %.1f | %.0f | %.1f | %.1f | %.0f | %.2fs / %.2fs | %d | %d / %d | %d / %d |\n",
        f, n, q, b / n, n / s, b / 1e6 / s, t / 1e6 / s, (c > 0 ? n / (c / hz) : 0), s, c / hz,
        r, hits, d, idle / 1024, peak / 1024 }')")
done

echo
echo "faultline serve ($match_threads match threads), HTTP push, pinned to CPU $cpu; push_load on CPU $load_cpu with $connections"
echo "keep-alive connections ($(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "Corpus: $corpus, sent in turn"
echo "until $records records per format. queue_bytes $queue_bytes."
echo
echo "| format | records | requests | body B/record | records/s | MB/s bodies | MB/s text | records/s per CPU-second | wall / CPU time | 429 retried | hits / decisions | RSS idle / peak (MiB) |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- | --- |"
printf '%s\n' "${rows[@]}"
