#!/usr/bin/env bash
# The rule directory read again while serving (`rules_reload`, core/rules_watch.h), as the
# kubelet updates a ConfigMap volume under a running pod:
#   - a rule file that does not load is logged with its file, line and cause, shown in
#     faultline_rules_last_reload_successful 0, and changes nothing: the same process goes on
#     deciding with the bank it loaded, and the directory back as it was shows 1 again;
#   - files that load restart the service on them in the same process (same pid, as a container
#     that is not restarted), the decision log kept: a signature only the new bank has then decides;
#   - the same files with other comments, indentation and quotes are logged and restart nothing.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"

# The rule directory is laid out as the kubelet keeps a ConfigMap volume; $tmp/src holds the
# ConfigMap's files, and publish makes the volume hold them as the kubelet's AtomicWriter does: a
# new directory, the ..data symlink swapped to it by a rename, a symlink per new file, and the
# symlinks of removed files deleted.
mkdir "$tmp/rules" "$tmp/src"
cp "$FL_SOURCE"/rules/*.yaml "$tmp/src/"
version=0
publish() {
  local vol=$tmp/rules f old
  old=$(readlink "$vol/..data" || true)
  version=$((version + 1))
  mkdir "$vol/..v$version"
  cp "$tmp"/src/*.yaml "$vol/..v$version/"
  ln -s "..v$version" "$vol/..data_tmp"
  mv -T "$vol/..data_tmp" "$vol/..data"
  for f in "$tmp"/src/*.yaml; do
    [[ -L $vol/${f##*/} ]] || ln -s "..data/${f##*/}" "$vol/${f##*/}"
  done
  for f in "$vol"/*.yaml; do [[ -e $f ]] || rm "$f"; done
  [[ -z $old ]] || rm -r "${vol:?}/$old"
}
publish
cat >"$tmp/config.yaml" <<YAML
rules: $tmp/rules
rules_reload: 200ms
decisions: $tmp/decisions.jsonl
http: {listen: "127.0.0.1:0"}
YAML
start_serve_http "$tmp/config.yaml"
signatures=$(sed -n 's/.*loaded \([0-9]*\) signatures.*/\1/p' "$tmp/serve.log")
t0=1740787200
# push NODE SECONDS LINE: one kernel line of NODE at t0 + SECONDS, over Loki JSON.
push() {
  local body code
  body=$(jq -cn --arg node "$1" --arg t "$((t0 + $2))000000000" --arg line "$3" \
    '{streams: [{stream: {node: $node, transport: "kernel"}, values: [[$t, $line]]}]}')
  code=$(curl -s -o "$tmp/body" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary "$body" "http://127.0.0.1:$port/loki/api/v1/push")
  [[ $code == 204 ]] || fail "push to $1: HTTP $code $(cat "$tmp/body")"
}
# wait_decided NODE RULE: waits up to 60 s for a taint of NODE by RULE in the decision log.
wait_decided() {
  for _ in $(seq 600); do
    jq -e --arg n "$1" --arg r "$2" 'select(.action == "taint" and .node == $n and .rule == $r)' \
      "$tmp/decisions.jsonl" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  fail "no taint of $1 by $2: $(cat "$tmp/decisions.jsonl" 2>/dev/null)"
}
gauge() {
  curl -fsS "http://127.0.0.1:$port/metrics" |
    awk '$1 == "faultline_rules_last_reload_successful" { print $2 }'
}
# wait_log TEXT N: waits up to 60 s for the N-th line of serve.log holding TEXT.
wait_log() {
  for _ in $(seq 600); do
    [[ $(grep -cF -- "$1" "$tmp/serve.log") -ge $2 ]] && return 0
    sleep 0.1
  done
  fail "serve.log has no line '$1' (#$2)"
}
xid79='NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.'
test_line='FLTEST: accelerator 7 wedged'

[[ $(gauge) == 1 ]] || fail "gauge at start: $(gauge)"
push gpu-a 10 "$xid79"
wait_decided gpu-a xid-fatal

# A file that does not load: a pattern that does not compile, on line 6.
cat >"$tmp/src/zz-broken.yaml" <<'YAML'
signatures:
  - id: broken
    description: a pattern that does not compile
    streams: [kernel]
    severity: fatal
    pattern: 'FLTEST: (unclosed'
    examples:
      match: ['FLTEST: (unclosed']
YAML
publish
wait_log "changed and does not load" 1
grep -qE "zz-broken\.yaml:6: .*missing \)" "$tmp/serve.log" ||
  fail "the refusal names no file, line and cause: $(grep -A3 'does not load' "$tmp/serve.log")"
[[ $(gauge) == 0 ]] || fail "gauge after a refused bank: $(gauge)"
pid_before=$serve_pid
kill -0 "$serve_pid" || fail "serve exited on a refused bank"
push gpu-b 20 "$xid79"
wait_decided gpu-b xid-fatal
sleep 1  # several checks of the same refused files: logged once
[[ $(grep -cF "changed and does not load" "$tmp/serve.log") == 1 ]] ||
  fail "a refused bank logged at every check"
