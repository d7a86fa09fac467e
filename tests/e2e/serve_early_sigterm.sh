#!/usr/bin/env bash
# A SIGTERM sent while serve starts, before its handler is installed, still stops it once
# started, as a container's pid 1: there the kernel drops a signal whose action is the default
# one, and the pod would wait for SIGKILL at the end of its grace period. Serve runs as pid 1 of
# its own pid namespace; its start is held where it opens its configuration, a FIFO no one writes
# yet (the open waits for a writer), while the SIGTERM is sent. The decision log opened for reading
# too (a FIFO opened so does not wait), which held it before, no longer does.
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
# In the open (the kernel's fifo wait, fs/pipe.c wait_for_partner): past runCli's blocking of
# SIGTERM, before the handler.
waiting() {
  serve_pid=$(pgrep -P "$ns_pid")
  [[ -n $serve_pid && $(cat "/proc/$serve_pid/wchan" 2>/dev/null) == wait_for_partner ]]
}
for _ in $(seq 600); do waiting && break; sleep 0.1; done
waiting || fail "serve does not wait in its configuration's open: wchan" \
  "$(cat "/proc/$serve_pid/wchan" 2>/dev/null)"
kill -TERM "$serve_pid"
printf 'decisions: %s\nhttp: {listen: "127.0.0.1:0"}\n' "$tmp/decisions.jsonl" >"$tmp/config.fifo"
for _ in $(seq 600); do kill -0 "$ns_pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$ns_pid" 2>/dev/null; then
  kill -KILL "$serve_pid" # as pid 1 it ignores TERM, and unshare does too
  fail "serve (pid 1) still runs 60 s after a SIGTERM sent at start"
fi
wait "$ns_pid" || fail "serve exited $? after a SIGTERM sent at start"
grep -q 'stopped:' "$tmp/serve.log" || fail "serve did not stop as on a SIGTERM"
echo "ok: a SIGTERM sent before serve's handler stopped it once started (pid 1)"
