#!/usr/bin/env bash
# Replay and the live service decide alike (README, "Replay": the decisions live ingestion would
# have given): every labelled scenario (tests/scenarios) is replayed, and its same records are
# pushed to `faultline serve` over Loki JSON push, and the two must give the same decisions
# (node, action, rule). Live, each node's agent pushes its own streams (one per node and stream
# kind: the dmesg file as the kernel stream, the jsonl files with their labels) in event-time
# order with their stamps; the nodes take turns, each pushing its next 5 minutes of event time,
# so a node lags the newest time by less than max_lag (10m), as the service allows. Timers only
# fall due as event time moves, so both also get a trailing harmless kernel line on every node
# 3 days after the scenario's last line, past every window, timer and max_lag of the bank: both
# then decide every quiet recovery too. No scenario is excluded.
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

cat >"$tmp/config.yaml" <<YAML
decisions: $tmp/live.jsonl
http: {listen: "127.0.0.1:0"}
YAML
shopt -s nullglob
n=0 decisions=0 failed=()
for scn in "$FL_SOURCE"/tests/scenarios/*.scn; do
  name=$(basename "$scn" .scn)
  dir=$tmp/$name
  gen_scenario "$scn" "$dir"
  files=("$dir"/*)
  for f in "${files[@]}"; do
    if [[ $f == *.dmesg ]]; then dmesg_records "$f"; else jsonl_records "$f"; fi
  done | sort -s -t$'\t' -k1,1n -k2,2 >"$tmp/records.tsv"  # a node's lines of one time: by file
  last=$(tail -1 "$tmp/records.tsv" | cut -f1)
  end=$((${last:0:-9} + 3 * 86400))000000000
  cut -f2 "$tmp/records.tsv" | sort -u | jq -cR --arg t "$end" '{labels: {node_name: .,
    transport: "kernel"}, line: "faultline live-replay: end of scenario", timestamp: $t}' \
    >"$tmp/$name.end.jsonl"
  jsonl_records "$tmp/$name.end.jsonl" >>"$tmp/records.tsv"

  : >"$tmp/replay.jsonl"  # decision logs are appended to
  : >"$tmp/live.jsonl"
  "$FAULTLINE" replay --boot-time 2025-03-01T00:00:00Z --decisions "$tmp/replay.jsonl" "${files[@]}" \
    "$tmp/$name.end.jsonl" 2>"$tmp/replay.log" || fail "$name: replay exited $?"

  rm -rf "$tmp/req" && mkdir "$tmp/req"
  requests "$tmp/records.tsv" "$tmp/req"
  : >"$tmp/serve.log"
  start_serve_http "$tmp/config.yaml"
  for r in "$tmp"/req/*.json; do  # one curl, one connection, the requests in order
    printf 'url = "http://127.0.0.1:%s/loki/api/v1/push"\nheader = "Content-Type: application/json"\n' "$port"
    printf 'data-binary = "@%s"\noutput = "/dev/null"\nwrite-out = "%%{http_code}\\n"\nnext\n' "$r"
  done | sed '$d' >"$tmp/curl.cfg"
  codes=$(curl -s -K "$tmp/curl.cfg" | sort | uniq -c)
  [[ $(awk '$2 != 204' <<<"$codes") == "" ]] || fail "$name: push answered $codes"
  kill -TERM "$serve_pid"
  wait "$serve_pid" || fail "$name: serve exited non-zero after SIGTERM"

  replayed=$(jq -r '"\(.node) \(.action) \(.rule)"' "$tmp/replay.jsonl" | sort)
  live=$(jq -r '"\(.node) \(.action) \(.rule)"' "$tmp/live.jsonl" | sort)
  if [[ $replayed != "$live" ]]; then
    failed+=("$name")
    echo "$name: replay [$replayed] live [$live]" >&2
  fi
  n=$((n + 1)) decisions=$((decisions + $(grep -c . <<<"$replayed" || true)))
done
[[ $n -ge 30 ]] || fail "only $n scenarios"
echo "scenarios: $n, decisions compared: $decisions"
[[ ${#failed[@]} == 0 ]] || fail "replay and live differ: ${failed[*]}"
echo "PASS"
