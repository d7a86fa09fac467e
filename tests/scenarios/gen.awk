# Builds one scenario's archive from its description (format: tests/scenarios/README.md).
# Variables: out (directory), pool (background lines file), base (epoch seconds of t=0).
function esc(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); gsub(/\t/, "\\t", s); return s }
function emit(n, t, line,   f, kind, ns, parts, i, out_line) {
  kind = kinds[n]
  if (kind == "kernel") {
    f = out "/" n ".dmesg"
    gsub(/\\n/, "\n               ", line)
    printf "[%12.6f] %s\n", t, line >> f
  } else {
    f = out "/" n "." kind ".jsonl"
    ns = sprintf("%d%09d", base + int(t), (t - int(t)) * 1e9)
    if (kind == "pod")
      printf "{\"labels\":{\"namespace\":\"train\",\"pod\":\"%s-worker\",\"node_name\":\"%s\"%s},\"line\":\"%s\",\"timestamp\":\"%s\"}\n", n, n, jobs[n] == "" ? "" : ",\"job_name\":\"" jobs[n] "\"", esc(line), ns >> f
    else if (kind == "host")
      printf "{\"labels\":{\"syslog_identifier\":\"systemd-networkd\",\"node_name\":\"%s\"},\"line\":\"%s\",\"timestamp\":\"%s\"}\n", n, esc(line), ns >> f
    else
      printf "{\"labels\":{\"transport\":\"kernel\",\"node_name\":\"%s\"},\"line\":\"%s\",\"timestamp\":\"%s\"}\n", n, esc(line), ns >> f
  }
}
function group(prefix, count, kind,   i, name) {
  ngroup = 0
  for (i = 0; i < count; i++) {
    name = count == 1 ? prefix : sprintf("%s-%02d", prefix, i)
    kinds[name] = kind; members[++ngroup] = name
  }
}
function rest(from,   s, i) { s = $from; for (i = from + 1; i <= NF; i++) s = s " " $i; return s }
BEGIN { srand(7); while ((getline l < pool) > 0) bg[++nbg] = l }
/^#/ || NF == 0 || $1 == "expect" { next }
$1 == "kernel" || $1 == "pod" || $1 == "kloki" || $1 == "host" { group($2, NF > 2 ? $3 : 1, $1); next }
$1 == "bg" {  # bg COUNT SPAN_SECONDS: background lines spread evenly over [0, SPAN]
  for (g = 1; g <= ngroup; g++) if (kinds[members[g]] == "kernel")
    for (i = 0; i < $2; i++) emit(members[g], i * $3 / $2, bg[int(rand() * nbg) + 1])
  next
}
$1 == "job" { for (g = 1; g <= ngroup; g++) jobs[members[g]] = $2; next }
$1 == "at" { line = rest(3); for (g = 1; g <= ngroup; g++) emit(members[g], $2, line); next }
$1 == "rep" {  # rep COUNT START STEP LINE; {k} in LINE becomes i % 29
  for (g = 1; g <= ngroup; g++) for (i = 0; i < $2; i++) {
    line = rest(5); gsub(/\{k\}/, sprintf("%02x", i % 29), line); emit(members[g], $3 + i * $4, line)
  }
  next
}
{ print FILENAME ":" FNR ": unknown directive " $1 > "/dev/stderr"; exit 2 }