rm "$tmp/src/zz-broken.yaml"
publish
wait_log "holds the running bank again" 1
[[ $(gauge) == 1 ]] || fail "gauge with the running bank back: $(gauge)"

# Before the new bank, its line hits nothing.
push gpu-c 30 "$test_line"
sleep 0.5
if jq -e 'select(.node == "gpu-c")' "$tmp/decisions.jsonl" >/dev/null; then
  fail "the old bank decided on gpu-c"
fi
listening=$(grep -c 'listening on' "$tmp/serve.log")
cat >"$tmp/src/zz-test.yaml" <<'YAML'
signatures:
  - id: fltest-wedged
    description: a test signature only the new bank has
    streams: [kernel]
    severity: fatal
    pattern: 'FLTEST: accelerator (?P<unit>\d+) wedged'
    examples:
      match: ['FLTEST: accelerator 7 wedged']
rules:
  - id: fltest-wedged-fatal
    signature: fltest-wedged
YAML
publish
wait_restart_on_new_rules "$tmp/serve.log" "$listening"
kill -0 "$pid_before" || fail "serve is gone after the restart"
[[ $(pgrep -f "serve --config $tmp/config.yaml" | head -1) == "$pid_before" ]] ||
  fail "the restart is not the same process"
# Named as before, not "exe" (it executed /proc/self/exe): ps, pgrep -x and exporters find it.
[[ $(cat "/proc/$pid_before/comm") == "${FAULTLINE##*/}" ]] ||
  fail "the restarted process is named $(cat "/proc/$pid_before/comm")"
grep -q "loaded $((signatures + 1)) signatures .* from $tmp/rules" "$tmp/serve.log" ||
  fail "the new bank was not loaded: $(grep loaded "$tmp/serve.log")"
push gpu-d 40 "$test_line"
wait_decided gpu-d fltest-wedged-fatal
# The decision log was appended to, not truncated, across the restart.
[[ $(decided "$tmp/decisions.jsonl") == $'gpu-a xid-fatal\ngpu-b xid-fatal\ngpu-d fltest-wedged-fatal' ]] ||
  fail "decisions: $(decided "$tmp/decisions.jsonl")"
[[ $(gauge) == 1 ]] || fail "gauge after the restart: $(gauge)"

# The same rules in other comments and layout: logged once, no restart, the bank as it was.
listening=$(grep -c 'listening on' "$tmp/serve.log")
{
  echo "# FLTEST: the wedged accelerator signature, reformatted"
  sed -e 's/^  /    /' -e 's/\[kernel\]/[ "kernel" ]/' "$tmp/src/zz-test.yaml"
} >"$tmp/src/zz-test.yaml.new"
mv "$tmp/src/zz-test.yaml.new" "$tmp/src/zz-test.yaml"
publish
wait_log "changed, in other comments or layout: the running bank stays" 1
sleep 0.5
[[ $(grep -c 'listening on' "$tmp/serve.log") == "$listening" ]] ||
  fail "serve restarted on a change of comments and layout"
push gpu-e 50 "$test_line"
wait_decided gpu-e fltest-wedged-fatal
[[ $(gauge) == 1 ]] || fail "gauge after a change of layout: $(gauge)"

# A restart runs the files its watch loaded, handed over across execv (core/rules_watch.h
# handOverRuleFiles), not what the directory holds by then: here a file that does not load, as if
# written between the check and the restart, where the restart refused to start (exit 2). A
# second serve starts as a restart does, the running files (the test signature's among them)
# handed over in a file that FAULTLINE_RULE_FILES_FD names, one "<name bytes> <text bytes>\n"
# line before each name and text.
for f in "$tmp"/rules/*.yaml; do
  printf '%d %d\n%s' "$(printf '%s' "$f" | wc -c)" "$(wc -c <"$f")" "$f"
  cat "$f"
done >"$tmp/handed"
cp "$tmp/src/zz-test.yaml" "$tmp/src/zz-broken.yaml"
sed -i 's/pattern: .*/pattern: "FLTEST: (unclosed"/' "$tmp/src/zz-broken.yaml"
publish
sed -e "s|decisions.jsonl|decisions2.jsonl|" "$tmp/config.yaml" >"$tmp/config2.yaml"
FAULTLINE_RULE_FILES_FD=3 "$FAULTLINE" serve --config "$tmp/config2.yaml" 3<"$tmp/handed" \
  2>>"$tmp/serve2.log" &
pids+=($!)
wait_listening "$tmp/serve2.log"
grep -q "loaded $((signatures + 1)) signatures .* from $tmp/rules, as the restart found them" \
  "$tmp/serve2.log" || fail "the handed files were not run: $(cat "$tmp/serve2.log")"
