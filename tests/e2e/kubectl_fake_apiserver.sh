#!/usr/bin/env bash
# Proves that tests/tools/fake_apiserver behaves like a real API server for kubectl (v1.32,
# kubernetes/kubectl): kubectl discovers nodes, taints one with a strategic-merge patch, reads it
# back, and sees changes the fake made; a stale resourceVersion gets 409 Conflict; a paged LIST
# (--chunk-size) follows the fake's continue tokens; a Lease PUT without a resourceVersion gets
# 422 Invalid, which kubectl prints as it prints a real server's.
# Env: FL_BUILD = build directory (holds tests/tools/fake_apiserver).
set -eEuo pipefail

fail() {
  echo "FAIL: $*" >&2
  [[ -f ${tmp:-}/fake.log ]] && sed 's/^/  fake_apiserver: /' "$tmp/fake.log" >&2
  exit 1
}
trap 'fail "line $LINENO: command exited with $?"' ERR

fake="${FL_BUILD:?FL_BUILD must be the build directory}/tests/tools/fake_apiserver"
[[ -x $fake ]] || fail "$fake not built"
command -v kubectl >/dev/null || fail "kubectl not installed"
command -v jq >/dev/null || fail "jq not installed"

tmp=$(mktemp -d)
pid=""
cleanup() {
  if [[ -n $pid ]]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

"$fake" --port 0 --port-file "$tmp/port" --nodes n1 2>"$tmp/fake.log" &
pid=$!
for _ in $(seq 600); do
  [[ -s $tmp/port ]] && break
  kill -0 "$pid" 2>/dev/null || fail "fake_apiserver exited early"
  sleep 0.1
done
[[ -s $tmp/port ]] || fail "fake_apiserver wrote no port file within 60 s"
base="http://127.0.0.1:$(cat "$tmp/port")"

cat >"$tmp/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: $base
users:
- name: anonymous
  user: {}
contexts:
- name: fake
  context: {cluster: fake, user: anonymous}
current-context: fake
EOF
# A fresh discovery cache and HOME so that nothing of the user's kubectl setup leaks in.
k() {
  HOME="$tmp" kubectl --kubeconfig "$tmp/kubeconfig" --cache-dir "$tmp/cache" \
    --request-timeout 10s "$@"
}
api() { curl -sS --max-time 10 "$@"; }
node_json() { k get node n1 -o json; }

# Another writer's taint, which kubectl must keep.
api -X POST "$base/_test/mutate/n1" -d \
  '{"patch":{"spec":{"taints":[{"key":"existing","value":"x","effect":"PreferNoSchedule"}]}}}' \
  >/dev/null
rv_before=$(node_json | jq -r .metadata.resourceVersion)

out=$(k taint nodes n1 example.com/x=y:NoSchedule 2>&1) || fail "kubectl taint: $out"
[[ $out == "node/n1 tainted" ]] || fail "kubectl taint printed: $out"

node=$(node_json)
jq -e '.spec.taints | length == 2
       and any(.[]; . == {"key":"example.com/x","value":"y","effect":"NoSchedule"})
       and any(.[]; . == {"key":"existing","value":"x","effect":"PreferNoSchedule"})' \
  <<<"$node" >/dev/null || fail "taints after kubectl taint: $(jq -c .spec.taints <<<"$node")"
jq -e '.kind == "Node" and .apiVersion == "v1" and .metadata.name == "n1"
       and (.metadata.uid | length > 0) and (.metadata.creationTimestamp | length > 0)
       and .metadata.labels["kubernetes.io/hostname"] == "n1"
       and any(.status.conditions[]; .type == "Ready" and .status == "True")' \
  <<<"$node" >/dev/null || fail "node lost other fields: $node"
rv_after=$(jq -r .metadata.resourceVersion <<<"$node")
((rv_after > rv_before)) || fail "resourceVersion not bumped: $rv_before -> $rv_after"

# kubectl used a strategic-merge patch without a resourceVersion (kubernetes/kubectl
# pkg/cmd/taint/taint.go RunTaint).
api "$base/_test/requests" | jq -e 'any(.[]; .method == "PATCH" and .path == "/api/v1/nodes/n1"
    and (.query | contains("fieldManager=kubectl-taint"))
    and .content_type == "application/strategic-merge-patch+json")' >/dev/null ||
  fail "no strategic-merge PATCH from kubectl recorded"

