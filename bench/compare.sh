#!/usr/bin/env bash
# faultline's matcher against the tools people use, on the same bytes, in one run; writes the table
# with the machine's details to bench/RESULTS.md (and prints it).
#
#   bench/compare.sh [BUILD_DIR]   (default: build; needs the faultline and faultline_match_file
#                                   targets built, Release)
#   env: LINES (1000000), N (300 patterns), CPU (core to pin to, 1), RUNS (3), SLOW_LINES (50000:
#        the per-line Python and Go loops run on the first SLOW_LINES lines only), WORK (temp dir),
#        OUT (bench/RESULTS.md)
#
# Corpus: bench/make_corpus.py (seeded; real kernel formats, dmesg and syslog files, 8 nodes, one
# fault per 100,000 lines), concatenated into corpus.log. Patterns: the bench bank of N patterns
# (bench/bench_bank.h: the real bank's kernel signatures, then per-Xid/SXid/NCCL/mlx5 variants).
# Engines, each pinned to CPU:
#   faultline matcher  faultline_match_file: lines in memory, 8192-line batches, Matcher::match;
#                      also with N=20 (bank size must not matter) and on a storm corpus (seed 2,
#                      1% fault lines, and every 20th line of one node repeating one Xid 95 line);
#                      on raw lines (timestamps included, as grep sees them) and on the records
#                      the format parsers give (the message alone, as the service matches it)
#   memchr             the same program's line split alone (the floor)
#   faultline replay   `faultline replay` of the corpus as .zst files to decisions:
#                      decompression, parsing, matching, correlation; with the production bank
#                      (rules/), and with it grown to N patterns by the bench bank's variants
#                      (quiet and storm corpus)
#   grep -E -c -f      GNU grep, LC_ALL=C, the patterns translated to POSIX ERE
#   rg -c -f           ripgrep, one thread, the RE2 patterns without group names; ripgrep is
#                      installed with apt if missing
#   python re loop     every pattern's re.search on every line (as Konduktor matches)
#   go regexp loop     every pattern's MatchString on every line (as node-problem-detector does);
#                      golang-go is installed with apt if missing
# MB/s counts text bytes (newlines included), MB = 10^6 bytes. In-process engines report the best
# of RUNS passes, whole-process ones the median wall time of RUNS runs (start-up included).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-build}" && pwd)
lines=${LINES:-1000000}
n=${N:-300}
cpu=${CPU:-1}
runs=${RUNS:-3}
slow=${SLOW_LINES:-50000}
out=${OUT:-$here/RESULTS.md}
# shellcheck source=bench/lib.sh
source "$here/lib.sh"
mf=$build/bench/faultline_match_file
need "$fl" "$mf"
missing=()
command -v go >/dev/null || missing+=(golang-go)
command -v rg >/dev/null || missing+=(ripgrep)
if ((${#missing[@]})); then
  echo "installing ${missing[*]} ..." >&2
  sudo_=""; [[ $(id -u) == 0 ]] || sudo_=sudo
  $sudo_ apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
pin=(taskset -c "$cpu")
mkdir -p "$work/plain" "$work/zst" "$work/storm"

echo "corpus: $lines lines in $work ..." >&2
python3 "$here/make_corpus.py" --out "$work/plain" --lines "$lines" --nodes 8 --seed 1 \
  2>"$work/corpus.log.txt" >/dev/null
cat "$work"/plain/*.dmesg "$work"/plain/*.syslog >"$work/corpus.log"
# Storm: 1% of lines are faults, and every 20th line of one node repeats one Xid 95 line.
python3 "$here/make_corpus.py" --out "$work/storm" --lines "$lines" --nodes 8 --seed 2 \
  --fault-every 100 --repeat-every 20 2>/dev/null >/dev/null
cat "$work"/storm/*.dmesg "$work"/storm/*.syslog >"$work/storm.log"
storm_bytes=$(stat -c %s "$work/storm.log")
mkdir -p "$work/storm-zst"
for f in "$work"/plain/*.dmesg "$work"/plain/*.syslog; do
  zstd -q -f -3 "$f" -o "$work/zst/$(basename "$f").zst"
done
for f in "$work"/storm/*.dmesg "$work"/storm/*.syslog; do
  zstd -q -f -3 "$f" -o "$work/storm-zst/$(basename "$f").zst"
done
head -n "$slow" "$work/corpus.log" >"$work/slow.log"
bytes=$(stat -c %s "$work/corpus.log")
slow_bytes=$(stat -c %s "$work/slow.log")

# Patterns: RE2 as they are (rg, Python, Go) and as POSIX ERE for grep.
"$mf" --patterns "$n" >"$work/pats.re2"
# rg joins the patterns into one regex: group names would repeat, so drop them.
sed -E 's/\(\?P<[^>]+>/(/g' "$work/pats.re2" >"$work/pats.rg"
python3 "$here/re2_to_ere.py" "$work/pats.re2" "$work/pats.ere"

cat >"$work/loop.py" <<'EOF'
import re, sys, time
pats = [re.compile(l.rstrip("\n")) for l in open(sys.argv[1])]
data = open(sys.argv[2], "rb").read().decode("utf-8", "replace").split("\n")
if data and data[-1] == "": data.pop()
t0 = time.perf_counter(); matching = 0
for line in data:
    hit = False
    for p in pats:
        if p.search(line): hit = True
    matching += hit
print(matching, time.perf_counter() - t0)
EOF
mkdir -p "$work/goloop"
cat >"$work/goloop/main.go" <<'EOF'
package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"time"
)

func main() {
	var pats []*regexp.Regexp
	pf, _ := os.Open(os.Args[1])
	ps := bufio.NewScanner(pf)
	for ps.Scan() {
		pats = append(pats, regexp.MustCompile(ps.Text()))
	}
	data, _ := os.ReadFile(os.Args[2])
	var lines []string
	start := 0
	for i, b := range data {
		if b == '\n' {
			lines = append(lines, string(data[start:i]))
			start = i + 1
		}
	}
	t0 := time.Now()
	matching := 0
	for _, l := range lines {
		hit := false
		for _, p := range pats {
			if p.MatchString(l) {
				hit = true
			}
		}
		if hit {
			matching++
		}
	}
	fmt.Println(matching, time.Since(t0).Seconds())
}
EOF
(cd "$work/goloop" && GOCACHE=$work/gocache GO111MODULE=off go build -o "$work/goloop/goloop" main.go)

median() { sort -g | sed -n "$(((runs + 1) / 2))p"; }
# Median wall seconds of RUNS runs of a command (its stdout to $work/last.out).
timed() {
  for ((i = 0; i < runs; i++)); do
    local t0=$EPOCHREALTIME
    "${pin[@]}" "$@" >"$work/last.out" || { echo "compare.sh: failed: $*" >&2; exit 1; }
    awk -v a="$EPOCHREALTIME" -v b="$t0" 'BEGIN { printf "%.4f\n", a - b }'
  done | median
}
rows=()
row() { rows+=("$1|$2|$3|$4|$5"); } # engine, bytes, lines, seconds, matching lines

echo "faultline matcher, memchr ..." >&2
# The files in corpus.log's order (the same bytes), so that each is also parsed as its format.
mf_out=$("${pin[@]}" "$mf" "$n" "$work"/plain/*.dmesg "$work"/plain/*.syslog --reps "$runs")
mf20_out=$("${pin[@]}" "$mf" 20 "$work"/plain/*.dmesg "$work"/plain/*.syslog --reps "$runs")
mfs_out=$("${pin[@]}" "$mf" "$n" "$work"/storm/*.dmesg "$work"/storm/*.syslog --reps "$runs")
read -r _ mc_mbs _ m_lines < <(grep '^memchr' <<<"$mf_out")
read -r _ f_mbs _ f_match _ < <(grep '^faultline' <<<"$mf_out")
row "faultline matcher (N=$n)" "$bytes" "$m_lines" "$(awk -v b="$bytes" -v r="$f_mbs" 'BEGIN{print b/r/1e6}')" "$f_match"
row "memchr line split" "$bytes" "$m_lines" "$(awk -v b="$bytes" -v r="$mc_mbs" 'BEGIN{print b/r/1e6}')" "-"
read -r _ f20_mbs _ f20_match _ < <(grep '^faultline' <<<"$mf20_out")
row "faultline matcher (N=20)" "$bytes" "$m_lines" "$(awk -v b="$bytes" -v r="$f20_mbs" 'BEGIN{print b/r/1e6}')" "$f20_match"
read -r _ fs_mbs _ fs_match _ < <(grep '^faultline' <<<"$mfs_out")
read -r _ _ _ s_lines < <(grep '^memchr' <<<"$mfs_out")
row "faultline matcher (N=$n), storm corpus" "$storm_bytes" "$s_lines" "$(awk -v b="$storm_bytes" -v r="$fs_mbs" 'BEGIN{print b/r/1e6}')" "$fs_match"
read -r _ rec_lps rec_n rec_match _ < <(grep '^records' <<<"$mf_out")
row "faultline matcher (N=$n), parsed records" "$bytes" "$rec_n" "$(awk -v l="$rec_n" -v r="$rec_lps" 'BEGIN{print l/r}')" "$rec_match"
read -r _ recs_lps recs_n recs_match _ < <(grep '^records' <<<"$mfs_out")
row "faultline matcher (N=$n), parsed records, storm corpus" "$storm_bytes" "$recs_n" "$(awk -v l="$recs_n" -v r="$recs_lps" 'BEGIN{print l/r}')" "$recs_match"
read -r _ g_mbs _ g_cand < <(grep '^gate' <<<"$mf_out")
read -r _ setup_ms _ n_literals _ < <(grep '^setup' <<<"$mf_out")

echo "faultline replay (.zst) ..." >&2
mkdir -p "$work/grown"
"$mf" --grown-rules "$n" "$work/grown"
# Median of RUNS replays; prints "lines hits lines/s". $1 = .zst dir, the rest = extra options.
replay_rate() {
  local dir=$1 rp=() s
  shift
  for ((i = 0; i < runs; i++)); do
    s=$("${pin[@]}" "$fl" replay --threads 1 --year 2025 --decisions /dev/null "$@" "$dir"/*.zst 2>&1 >/dev/null | grep replayed)
    rp+=("$(sed -E 's/.*: ([0-9]+) lines .*, ([0-9]+) hits, ([0-9]+) decisions .*\(([0-9]+) lines\/s.*/\1 \2 \4/' <<<"$s")")
  done
  echo "$(awk '{print $1, $2}' <<<"${rp[0]}") $(printf '%s\n' "${rp[@]}" | awk '{print $3}' | median)"
}
read -r r_lines r_hits r_lps < <(replay_rate "$work/zst")
row "faultline replay .zst, rules/ bank" "$bytes" "$r_lines" "$(awk -v l="$r_lines" -v r="$r_lps" 'BEGIN{print l/r}')" "$r_hits hits"
read -r rg_lines rg_hits rg_lps < <(replay_rate "$work/zst" --rules "$work/grown")
row "faultline replay .zst, rules/ grown to N=$n" "$bytes" "$rg_lines" "$(awk -v l="$rg_lines" -v r="$rg_lps" 'BEGIN{print l/r}')" "$rg_hits hits"
read -r rgs_lines rgs_hits rgs_lps < <(replay_rate "$work/storm-zst" --rules "$work/grown")
row "faultline replay .zst, rules/ grown to N=$n, storm corpus" "$storm_bytes" "$rgs_lines" "$(awk -v l="$rgs_lines" -v r="$rgs_lps" 'BEGIN{print l/r}')" "$rgs_hits hits"

echo "grep, rg ..." >&2
t=$(LC_ALL=C timed grep -E -c -f "$work/pats.ere" "$work/corpus.log")
t_grep=$t
row "grep -E -c -f (GNU grep $(grep --version | head -1 | awk '{print $NF}'))" "$bytes" "$m_lines" "$t" "$(cat "$work/last.out")"
t=$(timed rg -j1 -c -f "$work/pats.rg" "$work/corpus.log")
row "rg -j1 -c -f (ripgrep $(rg --version | head -1 | awk '{print $2}'))" "$bytes" "$m_lines" "$t" "$(cat "$work/last.out")"

echo "python, go loops on $slow lines ..." >&2
read -r p_match p_t < <("${pin[@]}" python3 "$work/loop.py" "$work/pats.re2" "$work/slow.log")
row "python re loop ($(python3 -V | awk '{print $2}'), first $slow lines)" "$slow_bytes" "$slow" "$p_t" "$p_match"
read -r g_match g_t < <("${pin[@]}" "$work/goloop/goloop" "$work/pats.re2" "$work/slow.log")
row "go regexp loop ($(go version | awk '{print $3}'), first $slow lines)" "$slow_bytes" "$slow" "$g_t" "$g_match"

{
  echo "# bench/compare.sh results"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%MZ); $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs," \
    "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end; pinned to CPU $cpu."
  echo "Corpus: $m_lines lines, $((bytes / 1000000)) MB ($(awk -v b="$bytes" -v l="$m_lines" 'BEGIN{printf "%.0f", b/l}') B/line), make_corpus.py seed 1;" \
    "N=$n patterns ($(wc -l <"$work/pats.ere") translated to ERE). Runs: $runs."
  echo
  echo "| engine | MB/s | lines/s | matching lines | faultline matcher speed / this |"
  echo "| --- | ---: | ---: | ---: | ---: |"
  f_rate=$f_mbs
  for r in "${rows[@]}"; do
    IFS='|' read -r name b l s m <<<"$r"
    awk -v name="$name" -v b="$b" -v l="$l" -v s="$s" -v m="$m" -v f="$f_rate" 'BEGIN {
      mbs = b / s / 1e6; printf "| %s | %.1f | %.0f | %s | %.2f |\n", name, mbs, l / s, m, f / mbs }'
  done
  grep_mbs=$(awk -v b="$bytes" -v t="$t_grep" 'BEGIN { print b / t / 1e6 }')
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
  echo
  echo "Goals of issue 6, as ratios within this run:"
  echo
  echo "| goal | measured | target |"
  echo "| --- | ---: | ---: |"
  echo "| matcher / grep -E -c -f | $(ratio "$f_mbs" "$grep_mbs") | >= 3 |"
  echo "| matcher / memchr line split | $(ratio "$f_mbs" "$mc_mbs") | >= 0.25 |"
  echo "| matcher N=$n / N=20 | $(ratio "$f_mbs" "$f20_mbs") | >= 0.9 |"
  echo "| storm / quiet, parsed records (what the service matches) | $(ratio "$recs_lps" "$rec_lps") | >= 0.8 |"
  echo "| storm / quiet, raw lines (timestamps make every line distinct) | $(ratio "$fs_mbs" "$f_mbs") | (0.8) |"
  echo "| storm / quiet, replay end to end (N=$n) | $(ratio "$rgs_lps" "$rg_lps") | (0.8) |"
  echo
  echo "The literal gate alone (N=$n, $n_literals literals): $g_mbs MB/s, $g_cand candidate lines" \
    "of $m_lines; building the Matcher and tuning its gate on the first batch took $setup_ms ms."
} | tee "$out"