for fd in /proc/"$!"/fd/*; do
  [[ $(readlink "$fd") != "$tmp/handed" ]] || fail "the handed files' descriptor stayed open"
done
for _ in $(seq 600); do
  grep -q "changed and does not load" "$tmp/serve2.log" && break
  sleep 0.1
done
grep -q "zz-broken\.yaml:.*missing )" "$tmp/serve2.log" ||
  fail "the directory's broken file was not refused: $(cat "$tmp/serve2.log")"
[[ $(gauge) == 0 ]] || fail "gauge after a restart onto a broken directory: $(gauge)"
push gpu-f 60 "$test_line"
for _ in $(seq 600); do
  jq -e 'select(.node == "gpu-f" and .rule == "fltest-wedged-fatal")' "$tmp/decisions2.jsonl" \
    >/dev/null 2>&1 && break
  sleep 0.1
done
jq -e 'select(.node == "gpu-f" and .rule == "fltest-wedged-fatal")' "$tmp/decisions2.jsonl" \
  >/dev/null || fail "the handed bank decided nothing: $(cat "$tmp/decisions2.jsonl" 2>/dev/null)"
# A restart reads the configuration again, and refuses to start on a bank its
# `kubernetes.dry_run_rules` names a rule of that the bank lacks (a typo would run the rule for
# real), or on a configuration that no longer loads; the restart exited 2, and with it the
# service. Such a bank is refused as one that does not load, and the running service goes on; it
# is checked again at each read, so a configuration put right restarts on it.
mkdir "$tmp/rules3"
cp "$FL_SOURCE"/rules/*.yaml "$tmp/src/zz-test.yaml" "$tmp/rules3/"
start_apiserver gpu-z
# config3 KUBERNETES_EXTRA [DECISIONS [LISTEN]]: the configuration, replaced in one rename. Written
# in place or in two steps, a check between the writes could find a configuration that loads and
# restart on it; the restart then reads the second (CI failed so).
config3() {
  cat >"$tmp/config3.yaml.new" <<YAML
rules: $tmp/rules3
rules_reload: 200ms
decisions: ${2:-$tmp/decisions3.jsonl}
http: {listen: "${3:-127.0.0.1:0}"}
kubernetes: {server: "$api", namespace: faultline$1}
YAML
  mv "$tmp/config3.yaml.new" "$tmp/config3.yaml"
}
config3 ", dry_run_rules: [fltest-wedged-fatal]"
"$FAULTLINE" serve --config "$tmp/config3.yaml" 2>>"$tmp/serve3.log" &
serve3_pid=$!
pids+=("$serve3_pid")
wait_listening "$tmp/serve3.log"
# refused3 N WHY: waits for the N-th refusal, which must say WHY, with serve running on.
refused3() {
  for _ in $(seq 600); do
    [[ $(grep -c "changed and does not load" "$tmp/serve3.log") -ge $1 ]] && break
    kill -0 "$serve3_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$serve3_pid" 2>/dev/null ||
    fail "serve exited on a bank its restart would refuse: $(tail -3 "$tmp/serve3.log")"
  grep -qF "$2" "$tmp/serve3.log" || fail "the refusal does not say why: $(tail -5 "$tmp/serve3.log")"
  [[ $(gauge) == 0 ]] || fail "gauge after a bank its restart would refuse: $(gauge)"
}
rm "$tmp/rules3/zz-test.yaml"
refused3 1 "dry_run_rules: no rule 'fltest-wedged-fatal' in the bank"
[[ $(grep -c 'listening on' "$tmp/serve3.log") == 1 ]] || fail "serve restarted on that bank"
config3 ""
wait_restart_on_new_rules "$tmp/serve3.log" 1
kill -0 "$serve3_pid" || fail "serve is gone after the configuration was put right"
listening=$(grep -c 'listening on' "$tmp/serve3.log")
config3 ", no_such_key: 1"
# In one rename: a check between cp's creating the file and writing it finds an empty file, which
# loads, and logs one more refusal.
cp "$tmp/src/zz-test.yaml" "$tmp/rules3/zz-test.yaml.new"
mv "$tmp/rules3/zz-test.yaml.new" "$tmp/rules3/zz-test.yaml"
refused3 2 "unknown key"
[[ $(grep -c 'listening on' "$tmp/serve3.log") == "$listening" ]] ||
  fail "serve restarted on a configuration that does not load"
# Nor does it start on a decisions file it cannot open, or on a listen address taken by another
# process (the fake API server's): both ended the service.
config3 "" "$tmp/no-such-dir/decisions.jsonl"
refused3 3 "$tmp/no-such-dir/decisions.jsonl: No such file or directory"
config3 "" "" "127.0.0.1:${api##*:}"
refused3 4 "http: cannot listen on 127.0.0.1:${api##*:}"
[[ $(grep -c 'listening on' "$tmp/serve3.log") == "$listening" ]] ||
  fail "serve restarted on a decisions file or listen address it cannot take"
config3 ""
wait_restart_on_new_rules "$tmp/serve3.log" "$listening"
kill -0 "$serve3_pid" || fail "serve is gone after the configuration was put right again"
echo "ok: refused bank kept the running one; new bank restarted serve (pid $pid_before) on it;" \
  "comments and layout alone did not; a restart ran the files it had checked; a bank its" \
  "restart would refuse (dry_run_rules, configuration, decisions file, listen) was refused"
