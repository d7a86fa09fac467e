# Shared helpers for the end-to-end scripts (sourced, not run by ctest: it has no _ in the name).
set -eEuo pipefail
: "${FL_BUILD:?FL_BUILD must be the build directory}" "${FL_SOURCE:?FL_SOURCE must be the source directory}"
FAULTLINE=$FL_BUILD/faultline
tmp=$(mktemp -d)
pids=()
fail() {
  echo "FAIL: $*" >&2
  for f in "$tmp"/*.log; do [[ -f $f ]] && sed "s|^|  $(basename "$f"): |" "$f" | tail -20 >&2; done
  exit 1
}
trap 'fail "line $LINENO: command exited with $?"' ERR
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
# The (node, rule) pairs of a decision log, sorted, one "node rule" per line.
decided() { jq -r '"\(.node) \(.rule)"' "$1" | sort; }
# Waits up to $2 seconds for file $1 to be non-empty.
wait_file() {
  for _ in $(seq $(($2 * 10))); do [[ -s $1 ]] && return 0; sleep 0.1; done
  fail "$1 not written within $2 s"
}
# Starts `faultline serve --config $1` in the background (serve_pid), logging to $tmp/serve.log;
# with an http section listening on 127.0.0.1:0, waits for it and sets `port` to the one chosen.
start_serve_http() {
  "$FAULTLINE" serve --config "$1" 2>>"$tmp/serve.log" &
  serve_pid=$!
  pids+=("$serve_pid")
  for _ in $(seq 100); do grep -q 'listening on' "$tmp/serve.log" && break; sleep 0.1; done
  port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/serve.log" | tail -1)
  [[ -n $port ]] || fail "serve did not listen"
}
# A cluster CA ($tmp/ca.crt) and an API server certificate for 127.0.0.1 signed by it
# ($tmp/server.{crt,key}), as kubeadm makes them (P-256 keys, valid one day).
make_cluster_ca() {
  local key=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
  openssl req -x509 "${key[@]}" -days 1 -subj /CN=test-cluster-ca -keyout "$tmp/ca.key" \
    -out "$tmp/ca.crt" 2>>"$tmp/openssl.log"
  openssl req "${key[@]}" -subj /CN=kube-apiserver -keyout "$tmp/server.key" \
    -out "$tmp/server.csr" 2>>"$tmp/openssl.log"
  printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >"$tmp/server.ext"
  openssl x509 -req -in "$tmp/server.csr" -CA "$tmp/ca.crt" -CAkey "$tmp/ca.key" \
    -CAcreateserial -days 1 -extfile "$tmp/server.ext" -out "$tmp/server.crt" 2>>"$tmp/openssl.log"
}
