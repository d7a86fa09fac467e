#!/usr/bin/env bash
# Latency from a fatal line's arrival to the taint PATCH reaching the API server, under background
# load, through Loki push (default) or Kafka. Builds nothing: pass the build directory (default:
# build; it needs faultline, tests/tools/fake_apiserver, tests/tools/mock_kafka, bench/kafka_load
# and bench/loki_pace).
#
#   bench/latency.sh [BUILD_DIR]   env: TRANSPORT (loki | kafka), RATE (background lines/s;
#                                   default: half of what faultline sustains on one core, measured
#                                   first, see below), ENCODING (kafka: raw), DURATION (120 s),
#                                   FAULT_EVERY_MS (700), NODES (64), PARTITIONS (kafka: 32),
#                                   CPU (core for faultline, 1), LOAD_CPU (core for the load, the
#                                   broker and the API server, 0), WORK
#
# Background: make_corpus.py's lines (NODES nodes, 1,000,000 lines sent in turn). From 5 s on
# (past the start-up burst), every FAULT_EVERY_MS a real Xid 79 line (NVIDIA/NVSentinel#155)
# goes alone in its request or message for a node of its own (lat-0000, lat-0001, ...: eligible
# nodes of tests/tools/fake_apiserver). The fake API server stamps each request with
# CLOCK_REALTIME when its handler gets it (/_test/requests received_ns; same machine, same clock);
# a fault's latency is the first PATCH of its node minus its arrival:
#   loki   bench/loki_pace posts Promtail-style requests of 1000 lines to POST /loki/api/v1/push
#          at RATE over two connections, the faults over a third; the fault's arrival is CLOCK_REALTIME just before its request (also shown
#          from the 204, once faultline queued it). The sustained rate is faultline's lines per
#          CPU-second while loki_pace sends the 1,000,000 lines as fast as it answers.
#   kafka  bench/kafka_load produces into a librdkafka mock cluster as kafka_e2e.sh does; the
#          fault's arrival is when the broker's acknowledgement (the delivery report) arrives
#          (also shown from the producer call, which adds its linger, 5 ms). The sustained rate is
#          kafka_e2e.sh's lines per CPU-second, run first, but RATE stays under 70% of what
#          `kcat -G` got from the mock there: past that a group consumer falls behind the mock and
#          the mock, which keeps only 5 MiB per partition, drops lines (the script then warns that
#          the figures are void). The consumer runs with fetch.wait.max.ms 10: the mock answers a
#          fetch that finds no new data only after the whole fetch.wait.max.ms (500 ms by
#          default) even if data arrives meanwhile (rdkafka_mock handlers, "we should cut the
#          wait short"), where a real broker answers once fetch.min.bytes (1) arrived.
# The latency includes the source's batching (Kafka: a batch closes at 10000 messages or 100 ms),
# matching, correlation and the taint sink (which first reads the node list when it is older
# than node_list_period, 30 s). The blast-radius guard is off (every fault is a new node); the
# client rate limit keeps its default (qps 5, burst 10): each taint costs 3 requests (PATCH node,
# POST event, PATCH status), so keep FAULT_EVERY_MS >= 600.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
transport=${TRANSPORT:-loki}
encoding=${ENCODING:-raw}
duration=${DURATION:-120}
fault_every_ms=${FAULT_EVERY_MS:-700}
nodes=${NODES:-64}
partitions=${PARTITIONS:-32}
cpu=${CPU:-1}
load_cpu=${LOAD_CPU:-0}
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
api=$build/tests/tools/fake_apiserver
load=$build/bench/kafka_load
pace=$build/bench/loki_pace
need "$fl" "$api" curl python3 taskset
if [[ $transport == kafka ]]; then
  need "$load" "$build/tests/tools/mock_kafka"
else
  need "$pace"
