#!/usr/bin/env bash
# `faultline replay` on the bundled sample (tests/data/sample/NOTICE lists what it holds): exactly
# the expected nodes are tainted, whatever the order of the files, and a pod's fake Xid is not.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"

expected="gpu-node-01 xid-fatal
gpu-node-02 gpu-fallen-off-bus
gpu-node-05 xid-fatal
gpu-node-06 gpu-fallen-off-bus
trn-node-01 neuron-hw-fatal"

"$FAULTLINE" rules test >/dev/null || fail "rules test failed"
"$FAULTLINE" replay --year 2025 --decisions "$tmp/embedded.jsonl" 2>"$tmp/replay.log"
[[ "$(decided "$tmp/embedded.jsonl")" == "$expected" ]] ||
  fail "embedded sample decisions: $(decided "$tmp/embedded.jsonl")"
# SPDLOG_LEVEL sets the log level (default info): warn drops the info summary and keeps the
# warning that gpu-node-02's plain dmesg counts from 1970; error drops that too.
grep -q "replayed 6 files" "$tmp/replay.log" || fail "no summary at the default level"
SPDLOG_LEVEL=warn "$FAULTLINE" replay --year 2025 --decisions "$tmp/warn.jsonl" 2>"$tmp/warn.log"
if [[ $(wc -l <"$tmp/warn.log") != 1 ]] ||
  ! grep -q "\[warning\] 1 file(s) stamped in seconds since boot.*gpu-node-02.dmesg.gz$" "$tmp/warn.log"; then
  fail "SPDLOG_LEVEL=warn: $(cat "$tmp/warn.log")"
fi
cmp "$tmp/embedded.jsonl" "$tmp/warn.jsonl" || fail "SPDLOG_LEVEL changed the decisions"
SPDLOG_LEVEL=error "$FAULTLINE" replay --year 2025 --decisions "$tmp/error.jsonl" 2>"$tmp/error.log"
[[ ! -s "$tmp/error.log" ]] || fail "SPDLOG_LEVEL=error still logged: $(head -2 "$tmp/error.log")"

