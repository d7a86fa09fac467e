#!/usr/bin/env python3
"""Writes a deterministic replay corpus: one kernel log per node, in real formats.

Odd nodes get `gpu-node-NN.dmesg` (`[uptime] msg`), even nodes `gpu-node-NN.syslog`
(`Mon DD HH:MM:SS gpu-node-NN kernel: msg`, year 2025: replay with --year 2025).

Background messages come from three pools, drawn with a seeded random.Random:
  - templates shaped like the gpud kernel captures, with varying numbers, PCI addresses, PIDs;
  - when --gpud exists: the messages of the gpud captures themselves (Apache-2.0);
  - when --loghub exists: the messages of the Linux, Thunderbird, BGL and HPC samples, re-emitted
    as kernel lines. loghub text is read in place at generation time and never stored in the repo
    (research-only licence: see /work/shared/corpora/SOURCES.md).
Pool lines that a signature of --rules matches (Python re over the RE2 patterns) are dropped, so
only the injected faults match. The faults (real lines) go to known nodes at known times; they are
printed and written to faults.tsv in --out.
"""
import argparse
import glob
import os
import random
import re
import sys

FAULTS = [  # (line, decides alone?)
    # https://github.com/leptonai/gpud components/accelerator/nvidia/xid/testdata
    ("NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s of waiting "
     "for RPC response from GPU4 GSP! Expected function 103 (GSP_RM_ALLOC) (0x2081 0x4).", True),
    # https://github.com/leptonai/gpud components/memory/testdata/dmesg.decode.iso.log
    ("NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception "
     "on (GPC 9, TPC 1, SM 1): Out Of Range Address", False),
    # https://github.com/NVIDIA/NVSentinel/issues/155
    ("NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus", True),
    # https://github.com/leptonai/gpud/pull/1174
    ("NVRM: Xid (PCI:0000:9b:00): 94, pid=1234, name=python3, Contained ECC error", False),
]
# A flood of one Xid 95 line on one node (~800K Xid 95 lines on one node: NVIDIA/NVSentinel#1120;
# the line as tests/scenarios/xid95-flood-800k.scn writes it).
REPEATED = "NVRM: Xid (PCI:0000:3b:00): 95, pid=1234, name=python3, Uncontained ECC error at address 0x1c"
MONTHS = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()


def template(r):
    """One benign kernel message (same shapes as bench/micro_bench.cc)."""
    h = lambda n: "%0*x" % (n, r.getrandbits(4 * n))
    pci = lambda: "0000:%02x:%02x.%d" % (r.randrange(256), r.randrange(32), r.randrange(2))
    k = r.randrange(14)
    if k == 0:
        return "IPv6: ADDRCONF(NETDEV_CHANGE): cali%s: link becomes ready" % h(11)
    if k == 1:
        return "nvidia-nvswitch%d: open (major=510)" % r.randrange(8)
    if k == 2:
        return ("mlx5_core %s: E-Switch: Total vports %d, per vport: max uc(128) max mc(2048)"
                % (pci(), r.randint(2, 16)))
    if k == 3:
        return "mlx5_core %s: Port module event: module %d, Cable %s" % (
            pci(), r.randrange(8), r.choice(["plugged", "unplugged"]))
    if k == 4:
        return "ata%d: SATA link down (SStatus 0 SControl 300)" % r.randint(1, 8)
    if k == 5:
        return ("usb %d-%d.%d: New USB device found, idVendor=%s, idProduct=%s, bcdDevice= 1.00"
                % (r.randint(1, 4), r.randint(1, 4), r.randint(1, 4), h(4), h(4)))
    if k == 6:
        return ('audit: type=1400 audit(%d.%03d:%d): apparmor="STATUS" operation="profile_replace" '
                'profile="unconfined" name="snap.lxd.hook.install" pid=%d comm="apparmor_parser"'
                % (r.randint(1700000000, 1750000000), r.randrange(1000), r.randint(1, 9999),
                   r.randint(1000, 4000000)))
    if k == 7:
        return "loop%d: detected capacity change from 0 to %d" % (r.randrange(41),
                                                                  r.randint(8, 400000))
    if k == 8:
        return ("perf: interrupt took too long (%d > %d), lowering "
                "kernel.perf_event_max_sample_rate to %d"
                % (r.randint(2500, 9999), r.randint(2500, 9999), r.randint(20000, 80000)))
    if k == 9:
        return "EDAC amd64: MC: %d:     %dMB %d:     %dMB" % (
            r.randrange(4), r.randrange(32769), r.randint(1, 3), r.randrange(32769))
    if k == 10:
        # a driver component's load banner; the `NVRM: GPU at PCI:` UUID line is a signature
        return ("nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms  "
                "%d.%d.%02d" % (r.choice([535, 550, 570]), r.randrange(200), r.randrange(100)))
    if k == 11:
        return "kauditd_printk_skb: %d callbacks suppressed" % r.randint(1, 200)
    if k == 12:
        return "mlx5_core %s enp%ds0f%dnp%d: renamed from eth%d" % (
            pci(), r.randint(1, 200), r.randrange(2), r.randrange(2), r.randrange(10))
    return "device veth%s entered promiscuous mode" % h(7)