# Same key and effect again: kubectl itself refuses (it read the taint back from the fake).
if out=$(k taint nodes n1 example.com/x=z:NoSchedule 2>&1); then
  fail "duplicate kubectl taint succeeded: $out"
fi
[[ $out == *"already has example.com/x taint"* ]] || fail "duplicate kubectl taint: $out"

# A PATCH with a stale resourceVersion gets the apiserver's 409 Conflict Status.
status=$(api -o "$tmp/conflict.json" -w '%{http_code}' -X PATCH "$base/api/v1/nodes/n1" \
  -H 'Content-Type: application/strategic-merge-patch+json' \
  -d "{\"metadata\":{\"resourceVersion\":\"$rv_before\"},\"spec\":{\"taints\":[]}}")
[[ $status == 409 ]] || fail "stale PATCH got HTTP $status: $(cat "$tmp/conflict.json")"
jq -e '.kind == "Status" and .status == "Failure" and .reason == "Conflict" and .code == 409' \
  "$tmp/conflict.json" >/dev/null || fail "409 body: $(cat "$tmp/conflict.json")"
[[ $(node_json | jq '.spec.taints | length') == 2 ]] || fail "the stale PATCH changed taints"

# The same PATCH with the current resourceVersion applies.
status=$(api -o /dev/null -w '%{http_code}' -X PATCH "$base/api/v1/nodes/n1" \
  -H 'Content-Type: application/merge-patch+json' \
  -d "{\"metadata\":{\"resourceVersion\":\"$rv_after\",\"annotations\":{\"a\":\"b\"}}}")
[[ $status == 200 ]] || fail "current-resourceVersion PATCH got HTTP $status"

# Duplicate (key, effect) taints are rejected with 422 Invalid.
status=$(api -o "$tmp/invalid.json" -w '%{http_code}' -X PATCH "$base/api/v1/nodes/n1" \
  -H 'Content-Type: application/merge-patch+json' \
  -d '{"spec":{"taints":[{"key":"d","effect":"NoSchedule"},{"key":"d","effect":"NoSchedule"}]}}')
[[ $status == 422 ]] || fail "duplicate taints got HTTP $status"
jq -e '.reason == "Invalid"' "$tmp/invalid.json" >/dev/null ||
  fail "422 body: $(cat "$tmp/invalid.json")"

# kubectl sees changes the fake makes as a concurrent writer.
api -X POST "$base/_test/mutate/n1" \
  -d '{"patch":{"metadata":{"labels":{"faultline.dev/probe":"mutated"}}}}' >/dev/null
label=$(k get node n1 -o jsonpath='{.metadata.labels.faultline\.dev/probe}')
[[ $label == mutated ]] || fail "kubectl get did not see the fake's label change: '$label'"
names=$(k get nodes -o name)
[[ $names == node/n1 ]] || fail "kubectl get nodes: $names"

# Paged LIST: kubectl --chunk-size=1 follows metadata.continue page by page (limit=1 and the
# fake's tokens), and gets every node, in order, as one list.
for n in n2 n3; do
  api -X POST "$base/_test/nodes" -d "{\"metadata\":{\"name\":\"$n\"}}" >/dev/null
done
lists_before=$(api "$base/_test/requests" | jq '[.[] | select(.method == "GET" and .path == "/api/v1/nodes")] | length')
names=$(k get nodes --chunk-size=1 -o name | tr '\n' ' ')
[[ $names == "node/n1 node/n2 node/n3 " ]] || fail "kubectl get nodes --chunk-size=1: $names"
pages=$(api "$base/_test/requests" |
  jq -c --argjson skip "$lists_before" '[.[] | select(.method == "GET" and .path == "/api/v1/nodes")][$skip:] | map(.query)')
jq -e 'length == 3 and all(.[]; test("(^|&)limit=1(&|$)"))
       and (.[0] | test("continue=") | not) and all(.[1:][]; test("(^|&)continue=[^&]+"))
       and .[1] != .[2]' <<<"$pages" >/dev/null || fail "kubectl's paged LIST requests: $pages"
# A page of the raw API: remainingItemCount without a selector, none on the last page.
page=$(api "$base/api/v1/nodes?limit=2")
jq -e '[.items[].metadata.name] == ["n1","n2"] and .metadata.remainingItemCount == 1
       and (.metadata.continue | length > 0)' <<<"$page" >/dev/null || fail "first page: $page"
