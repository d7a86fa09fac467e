#!/usr/bin/env bash
# What an operator sees of faultline's decisions through kubectl (README "Deploy", step 4), with
# serve against the fake API server: `kubectl describe node` and `kubectl get events` show the
# taint's Warning Event naming the rule and the evidence line, the FaultlineFaulty condition True,
# then the untaint's Normal Event and the condition False with a later lastTransitionTime; an
# opted-out node shows the suppressed decision's Warning Event and no condition; a control byte of
# an evidence line shows as \xNN. The decision log has one line per decision, and README's
# `kubectl logs` command finds them in a pod's log.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
command -v kubectl >/dev/null || fail "kubectl not installed"

start_apiserver gpu-1,gpu-2
curl -fsS -X POST "$api/_test/mutate/gpu-2" \
  -d '{"patch":{"metadata":{"labels":{"faultline.dev/opt-out":"true"}}}}' >/dev/null
cat >"$tmp/config.yaml" <<YAML
decisions: $tmp/decisions.jsonl
http: {listen: "127.0.0.1:0"}
kubernetes: {server: "$api", namespace: faultline, node_list_period: 1s,
             guard: {max_tainted: 0, max_tainted_percent: 0, max_new: 0}}
YAML
start_serve_http "$tmp/config.yaml"

cat >"$tmp/kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters: [{name: fake, cluster: {server: "$api"}}]
users: [{name: anonymous, user: {}}]
contexts: [{name: fake, context: {cluster: fake, user: anonymous}}]
current-context: fake
YAML
k() {
  HOME="$tmp" kubectl --kubeconfig "$tmp/kubeconfig" --cache-dir "$tmp/cache" \
    --request-timeout 10s "$@"
}
push() {  # node, ns, line
  curl -fsS -H 'Content-Type: application/json' --data-binary \
    "{\"streams\":[{\"stream\":{\"node\":\"$1\",\"transport\":\"kernel\"},\"values\":[[\"$2\",$(jq -Rn --arg l "$3" '$l')]]}]}" \
    "http://127.0.0.1:$port/loki/api/v1/push" || fail "push to serve"
}
wait_for() {  # $1 = seconds, $2... = command that must succeed
  local limit=$1
  shift
  for _ in $(seq $((limit * 10))); do "$@" && return 0; sleep 0.1; done
  return 1
}
faulty() {  # node → the FaultlineFaulty condition as JSON, "" without one
  k get node "$1" -o jsonpath='{.status.conditions[?(@.type=="FaultlineFaulty")]}'
}
condition_is() { [[ $(faulty "$1" | jq -r .status) == "$2" ]]; }
described() {  # node, then the extended regexes `kubectl describe node` must show lines of
  local node=$1
  shift
  k describe node "$node" >"$tmp/describe.txt"
  for re in "$@"; do
    grep -qE "$re" "$tmp/describe.txt" ||
      fail "kubectl describe node $node shows no line like '$re': $(cat "$tmp/describe.txt")"
  done
}
events_of() {  # node → its Events as kubectl's field selector finds them, one JSON per line
  k get events --field-selector "involvedObject.name=$1" -o json | jq -c '.items[]'
}
# The sink writes a node's condition, then its Event: a test that saw the condition waits for it.
events_at_least() { [[ $(events_of "$1" | wc -l) -ge $2 ]]; }

m=60000000000
t0=$(($(date +%s%N) - 30 * m))
xid='NVRM: Xid (PCI:0000:44:00): 48, pid=1234, name=python, Ch 00000010, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0.'
load='NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.144.03  Mon Dec 30 17:44:08 UTC 2024'

push gpu-1 "$t0" "$xid"
push gpu-2 "$t0" "$xid"
wait_for 20 condition_is gpu-1 True || fail "gpu-1's condition: $(faulty gpu-1)"
uid=$(k get node gpu-1 -o jsonpath='{.metadata.uid}')
tainted=$(faulty gpu-1)
jq -e '.reason == "FaultDetected" and (.message | startswith("rule xid-fatal (a fatal hit on pci=0000:44:00): nvidia-xid: NVRM: Xid (PCI:0000:44:00): 48"))' \
  <<<"$tainted" >/dev/null || fail "gpu-1's condition when tainted: $tainted"
wait_for 20 events_at_least gpu-1 1 || fail "gpu-1 has no Event when tainted"
events_of gpu-1 >"$tmp/events.json"
jq -se --arg uid "$uid" 'length == 1 and (.[0] | .type == "Warning" and .reason == "FaultlineTaint"
    and .count == 1 and .source.component == "faultline" and .reportingComponent == "faultline"
    and .involvedObject == {"apiVersion": "v1", "kind": "Node", "name": "gpu-1", "uid": $uid}
    and .firstTimestamp == .lastTimestamp
    and (.message | contains("rule xid-fatal") and contains("nvidia-xid: NVRM: Xid (PCI:0000:44:00): 48")))' \
  "$tmp/events.json" >/dev/null || fail "gpu-1's Events when tainted: $(cat "$tmp/events.json")"
described gpu-1 '^Taints: +faultline.dev/faulty=true:NoSchedule$' \
  '^  FaultlineFaulty +True .* FaultDetected +rule xid-fatal ' \
  '^  Warning +FaultlineTaint .* faultline +tainted faultline.dev/faulty=true:NoSchedule on node gpu-1 by rule xid-fatal .*: nvidia-xid: NVRM: Xid '

