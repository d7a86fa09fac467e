# shellcheck shell=bash
# Shared helpers for the end-to-end scripts (sourced; tests/CMakeLists.txt runs every other
# tests/e2e/*.sh as a test).
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
# Whether $FAULTLINE carries AddressSanitizer: gcc links its runtime as a shared library, clang
# into the binary; both leave __asan_init among its dynamic symbols.
asan_build() { [[ $(nm -D "$FAULTLINE") == *__asan_init* ]]; }
# Stops what the test started. One still running 60 s after SIGTERM (a pod's grace period is 30 s)
# is killed and fails the test by name, rather than hanging it until ctest's timeout.
cleanup() {
  # Whether child $1 runs: an exited child not yet waited for is a zombie (state Z).
  running() {
    local stat
    read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
  }
  local p args stuck=0 deadline=$((SECONDS + 60))
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    while running "$p" && ((SECONDS < deadline)); do sleep 0.1; done
    if running "$p"; then
      mapfile -d '' args <"/proc/$p/cmdline" || true
      echo "FAIL: still running 60 s after SIGTERM, killed: ${args[*]}" >&2
      kill -KILL "$p" 2>/dev/null || true
      stuck=1
    fi
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$tmp"
  if ((stuck)); then exit 1; fi
}
trap cleanup EXIT
# The (node, rule) pairs of a decision log, sorted, one "node rule" per line.
decided() { jq -r '"\(.node) \(.rule)"' "$1" | sort; }
# Waits up to $2 seconds for file $1 to be non-empty.
wait_file() {
  for _ in $(seq $(($2 * 10))); do [[ -s $1 ]] && return 0; sleep 0.1; done
  fail "$1 not written within $2 s"
}
# Waits up to 60 s (a loaded machine) for the serve logging to $1 to listen on 127.0.0.1 and sets
# `port` to its port.
wait_listening() {
  for _ in $(seq 600); do grep -q 'listening on' "$1" 2>/dev/null && break; sleep 0.1; done
  port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$1" | tail -1)
  [[ -n $port ]] || fail "serve did not listen ($1)"
}
# Changes the bank of rule directory $1 as a rules update does: a file of its own with a signature
# no test line matches, its description counting the calls, so that each call gives another bank
# (a comment alone would not: serve restarts only on another bank, core/rules_watch.h).
bank_changes=0
change_bank() {
  bank_changes=$((bank_changes + 1))
  # Written aside and renamed in, as a ConfigMap update lands: a watch reading the directory while
  # `cat` had written part of the file saw another bank (an empty file loads) and restarted twice.
  cat >"$tmp/zz-e2e-change.yaml.new" <<YAML
signatures:
  - id: e2e-change
    description: a signature no test line matches, change $bank_changes
    streams: [kernel]
    severity: fatal
    pattern: 'FLTEST: never printed'
    examples:
      match: ['FLTEST: never printed']
YAML
  mv "$tmp/zz-e2e-change.yaml.new" "$1/zz-e2e-change.yaml"
}
# The serve logging to $1 restarts itself on new rules (rules_reload: it executes itself again, so
# its log goes on): waits up to 60 s for more 'listening on' lines than $2 (their count before the
# rules changed), and sets `port` to the new process's port (as wait_listening: the old process's
# shutdown and two sanitized bank loads on a loaded machine may take more than 10 s).
wait_restart_on_new_rules() {
  for _ in $(seq 600); do [[ $(grep -c 'listening on' "$1") -gt $2 ]] && break; sleep 0.1; done
  grep -q 'changed and loads' "$1" || fail "no restart on new rules: $(tail -5 "$1")"
  [[ $(grep -c 'listening on' "$1") -gt $2 ]] || fail "serve did not listen again after new rules"
  wait_listening "$1"
}
# Starts `faultline serve --config $1` in the background (serve_pid), logging to $tmp/serve.log;
# with an http section listening on 127.0.0.1:0, waits for it and sets `port` to the one chosen.
start_serve_http() {
  "$FAULTLINE" serve --config "$1" 2>>"$tmp/serve.log" &
  serve_pid=$!
  pids+=("$serve_pid")
  wait_listening "$tmp/serve.log"
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
# Starts the test API server over plain HTTP with GPU nodes $1 (comma-separated); sets `api` to
# its URL and `apiserver_pid`.
start_apiserver() {
  "$FL_BUILD/tests/tools/fake_apiserver" --port 0 --port-file "$tmp/port" --nodes "$1" \
    --labels nvidia.com/gpu.present=true 2>"$tmp/apiserver.log" &
  apiserver_pid=$!
  pids+=("$apiserver_pid")
  wait_file "$tmp/port" 20
  api="http://127.0.0.1:$(cat "$tmp/port")"
}
# Starts the test API server over HTTPS with the certificate of make_cluster_ca and GPU nodes $1
# (comma-separated); sets `api` to its URL.
start_tls_apiserver() {
  "$FL_BUILD/tests/tools/fake_apiserver" --port-file "$tmp/port" --nodes "$1" \
    --labels nvidia.com/gpu.present=true --tls-cert "$tmp/server.crt" --tls-key "$tmp/server.key" \
    2>"$tmp/apiserver.log" &
  pids+=($!)
  wait_file "$tmp/port" 20
  api="https://127.0.0.1:$(cat "$tmp/port")"
}
# GET $1 from that server, trusting the cluster CA. The tests' own requests carry the token
# "probe"; faultline's are told apart by theirs.
api_get() { curl -fsS --cacert "$tmp/ca.crt" -H 'Authorization: Bearer probe' "$api$1"; }
# The labelled scenarios (tests/scenarios/README.md) start at 2025-03-01T00:00:00Z (replay
# --boot-time of their dmesg files).
scenario_base=1740787200
# Writes the scenarios' background lines to $tmp/pool.txt: real kernel lines (the bundled gpud
# captures; the gpud and loghub corpora in directory $1 read in place when present) and seeded
# templates, without any line a signature or recovery rule could take for a fault or a recovery.
scenario_pool() {
  local corpora=$1
  {
    sed 's/^\[[^]]*\] //' "$FL_SOURCE"/tests/data/sample/gpu-node-01.dmesg
    zcat "$FL_SOURCE/tests/data/sample/gpu-node-02.dmesg.gz" | sed -n 's/^<[0-9]>\[[^]]*\] //p'
    if [[ -d $corpora/gpud ]]; then sed 's/^[0-9,]*-;//' "$corpora"/gpud/kmsg.1.log; fi
    if [[ -d $corpora/loghub ]]; then  # research-use data: read in place, never copied
      tr -d '\r' <"$corpora/loghub/Linux_2k.log" | sed 's/^.*\]: //'
    fi
    awk 'BEGIN { srand(42); for (i = 0; i < 2000; i++) { r = int(rand() * 3);
      if (r == 0) printf "IPv6: ADDRCONF(NETDEV_CHANGE): cali%08x: link becomes ready\n", int(rand()*2^31);
      else if (r == 1) printf "nvidia-nvswitch%d: open (major=510)\n", int(rand()*4);
      else printf "python3[%d]: segfault at %x ip %x sp %x error 4 in libc.so.6[7f7c7ac00000+d3d3000]\n", int(rand()*99999), int(rand()*2^31), int(rand()*2^31), int(rand()*2^31) } }'
  } | grep -v -E 'NVRM|SXid|NEURON_HW_ERR|Port: [0-9]+ Link|Link (up|down)|fallen off|Linux version|AER|GPU reset|lost carrier|mlx5|segfault at .* in libnccl|^\s' \
    >"$tmp/pool.txt"
  [[ $(wc -l <"$tmp/pool.txt") -gt 100 ]] || fail "no background"
}
# Generates the archive of scenario file $1 into new directory $2 (scenario_pool first).
gen_scenario() {
  mkdir "$2"
  awk -v out="$2" -v pool="$tmp/pool.txt" -v base="$scenario_base" -f "$FL_SOURCE/tests/scenarios/gen.awk" "$1"
}
