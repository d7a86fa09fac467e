#!/usr/bin/env bash
# A SIGTERM sent while serve starts, before its handler is installed, still stops it once
# started, as a container's pid 1: there the kernel drops a signal whose action is the default
# one, and the pod would wait for SIGKILL at the end of its grace period. Serve runs as pid 1 of
# its own pid namespace; its start is held where it reads its configuration, a FIFO, while the
# SIGTERM is sent. The decision log, a FIFO that held it before, opens for reading too, and such
# an open of a FIFO does not wait.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
if ! unshare --pid --fork true 2>/dev/null; then
  echo "skip: no pid namespace (unshare --pid needs CAP_SYS_ADMIN)"
  exit 77  # ctest reports it skipped (SKIP_RETURN_CODE)
fi
mkfifo "$tmp/config.fifo"
unshare --pid --fork --kill-child "$FAULTLINE" serve --config "$tmp/config.fifo" \
  2>>"$tmp/serve.log" &
ns_pid=$!
pids+=("$ns_pid")
# Opening the FIFO for writing waits for serve to open it for reading, and serve's read then waits
# for the text until the FIFO is closed: the SIGTERM is sent in that wait, past runCli's blocking of
# it and before the handler.
timeout 60 bash -c 'exec 3>"$1"
  kill -TERM "$(pgrep -P "$2")"
  printf "decisions: %s\nhttp: {listen: \"127.0.0.1:0\"}\n" "$3" >&3' \
  _ "$tmp/config.fifo" "$ns_pid" "$tmp/decisions.jsonl" ||
  fail "serve did not open its configuration within 60 s"
for _ in $(seq 600); do kill -0 "$ns_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$ns_pid" 2>/dev/null; then
  kill -KILL "$(pgrep -P "$ns_pid")" # as pid 1 it ignores TERM, and unshare does too
  fail "serve (pid 1) still runs 60 s after a SIGTERM sent at start"
fi
wait "$ns_pid" || fail "serve exited $? after a SIGTERM sent at start"
grep -q 'stopped:' "$tmp/serve.log" || fail "serve did not stop as on a SIGTERM"
echo "ok: a SIGTERM sent before serve's handler stopped it once started (pid 1)"