# The same files from disk, in reverse order, give the same decisions byte for byte.
mapfile -t files < <(printf '%s\n' "$FL_SOURCE"/tests/data/sample/* | grep -v NOTICE | sort -r)
"$FAULTLINE" replay --year 2025 --decisions "$tmp/files.jsonl" "${files[@]}" 2>>"$tmp/replay.log"
cmp "$tmp/embedded.jsonl" "$tmp/files.jsonl" || fail "file order changed the decisions"
# So does any number of threads, each reading and matching its share of the files.
for t in 1 2 3 8; do
  rm -f "$tmp/threads.jsonl"  # the decision log appends
  "$FAULTLINE" replay --year 2025 --threads $t --decisions "$tmp/threads.jsonl" "${files[@]}" \
    2>>"$tmp/replay.log"
  cmp "$tmp/embedded.jsonl" "$tmp/threads.jsonl" || fail "--threads $t changed the decisions"
  grep -q "with $((t < ${#files[@]} ? t : ${#files[@]})) threads" "$tmp/replay.log" ||
    fail "--threads $t: not the threads expected"
done

# Every decision carries the fields operators read.
jq -se 'length == 5 and all(.[]; (.time|test("^[0-9-]+T[0-9:]+\\.[0-9]{9}Z$")) and .action == "taint"
  and .taint == {"key":"faultline.dev/faulty","value":"true","effect":"NoSchedule"}
  and (.evidence|length) >= 1 and (.evidence[0].line|length) > 0)' \
  "$tmp/embedded.jsonl" >/dev/null || fail "decision fields: $(cat "$tmp/embedded.jsonl")"
[[ $(jq -s 'map(select(.node=="gpu-node-02"))[0].evidence[0].fields.pci' "$tmp/embedded.jsonl") == '"0000:b3:00"' ]] ||
  fail "multi-line fallen-off-bus record lost its PCI address"

# stdin works, with the format detected from the content.
zstdcat "$FL_SOURCE/tests/data/sample/gpu-node-03-05.syslog.zst" |
  "$FAULTLINE" replay --year 2025 - --decisions "$tmp/stdin.jsonl" 2>>"$tmp/replay.log"
[[ "$(decided "$tmp/stdin.jsonl")" == "gpu-node-05 xid-fatal" ]] || fail "stdin replay"

# A broken rule directory refuses to load, naming file, line and cause.
mkdir "$tmp/rules"
printf 'signatures:\n  - id: broken\n    streams: [kernel]\n    severity: fatal\n    pattern: "NVRM: (Xid"\n    examples: {match: [x]}\n' >"$tmp/rules/bad.yaml"
rc=0
"$FAULTLINE" rules test "$tmp/rules" 2>"$tmp/bad.txt" || rc=$?
[[ $rc == 2 ]] || fail "bad bank exit code $rc"
grep -q "bad.yaml:5: signature broken: pattern does not compile" "$tmp/bad.txt" || fail "bad bank message: $(cat "$tmp/bad.txt")"
# A configured label and value marks kernel streams (here a Loki label a site relabels to).
echo '{"labels":{"source":"dmesg","node_name":"gpu-9"},"line":"NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus","timestamp":"1741000000000000000"}' >"$tmp/site.jsonl"
"$FAULTLINE" replay "$tmp/site.jsonl" --decisions "$tmp/site0.jsonl" 2>>"$tmp/replay.log"
[[ ! -s "$tmp/site0.jsonl" ]] || fail "an unlabelled stream matched a kernel signature"
"$FAULTLINE" replay "$tmp/site.jsonl" --kernel-label source=dmesg --decisions "$tmp/site1.jsonl" 2>>"$tmp/replay.log"
[[ "$(decided "$tmp/site1.jsonl")" == "gpu-9 xid-fatal" ]] || fail "--kernel-label"
# Given before the files, --kernel-label takes its one NAME=VALUE (README: `--kernel-label
# NAME=VALUE`), not the files after it.
"$FAULTLINE" replay --decisions "$tmp/site2.jsonl" --kernel-label source=dmesg "$tmp/site.jsonl" 2>>"$tmp/replay.log"
[[ "$(decided "$tmp/site2.jsonl")" == "gpu-9 xid-fatal" ]] || fail "--kernel-label before the files"

# --apply writes the taints through the API server (the fake one, given explicitly); without it
# replay never calls the API.
nodes=gpu-node-01,gpu-node-02,gpu-node-03,gpu-node-04,gpu-node-05,gpu-node-06,gpu-node-07,gpu-node-08,trn-node-01,trn-node-02
start_apiserver "$nodes"
"$FAULTLINE" replay --year 2025 --decisions /dev/null --kube-server "$api" 2>>"$tmp/replay.log"
[[ $(curl -fsS "$api/_test/requests" | jq '[.[] | select(.method == "PATCH")] | length') == 0 ]] ||
  fail "replay without --apply wrote to the API"
# In dry run every decision is logged marked "dry_run": true, and nothing is written.
printf 'kubernetes: {server: "%s", dry_run: true}\n' "$api" >"$tmp/dry.yaml"
"$FAULTLINE" replay --year 2025 --decisions "$tmp/dry.jsonl" --apply --kube-server "$api" \
  --config "$tmp/dry.yaml" 2>>"$tmp/replay.log"
[[ $(jq -s 'length > 0 and all(.dry_run == true)' "$tmp/dry.jsonl") == true ]] ||
  fail "dry run decisions not marked: $(cat "$tmp/dry.jsonl")"
[[ $(curl -fsS "$api/_test/requests" | jq '[.[] | select(.method == "PATCH")] | length') == 0 ]] ||
  fail "replay in dry run wrote to the API"
# The sample taints half of this 10-node cluster, more than the default blast-radius guard allows
# (tests/unit/kubernetes_taint_sink_test.cc tests the guard): lift it for this replay.
printf 'kubernetes: {server: "%s", guard: {max_tainted: 0, max_tainted_percent: 0, max_new: 0}}\n' \
  "$api" >"$tmp/apply.yaml"
"$FAULTLINE" replay --year 2025 --decisions "$tmp/applied.jsonl" --apply --kube-server "$api" \
  --config "$tmp/apply.yaml" 2>>"$tmp/replay.log"
tainted=$(for n in ${nodes//,/ }; do
  curl -fsS "$api/api/v1/nodes/$n" | jq -r 'select([.spec.taints[]? | select(.key == "faultline.dev/faulty" and .effect == "NoSchedule")] | length == 1) | .metadata.name'
done | sort | tr '\n' ' ')
[[ "$tainted" == "gpu-node-01 gpu-node-02 gpu-node-05 gpu-node-06 trn-node-01 " ]] || fail "--apply tainted: $tainted"
[[ $(jq -s 'length > 0 and all(has("dry_run") | not)' "$tmp/applied.jsonl") == true ]] ||
  fail "applied decisions marked dry run"
# --apply writes the archive's end state: a node whose fault the archive shows cleared is not
# touched (live, its taint and untaint came hours apart; in one go they would flip its condition
# and count against max_new), and the one still faulty is tainted within max_new 6 (the sample's
# five taints above count: the pair before it would make it the 7th).
cat >"$tmp/cleared.log" <<'EOF'
2026-11-29T16:00:19.000000+00:00 gpu-node-03 kernel: NVRM: Xid (PCI:0000:44:00): 48, pid=1234, name=python, Ch 00000010, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 1, subpartition 0.
2026-11-29T16:10:19.000000+00:00 gpu-node-03 kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.144.03  Mon Dec 30 17:44:08 UTC 2024
2026-11-29T16:33:39.000000+00:00 gpu-node-03 kernel: usb 1-1: new high-speed USB device number 2 using xhci_hcd
2026-11-29T21:00:19.000000+00:00 gpu-node-04 kernel: NVRM: Xid (PCI:0000:a1:00): 79, pid=<unknown>, name=<unknown>, GPU has fallen off the bus.
EOF
printf 'kubernetes: {server: "%s", guard: {max_tainted: 0, max_tainted_percent: 0, max_new: 6}}\n' \
  "$api" >"$tmp/end.yaml"
"$FAULTLINE" replay "$tmp/cleared.log" --decisions "$tmp/end.jsonl" --apply --config "$tmp/end.yaml" \
  2>>"$tmp/replay.log"
[[ $(jq -sc 'map([.node, .action])' "$tmp/end.jsonl") == \
  '[["gpu-node-03","taint"],["gpu-node-03","untaint"],["gpu-node-04","taint"]]' ]] ||
  fail "end state decisions: $(cat "$tmp/end.jsonl")"
[[ $(curl -fsS "$api/_test/requests" | jq '[.[] | select(.method == "PATCH" and .path == "/api/v1/nodes/gpu-node-03")] | length') == 0 ]] ||
  fail "--apply wrote to a node whose fault the archive shows cleared"
[[ $(curl -fsS "$api/api/v1/nodes/gpu-node-04" | jq '[.spec.taints[]? | select(.key == "faultline.dev/faulty")] | length') == 1 ]] ||
  fail "--apply did not taint the node still faulty: $(cat "$tmp/end.jsonl")"
# The end state is applied earliest fault first, so that the guard refuses the latest, as live:
# with room for one more taint (the six above count against max_new 7), gpu-node-08's earlier
# fault is tainted, not gpu-node-07's, though gpu-node-07 comes first by name.
cat >"$tmp/order.log" <<'EOF'
2026-11-29T21:00:19.000000+00:00 gpu-node-07 kernel: NVRM: Xid (PCI:0000:a1:00): 79, pid=<unknown>, name=<unknown>, GPU has fallen off the bus.
2026-11-29T16:00:19.000000+00:00 gpu-node-08 kernel: NVRM: Xid (PCI:0000:a1:00): 79, pid=<unknown>, name=<unknown>, GPU has fallen off the bus.
EOF
printf 'kubernetes: {server: "%s", guard: {max_tainted: 0, max_tainted_percent: 0, max_new: 7}}\n' \
  "$api" >"$tmp/order.yaml"
"$FAULTLINE" replay "$tmp/order.log" --decisions /dev/null --apply --config "$tmp/order.yaml" \
  2>>"$tmp/replay.log"
faulty() { curl -fsS "$api/api/v1/nodes/$1" | jq '[.spec.taints[]? | select(.key == "faultline.dev/faulty")] | length'; }
[[ $(faulty gpu-node-08) == 1 && $(faulty gpu-node-07) == 0 ]] ||
  fail "--apply's end state is not earliest first: gpu-node-07 $(faulty gpu-node-07), gpu-node-08 $(faulty gpu-node-08)"
# A suspect changes nothing on its node, so it is no node's end state: trn-node-02, tainted for
# its own fault and then named suspect of its job's hang (two of the job's nodes report it), is
# still tainted. (The breaker the test above tripped is reset, as its message says.)
curl -fsS -X DELETE "$api/api/v1/namespaces/faultline/configmaps/faultline-breaker" >/dev/null
t0=1764600000
{
  for n in 02 03 04 05; do
    for k in $(seq 0 20); do
      printf '{"labels":{"node_name":"trn-node-%s","pod":"llama-%s","job_name":"llama"},"line":"step %d: loss 1.93","timestamp":"%d000000000"}\n' \
        "$n" "$n" "$k" $((t0 + 30 * k))
    done
  done
  printf '{"labels":{"node_name":"trn-node-02","_TRANSPORT":"kernel"},"line":"NEURON_HW_ERR=SRAM_UNCORRECTABLE_ERROR instance-id=i-0592464924bd45322 hostname=ip-172-31-61-252 nd-id=0 nc-id=0 serial-num=19fcda00f5ff6eb9 action=TERMINATE_INSTANCE","timestamp":"%d000000000"}\n' \
    $((t0 + 100))
  for n in 03 04; do
    printf '{"labels":{"node_name":"trn-node-%s","_TRANSPORT":"kernel"},"line":"NEURON_HW_ERR=HANG_ON_COLLECTIVES nd-id=0 nc-id=0","timestamp":"%d000000000"}\n' \
      "$n" $((t0 + 590))
  done
} >"$tmp/hang.jsonl"
printf 'kubernetes: {server: "%s", guard: {max_tainted: 0, max_tainted_percent: 0, max_new: 0}}\n' \
  "$api" >"$tmp/hang.yaml"
"$FAULTLINE" replay "$tmp/hang.jsonl" --decisions "$tmp/hang-decisions.jsonl" --apply \
  --config "$tmp/hang.yaml" 2>>"$tmp/replay.log"
[[ $(jq -sc 'map([.node, .action])' "$tmp/hang-decisions.jsonl") == \
  '[["trn-node-02","taint"],["trn-node-02","suspect"],["trn-node-05","suspect"]]' ]] ||
  fail "hang decisions: $(cat "$tmp/hang-decisions.jsonl")"
[[ $(faulty trn-node-02) == 1 ]] || fail "--apply took a suspect for trn-node-02's end state"
# Without --kube-server, --kube-token-file replaces the token file of the config's connection
# (as a config's token_file replaces the pod's). Not in dry run, whose sink may stop before its
# first LIST (nothing else of it goes to the API): a taint is checked against a LIST, here of a
# node already tainted.
echo -n "s3cret" >"$tmp/token"
printf '{"labels":{"node_name":"trn-node-02","_TRANSPORT":"kernel"},"line":"NEURON_HW_ERR=SRAM_UNCORRECTABLE_ERROR nd-id=0 nc-id=0","timestamp":"%d000000000"}\n' \
  "$t0" >"$tmp/token.jsonl"
"$FAULTLINE" replay "$tmp/token.jsonl" --decisions /dev/null --apply --config "$tmp/hang.yaml" \
  --kube-token-file "$tmp/token" 2>>"$tmp/replay.log"
[[ $(curl -fsS "$api/_test/requests" | jq -r '[.[] | .authorization] | last') == "Bearer s3cret" ]] ||
  fail "--kube-token-file with the config's server: $(curl -fsS "$api/_test/requests" | jq -c '[.[] | .authorization] | unique')"
# A taint the API server refuses fails --apply: exit 2, naming what was not applied (it exited 0).
curl -fsS -X POST "$api/_test/fail" \
  -d '{"method":"PATCH","path":"/api/v1/nodes/gpu-node-07","status":403,"count":100}' >/dev/null
printf '{"labels":{"node_name":"gpu-node-07","_TRANSPORT":"kernel"},"line":"NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus","timestamp":"%d000000000"}\n' \
  "$t0" >"$tmp/refused.jsonl"
rc=0
"$FAULTLINE" replay "$tmp/refused.jsonl" --decisions /dev/null --apply --config "$tmp/hang.yaml" \
  2>"$tmp/refused.log" || rc=$?
[[ $rc == 2 && $(faulty gpu-node-07) == 0 ]] &&
  grep -q -- "--apply incomplete: 1 decision(s) failed, 0 deferred" "$tmp/refused.log" ||
  fail "a refused taint: exit $rc, $(tail -3 "$tmp/refused.log")"
echo "PASS"
