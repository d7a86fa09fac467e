#!/usr/bin/env bash
# Replay and the live service decide alike (README, "Replay": the decisions live ingestion would
# have given): every labelled scenario (tests/scenarios) is replayed, and its same records are
# fed to `faultline serve`, and the two must give the same decisions, each whole (node, action,
# rule, time, reason, evidence: the lines and their times as the service took them). Live, each
# node's agent pushes its own streams (one per node and stream kind: the dmesg file as the kernel
# stream, the jsonl files with their labels) in event-time order with their stamps; the nodes
# take turns, each pushing its next 5 minutes of event time, so a node lags the newest time by
# less than max_lag (10m), as the service allows. Timers only fall due as event time moves, so
# both also get a trailing harmless kernel line on every node 3 days after the scenario's last
# line, past every window, timer and max_lag of the bank: both then decide every quiet recovery
# too. No scenario is excluded.
#
# Scenario k (in name order) goes over carrier k mod 5, still one service per scenario, so each
# decoder's path to decisions is compared with replay without more services to run:
#   loki_json   Loki push, JSON, as the records are written (one request per run of one stream);
#   loki_proto  the same requests as Loki protobuf + snappy;
#   otlp_json, otlp_proto  the same requests as OTLP/HTTP, one resource per stream, as the OTel
#               collector sends them: kernel and host-service streams as its journald receiver
#               (a kvlist body of journal fields: MESSAGE, _TRANSPORT, SYSLOG_IDENTIFIER,
#               _HOSTNAME; the resource's host.name), pods as its filelog receiver with
#               k8sattributes (a string body; the resource's k8s.node.name, k8s.pod.name,
#               k8s.namespace.name, and k8s.job.name for the job_name label);
#   kafka_json  the same records in the same order in one partition of a librdkafka mock
#               cluster (kcat), as Vector's kafka sink writes them (vector_records): the json
#               encoding, Kafka's own decoder (its otlp encodings call the OTLP/HTTP ones). A
#               consumer group's first join waits out the mock broker's 3 s initial rebalance
#               delay, so these services all start before the push scenarios run and are read
#               when those are done. A mock partition keeps only its last 5 MB or so, so a
#               scenario of more than 3 MiB of messages (xid95-flood-800k, on its turn) goes over
#               loki_json. The messages of each such topic are also replayed as an archive of
#               it (kafka_json_archive: the json format, the same decoder).
# Each record keeps its nanosecond time, node and stream kind (kernel, pod with its job, or a
# host service) on every carrier. The protobuf and OTLP bodies are made by tests/e2e/node/
# encode.js from the Loki JSON requests with the real clients' encoders (winston-loki's
# PushRequest and snappy; the OTel JS exporters' serializers), one node process per encoding
# for all scenarios. Not the clients' send paths: winston-loki stamps in milliseconds and both
# batch on their own, where the test needs each entry's nanoseconds and the requests' order. Not
# bench/push_load: it stamps the wall clock and writes one kernel stream's labels. The service's
# record count (faultline_records_total) must be the scenario's: a 200 of OTLP can still drop
# records (partial_success). The script prints how many scenarios each carrier took.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
export LC_ALL=C  # the order of file names, as replay takes them

scenario_pool "${FL_CORPORA:-$FL_SOURCE/../shared/corpora}"

