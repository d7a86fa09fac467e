#!/usr/bin/env python3
# Translates RE2 patterns, one a line, to GNU ERE for grep -E -f (bench/compare.sh):
#   re2_to_ere.py IN OUT
# A pattern ERE cannot express is left out and named on stderr.
import re, sys
# RE2 -> GNU ERE: named and non-capturing groups become groups, Perl classes become POSIX
# classes, lazy quantifiers greedy (same lines match), [^\n] and [\s\S] any character (grep sees
# one line at a time). Backslashes inside brackets are literal in ERE, so classes are rewritten.
PERL = {"d": "0-9", "s": "[:space:]", "w": "[:alnum:]_"}
def translate(p):
    out, i, bad = [], 0, None
    while i < len(p):
        c = p[i]
        if p.startswith("(?P<", i):
            i = p.index(">", i) + 1; out.append("("); continue
        if p.startswith("(?:", i):
            i += 3; out.append("("); continue
        if p.startswith("(?", i):
            bad = "flags group"; break
        if c in "*+?" and i + 1 < len(p) and p[i + 1] == "?":
            out.append(c); i += 2; continue
        if c == "\\":
            e = p[i + 1]
            if e in "dsw": out.append("[" + PERL[e] + "]")
            elif e == "S": out.append("[^[:space:]]")
            elif e == "D": out.append("[^0-9]")
            elif e in "xpPC": bad = "\\" + e; break
            else: out.append("\\" + e)
            i += 2; continue
        if c == "[":
            j = i + 1; neg = p[j] == "^"; j += neg; items = []
            while True:
                if p[j] == "]" and items: break
                if p[j] == "\\":
                    e = p[j + 1]
                    if e in "dsw": items.append(PERL[e])
                    elif e == "n": items.append("\n")
                    elif e == "S": items.append("S!")
                    else: items.append(e)
                    j += 2
                else:
                    items.append(p[j]); j += 1
            i = j + 1
            if "\n" in items and neg and len(items) == 1: out.append("."); continue
            if "S!" in items and not neg: out.append("."); continue  # [\s\S]
            if "S!" in items: bad = "class with \\S"; break
            # A literal ] goes first; a POSIX class's ] ([:alnum:], from \w) stays where it is.
            body = ("]" if "]" in items else "") + "".join(x for x in items if x not in "\n]")
            out.append("[" + ("^" if neg else "") + body + "]"); continue
        out.append(c); i += 1
    return None if bad else "".join(out), bad
src, dst = sys.argv[1], sys.argv[2]
with open(dst, "w") as f:
    for line in open(src):
        ere, bad = translate(line.rstrip("\n"))
        if ere is None:
            print("untranslatable for ERE (%s): %s" % (bad, line.strip()), file=sys.stderr)
            continue
        f.write(ere + "\n")
