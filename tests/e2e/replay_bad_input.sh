#!/usr/bin/env bash
# `faultline replay` over bad input: a truncated, corrupt or unrecognised file is reported, naming
# it, after the decisions of everything read (the same with any --threads), and replay exits 2; a
# decision log that cannot be written, a --year out of range and a usage error exit 2 too; syslog
# lines crossing New Year stay in order.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"

a=$tmp/archive
mkdir "$a"
xid() { printf '[%s] NVRM: Xid (PCI:0000:44:00): 79, pid=1, GPU has fallen off the bus.\n' "$1"; }
filler() { seq "$1" | awk '{ printf "[%d.%06d] usb 1-%d: new device strings: Mfr=%x\n", 200 + $1, $1 % 999983, $1 % 97, $1 * 7919 }'; }
# The first $1 bytes of standard input, which holds more.
truncate_to() { local all; all=$(mktemp -p "$tmp"); cat >"$all"; [[ $(stat -c %s "$all") -gt $1 ]]; head -c "$1" "$all"; }
xid 100.0 >"$a/gpu-a.dmesg"
# Cut short: the fault comes before the cut and counts.
{ xid 100.0; filler 200000; } >"$tmp/long.dmesg"
gzip -c "$tmp/long.dmesg" | truncate_to 100000 >"$a/gpu-b.dmesg.gz"
zstd -qc "$tmp/long.dmesg" | truncate_to 100000 >"$a/gpu-c.dmesg.zst"
# Tape padding after a complete gzip member, which gzip(1) accepts.
{ xid 100.0 | gzip; head -c 4096 /dev/zero; } >"$a/gpu-d.dmesg.gz"
gzip -t "$a/gpu-d.dmesg.gz" 2>/dev/null || fail "gzip -t refuses the padded file"
printf 'no log format at all\n' >"$a/gpu-e.txt"
filler 1000 | gzip >"$a/gpu-f.dmesg.gz"
printf '\xff%.0s' {1..16} | dd of="$a/gpu-f.dmesg.gz" bs=1 seek=2000 conv=notrunc status=none
files=("$a"/* "$a/gpu-g.dmesg")  # gpu-g does not exist

for t in 1 2 3; do
  rc=0
  "$FAULTLINE" replay --threads $t --decisions "$tmp/t$t.jsonl" "${files[@]}" 2>"$tmp/t$t.err" || rc=$?
  [[ $rc == 2 ]] || fail "--threads $t: exit code $rc, want 2"
  for e in "gpu-b.dmesg.gz: gzip stream truncated" "gpu-c.dmesg.zst: zstd stream truncated" \
    "gpu-e.txt: unknown log format" "gpu-f.dmesg.gz: corrupt gzip data" \
    "gpu-g.dmesg: No such file or directory"; do
    grep -qF "$e" "$tmp/t$t.err" || fail "--threads $t: no '$e' in: $(cat "$tmp/t$t.err")"
  done
  # Every file here is stamped since boot, and no --boot-time was given: replay says so.
  grep -q "file(s) stamped in seconds since boot, and no --boot-time: .*gpu-a.dmesg" "$tmp/t$t.err" ||
    fail "--threads $t: no warning of times since boot in: $(cat "$tmp/t$t.err")"
  # The errors come last, after the summary of what was read.
  tail -6 "$tmp/t$t.err" | grep -q "replay incomplete: 5 file(s)" ||
    fail "--threads $t: $(cat "$tmp/t$t.err")"
  cmp "$tmp/t1.jsonl" "$tmp/t$t.jsonl" || fail "--threads $t changed the decisions"
done
[[ "$(decided "$tmp/t1.jsonl" | tr '\n' ' ')" == "gpu-a xid-fatal gpu-b xid-fatal gpu-c xid-fatal gpu-d xid-fatal " ]] ||
  fail "decisions: $(decided "$tmp/t1.jsonl")"

# Two boots of one node (a dmesg and its rotation), each counting from 1970: they overlap, and
# replay says so, naming the node.
mkdir -p "$tmp/gpu-5/var/log"
{ printf '[    0.000000] Linux version 6.1.0-18-amd64\n'; xid 3600.0; } >"$tmp/gpu-5/var/log/dmesg.0"
{ printf '[    0.000000] Linux version 6.1.0-18-amd64\n'; filler 1; } >"$tmp/gpu-5/var/log/dmesg"
"$FAULTLINE" replay --decisions "$tmp/boots.jsonl" "$tmp"/gpu-5/var/log/dmesg* 2>"$tmp/boots.err" ||
  fail "two boots of gpu-5: $(cat "$tmp/boots.err")"
grep -qF "node gpu-5: 2 files stamped since boot overlap" "$tmp/boots.err" ||
  fail "no warning of gpu-5's overlapping boots in: $(cat "$tmp/boots.err")"

# Decisions that cannot be written are not lost in silence.
rc=0
"$FAULTLINE" replay --decisions /dev/full "$a/gpu-a.dmesg" 2>"$tmp/full.err" || rc=$?
[[ $rc == 2 ]] || fail "--decisions /dev/full: exit code $rc"
grep -q "decision log /dev/full: write failed: No space left on device" "$tmp/full.err" ||
  fail "--decisions /dev/full: $(cat "$tmp/full.err")"
rc=0
"$FAULTLINE" replay "$a/gpu-a.dmesg" >/dev/full 2>"$tmp/stdout.err" || rc=$?
[[ $rc == 2 ]] || fail "> /dev/full: exit code $rc"
grep -q "decision log stdout: write failed" "$tmp/stdout.err" || fail "> /dev/full: $(cat "$tmp/stdout.err")"

# --year: what int64 nanoseconds hold.
for y in 0 1677 2262; do
  rc=0
  "$FAULTLINE" replay --year $y "$a/gpu-a.dmesg" >/dev/null 2>"$tmp/year.err" || rc=$?
  [[ $rc == 2 ]] || fail "--year $y: exit code $rc"
  grep -q "^faultline: --year must be within 1678..2261, got $y$" "$tmp/year.err" ||
    fail "--year $y: $(cat "$tmp/year.err")"
done

# A usage error exits 2, as a refused configuration does (core/commands.h), not with CLI11's own
# codes (104, 106, 109).
for args in "replay --year twenty" "replay --threads -x" "serve" "nonsense"; do
  rc=0
  # shellcheck disable=SC2086  # the words are the arguments
  "$FAULTLINE" $args >/dev/null 2>"$tmp/usage.err" </dev/null || rc=$?
  [[ $rc == 2 ]] || fail "faultline $args: exit code $rc, want 2: $(cat "$tmp/usage.err")"
  grep -q "Run with --help for more information" "$tmp/usage.err" ||
    fail "faultline $args: $(cat "$tmp/usage.err")"
done
"$FAULTLINE" replay --help >/dev/null || fail "replay --help exited $?"

# --year is the year of the first line; a log crossing New Year goes on into the next.
for t in "Dec 31 22:00:00" "Dec 31 23:00:00" "Dec 31 23:59:00" "Jan  1 00:30:00" "Jan  1 01:00:00"; do
  echo "$t gpu-n1 kernel: ib0: lost carrier"
done >"$tmp/rollover.syslog"
"$FAULTLINE" replay --year 2025 --decisions "$tmp/rollover.jsonl" "$tmp/rollover.syslog" 2>>"$tmp/replay.log"
[[ "$(jq -r '"\(.time) \(.node) \(.action)"' "$tmp/rollover.jsonl")" == "2026-01-01T01:00:00.000000000Z gpu-n1 taint" ]] ||
  fail "rollover: $(cat "$tmp/rollover.jsonl")"

# A pod's output as `kubectl logs --timestamps` prints it. Read as syslog, the line the pod printed
# as gpu-3's kernel tainted gpu-3; as a container's log it is the pod stream of --node, and
# without --node the file is an error that says to give it.
{
  echo "2026-11-28T10:00:00.123456789Z epoch 3 loss: 0.1"
  echo "2026-11-28T10:00:01.223456789Z gpu-3 kernel: NVRM: Xid (PCI:0000:44:00): 79, pid=1, name=x, GPU has fallen off the bus."
  echo "2026-11-28T10:00:02.1Z step 5"
} >"$tmp/trainer-0.log"
"$FAULTLINE" replay --node gpu-7 --decisions "$tmp/pod.jsonl" "$tmp/trainer-0.log" 2>"$tmp/pod.err" ||
  fail "kubectl logs with --node: $(cat "$tmp/pod.err")"
grep -q "3 lines (0 malformed)" "$tmp/pod.err" || fail "kubectl logs with --node: $(cat "$tmp/pod.err")"
[[ ! -s $tmp/pod.jsonl ]] || fail "a pod's line tainted: $(cat "$tmp/pod.jsonl")"
rc=0
"$FAULTLINE" replay --decisions "$tmp/pod.jsonl" "$tmp/trainer-0.log" 2>"$tmp/pod.err" || rc=$?
[[ $rc == 2 ]] || fail "kubectl logs without --node: exit code $rc, want 2"
grep -qF "trainer-0.log: a container's log names no node (kubectl logs, /var/log/pods): give it with --node" \
  "$tmp/pod.err" || fail "kubectl logs without --node: $(cat "$tmp/pod.err")"

# A directory is replayed as its files, in its subdirectories too, but for hidden ones; links to
# directories and dangling ones are named in a warning; a directory without files is an error.
mkdir -p "$tmp/dir/node-7" "$tmp/dir/.git" "$tmp/empty-dir"
xid 100.0 >"$tmp/dir/node-7/gpu-h.dmesg"
xid 100.0 | gzip >"$tmp/dir/gpu-i.dmesg.gz"
printf 'not a log\n' >"$tmp/dir/.git/HEAD"
printf 'not a log\n' >"$tmp/dir/.DS_Store"
ln -s .. "$tmp/dir/up"
ln -s gone.dmesg "$tmp/dir/dangling"
"$FAULTLINE" replay --decisions "$tmp/dir.jsonl" "$tmp/dir" 2>"$tmp/dir.err" ||
  fail "a directory: $(cat "$tmp/dir.err")"
for f in up dangling; do
  grep -qF "skipping $tmp/dir/$f: not a regular file (links to directories are not followed)" \
    "$tmp/dir.err" || fail "$f in a directory: $(cat "$tmp/dir.err")"
done
[[ $(jq -r '.node' "$tmp/dir.jsonl" | sort | paste -sd ' ') == "gpu-h gpu-i" ]] ||
  fail "a directory: $(cat "$tmp/dir.jsonl")"
grep -q "replayed 2 files" "$tmp/dir.err" || fail "a directory: $(cat "$tmp/dir.err")"
rc=0
"$FAULTLINE" replay --decisions "$tmp/dir.jsonl" "$tmp/empty-dir" 2>"$tmp/dir.err" || rc=$?
[[ $rc == 2 ]] || fail "an empty directory: exit code $rc, want 2"
grep -qF "empty-dir: a directory without files to replay" "$tmp/dir.err" ||
  fail "an empty directory: $(cat "$tmp/dir.err")"

# `journalctl -o short-monotonic`: a process's line (python3[1234]) is no kernel record.
{
  echo "[    5.123456] gpu-4 kernel: Linux version 6.1.0"
  echo "[   15.123456] gpu-4 python3[1234]: NVRM: Xid (PCI:0000:44:00): 79, pid=1, name=x, GPU has fallen off the bus."
} >"$tmp/gpu-4.journal"
"$FAULTLINE" replay --decisions "$tmp/mono.jsonl" "$tmp/gpu-4.journal" 2>"$tmp/mono.err" ||
  fail "short-monotonic: $(cat "$tmp/mono.err")"
[[ ! -s $tmp/mono.jsonl ]] || fail "a process's line tainted: $(cat "$tmp/mono.jsonl")"
echo "[   16.0] gpu-4 kernel: NVRM: Xid (PCI:0000:44:00): 79, pid=1, name=x, GPU has fallen off the bus." >>"$tmp/gpu-4.journal"
"$FAULTLINE" replay --decisions "$tmp/mono.jsonl" "$tmp/gpu-4.journal" 2>"$tmp/mono.err" ||
  fail "short-monotonic: $(cat "$tmp/mono.err")"
[[ $(jq -r '"\(.node) \(.action)"' "$tmp/mono.jsonl") == "gpu-4 taint" ]] ||
  fail "short-monotonic kernel line: $(cat "$tmp/mono.jsonl")"

# A Kafka json topic's archive replays with the topic's fields and stream from --config, outside a
# pod too with the service's own config (its kubernetes section names no server: the pod's); topics
# reading json two ways leave replay no way to choose, an error.
cat >"$tmp/json.yaml" <<YAML
kubernetes: {}
kafka:
  brokers: 127.0.0.1:1
  topics:
    - {name: kern, encoding: json, stream: kernel, fields: {line: [text], node: [origin], time: [at]}}
YAML
printf '{"origin":"gpu-j","text":"NVRM: Xid (PCI:0000:44:00): 79, pid=1, name=x, GPU has fallen off the bus.","at":1764324002}\n' \
  >"$tmp/kern.jsonl"
env -u KUBERNETES_SERVICE_HOST "$FAULTLINE" replay --config "$tmp/json.yaml" \
  --decisions "$tmp/json.out" "$tmp/kern.jsonl" 2>"$tmp/json.err" ||
  fail "a json topic's archive: $(cat "$tmp/json.err")"
[[ $(jq -r '"\(.node) \(.action)"' "$tmp/json.out") == "gpu-j taint" ]] ||
  fail "a json topic's archive: $(cat "$tmp/json.out") $(cat "$tmp/json.err")"
rc=0
"$FAULTLINE" replay --decisions "$tmp/json-default.out" "$tmp/kern.jsonl" 2>"$tmp/json.err" ||
  rc=$?
[[ $rc == 2 && ! -s $tmp/json-default.out ]] ||
  fail "a json archive without its topic's fields: exit code $rc, $(cat "$tmp/json-default.out")"
echo '    - {name: pods, encoding: json}' >>"$tmp/json.yaml"
rc=0
"$FAULTLINE" replay --config "$tmp/json.yaml" --decisions "$tmp/json.out" "$tmp/kern.jsonl" \
  2>"$tmp/json.err" || rc=$?
[[ $rc == 2 ]] || fail "two json topics with different fields: exit code $rc, want 2"
grep -qF "kafka topics kern and pods read json with different fields or stream" "$tmp/json.err" ||
  fail "two json topics with different fields: $(cat "$tmp/json.err")"
echo "PASS"
