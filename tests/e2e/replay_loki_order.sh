#!/usr/bin/env bash
# `faultline replay` of a `logcli query --output=jsonl` export decides the same in either order:
# logcli writes newest first unless --forward, and lines of one second (a shipper that stamps
# kern.log lines with their syslog time) then come in the reverse of the order they were logged.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"

labels='{"host":"gpu-node-1","job":"node/kern","transport":"kernel"}'
entry() { printf '{"labels":%s,"line":"%s","timestamp":"%s"}\n' "$labels" "$2" "$1"; }
# replay_both NAME: replays $tmp/NAME-forward.jsonl and the same reversed (as logcli writes it),
# the decisions of each ORDER to $tmp/NAME-ORDER.out.
replay_both() {
  tac "$tmp/$1-forward.jsonl" >"$tmp/$1-backward.jsonl"
  for order in forward backward; do
    "$FAULTLINE" replay --decisions "$tmp/$1-$order.out" "$tmp/$1-$order.jsonl" 2>>"$tmp/replay.log"
  done
}
# A port that goes DOWN and is ACTIVE again in the same second (a healthy link flap), and a line
# past the 5 minutes ib-port-down-lasting waits for the ACTIVE.
{
  entry 2026-11-29T11:59:00Z "usb 1-1: new high-speed USB device number 2 using xhci_hcd"
  entry 2026-11-29T12:00:00Z "mlx5_core 0000:08:00.0 mlx5_0: Port: 1 Link DOWN"
  entry 2026-11-29T12:00:00Z "mlx5_core 0000:08:00.0 mlx5_0: Port: 1 Link ACTIVE"
  entry 2026-11-29T12:30:00Z "usb 1-1: USB disconnect, device number 2"
} >"$tmp/flap-forward.jsonl"
replay_both flap
for order in forward backward; do
  [[ ! -s "$tmp/flap-$order.out" ]] || fail "$order: a healthy flap tainted: $(cat "$tmp/flap-$order.out")"
done

# The multi-line fallen-off-the-bus report shipped a line per entry, in one second: the tail is
# decided with the GPU its head names, newest first as oldest first (a line of another second
# tells which order the export has).
{
  entry 2026-11-29T11:59:00Z "usb 1-1: new high-speed USB device number 2 using xhci_hcd"
  entry 2026-11-29T12:00:00Z "NVRM: The NVIDIA GPU 0000:b3:00.0"
  entry 2026-11-29T12:00:00Z "NVRM: (PCI ID: 10de:26b5) installed in this system has"
  entry 2026-11-29T12:00:00Z "NVRM: fallen off the bus and is not responding to commands."
} >"$tmp/bus-forward.jsonl"
replay_both bus
for order in forward backward; do
  [[ "$(jq -r '"\(.node) \(.rule) \(.reason)"' "$tmp/bus-$order.out")" == \
    "gpu-node-1 gpu-fallen-off-bus-unjoined a fatal hit on pci=0000:b3:00" ]] ||
    fail "bus $order: $(cat "$tmp/bus-$order.out")"
done
echo "PASS"
