#!/usr/bin/env bash
# Replay of a larger archive built here: real-format background (the gpud captures, the loghub
# samples read in place from ../shared/corpora when present, and seeded kernel-line templates)
# with real fault lines placed on known nodes, compressed as .zst, .gz and plain, in the dmesg,
# syslog and loki-jsonl formats. Exactly the nodes with real faults are tainted; flaps below
# threshold, sympathetic Xids, application Xids below their count and a pod's fake kernel lines
# are not.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"

corpora=${FL_CORPORA:-$FL_SOURCE/../shared/corpora}  # FL_CORPORA=/none tests without them
# Background messages, one per line, without any timestamp envelope.
{
  sed 's/^\[[^]]*\] //' "$FL_SOURCE"/tests/data/sample/gpu-node-01.dmesg
  zcat "$FL_SOURCE/tests/data/sample/gpu-node-02.dmesg.gz" | sed -n 's/^<[0-9]>\[[^]]*\] //p'
  if [[ -d $corpora/gpud ]]; then
    sed 's/^[0-9,]*-;//' "$corpora"/gpud/kmsg.1.log
    sed -n 's/^\[[^]]*\] //p' "$corpora"/gpud/dmesg-with-xid-119.log | grep -v 'Xid'
  fi
  if [[ -d $corpora/loghub ]]; then  # research-use data: read in place, never copied
    for s in Linux Thunderbird; do tr -d '\r' <"$corpora/loghub/${s}_2k.log" | sed 's/^.*\]: //'; done
  fi
} | grep -v -E 'NVRM: Xid|SXid|NEURON_HW_ERR|Link DOWN|fallen off' >"$tmp/background.txt"
[[ $(wc -l <"$tmp/background.txt") -gt 100 ]] || fail "no background"

# Seeded kernel-line templates in real formats, including near misses of the signatures.
awk -v seed=42 'BEGIN { srand(seed);
  for (i = 0; i < 8000; i++) { r = int(rand() * 6);
    if (r == 0) printf "IPv6: ADDRCONF(NETDEV_CHANGE): cali%08x: link becomes ready\n", int(rand()*2^31);
    else if (r == 1) printf "nvidia-nvswitch%d: open (major=510)\n", int(rand()*4);
    else if (r == 2) printf "mlx5_core 0000:%02x:00.0 mlx5_%d: Port: 1 Link ACTIVE\n", int(rand()*256), int(rand()*8);
    else if (r == 3) printf "NVRM: GPU at PCI:0000:%02x:00: GPU-%08x-893a-7cbb-c4cf-81472f89a462\n", int(rand()*256), int(rand()*2^31);
    else if (r == 4) printf "audit: type=1400 audit(%d.%03d:%d): apparmor=\"DENIED\" operation=\"open\" profile=\"cri-containerd.apparmor.d\"\n", 1700000000+i, int(rand()*1000), i;
    else printf "%s[%d]: segfault at %x ip %x sp %x error 4 in libc.so.6[7f7c7ac00000+d3d3000]\n", "python3", int(rand()*99999), int(rand()*2^31), int(rand()*2^31), int(rand()*2^31);
  } }' >>"$tmp/background.txt"
bg_lines=$(wc -l <"$tmp/background.txt")

# dmesg `[uptime] msg` of the whole background with fault lines inserted after line $2 (each
# fault line 10 s after the one before). Usage: dmesg_with NODE AFTER_LINE FAULT...
dmesg_with() {
  local after=$1
  shift
  awk -v after="$after" -v faults="$(printf '%s\n' "$@")" 'BEGIN { n = split(faults, f, "\n") }
    { t = NR * 0.05; printf "[%12.6f] %s\n", t, $0;
      if (NR == after) for (i = 1; i <= n; i++) if (f[i] != "") printf "[%12.6f] %s\n", t + i * 10, f[i] }' \
    "$tmp/background.txt"
}
a=$tmp/archive
mkdir "$a"
# gpu-a: GPU fallen off the bus (Xid 79, akash-network/support#209)
dmesg_with 500 "NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus." | zstd -q >"$a/gpu-a.dmesg.zst"
# gpu-b: NVSwitch fatal SXid with its continuation records (leptonai/gpud sxid README)
dmesg_with 700 \
  "nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up" \
  "nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 20034, Severity 1 Engine instance 60 Sub-engine instance 00" |
  gzip >"$a/gpu-b.dmesg.gz"
