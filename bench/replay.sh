#!/usr/bin/env bash
# End-to-end replay benchmark. Builds nothing: pass the build directory (default: build).
#
#   bench/replay.sh [BUILD_DIR]      env: LINES (default 2000000), NODES (8), WORK (temp dir),
#                                         CPU (core to pin to, 1), RUNS (3)
#
# Cases: (a) the embedded sample (`faultline replay` with no files); (b) a generated corpus
# (bench/make_corpus.py) as plain text and (c) the same files as .zst, with one thread pinned to
# CPU; (d) the .zst files with --threads 2 on CPUs 0 and 1 (one file share per core). Each case
# runs RUNS times; the table gives the median of the lines/s and MB/s that faultline prints on
# stderr. Baselines on the same core: `zstd -d -c` of the .zst files and `wc -l` of the plain ones.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
lines=${LINES:-2000000}
nodes=${NODES:-8}
cpu=${CPU:-1}
runs=${RUNS:-3}
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
need "$fl" python3 taskset zstd
mkdir -p "$work/plain" "$work/zst"
pin=(taskset -c "$cpu")

echo "generating $lines lines for $nodes nodes in $work ..." >&2
python3 "$here/make_corpus.py" --out "$work/plain" --lines "$lines" --nodes "$nodes" 2>"$work/corpus.log"
plain=("$work"/plain/*.dmesg "$work"/plain/*.syslog)
for f in "${plain[@]}"; do
  zstd -q -f -3 "$f" -o "$work/zst/$(basename "$f").zst"
done
zst=("$work"/zst/*.zst)
expected_hits=$(($(wc -l <"$work/plain/faults.tsv") - 1))

median() { sort -g | sed -n "$(((runs + 1) / 2))p"; }

# Runs faultline RUNS times with $threads threads on $cpus; prints "lines MB hits decisions
# median_lines/s median_MB/s all_MB/s".
threads=1
cpus=$cpu
replay() {
  local out=() summary
  for ((i = 0; i < runs; i++)); do
    summary=$(taskset -c "$cpus" "$fl" replay --threads "$threads" --year 2025 --decisions /dev/null "$@" 2>&1 >/dev/null |
      grep 'replayed') || { echo "replay.sh: faultline replay failed" >&2; exit 1; }
    out+=("$(sed -E 's/.*: ([0-9]+) lines .*, ([0-9.]+) MB text, ([0-9]+) hits, ([0-9]+) decisions .*\(([0-9]+) lines\/s, ([0-9.]+) MB\/s\).*/\1 \2 \3 \4 \5 \6/' <<<"$summary")")
  done
  local first lps mbs all
  read -ra first <<<"${out[0]}"
  lps=$(printf '%s\n' "${out[@]}" | awk '{print $5}' | median)
  mbs=$(printf '%s\n' "${out[@]}" | awk '{print $6}' | median)
  all=$(printf '%s\n' "${out[@]}" | awk '{print $6}' | paste -sd/)
  echo "${first[0]} ${first[1]} ${first[2]} ${first[3]} $lps $mbs $all"
}

# Times a command RUNS times on the pinned core; prints the median seconds.
timed() {
  local t0
  for ((i = 0; i < runs; i++)); do
    t0=$EPOCHREALTIME
    "${pin[@]}" "$@" >/dev/null
    awk -v a="$EPOCHREALTIME" -v b="$t0" 'BEGIN { printf "%.4f\n", a - b }'
  done | median
}

read -r s_lines s_mb s_hits s_dec s_lps s_mbs s_all < <(replay)
read -r p_lines p_mb p_hits p_dec p_lps p_mbs p_all < <(replay "${plain[@]}")
read -r z_lines z_mb z_hits z_dec z_lps z_mbs z_all < <(replay "${zst[@]}")
threads=2 cpus=0,1
read -r d_lines d_mb d_hits d_dec d_lps d_mbs d_all < <(replay "${zst[@]}")
t_zstd=$(timed zstd -d -c "${zst[@]}")
t_wc=$(timed wc -l "${plain[@]}")
zst_mb=$(du -cb "${zst[@]}" | tail -1 | awk '{printf "%.1f", $1 / 1e6}')
rate() { awk -v n="$1" -v t="$2" 'BEGIN { printf "%.0f", n / t }'; }
mbrate() { awk -v n="$1" -v t="$2" 'BEGIN { printf "%.1f", n / t }'; }

echo
echo "faultline replay, pinned to CPU $cpu, median of $runs runs ($(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg))"
echo
echo "| case | lines | MB text | hits / decisions | lines/s | MB/s (text) | MB/s of each run |"
echo "| --- | ---: | ---: | --- | ---: | ---: | --- |"
echo "| (a) embedded sample | $s_lines | $s_mb | $s_hits / $s_dec | $s_lps | $s_mbs | $s_all |"
echo "| (b) corpus, plain | $p_lines | $p_mb | $p_hits / $p_dec | $p_lps | $p_mbs | $p_all |"
echo "| (c) corpus, .zst ($zst_mb MB) | $z_lines | $z_mb | $z_hits / $z_dec | $z_lps | $z_mbs | $z_all |"
echo "| (d) corpus, .zst, --threads 2 on CPUs 0,1 | $d_lines | $d_mb | $d_hits / $d_dec | $d_lps | $d_mbs | $d_all |"
echo "| baseline: zstd -d -c (c) | $p_lines | $p_mb | | $(rate "$p_lines" "$t_zstd") | $(mbrate "$p_mb" "$t_zstd") | ${t_zstd}s |"
echo "| baseline: wc -l (b) | $p_lines | $p_mb | | $(rate "$p_lines" "$t_wc") | $(mbrate "$p_mb" "$t_wc") | ${t_wc}s |"
echo
echo "Two cores over one: $(awk -v a="$d_lps" -v b="$z_lps" 'BEGIN { printf "%.2fx", a / b }') (d over c)."
echo "Corpus: $work/plain ($nodes nodes; $expected_hits faults injected, see faults.tsv)."
# Every injected fault line hits at least once (some match two signatures, e.g. an Xid code and
# its own family's signature), and plain and .zst agree.
if [[ $p_hits != "$z_hits" || $p_hits -lt $expected_hits ]]; then
  echo "WARNING: $expected_hits fault lines injected, but $p_hits hits (plain) and $z_hits (.zst)"
fi