def read_lines(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return [l.rstrip("\r\n") for l in f]


def gpud_pool(d):
    """Messages of the gpud kernel captures, envelopes stripped."""
    env = re.compile(r"^(?:<\d>)?\[[^\]]*\] |^\d+,\d+,\d+,[^;]*;|^\w+ *:\w+ *: \S+ ")
    out = []
    for name in ("dmesg.txt", "kmsg.1.log", "kmsg.2.peermem.log", "dmesg-with-xid-119.log",
                 "memory-dmesg.decode.iso.log", "nccl-dmesg.decode.iso.log"):
        for l in read_lines(os.path.join(d, name)):
            m = env.match(l)
            if m and l[m.end():].strip():
                out.append(l[m.end():])
    return out


def loghub_pool(d):
    """Messages of the loghub kernel-ish samples (read in place, never copied)."""
    out = []
    for l in read_lines(os.path.join(d, "Linux_2k.log")):  # Mon DD HH:MM:SS host msg
        out.append(l.split(None, 4)[4])
    for l in read_lines(os.path.join(d, "Thunderbird_2k.log")):  # 8 header fields, then msg
        out.append(l.split(None, 8)[8])
    for l in read_lines(os.path.join(d, "BGL_2k.log")):  # 6 header fields, RAS COMP LEVEL msg
        out.append(l.split(None, 6)[6])
    for l in read_lines(os.path.join(d, "HPC_2k.log")):  # 6 header fields, then msg
        out.append(l.split(None, 6)[6])
    return [m.strip() for m in out if m.strip()]


def signature_patterns(rules_dir):
    try:
        import yaml
    except ImportError:
        print("make_corpus: no PyYAML: pool lines are not filtered", file=sys.stderr)
        return []
    pats = []
    for f in sorted(glob.glob(os.path.join(rules_dir, "*.yaml"))):
        for s in (yaml.safe_load(open(f)) or {}).get("signatures", []):
            pats.append(re.compile(s["pattern"]))
    return pats


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--lines", type=int, default=2000000, help="total lines (all nodes)")
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--fault-every", type=int, default=100000, help="one fault per N lines")
    ap.add_argument("--repeat-every", type=int, default=0,
                    help="storm: every Nth line of the first node repeats one Xid 95 line")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rules", default=os.path.join(here, "..", "rules"))
    # The shared corpora beside the project (FL_CORPORA=/none: without them, as the tests run
    # where they are absent); each pool is left out when its directory is.
    corpora = os.environ.get("FL_CORPORA", os.path.join(here, "..", "..", "shared", "corpora"))
    ap.add_argument("--gpud", default=os.path.join(corpora, "gpud"))
    ap.add_argument("--loghub", default=os.path.join(corpora, "loghub"))
    a = ap.parse_args()

    pats = signature_patterns(a.rules)
    benign = lambda pool: sorted({m for m in pool if not any(p.search(m) for p in pats)})
    gpud = benign(gpud_pool(a.gpud)) if os.path.isdir(a.gpud) else []
    loghub = benign(loghub_pool(a.loghub)) if os.path.isdir(a.loghub) else []
    print("pools: %d gpud, %d loghub messages (after dropping matching ones)"
          % (len(gpud), len(loghub)), file=sys.stderr)

    r = random.Random(a.seed)
    per_node = a.lines // a.nodes
    n_faults = max(1, a.lines // a.fault_every)
    # Fault k goes to node k % nodes, at a seeded line of that node's file.
    faults = {}
    for k in range(n_faults):
        faults[(k % a.nodes, r.randrange(per_node))] = FAULTS[k % len(FAULTS)]
    os.makedirs(a.out, exist_ok=True)
    manifest = open(os.path.join(a.out, "faults.tsv"), "w")
    manifest.write("node\tfile\tline\ttime\tdecides_alone\tfault\n")
    for n in range(a.nodes):
        node = "gpu-node-%02d" % (n + 1)
        dmesg = n % 2 == 0
        path = os.path.join(a.out, node + (".dmesg" if dmesg else ".syslog"))
        t = 100.0 + n  # dmesg: uptime (s); syslog: seconds since 2025-02-14 00:00:00
        with open(path, "w") as f:
            for i in range(per_node):
                t += r.expovariate(100.0)  # ~100 lines/s per node
                fault = faults.get((n, i))
                if n == 0 and a.repeat_every and i % a.repeat_every == 0:
                    msg = REPEATED  # not in faults.tsv: a flood the matcher must shrug off
                elif fault:
                    msg = fault[0]
                else:
                    u = r.random()
                    if loghub and u < 0.4:
                        msg = r.choice(loghub)
                    elif gpud and u < (0.6 if loghub else 0.3):
                        msg = r.choice(gpud)
                    else:
                        msg = template(r)
                if dmesg:
                    stamp = "[%12.6f] " % t
                else:
                    s = int(t)
                    stamp = "Feb %2d %02d:%02d:%02d %s kernel: " % (
                        14 + s // 86400, s // 3600 % 24, s // 60 % 60, s % 60, node)
                f.write(stamp + msg + "\n")
                if fault:
                    when = stamp.strip() if dmesg else stamp[:15] + " 2025"
                    manifest.write("%s\t%s\t%d\t%s\t%s\t%s\n" % (
                        node, os.path.basename(path), i + 1, when, fault[1], fault[0]))
                    print("fault: %s %s:%d %s %s" % (node, os.path.basename(path), i + 1, when,
                                                     fault[0][:60]), file=sys.stderr)
    manifest.close()


if __name__ == "__main__":
    main()
