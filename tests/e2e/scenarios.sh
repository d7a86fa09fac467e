#!/usr/bin/env bash
# The labelled incident suite (tests/scenarios/README.md): every scenario's archive is generated
# here from its description, replayed, and its decisions (node, action, rule) must be exactly the
# expected ones. Prints precision and recall over the whole suite.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"

corpora=${FL_CORPORA:-$FL_SOURCE/../shared/corpora}  # FL_CORPORA=/none tests without them
# Background: real kernel lines (the bundled gpud captures; the gpud and loghub corpora read in
# place when present) and seeded templates, without any line a signature or recovery rule
# could take for a fault or a recovery.
{
  sed 's/^\[[^]]*\] //' "$FL_SOURCE"/tests/data/sample/gpu-node-01.dmesg
  zcat "$FL_SOURCE/tests/data/sample/gpu-node-02.dmesg.gz" | sed -n 's/^<[0-9]>\[[^]]*\] //p'
  if [[ -d $corpora/gpud ]]; then sed 's/^[0-9,]*-;//' "$corpora"/gpud/kmsg.1.log; fi
  if [[ -d $corpora/loghub ]]; then  # research-use data: read in place, never copied
    tr -d '\r' <"$corpora/loghub/Linux_2k.log" | sed 's/^.*\]: //'
  fi
  awk 'BEGIN { srand(42); for (i = 0; i < 2000; i++) { r = int(rand() * 3);
    if (r == 0) printf "IPv6: ADDRCONF(NETDEV_CHANGE): cali%08x: link becomes ready\n", int(rand()*2^31);
    else if (r == 1) printf "nvidia-nvswitch%d: open (major=510)\n", int(rand()*4);
    else printf "python3[%d]: segfault at %x ip %x sp %x error 4 in libc.so.6[7f7c7ac00000+d3d3000]\n", int(rand()*99999), int(rand()*2^31), int(rand()*2^31), int(rand()*2^31) } }'
} | grep -v -E 'NVRM|SXid|NEURON_HW_ERR|Port: [0-9]+ Link|Link (up|down)|fallen off|Linux version|AER|GPU reset|lost carrier|mlx5|segfault at .* in libnccl|^\s' \
  >"$tmp/pool.txt"
[[ $(wc -l <"$tmp/pool.txt") -gt 100 ]] || fail "no background"

shopt -s nullglob
base=1740787200  # 2025-03-01T00:00:00Z, t=0 of every scenario
tp=0 fp=0 fn=0 failed=()
for scn in "$FL_SOURCE"/tests/scenarios/*.scn; do
  name=$(basename "$scn" .scn)
  dir=$tmp/$name
  mkdir "$dir"
  awk -v out="$dir" -v pool="$tmp/pool.txt" -v base="$base" -f "$FL_SOURCE/tests/scenarios/gen.awk" "$scn"
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