fi
fault='NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus'
rate=${RATE:-}
sustained=""
capped=""
if [[ $transport == kafka && -z $rate ]]; then
  echo "measuring the sustained rate (bench/kafka_e2e.sh, $encoding) ..." >&2
  ENCODINGS=$encoding LINES=1000000 NODES=$nodes WORK=$work/sustained CPU=$cpu LOAD_CPU=$load_cpu \
    "$here/kafka_e2e.sh" "$build" >"$work/sustained.md"
  column() {  # the value of column $1 in the encoding's row of the table
    awk -F' *[|] *' -v e="$encoding" -v h="$1" '
      { for (i = 1; i <= NF; i++) if ($i == h) col = i }
      col && $2 == e { print $col }' "$work/sustained.md"
  }
  sustained=$(column "faultline lines/s per CPU-second")
  group_ceiling=$(column "kcat -G lines/s")
  [[ -n $sustained && -n $group_ceiling ]] || { echo "latency.sh: no rates in $work/sustained.md" >&2; exit 1; }
  rate=$((sustained / 2))
  if ((rate > group_ceiling * 7 / 10)); then
    rate=$((group_ceiling * 7 / 10))
    capped=", capped at 70% of the $group_ceiling lines/s kcat -G got from the mock broker"
  fi
fi
make_lines 1000000 "$nodes"

faults=$(((duration - 5) * 1000 / fault_every_ms))
fault_nodes=$(seq -f 'lat-%04g' 0 $((faults + 1)) | paste -sd,)
taskset -c "$load_cpu" "$api" --port 0 --port-file "$work/api-port" --nodes "$fault_nodes" \
  --labels nvidia.com/gpu.present=true 2>"$work/apiserver.log" &
