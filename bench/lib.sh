# shellcheck shell=bash disable=SC2034,SC2154  # variables set and read by the sourcing script
# Shared by the bench scripts (sourced after setting here, bench/, and build). Sets fl (the
# faultline binary), work (WORK, else a new temporary dir) and pids. Every process added to pids
# is stopped on exit, and a temporary work dir removed after a run that succeeded: it holds up to
# gigabytes of corpus, and is kept, unless empty, only to look into a failure.
fl=$build/faultline
work=${WORK:-$(mktemp -d)}
mkdir -p "$work"
pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [[ -z ${WORK:-} ]]; then
    if [[ $rc == 0 ]]; then rm -rf "$work"; else rmdir "$work" 2>/dev/null || true; fi
  fi
}
trap cleanup EXIT

# need NAME...: exits 2 unless each is an executable path (a built target) or an installed
# command.
need() {
  local b
  for b in "$@"; do
    if [[ $b == */* ]]; then
      [[ -x $b ]] || { echo "$(basename "$0"): $b not found (build it first)" >&2; exit 2; }
    else
      command -v "$b" >/dev/null || { echo "$(basename "$0"): $b not installed" >&2; exit 2; }
    fi
  done
}

# make_lines LINES NODES: bench/make_corpus.py's corpus in $work/corpus (seeded, real-format
# kernel lines, one fault per 100,000 lines) and its messages as $work/lines.tsv, one
# "node<TAB>message" per line without the dmesg / syslog envelope, the nodes interleaved.
make_lines() {
  echo "generating $1 lines for $2 nodes in $work ..." >&2
  python3 "$here/make_corpus.py" --out "$work/corpus" --lines "$1" --nodes "$2" 2>"$work/corpus.log"
  local tsv=() f node
  for f in "$work"/corpus/*.dmesg "$work"/corpus/*.syslog; do
    node=$(basename "${f%%.*}")
    sed -E "s/^\[ *[0-9.]+\] //; s/^[A-Z][a-z]{2} [ 0-9]{2} [0-9:]{8} [^ ]+ kernel: //; s/^/$node\t/" \
      "$f" >"$f.tsv"
    tsv+=("$f.tsv")
  done
  paste -d '\n' "${tsv[@]}" | grep -v '^$' >"$work/lines.tsv"
}

# start_mock NAME PARTITIONS: a librdkafka mock cluster (one broker, tests/tools/mock_kafka) on
# load_cpu with topic `bench`; sets brokers and mock_pid.
start_mock() {
  taskset -c "$load_cpu" "$build/tests/tools/mock_kafka" --brokers 1 --topic "bench:$2" \
    --bootstrap-file "$work/bootstrap-$1" >"$work/mock-$1.log" 2>&1 &
  mock_pid=$!
  pids+=("$mock_pid")
  for _ in $(seq 300); do [[ -s $work/bootstrap-$1 ]] && break; sleep 0.1; done
  brokers=$(cat "$work/bootstrap-$1")
}

# start_serve CONFIG LOG: `faultline serve` pinned to cpu, its config listening on 127.0.0.1:0;
# sets serve_pid and port.
start_serve() {
  : >"$2"  # exists before the first look at it below
  taskset -c "$cpu" "$fl" serve --config "$1" 2>>"$2" &
  serve_pid=$!
  pids+=("$serve_pid")
  port=""
  for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$2" | tail -1)
    [[ -n $port ]] && return 0
    sleep 0.1
  done
  echo "$(basename "$0"): serve did not listen (see $2)" >&2
  exit 1
}

# metric NAME: the sum of the metric's series on serve's /metrics, 0 if absent.
metric() {
  curl -fsS "http://127.0.0.1:$port/metrics" 2>/dev/null |
    awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $2 } END { printf "%.0f\n", s }'
}

# wait_lines N: waits up to 60 s for serve to have matched at least N lines.
wait_lines() {
  for _ in $(seq 1200); do
    [[ $(metric faultline_lines_total) -ge $1 ]] && return 0
    sleep 0.05
  done
  echo "$(basename "$0"): serve matched fewer than $1 lines in 60 s" >&2
  exit 1
}

# CPU time serve used so far, in clock ticks (getconf CLK_TCK per second).
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$serve_pid/stat"; }
