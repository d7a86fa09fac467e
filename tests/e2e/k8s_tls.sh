#!/usr/bin/env bash
# The API server over TLS, verified against the cluster CA (kubernetes.ca_file), as in a pod:
# the fake API server serves HTTPS with a certificate for 127.0.0.1 signed by a test cluster CA.
#   - kubectl trusts it with that CA and refuses it without: the fake speaks TLS as a real one.
#   - faultline with the cluster CA taints through it, sending its bearer token.
#   - faultline with another CA sends nothing: every request fails TLS verification, is counted
#     as code="error", and the node stays untainted.
#   - replay --apply in a pod with no service account mounted, given its token and CA by flags and
#     a config whose kubernetes section names no server, taints through the pod's API server.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
command -v openssl >/dev/null || fail "openssl not installed"
make_cluster_ca
# A CA that signed nothing of this server's.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=other-ca \
  -keyout "$tmp/other.key" -out "$tmp/other.crt" 2>>"$tmp/openssl.log"
start_tls_apiserver gpu-1,gpu-2,gpu-3
echo "sa-token-1" >"$tmp/token"

[[ $(kubectl --server "$api" --certificate-authority "$tmp/ca.crt" --token probe get nodes -o name) == \
  $'node/gpu-1\nnode/gpu-2\nnode/gpu-3' ]] || fail "kubectl with the cluster CA"
if kubectl --server "$api" --certificate-authority "$tmp/other.crt" --token probe get nodes \
  >/dev/null 2>"$tmp/kubectl-other.log"; then
  fail "kubectl trusted the server with another CA"
fi
grep -q 'x509' "$tmp/kubectl-other.log" || fail "kubectl: $(cat "$tmp/kubectl-other.log")"

faultline_requests() { api_get /_test/requests | jq '[.[] | select(.authorization != "Bearer probe")]'; }
taints() { api_get "/api/v1/nodes/$1" | jq -c '[.spec.taints[]? | select(.key == "faultline.dev/faulty")]'; }
push_xid79() {  # $1 = serve's port, $2 = node
  curl -fsS -H 'Content-Type: application/json' --data-binary \
    "{\"streams\":[{\"stream\":{\"node\":\"$2\",\"transport\":\"kernel\"},\"values\":[[\"$(date +%s%N)\",\"NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus\"]]}]}" \
    "http://127.0.0.1:$1/loki/api/v1/push" || fail "push to $1"
}

# With the cluster CA: the node is tainted, and every request carried the token.
cat >"$tmp/good.yaml" <<YAML
decisions: $tmp/good.jsonl
http: {listen: "127.0.0.1:0"}
kubernetes: {server: "$api", ca_file: "$tmp/ca.crt", token_file: "$tmp/token"}
YAML
start_serve_http "$tmp/good.yaml"
push_xid79 "$port" gpu-1
for _ in $(seq 600); do [[ $(taints gpu-1) != '[]' ]] && break; sleep 0.1; done
[[ $(taints gpu-1 | jq -r '.[0].effect') == NoSchedule ]] || fail "gpu-1 not tainted: $(taints gpu-1)"
# Read once serve has stopped: the taint's Event and condition follow its PATCH, and a request
# counted later would be blamed on the other CA's serve below.
kill "$serve_pid" && wait "$serve_pid" 2>/dev/null || true
faultline_requests >"$tmp/requests.json"
jq -e 'length > 0 and all(.[]; .authorization == "Bearer sa-token-1")' "$tmp/requests.json" >/dev/null ||
  fail "requests without the bearer token: $(jq -c '[.[].authorization] | unique' "$tmp/requests.json")"
sent=$(jq length "$tmp/requests.json")

# With another CA: nothing reaches the server, every attempt is an error, gpu-2 stays untainted.
cat >"$tmp/bad.yaml" <<YAML
decisions: $tmp/bad.jsonl
http: {listen: "127.0.0.1:0"}
kubernetes: {server: "$api", ca_file: "$tmp/other.crt", token_file: "$tmp/token"}
YAML
: >"$tmp/serve.log"
start_serve_http "$tmp/bad.yaml"
push_xid79 "$port" gpu-2
wait_file "$tmp/bad.jsonl" 20
errors() {
  curl -fsS "http://127.0.0.1:$port/metrics" |
    sed -n 's/^faultline_kube_requests_total{verb="LIST",resource="nodes",code="error"} \([0-9]*\)$/\1/p'
}
for _ in $(seq 600); do [[ -n $(errors) ]] && break; sleep 0.1; done
[[ $(errors) -ge 1 ]] || fail "no LIST counted as code=error: $(curl -fsS "http://127.0.0.1:$port/metrics" | grep kube_requests)"
grep -q -i 'certificate' "$tmp/serve.log" || fail "serve did not log the certificate error"
[[ $(taints gpu-2) == '[]' ]] || fail "gpu-2 tainted through an unverified server: $(taints gpu-2)"
[[ $(faultline_requests | jq length) == "$sent" ]] ||
  fail "a request reached the server through an unverified TLS connection"
echo "TLS: tainted with the cluster CA ($sent requests, all with the token); another CA: refused"

# replay --apply in a pod (KUBERNETES_SERVICE_HOST/PORT set) without a service account token: the
# flags' token and CA replace the pod's files, which the config's in-cluster connection must not
# read first.
echo "2026-11-29T16:00:19.000000+00:00 gpu-3 kernel: NVRM: Xid (PCI:0000:a1:00): 79, pid=<unknown>, name=<unknown>, GPU has fallen off the bus." >"$tmp/gpu-3.log"
echo "kubernetes: {guard: {max_tainted: 0, max_tainted_percent: 0}}" >"$tmp/replay.yaml"  # gpu-1 is tainted
KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$(cat "$tmp/port") \
  "$FAULTLINE" replay "$tmp/gpu-3.log" --decisions /dev/null --apply --config "$tmp/replay.yaml" \
  --kube-token-file "$tmp/token" --kube-ca-file "$tmp/ca.crt" 2>"$tmp/replay.log" ||
  fail "replay --apply in a pod without a service account: $(cat "$tmp/replay.log")"
[[ $(taints gpu-3 | jq -r '.[0].effect') == NoSchedule ]] || fail "gpu-3 not tainted: $(taints gpu-3)"
echo "replay --apply in a pod with the flags' token and CA: tainted"