last=$(api "$base/api/v1/nodes?limit=2&continue=$(jq -r .metadata.continue <<<"$page")")
jq -e '[.items[].metadata.name] == ["n3"] and (.metadata | has("continue") | not)' \
  <<<"$last" >/dev/null || fail "last page: $last"
status=$(api -o /dev/null -w '%{http_code}' "$base/api/v1/nodes?limit=1&continue=bogus")
[[ $status == 400 ]] || fail "a continue token the server did not make got HTTP $status"

# Removal through kubectl keeps the other writer's taint.
out=$(k taint nodes n1 example.com/x:NoSchedule- 2>&1) || fail "kubectl untaint: $out"
node_json | jq -e '.spec.taints == [{"key":"existing","value":"x","effect":"PreferNoSchedule"}]' \
  >/dev/null || fail "taints after untaint: $(node_json | jq -c .spec.taints)"

# Unknown nodes are 404 NotFound for kubectl too.
if out=$(k get node nope 2>&1); then
  fail "kubectl get of a missing node succeeded: $out"
fi
[[ $out == *'nodes "nope" not found'* ]] || fail "kubectl get missing node: $out"

# Leases allow no unconditional update (the Lease strategy's AllowUnconditionalUpdate is false).
# kubectl replace of a manifest without metadata.resourceVersion reads the Lease and sends the
# version it read, so it applies; the same body PUT as written (replace --raw) gets 422 Invalid.
lease_path=/apis/coordination.k8s.io/v1/namespaces/faultline/leases/l1
cat >"$tmp/lease.json" <<'EOF'
{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
 "metadata": {"name": "l1", "namespace": "faultline"},
 "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}
EOF
lease_rv() { k get lease l1 -n faultline -o jsonpath='{.metadata.resourceVersion}'; }
# --validate=false: the fake serves no OpenAPI schema for kubectl to validate against.
out=$(k create --validate=false -f "$tmp/lease.json" 2>&1) || fail "kubectl create lease: $out"
rv_created=$(lease_rv)
out=$(k replace --validate=false -f "$tmp/lease.json" 2>&1) || fail "kubectl replace: $out"
[[ $out == "lease.coordination.k8s.io/l1 replaced" ]] || fail "kubectl replace printed: $out"
api "$base/_test/requests" | jq -e --arg p "$lease_path" --arg rv "$rv_created" '
    [.[] | select(.method == "PUT" and .path == $p)] | length == 1
    and (.[0].body | fromjson | .metadata.resourceVersion == $rv)' >/dev/null ||
  fail "kubectl replace did not PUT the Lease with the resourceVersion it read ($rv_created)"
rv_replaced=$(lease_rv)
if out=$(k replace --raw "$lease_path" -f "$tmp/lease.json" 2>&1); then
  fail "kubectl replace --raw of a Lease without resourceVersion succeeded: $out"
fi
invalid='metadata.resourceVersion: Invalid value: 0x0: must be specified for an update'
[[ $out == "The leases \"l1\" is invalid: $invalid" ]] ||
  fail "kubectl replace --raw without resourceVersion printed: $out"
[[ $(lease_rv) == "$rv_replaced" ]] || fail "the refused kubectl replace --raw changed the Lease"
# The Status itself, for a missing and for an empty resourceVersion.
for body in "$(cat "$tmp/lease.json")" "$(jq -c '.metadata.resourceVersion = ""' "$tmp/lease.json")"; do
  status=$(api -o "$tmp/invalid.json" -w '%{http_code}' -X PUT "$base$lease_path" \
    -H 'Content-Type: application/json' -d "$body")
  [[ $status == 422 ]] || fail "Lease PUT without resourceVersion got HTTP $status: $body"
  jq -e --arg invalid "$invalid" '.kind == "Status" and .apiVersion == "v1"
      and .status == "Failure" and .reason == "Invalid" and .code == 422
      and .message == "leases.coordination.k8s.io \"l1\" is invalid: \($invalid)"
      and .details == {"name": "l1", "group": "coordination.k8s.io", "kind": "leases",
        "causes": [{"reason": "FieldValueInvalid", "field": "metadata.resourceVersion",
                    "message": "Invalid value: 0x0: must be specified for an update"}]}' \
    "$tmp/invalid.json" >/dev/null || fail "422 body: $(cat "$tmp/invalid.json")"
done
[[ $(lease_rv) == "$rv_replaced" ]] || fail "a refused raw PUT changed the Lease"

echo "PASS: kubectl against fake_apiserver"
