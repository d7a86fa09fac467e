#!/usr/bin/env bash
# The labelled incident suite (tests/scenarios/README.md): every scenario's archive is generated
# here from its description, replayed, and its decisions (node, action, rule) must be exactly the
# expected ones. Prints precision and recall over the whole suite.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"

corpora=${FL_CORPORA:-$FL_SOURCE/../shared/corpora}  # FL_CORPORA=/none tests without them
scenario_pool "$corpora"

shopt -s nullglob
tp=0 fp=0 fn=0 failed=()
for scn in "$FL_SOURCE"/tests/scenarios/*.scn; do
  name=$(basename "$scn" .scn)
  dir=$tmp/$name
  gen_scenario "$scn" "$dir"
  files=("$dir"/*)
  "$FAULTLINE" replay --boot-time 2025-03-01T00:00:00Z --decisions "$tmp/$name.out" "${files[@]}" \
    2>"$tmp/$name.log" || fail "$name: replay exited $?: $(cat "$tmp/$name.log")"
  got=$(jq -r '"\(.node) \(.action) \(.rule)"' "$tmp/$name.out" | sort)
  want=$(sed -n 's/^expect //p' "$scn" | sort)
  both=$(comm -12 <(echo "$got") <(echo "$want") | grep -c . || true)
  extra=$(comm -23 <(echo "$got") <(echo "$want") | grep -c . || true)
  missed=$(comm -13 <(echo "$got") <(echo "$want") | grep -c . || true)
  tp=$((tp + both)) fp=$((fp + extra)) fn=$((fn + missed))
  if [[ $extra != 0 || $missed != 0 ]]; then
    failed+=("$name")
    echo "$name: got [$got] want [$want]" >&2
  fi
done
n=$(ls "$FL_SOURCE"/tests/scenarios/*.scn | wc -l)
[[ $n -ge 30 ]] || fail "only $n scenarios"
precision=$(awk -v a=$tp -v b=$fp 'BEGIN { printf "%.3f", a + b ? a / (a + b) : 1 }')
recall=$(awk -v a=$tp -v b=$fn 'BEGIN { printf "%.3f", a + b ? a / (a + b) : 1 }')
echo "scenarios: $n, decisions expected: $((tp + fn)), correct: $tp, wrong: $fp, missed: $fn," \
  "precision $precision, recall $recall (loghub $([[ -d $corpora/loghub ]] && echo used || echo absent))"
[[ ${#failed[@]} == 0 ]] || fail "scenarios failed: ${failed[*]}"
echo "PASS"
