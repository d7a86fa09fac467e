#!/usr/bin/env bash
# Every goal of issue 6 measured again, one run after another on one machine: the sequence the
# dated sections of bench/README.md ("Every goal again ...") ran by hand. Builds nothing: pass the
# build directory (default: build, Release, every target built).
#
#   bench/goals.sh [BUILD_DIR]   env: OUT (the report; default goals.md in the current
#                                directory), WORK (temp dir)
#
# In turn:
#   OTLP JSON push       push_e2e.sh, bodies plain, gzip'd and zstd'd, alternating, twice each
#                        (RECORDS 2,000,000)
#   protobuf push        push_e2e.sh, OTLP protobuf and Loki protobuf + snappy
#   Kafka                kafka_e2e.sh, encodings json, otlp_proto and raw (LINES 2,000,000)
#   latency              latency.sh: fatal line to taint request at half the sustained rate
#   two match workers    faultline_bench BM_ServeWorkers, medians of 5 randomly interleaved
#                        repetitions on CPUs 0,1: two workers' wall time over one's, per corpus
#   matcher and replay   compare.sh (its table, not bench/RESULTS.md)
# Each script's own output goes to the report under a heading; the figures are each script's
# (see the comments at their top). The machine is shared: compare runs of one sitting, and read
# /proc/pressure/cpu, printed before each step, for the other tenants' load.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
need "$fl" "$build/bench/faultline_bench" jq
out=$(realpath "${OUT:-goals.md}")

step() {
  {
    echo
    echo "## $1"
    echo
    echo "\`$2\`, from $(date -u +%H:%M:%SZ); CPU pressure: $(head -1 /proc/pressure/cpu)"
    echo
  } >>"$out"
  echo "$1 ..." >&2
}

{
  echo "# Issue 6's goals, $(date -u +%Y-%m-%d)"
  echo
  echo "At $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '(no git)'), on $(nproc) CPUs of" \
    "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')."
} >"$out"

for round in 1 2; do
  for encoding in identity gzip zstd; do
    step "OTLP JSON push, $encoding bodies (round $round)" \
      "CONTENT_ENCODING=$encoding FORMATS=otlp_json RECORDS=2000000 bench/push_e2e.sh"
    CONTENT_ENCODING=$encoding FORMATS=otlp_json RECORDS=2000000 WORK="$work/push" \
      bash "$here/push_e2e.sh" "$build" >>"$out"
  done
done
step "OTLP protobuf and Loki protobuf push" \
  'FORMATS="otlp_proto loki_proto" RECORDS=2000000 bench/push_e2e.sh'
FORMATS="otlp_proto loki_proto" RECORDS=2000000 WORK="$work/push" \
  bash "$here/push_e2e.sh" "$build" >>"$out"
step "Kafka" 'LINES=2000000 ENCODINGS="json otlp_proto raw" bench/kafka_e2e.sh'
LINES=2000000 ENCODINGS="json otlp_proto raw" WORK="$work/kafka" \
  bash "$here/kafka_e2e.sh" "$build" >>"$out"
step "Fatal line to taint request" "bench/latency.sh"
WORK="$work/latency" bash "$here/latency.sh" "$build" >>"$out"

step "Two match workers over one" \
  "faultline_bench --benchmark_filter='ServeWorkers/./[012]/0' --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true --benchmark_min_time=0.5"
taskset -c 0,1 "$build/bench/faultline_bench" --benchmark_filter='ServeWorkers/./[012]/0' \
  --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true \
  --benchmark_min_time=0.5 --benchmark_format=json >"$work/workers.json" 2>/dev/null
# BM_ServeWorkers/WORKERS/CORPUS/PARTITIONED_median: its real_time, per corpus one worker's over two's.
median() {
  jq -r --arg n "BM_ServeWorkers/$1/$2/0/real_time_median" \
    '.benchmarks[] | select(.name == $n) | .real_time' "$work/workers.json"
}
{
  echo "| corpus | one worker, ms | two workers, ms | two over one |"
  echo "| --- | ---: | ---: | ---: |"
  for corpus in 0 1 2; do
    one=$(median 1 "$corpus")
    two=$(median 2 "$corpus")
    name=$(case $corpus in 0) echo quiet ;; 1) echo storm ;; 2) echo "one node's flood" ;; esac)
    awk -v n="$name" -v a="$one" -v b="$two" 'BEGIN { printf "| %s | %.1f | %.1f | %.2f |\n", n, a, b, a / b }'
  done
} >>"$out"

step "Matcher and replay" "bench/compare.sh"
OUT="$work/results.md" WORK="$work/compare" bash "$here/compare.sh" "$build" >/dev/null
cat "$work/results.md" >>"$out"

cat "$out"