pids+=($!)
for _ in $(seq 100); do [[ -s $work/api-port ]] && break; sleep 0.1; done
api_url="http://127.0.0.1:$(cat "$work/api-port")"
if [[ $transport == kafka ]]; then
  start_mock latency "$partitions"
  source_yaml="kafka:
  brokers: \"$brokers\"
  group_id: latency
  properties: {fetch.wait.max.ms: \"10\"}
  topics:
    - {name: bench, encoding: $encoding, stream: kernel}"
fi
cat >"$work/config.yaml" <<YAML
decisions: $work/decisions.jsonl
http: {listen: "127.0.0.1:0"}
kubernetes:
  server: "$api_url"
  guard: {max_tainted: 0, max_tainted_percent: 0, max_new: 0}
${source_yaml:-}
YAML
start_serve "$work/config.yaml" "$work/serve.log"
if [[ $transport == kafka ]]; then
  # Warm up until serve is in its group and matching, so that no fault waits for the join.
  head -1000 "$work/lines.tsv" >"$work/warmup.tsv"
  taskset -c "$load_cpu" "$load" --brokers "$brokers" --topic bench --encoding "$encoding" \
    --input "$work/warmup.tsv" 2>>"$work/load.log"
  wait_lines 1000
else
  # Every line once as fast as faultline takes them: its lines per CPU-second.
  c0=$(cpu_ticks)
  taskset -c "$load_cpu" "$pace" --url "http://127.0.0.1:$port" --input "$work/lines.tsv" \
    --rate 0 2>>"$work/load.log"
  wait_lines "$(wc -l <"$work/lines.tsv")"
  flood_lps=$(awk -v n="$(metric faultline_lines_total)" -v c="$(($(cpu_ticks) - c0))" \
    -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.0f", n / (c / hz) }')
  if [[ -z $rate ]]; then
    sustained=$flood_lps
    rate=$((sustained / 2))
  fi
fi

echo "$transport: $rate lines/s for $duration s, a fault every $fault_every_ms ms ..." >&2
c0=$(cpu_ticks) l0=$(metric faultline_lines_total) t0=$EPOCHREALTIME
faults_args=(--fault "$fault" --fault-every-ms "$fault_every_ms" --fault-after-ms 5000
  --fault-nodes lat --sent "$work/sent.tsv")
if [[ $transport == kafka ]]; then
  taskset -c "$load_cpu" "$load" --brokers "$brokers" --topic bench --encoding "$encoding" \
    --partitions "$partitions" --input "$work/lines.tsv" --rate "$rate" --seconds "$duration" \
    "${faults_args[@]}" 2>>"$work/load.log"
  arrival=2 other=1 other_name="the producer call"
else
  taskset -c "$load_cpu" "$pace" --url "http://127.0.0.1:$port" --input "$work/lines.tsv" \
    --rate "$rate" --seconds "$duration" "${faults_args[@]}" 2>>"$work/load.log"
  arrival=1 other=2 other_name="its 204"
fi
produced=$(tail -1 "$work/load.log")
produced_lines=$(sed -E 's/^[a-z_]+: ([0-9]+) lines.*/\1/' <<<"$produced")
sleep 3  # the last fault's taint
c1=$(cpu_ticks) l1=$(metric faultline_lines_total) t1=$EPOCHREALTIME
curl -fsS "$api_url/_test/requests" >"$work/requests.json"
kill -TERM "$serve_pid"
wait "$serve_pid" || { echo "latency.sh: serve exited non-zero (see $work/serve.log)" >&2; exit 1; }

python3 - "$work/sent.tsv" "$work/requests.json" "$arrival" "$other" <<'PY' >"$work/latency.txt"
import json, sys
faults = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
first = {}
for r in json.load(open(sys.argv[2])):
    if r["method"] == "PATCH" and r["path"].startswith("/api/v1/nodes/") and r["path"].count("/") == 4:
        first.setdefault(r["path"].rsplit("/", 1)[1], r["received_ns"])
def stats(col):  # p50 p99 max of the first PATCH minus column col, in ms
    lat = sorted((first[f[0]] - int(f[col])) / 1e6 for f in faults if f[0] in first and int(f[col]))
    if not lat:
        return "nan nan nan"
    pct = lambda p: lat[min(len(lat) - 1, int(p / 100 * len(lat)))]
    return f"{pct(50):.1f} {pct(99):.1f} {lat[-1]:.1f}"
print(len(faults), sum(f[0] not in first for f in faults), stats(int(sys.argv[3])),
      stats(int(sys.argv[4])))
PY
read -r n_sent n_missing p50 p99 max s50 s99 smax <"$work/latency.txt"
cpu_share=$(awk -v c="$((c1 - c0))" -v hz="$(getconf CLK_TCK)" -v a="$t1" -v b="$t0" 'BEGIN { printf "%.0f%%", 100 * c / hz / (a - b) }')

echo
where=$([[ $transport == kafka ]] && echo "Kafka ($encoding; broker, producer" || echo "Loki push (loki_pace")
echo "Latency, fault line's arrival → taint PATCH at the API server, through $where and API"
echo "server on CPU $load_cpu; faultline on CPU $cpu; $(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "Background: $rate lines/s offered${sustained:+ (half of the $sustained lines per CPU-second measured$capped)}; ${produced#*: }."
echo "faultline matched $((l1 - l0)) lines meanwhile, using $cpu_share of its core."
# Kafka: the mock keeps 5 MiB per partition; when the load rig (one core for the producer and the
# broker) falls behind, lines are dropped before faultline sees them and the figures mean nothing.
resets=$(grep -c 'Offset out of range' "$work/serve.log" || true)
if [[ $((l1 - l0)) != "$produced_lines" || $resets != 0 ]]; then
  echo "WARNING: $((produced_lines - l1 + l0)) lines never reached faultline ($resets offset resets in"
  echo "$work/serve.log): the load rig fell behind; lower RATE or give it a free core."
fi
echo
echo "| faults | no PATCH | from arrival: p50 / p99 / max ms | from $other_name: p50 / p99 / max ms |"
echo "| ---: | ---: | --- | --- |"
echo "| $n_sent | $n_missing | $p50 / $p99 / $max | $s50 / $s99 / $smax |"