# A dmesg file as gen.awk writes it, as records: ns TAB node TAB labels TAB line (labels and line
# as JSON), the time as replay reads it with --boot-time, continuation lines joined with '\n' as
# replay joins them.
dmesg_records() {
  awk -v base="$scenario_base" '
    function jstr(s,   out, i, c) {
      gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); gsub(/\t/, "\\t", s); gsub(/\r/, "\\r", s)
      gsub(/\n/, "\\n", s)
      if (s !~ /[[:cntrl:]]/) return "\"" s "\""
      out = ""
      for (i = 1; i <= length(s); i++) { c = substr(s, i, 1); out = out (c in ctl ? ctl[c] : c) }
      return "\"" out "\""
    }
    function flush() {
      if (have) printf "%s\t%s\t{\"node_name\":%s,\"transport\":\"kernel\"}\t%s\n", ns, node, jstr(node), jstr(msg)
      have = 0
    }
    BEGIN { for (i = 1; i < 32; i++) ctl[sprintf("%c", i)] = sprintf("\\u%04x", i) }
    FNR == 1 { node = FILENAME; sub(/.*\//, "", node); sub(/\..*/, "", node) }
    /^\[/ {
      flush()
      stamp = substr($0, 2, index($0, "]") - 2); gsub(/ /, "", stamp); split(stamp, p, ".")
      ns = sprintf("%d%s000", base + p[1], p[2])
      msg = substr($0, index($0, "]") + 2); have = 1
      next
    }
    /^[ \t]+[^ \t]/ { sub(/^[ \t]+/, ""); msg = msg "\n" $0 }
    END { flush() }' "$1"
}
# A logcli jsonl file (gen.awk's, or the trailer) as the same records.
jsonl_records() {
  jq -r '[.timestamp, .labels.node_name, (.labels | tojson), (.line | tojson)] | join("\t")' "$1"
}
# Sorted records as Loki push bodies $2/req-N.json: the records of each node's 5 minutes of event
# time in turn, one request per run of one stream, at most 5000 records each.
requests() {
  awk -F'\t' '{ print int(substr($1, 1, length($1) - 9) / 300) "\t" $0 }' "$1" |
    sort -s -t$'\t' -k1,1n -k3,3 | cut -f2- | awk -F'\t' -v out="$2" '
    function close_req() {
      if (n == 0) return
      f = sprintf("%s/req-%06d.json", out, ++reqs)
      printf "{\"streams\":[{\"stream\":%s,\"values\":[%s", labels, vals[1] > f
      for (i = 2; i <= n; i++) printf ",%s", vals[i] > f
      printf "]}]}\n" > f
      close(f)
      n = 0
    }
    n > 0 && ($2 != node || $3 != labels || n >= 5000) { close_req() }
    { node = $2; labels = $3; vals[++n] = "[\"" $1 "\"," $4 "]" }
    END { close_req() }'
}
# Loki JSON requests $@ as Vector's kafka sink writes their entries, one JSON object a line: its
# journald source's (host, _TRANSPORT, SYSLOG_IDENTIFIER) or its kubernetes_logs source's
# (kubernetes.pod_name, pod_namespace, pod_node_name, pod_labels) fields, and the time in RFC 3339
# with nanoseconds.
vector_records() {
  jq -c '.streams[] | .stream as $l | .values[] | .[0] as $ns |
    {timestamp: ($ns[:-9] | tonumber | todate | rtrimstr("Z") + "." + $ns[-9:] + "Z"),
      message: .[1]} +
    if $l.pod then {kubernetes: ({pod_name: $l.pod, pod_namespace: $l.namespace,
      pod_node_name: $l.node_name} + if $l.job_name then {pod_labels: {"job-name": $l.job_name}}
      else {} end)}
    else {host: $l.node_name, _TRANSPORT: (if $l.transport == "kernel" then "kernel"
      else "journal" end), SYSLOG_IDENTIFIER: ($l.syslog_identifier // "kernel")} end' "$@"
}

cat >"$tmp/config.yaml" <<YAML
decisions: $tmp/live.jsonl
http: {listen: "127.0.0.1:0"}
YAML
command -v node >/dev/null || fail "node not installed (.ci/setup installs nodejs)"
[[ -d $FL_SOURCE/tests/e2e/node/node_modules ]] ||
  fail "run 'npm ci' in tests/e2e/node (.ci/setup does)"
command -v kcat >/dev/null || fail "kcat not installed"
carriers=(loki_json loki_proto otlp_json otlp_proto kafka_json)  # scenario k: carriers[k % 5]
shopt -s nullglob
# First every scenario is generated and replayed and its Loki JSON requests are written, so that
# one node process re-encodes the requests of each other encoding (a start costs 0.3 s).
names=()
for scn in "$FL_SOURCE"/tests/scenarios/*.scn; do
  name=$(basename "$scn" .scn)
  names+=("$name")
  dir=$tmp/$name
  gen_scenario "$scn" "$dir"
  files=("$dir"/*)
  for f in "${files[@]}"; do
    if [[ $f == *.dmesg ]]; then dmesg_records "$f"; else jsonl_records "$f"; fi
  done | sort -s -t$'\t' -k1,1n -k2,2 >"$tmp/$name.tsv"  # a node's lines of one time: by file
  last=$(tail -1 "$tmp/$name.tsv" | cut -f1)
  end=$((${last:0:-9} + 3 * 86400))000000000
  cut -f2 "$tmp/$name.tsv" | sort -u | jq -cR --arg t "$end" '{labels: {node_name: .,
    transport: "kernel"}, line: "faultline live-replay: end of scenario", timestamp: $t}' \
    >"$tmp/$name.end.jsonl"
  jsonl_records "$tmp/$name.end.jsonl" >>"$tmp/$name.tsv"

  "$FAULTLINE" replay --boot-time 2025-03-01T00:00:00Z --decisions "$tmp/$name.replay.jsonl" \
    "${files[@]}" "$tmp/$name.end.jsonl" 2>"$tmp/replay.log" || fail "$name: replay exited $?"
  mkdir -p "$tmp/req/$name"
  requests "$tmp/$name.tsv" "$tmp/req/$name"
done
[[ ${#names[@]} -ge 30 ]] || fail "only ${#names[@]} scenarios"
# A partition of the mock broker keeps only its last 5 MB or so (older messages are gone, as past
# a retention limit): a scenario whose Kafka messages would pass 3 MiB goes over Loki JSON.
declare -A carrier_of=()
for ((i = 0; i < ${#names[@]}; i++)); do
  name=${names[i]}
  carrier_of[$name]=${carriers[i % 5]}
  if [[ ${carrier_of[$name]} == kafka_json ]]; then
    vector_records "$tmp/req/$name"/*.json >"$tmp/$name.kafka.jsonl"
    [[ $(wc -c <"$tmp/$name.kafka.jsonl") -le 3145728 ]] || carrier_of[$name]=loki_json
  fi
done
for carrier in loki_proto otlp_json otlp_proto; do
  dirs=()
  for name in "${names[@]}"; do
    [[ ${carrier_of[$name]} == "$carrier" ]] && dirs+=("$tmp/req/$name")
  done
  node "$FL_SOURCE/tests/e2e/node/encode.js" "${carrier//_/-}" "${dirs[@]}" \
    2>"$tmp/encode.log" || fail "encode.js $carrier exited $?"
done

n=0 decisions=0 failed=()
declare -A carried=()
# Compares scenario $1's decisions over carrier $2 (log $3) with replay's, each whole: node,
# action, rule, time, reason and evidence (the lines and their times as the carrier took them).
compare() {
  local replayed live
  replayed=$(jq -cS . "$tmp/$1.replay.jsonl" | sort)
  live=$(jq -cS . "$3" | sort)
  if [[ $replayed != "$live" ]]; then
    failed+=("$1 ($2)")
    echo "$1 ($2): replay [$(jq -r '"\(.node) \(.action) \(.rule)"' <<<"$replayed")]" \
      "live [$(jq -r '"\(.node) \(.action) \(.rule)"' <<<"$live")]; the decisions, replay's <:" >&2
    diff <(echo "$replayed") <(echo "$live") | head -20 >&2 || true
  fi
  carried[$2]=$((${carried[$2]:-0} + 1))
  n=$((n + 1)) decisions=$((decisions + $(grep -c . <<<"$replayed" || true)))
}
# The service's faultline_records_total{source=$1,format=$2} (empty if not yet counted).
records_taken() {
  curl -fsS "http://127.0.0.1:$port/metrics" |
    sed -n "s/^faultline_records_total{source=\"$1\",format=\"$2\"} //p"
}

# The Kafka scenarios' services start first: each waits out its group's first join meanwhile.
kafka=() topics=()
for name in "${names[@]}"; do
  [[ ${carrier_of[$name]} == kafka_json ]] && kafka+=("$name") topics+=(--topic "$name:1")
done
"$FL_BUILD/tests/tools/mock_kafka" --brokers 1 "${topics[@]}" \
  --bootstrap-file "$tmp/bootstrap" >"$tmp/mock.log" 2>&1 &
pids+=($!)
wait_file "$tmp/bootstrap" 20
brokers=$(cat "$tmp/bootstrap")
declare -A kafka_pid=()
for name in "${kafka[@]}"; do
  kcat -P -b "$brokers" -t "$name" <"$tmp/$name.kafka.jsonl" 2>>"$tmp/kcat.log"
  cat >"$tmp/$name.yaml" <<YAML
decisions: $tmp/$name.live.jsonl
http: {listen: "127.0.0.1:0"}  # /metrics: when every record was read
kafka: {brokers: "$brokers", group_id: "$name", topics: [{name: "$name", encoding: json}]}
YAML
  : >"$tmp/$name.live.jsonl"
  "$FAULTLINE" serve --config "$tmp/$name.yaml" 2>"$tmp/$name.serve.log" &
  kafka_pid[$name]=$!
  pids+=($!)
done

for name in "${names[@]}"; do
  carrier=${carrier_of[$name]}
  case $carrier in
    loki_json) path=loki/api/v1/push type=application/json ok=204 ext=json ;;
    loki_proto) path=loki/api/v1/push type=application/x-protobuf ok=204 ext=bin ;;
    otlp_json) path=v1/logs type=application/json ok=200 ext=bin ;;
    otlp_proto) path=v1/logs type=application/x-protobuf ok=200 ext=bin ;;
    kafka_json) continue ;;
  esac
  : >"$tmp/live.jsonl"  # decision logs are appended to
  : >"$tmp/serve.log"
  start_serve_http "$tmp/config.yaml"
  for r in "$tmp/req/$name"/*."$ext"; do  # one curl, one connection, the requests in order
    printf 'url = "http://127.0.0.1:%s/%s"\nheader = "Content-Type: %s"\n' "$port" "$path" "$type"
    printf 'data-binary = "@%s"\noutput = "/dev/null"\nwrite-out = "%%{http_code}\\n"\nnext\n' "$r"
  done | sed '$d' >"$tmp/curl.cfg"
  codes=$(curl -s -K "$tmp/curl.cfg" | sort | uniq -c)
  [[ $(awk -v ok="$ok" '$2 != ok' <<<"$codes") == "" ]] ||
    fail "$name: $carrier push answered $codes"
  taken=$(records_taken http "$carrier")
  [[ $taken == $(wc -l <"$tmp/$name.tsv") ]] ||
    fail "$name: $carrier took ${taken:-no} records of $(wc -l <"$tmp/$name.tsv")"
  kill -TERM "$serve_pid"
  wait "$serve_pid" || fail "$name: serve exited non-zero after SIGTERM"
  compare "$name" "$carrier" "$tmp/live.jsonl"
done

for name in "${kafka[@]}"; do
  wait_listening "$tmp/$name.serve.log"
  want=$(wc -l <"$tmp/$name.tsv")
  for _ in $(seq 1200); do  # the records are counted once their batch is correlated
    taken=$(records_taken kafka all)
    [[ $taken == "$want" ]] && break
    sleep 0.1
  done
  [[ $taken == "$want" ]] || fail "$name: kafka_json read ${taken:-no} records of $want"
  kill -TERM "${kafka_pid[$name]}"
  wait "${kafka_pid[$name]}" || fail "$name: serve exited non-zero after SIGTERM"
  compare "$name" kafka_json "$tmp/$name.live.jsonl"
  # The topic's messages as an archive keeps them (Vector's file or aws_s3 sink, one object a
  # line): replay's json format reads them with the Kafka source's decoder, to the same decisions.
  "$FAULTLINE" replay --decisions "$tmp/$name.archive.jsonl" "$tmp/$name.kafka.jsonl" \
    2>"$tmp/replay.log" || fail "$name: replay of its topic's messages exited $?"
  compare "$name" kafka_json_archive "$tmp/$name.archive.jsonl"
done

echo "comparisons with replay: $n, decisions compared: $decisions"
for carrier in "${carriers[@]}" kafka_json_archive; do
  echo "$carrier: ${carried[$carrier]:-0} scenarios"
done
[[ ${#failed[@]} == 0 ]] || fail "replay and live differ: ${failed[*]}"
echo "PASS"
