#!/usr/bin/env bash
# A SIGTERM sent while serve starts, before its handler is installed, still stops it once
# started, as a container's pid 1: there the kernel drops a signal whose action is the default
# one, and the pod would wait for SIGKILL at the end of its grace period. Serve runs as pid 1 of
# its own pid namespace; its start is held where it opens the decision log, a FIFO no one reads
# yet, while the SIGTERM is sent.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
if ! unshare --pid --fork true 2>/dev/null; then
  echo "skip: no pid namespace (unshare --pid needs CAP_SYS_ADMIN)"
  exit 77  # ctest reports it skipped (SKIP_RETURN_CODE)
fi
mkfifo "$tmp/decisions.fifo"
cat >"$tmp/config.yaml" <<YAML
decisions: $tmp/decisions.fifo
http: {listen: "127.0.0.1:0"}
YAML
unshare --pid --fork --kill-child "$FAULTLINE" serve --config "$tmp/config.yaml" \
  2>>"$tmp/serve.log" &
ns_pid=$!
pids+=("$ns_pid")
for _ in $(seq 100); do grep -qs 'loaded .* signatures' "$tmp/serve.log" && break; sleep 0.1; done
grep -q 'loaded .* signatures' "$tmp/serve.log" || fail "serve did not load its bank"
serve_pid=$(pgrep -P "$ns_pid")
[[ -n $serve_pid ]] || fail "no serve under unshare"
sleep 0.2 # serve waits in the FIFO's open
kill -TERM "$serve_pid"
cat "$tmp/decisions.fifo" >/dev/null &
pids+=($!)
for _ in $(seq 100); do kill -0 "$ns_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$ns_pid" 2>/dev/null; then
  kill -KILL "$serve_pid" # as pid 1 it ignores TERM, and unshare does too
  fail "serve (pid 1) still runs 10 s after a SIGTERM sent at start"
fi
wait "$ns_pid" || fail "serve exited $? after a SIGTERM sent at start"
grep -q 'stopped:' "$tmp/serve.log" || fail "serve did not stop as on a SIGTERM"
echo "ok: a SIGTERM sent before serve's handler stopped it once started (pid 1)"