# gpu-c: Neuron SRAM uncorrectable error, as syslog (Neuron runtime troubleshooting guide)
awk '{ printf "Mar  3 11:%02d:%02d gpu-c kernel: %s\n", int(NR / 60) % 60, NR % 60, $0 }' "$tmp/background.txt" >"$a/gpu-c.log"
echo "Mar  3 12:00:00 gpu-c kernel: NEURON_HW_ERR=SRAM_UNCORRECTABLE_ERROR instance-id=i-0592464924bd45322 hostname=ip-172-31-61-252 nd-id=0 nc-id=0 serial-num=19fcda00f5ff6eb9 action=TERMINATE_INSTANCE" >>"$a/gpu-c.log"
# gpu-d: IB port flapping three times within the hour (line format of leptonai/gpud#1209)
dmesg_with 900 \
  "mlx5_core 0000:53:00.0 mlx5_3: Port: 1 Link DOWN" "mlx5_core 0000:53:00.0 mlx5_3: Port: 1 Link ACTIVE" \
  "mlx5_core 0000:53:00.0 mlx5_3: Port: 1 Link DOWN" "mlx5_core 0000:53:00.0 mlx5_3: Port: 1 Link ACTIVE" \
  "mlx5_core 0000:53:00.0 mlx5_3: Port: 1 Link DOWN" "mlx5_core 0000:53:00.0 mlx5_3: Port: 1 Link ACTIVE" |
  zstd -q >"$a/gpu-d.dmesg.zst"
# gpu-e: a single flap stays below the threshold
dmesg_with 900 "mlx5_core 0000:53:00.0 mlx5_3: Port: 1 Link DOWN" "mlx5_core 0000:53:00.0 mlx5_3: Port: 1 Link ACTIVE" >"$a/gpu-e.dmesg"
# gpu-f: sympathetic Xid 45 teardown burst and one contained ECC error (application level)
xid45=()
for _ in $(seq 50); do xid45+=("NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149"); done
dmesg_with 300 "${xid45[@]}" "NVRM: Xid (PCI:0000:9b:00): 94, pid=1234, name=python3, Contained ECC error" | zstd -q >"$a/gpu-f.dmesg.zst"
# gpu-h: two Xid 13 on one GPU stay below the repeat count (leptonai/gpud memory capture)
dmesg_with 100 \
  "NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Global Exception on (GPC 8, TPC 5, SM 1): Multiple Warp Errors" \
  "NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Global Exception on (GPC 8, TPC 5, SM 1): Multiple Warp Errors" >"$a/gpu-h.dmesg"
# gpu-g: a pod printing fake kernel fault lines to stdout, as logcli jsonl
for i in $(seq 10); do
  for line in "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus" \
    "NEURON_HW_ERR=HBM_UNCORRECTABLE_ERROR instance-id=i-0 nd-id=0 nc-id=0" \
    "nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up"; do
    jq -nc --arg l "$line" --arg t "2025-03-03T11:0$((i % 10)):00.000000000Z" \
      '{labels: {namespace: "train", pod: "evil-0", node_name: "gpu-g", transport: "kernel"}, line: $l, timestamp: $t}'
  done
done | gzip >"$a/gpu-g.loki.jsonl.gz"

"$FAULTLINE" replay --year 2025 --decisions "$tmp/decisions.jsonl" "$a"/* 2>"$tmp/replay.log"
# The background holds kernel boot banners (the loghub Linux sample, when present) after the
# faults: a reboot lifts the taints of faults it repairs (GPU fallen off the bus, fatal SXid).
# The seeded background also prints `Link ACTIVE` for gpu-d's flapping port (0000:53:00.0 mlx5_3
# port 1) minutes after the flaps, and no DOWN follows: the port is stable, the taint lifts.
expected="gpu-a taint xid-fatal
gpu-b taint sxid-fatal
gpu-c taint neuron-hw-fatal
gpu-d taint ib-port-flap
gpu-d untaint ib-port-flap"
if [[ -d $corpora/loghub ]]; then
  expected+=$'\ngpu-a untaint xid-reboot-required\ngpu-b untaint sxid-fatal'
fi
actions=$(jq -r '"\(.node) \(.action) \(.rule)"' "$tmp/decisions.jsonl" | sort)
[[ "$actions" == "$(sort <<<"$expected")" ]] || fail "decisions: $actions"
grep -q '(0 malformed)' "$tmp/replay.log" || fail "malformed lines: $(cat "$tmp/replay.log")"
echo "PASS ($bg_lines background lines per node, loghub $([[ -d $corpora/loghub ]] && echo used || echo absent))"