# The untaint, a second or more later: lastTransitionTime (whole seconds) moves with the status.
sleep 1.1
push gpu-1 $((t0 + 10 * m)) "$load"
push gpu-1 $((t0 + 21 * m)) "some unrelated kernel line"
wait_for 20 condition_is gpu-1 False || fail "gpu-1's condition after recovery: $(faulty gpu-1)"
recovered=$(faulty gpu-1)
jq -e --argjson was "$tainted" '.reason == "Recovered" and (.message | startswith("rule xid-fatal: recovered"))
    and .lastTransitionTime > $was.lastTransitionTime and .lastHeartbeatTime == .lastTransitionTime' \
  <<<"$recovered" >/dev/null || fail "gpu-1's condition: $tainted, then $recovered"
wait_for 20 events_at_least gpu-1 2 || fail "gpu-1's Events after recovery: $(events_of gpu-1)"
events_of gpu-1 >"$tmp/events.json"
jq -se '[.[] | [.type, .reason, .count]] | sort == [["Normal", "FaultlineUntaint", 1], ["Warning", "FaultlineTaint", 1]]' \
  "$tmp/events.json" >/dev/null || fail "gpu-1's Events after recovery: $(cat "$tmp/events.json")"
described gpu-1 '^Taints: +<none>$' \
  '^  FaultlineFaulty +False .* Recovered +rule xid-fatal: recovered' \
  '^  Normal +FaultlineUntaint .* faultline +removed taint faultline.dev/faulty: rule xid-fatal: recovered'

# The opted-out node: the refusal's Event, no taint, no condition.
events_of gpu-2 >"$tmp/events.json"
jq -se 'length == 1 and (.[0] | .type == "Warning" and .reason == "FaultlineSuppressed"
    and (.message | startswith("rule xid-fatal: taint refused: node opted out (label faultline.dev/opt-out=true); nvidia-xid: NVRM: Xid")))' \
  "$tmp/events.json" >/dev/null || fail "gpu-2's Events: $(cat "$tmp/events.json")"
[[ -z $(faulty gpu-2) ]] || fail "the opted-out gpu-2 has a condition: $(faulty gpu-2)"
described gpu-2 '^  Warning +FaultlineSuppressed .* faultline +rule xid-fatal: taint refused: node opted out'

# A process name is any pod's to set (prctl), and an Xid line prints it: its escape sequence (here
# one that hides the text after it) reaches describe spelled \xNN, never as the byte, which kubectl
# prints as it is to the operator's terminal. The decision log keeps the line as it was.
hidden=${xid/name=python/name=$'\e'[8mpython}
push gpu-1 $((t0 + 25 * m)) "$hidden"
wait_for 20 condition_is gpu-1 True || fail "gpu-1 not tainted again: $(faulty gpu-1)"
wait_for 20 events_at_least gpu-1 3 || fail "gpu-1's Events when tainted again: $(events_of gpu-1)"
described gpu-1 '^  Warning +FaultlineTaint .* nvidia-xid: NVRM: Xid \(PCI:0000:44:00\): 48, pid=1234, name=\\x1b\[8mpython, '
! grep -q $'\e' "$tmp/describe.txt" || fail "kubectl describe node prints an escape byte: $(cat -v "$tmp/describe.txt")"
jq -se --arg l "$hidden" 'any(.[]; .node == "gpu-1" and .evidence[0].line == $l)' \
  "$tmp/decisions.jsonl" >/dev/null || fail "the decision log lost the line: $(cat "$tmp/decisions.jsonl")"

# One decision log line per decision.
[[ $(jq -c '[.node, .action, .rule]' "$tmp/decisions.jsonl" | sort | tr '\n' ' ') == \
  '["gpu-1","taint","xid-fatal"] ["gpu-1","taint","xid-fatal"] ["gpu-1","untaint","xid-fatal"] ["gpu-2","suppressed","xid-fatal"] ["gpu-2","taint","xid-fatal"] ' ]] ||
  fail "decision log: $(cat "$tmp/decisions.jsonl")"

# README "Deploy", step 4: its command for the decisions in the pods' logs (stdout) finds one that
# ten log lines followed, of later taints, as a pod's log holds them after a busy hour.
later=$(for n in $(seq 10); do echo "[$(date -u '+%F %T.000')] [faultline] [info] kubernetes: applied taint faultline.dev/faulty=true:NoSchedule on node gpu-$((n + 2)) (rule xid-fatal)"; done)
jq -n --rawfile log "$tmp/decisions.jsonl" --arg later "$later" '{
    metadata: {name: "faultline-0", labels: {"app.kubernetes.io/name": "faultline"}},
    spec: {containers: [{name: "faultline", image: "faultline"}]},
    status: {phase: "Running"}, log: ($log + $later + "\n")}' |
  curl -fsS -X POST "$api/api/v1/namespaces/faultline/pods" --data-binary @- >/dev/null
readme_logs=$(sed -n 's/^ *kubectl \(-n faultline logs -l [^|]*\)| grep .*/\1/p' "$FL_SOURCE/README.md")
[[ -n $readme_logs ]] || fail "README shows no kubectl logs command for the decisions"
# shellcheck disable=SC2086 # the command's words, as a shell splits them
k $readme_logs >"$tmp/logs.txt" || fail "kubectl $readme_logs: $(cat "$tmp/logs.txt")"
grep -qF "$(head -1 "$tmp/decisions.jsonl")" "$tmp/logs.txt" ||
  fail "kubectl $readme_logs (README \"Deploy\") misses gpu-1's first decision: $(cat "$tmp/logs.txt")"
echo "PASS: kubectl shows faultline's decisions"
