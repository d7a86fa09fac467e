#!/usr/bin/env bash
# bench/compare.sh runs grep, rg, Python and Go on the bench bank's patterns: its table (issue 6's
# bench/RESULTS.md, made by one command) needs every pattern to load in each and to match the
# lines the matcher matches. A bank change once broke the ERE translation (a Perl class inside a
# bracket) and with it compare.sh. Checked here on a seeded storm corpus: grep -E and Python `re`
# count the lines faultline_match_file counts.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
mf=$FL_BUILD/bench/faultline_match_file
if [[ ! -x $mf ]]; then
  echo "skip: $mf not built (FL_BENCH=OFF)"
  exit 77  # ctest reports it skipped (SKIP_RETURN_CODE)
fi
"$mf" --patterns 300 >"$tmp/pats.re2"
python3 "$FL_SOURCE/bench/re2_to_ere.py" "$tmp/pats.re2" "$tmp/pats.ere" 2>"$tmp/translate.log"
[[ $(wc -l <"$tmp/pats.ere") == 300 ]] || fail "not every pattern translated to ERE"
python3 "$FL_SOURCE/bench/make_corpus.py" --out "$tmp/corpus" --lines 50000 --nodes 4 --seed 3 \
  --fault-every 100 --repeat-every 20 >/dev/null 2>&1
cat "$tmp"/corpus/*.dmesg "$tmp"/corpus/*.syslog >"$tmp/corpus.txt"
matched=$("$mf" 300 "$tmp/corpus.txt" --reps 1 | awk '$1 == "faultline" {print $4}')
((matched > 400)) || fail "faultline_match_file matched $matched lines, expected the corpus's faults"
grep=$(LC_ALL=C grep -E -c -f "$tmp/pats.ere" "$tmp/corpus.txt" 2>"$tmp/grep.log") ||
  fail "grep -E refused the translated patterns: $(cat "$tmp/grep.log")"
[[ $grep == "$matched" ]] || fail "grep -E matched $grep lines, faultline $matched"
py=$(python3 - "$tmp/pats.re2" "$tmp/corpus.txt" <<'PY'
import re, sys
pats = [re.compile(l.rstrip("\n")) for l in open(sys.argv[1])]
print(sum(1 for line in open(sys.argv[2], errors="replace") if any(p.search(line) for p in pats)))
PY
)
[[ $py == "$matched" ]] || fail "python re matched $py lines, faultline $matched"
echo "PASS: grep -E, python re and faultline each matched $matched lines"
