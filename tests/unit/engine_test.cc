// Bank loading, matcher and correlator, on a small bank written here so that the tests do not
// move when rules/ grows (the real bank is checked by `faultline rules test` and the e2e tests).
#include <algorithm>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "core/pipeline.h"
#include "core/time.h"
#include "matcher/bank.h"
#include "matcher/correlator.h"
#include "matcher/matcher.h"
#include "tests/unit/helpers.h"

namespace faultline {
namespace {

constexpr const char* kBank = R"(
signatures:
  - id: xid
    streams: [kernel]
    severity: warning
    pattern: 'NVRM: Xid \(PCI:(?P<pci>[0-9a-f:]+)\): (?P<code>\d+),'
    examples: {match: ['NVRM: Xid (PCI:0000:44:00): 79, x']}
  - id: watchdog
    streams: [pod]
    severity: info
    pattern: 'Watchdog caught collective operation timeout'
    examples: {match: ['Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1)']}
rules:
  - id: xid-fatal
    signature: xid
    severity: fatal
    where: {code: [79, 48]}
    entity: [pci]
    dedup: 3m
  - id: xid-13-repeated
    signature: xid
    severity: warning
    where: {code: [13]}
    entity: [pci]
    count: 3
    window: 1h
    dedup: 10s
)";

std::shared_ptr<const Bank> bank() {
  return loadBank({{"test.yaml", kBank}});
}

Hit hit(const Bank& b, std::string node, int64_t sec, std::string code, std::string pci) {
  Hit h;
  h.node = std::move(node);
  h.time_ns = sec * kNanosPerSecond;
  h.signature = 0;
  h.stream = StreamKind::kKernel;
  h.line = "NVRM: Xid (PCI:" + pci + "): " + code + ", x";
  h.fields = {{"pci", pci}, {"code", code}};
  (void)b;
  return h;
}

TEST(Bank, ReportsFileLineAndSignatureOfABadPattern) {
  const std::string bad = R"(signatures:
  - id: broken
    streams: [kernel]
    severity: fatal
    pattern: 'NVRM: Xid \((?P<pci>'
    examples: {match: [x]}
)";
  try {
    loadBank({{"rules/bad.yaml", bad}});
    FAIL() << "a bad pattern must not load";
  } catch (const BankError& e) {
    EXPECT_NE(std::string(e.what()).find("rules/bad.yaml:5: signature broken: pattern does not "
                                         "compile"),
              std::string::npos)
        << e.what();
  }
}

TEST(Bank, RejectsUnknownFieldsAndSignatures) {
  const std::string bad = std::string(kBank) + R"(
  - id: r2
    signature: xid
    where: {gpu: [1]}
  - id: r3
    signature: nope
)";
  try {
    loadBank({{"b.yaml", bad}});
    FAIL();
  } catch (const BankError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rule r2: signature xid has no field gpu"), std::string::npos) << what;
    EXPECT_NE(what.find("rule r3: unknown signature 'nope'"), std::string::npos) << what;
  }
}

// The problems loadBank reports for `files`, one per line; empty when they load.
std::string problemsOf(const std::vector<RuleFile>& files) {
  try {
    loadBank(files);
  } catch (const BankError& e) {
    return e.what();
  }
  return "";
}

// True when `problems` holds `problem` as one of its lines, from the start of the line on.
bool reports(const std::string& problems, const std::string& problem) {
  return ("\n" + problems).find("\n" + problem) != std::string::npos;
}

// A signature `s` capturing pci and code, on lines 1-6 of the files below.
constexpr const char* kOneSignature = R"(signatures:
  - id: s
    streams: [kernel]
    severity: warning
    pattern: 'X (?P<pci>\S+) (?P<code>\d+)'
    examples: {match: ['X 0000:01:00 79']}
)";

TEST(Bank, RefusesUnknownAndRepeatedKeysAtEveryLevel) {
  const std::string text = std::string(kOneSignature) + R"(  - id: s2
    streams: [kernel]
    severity: warning
    pattern: 'Y (?P<code>\d+)'
    pattern: 'never'
    examples: {match: ['Y 1']}
  - id: s3
    streams: [kernel]
    severity: warning
    pattern: 'Z (?P<code>\d+)'
    examples: {match: ['Z 1'], nomatch: ['Z x']}
  - id: s4
    streams: [kernel]
    severity: warning
    pattern: 'W (?P<code>\d+)'
    examples: {match: ['W 1', {line: 'W 2', feilds: {}}], no_match: [{line: x, fields: {}}]}
tables:
  - {id: t, signature: s, key: [code], colums: [class], rows: []}
rules:
  - id: r1
    signature: s
    severity: fatal
    wehre: {code: [79]}
  - id: r2
    signature: s
    severity: fatal
    recovery: {by: [r1], stabel: 10m}
  - id: r3
    signature: s
    severity: fatal
    where: {code: [79], code: [13]}
  - id: r4
    signature: s
    severity: info
    attach_to: {rule: [r1], within: 1m}
  - id: r5
    signature: s
    severity: info
    joins: {rule: r1, whithin: 5s}
rule:
  - id: r6
)";
  const std::string what = problemsOf({{"a.yaml", text}});
  for (const char* problem : {
           "a.yaml:11: signature s2: duplicate key 'pattern'",
           "a.yaml:17: signature s3: examples: unknown key 'nomatch'",
           "a.yaml:22: signature s4: examples.match: unknown key 'feilds'",
           "a.yaml:22: signature s4: examples.no_match: unknown key 'fields'",
           "a.yaml:24: table t: unknown key 'colums'",
           "a.yaml:29: rule r1: unknown key 'wehre'",
           "a.yaml:33: rule r2: recovery: unknown key 'stabel'",
           "a.yaml:37: rule r3: where: duplicate key 'code'",
           "a.yaml:41: rule r4: attach_to: unknown key 'rule'",
           "a.yaml:45: rule r5: joins: unknown key 'whithin'",
           "a.yaml:46: rule file: unknown key 'rule'",
       }) {
    EXPECT_TRUE(reports(what, problem)) << problem << "\nin:\n" << what;
  }
}

// A quote left open would take the rest of the file as its value (yaml-cpp): rule r1 gone.
TEST(Bank, RefusesAQuoteLeftOpen) {
  const std::string text = std::string(kOneSignature) + R"(    description: 'oops it''s
rules:
  - {id: r1, signature: s, severity: fatal}
)";
  EXPECT_EQ(problemsOf({{"a.yaml", text}}), "a.yaml:7: YAML: a quote opened here is not closed\n");
}

// A bank of empty files (a ConfigMap whose keys lost their values) would decide nothing, in
// silence.
TEST(Bank, RefusesAnEmptyBank) {
  EXPECT_EQ(problemsOf({{"a.yaml", "# emptied\n"}, {"b.yaml", ""}}),
            "a.yaml, b.yaml: no signature and no rule: the bank would decide nothing\n");
}

// suppressed_by itself drops every hit but the first, silently: refused, as any self-reference.
TEST(Bank, RefusesARuleNamingItself) {
  const std::string text = std::string(kOneSignature) + R"(rules:
  - id: r1
    signature: s
    severity: fatal
    suppressed_by: {rules: [r1], within: 5m}
  - {id: r2, signature: s, severity: fatal, recovery: {by: [r2], stable: 1m}}
)";
  const std::string what = problemsOf({{"a.yaml", text}});
  EXPECT_TRUE(reports(what, "a.yaml:11: rule r1: suppressed_by: names the rule itself")) << what;
  EXPECT_TRUE(reports(what, "a.yaml:12: rule r2: recovery.by: names the rule itself")) << what;
}

// A suspects_peers window of a fraction of a second would let live and replay differ: the
// correlator keeps one report per node and second, which must fall all in a window or all out.
TEST(Bank, RefusesASuspectsPeersWindowOfAFractionOfASecond) {
  const std::string text = std::string(kOneSignature) + R"(rules:
  - {id: r1, signature: s, severity: info, suspects_peers: {within: 500ms}}
  - {id: r2, signature: s, severity: info, suspects_peers: {within: 1s}}
  - {id: r3, signature: s, severity: info, suspects_peers: {within: 1500ms}}
)";
  const std::string what = problemsOf({{"a.yaml", text}});
  const char* want = ": suspects_peers is {within: DUR}, whole seconds from 1s";
  EXPECT_TRUE(reports(what, std::string("a.yaml:8: rule r1") + want)) << what;
  EXPECT_TRUE(reports(what, std::string("a.yaml:10: rule r3") + want)) << what;
  EXPECT_EQ(what.find("r2"), std::string::npos) << what;
}

// A duplicate id names where it came first: the file read first is not always the one at fault.
TEST(Bank, ADuplicateIdNamesItsFirst) {
  const std::string rule = "rules:\n  - {id: r1, signature: s, severity: fatal}\n";
  const std::string what =
      problemsOf({{"a.yaml", std::string(kOneSignature) + rule}, {"b.yaml", kOneSignature + rule}});
  EXPECT_TRUE(reports(what, "b.yaml:2: duplicate signature id s (first at a.yaml:2)")) << what;
  EXPECT_TRUE(reports(what, "b.yaml:8: duplicate rule id r1 (first at a.yaml:8)")) << what;
}

TEST(Bank, RefusesAScalarOrMapWhereAListIsExpected) {
  const std::string rules = std::string(kOneSignature) + R"(tables:
  - {id: t, signature: s, key: code, columns: [class], rows: [[79, fatal]]}
  - [t2]
rules:
  - {id: r1, signature: s, severity: fatal, entity: pcii}
  - {id: r2, signature: s, severity: info, attach_to: {rules: r1, within: 1m}}
  - {id: r3, signature: s, severity: fatal, recovery: {by: {r1: x}}}
  - {id: r4, signature: s, severity: fatal, entity: [pci, [code]]}
)";
  const std::string what = problemsOf({{"a.yaml", "signatures: none\nrules: oops\n"},
                                       {"b.yaml", "signatures:\n  id: s1\n  pattern: x\n"},
                                       {"c.yaml", rules}});
  for (const char* problem : {
           "a.yaml:1: signatures must be a list",
           "a.yaml:2: rules must be a list",
           "b.yaml:2: signatures must be a list",
           "c.yaml:8: table t: key must be a list",
           "c.yaml:9: each entry of tables is a map",
           "c.yaml:11: rule r1: entity must be a list",
           "c.yaml:12: rule r2: attach_to: rules must be a list",
           "c.yaml:13: rule r3: recovery: by must be a list",
           "c.yaml:14: rule r4: entity: each item is a single value",
       }) {
    EXPECT_TRUE(reports(what, problem)) << problem << "\nin:\n" << what;
  }
  EXPECT_EQ(what.find(":0:"), std::string::npos) << what;
  EXPECT_EQ(what.find("invalid node"), std::string::npos) << what;
}

TEST(Bank, RefusesAPatternThatMatchesAnEmptyLine) {
  for (const char* pattern : {"(?:NVRM: Xid)?", "x*", "^", "(?m)$"}) {
    const std::string what = problemsOf({{"a.yaml", std::string(R"(signatures:
  - id: s
    streams: [kernel]
    severity: fatal
    pattern: ')") + pattern + R"('
    examples: {match: ['NVRM: Xid (0000:01:00): 79, x']}
)"}});
    EXPECT_TRUE(
        reports(what, "a.yaml:5: signature s: pattern matches an empty line, so every line"))
        << pattern << ": " << what;
  }
}

TEST(Bank, RefusesAPatternThatMatchesAnEmptyStringInsideALine) {
  for (const char* pattern : {R"(\b)", R"((?:NVRM: Xid)?\b)", R"(x|\b)", R"(\w*\b)"}) {
    const std::string what = problemsOf({{"a.yaml", std::string(R"(signatures:
  - id: s
    streams: [kernel]
    severity: fatal
    pattern: ')") + pattern + R"('
    examples: {match: ['NVRM: Xid (0000:01:00): 79, x']}
)"}});
    EXPECT_TRUE(reports(what,
                        "a.yaml:5: signature s: pattern matches an empty string inside the "
                        "line \"a\", so nearly every line"))
        << pattern << ": " << what;
  }
  EXPECT_EQ(problemsOf({{"a.yaml", R"(signatures:
  - id: s
    streams: [kernel]
    severity: fatal
    pattern: '\bXid\b'
    examples: {match: ['NVRM: Xid (0000:01:00): 79, x']}
)"}}),
            "");
}

TEST(Bank, TheJobFieldIsNoCaptureOrColumn) {
  // A pod hit's job field is its pod's job label, which distinct_jobs rules count: a capture named
  // job came first and let one job count as several.
  const std::string what = problemsOf({{"a.yaml", R"(signatures:
  - id: s
    streams: [pod]
    severity: info
    pattern: 'HANG in (?P<job>\w+)'
    examples: {match: ['HANG in alpha']}
  - id: t
    streams: [pod]
    severity: info
    pattern: 'STALL (?P<code>\d+)'
    examples: {match: ['STALL 7']}
  - id: k
    streams: [kernel]
    severity: info
    pattern: 'slurm job (?P<job>\d+)'
    examples: {match: ['slurm job 7']}
tables:
  - {id: u, signature: t, key: [code], columns: [job], rows: [[7, x]]}
)"}});
  // A kernel signature's hits carry no pod's job: its capture may take the name.
  EXPECT_EQ(what.find("signature k:"), std::string::npos) << what;
  for (const char* problem : {
           "a.yaml:5: signature s: field job is the pod's job label",
           "a.yaml:18: table u: field job is the pod's job label",
       }) {
    EXPECT_TRUE(reports(what, problem)) << problem << "\nin:\n" << what;
  }
}

TEST(Bank, ASetOutOfMemoryNamesItsLargestPattern) {
  // Each pattern compiles alone; the Set of the kind does not fit RE2's memory budget.
  const std::string what = problemsOf({{"a.yaml", R"(signatures:
  - id: big
    streams: [kernel]
    severity: fatal
    pattern: '\pL{200}X'
    examples: {match: [')" + std::string(200, 'a') + R"(X']}
)"}});
  EXPECT_TRUE(reports(what,
                      "a.yaml:2: RE2::Set for stream kind kernel does not compile (out of "
                      "memory); its largest pattern is signature big's"))
      << what;
}

TEST(Bank, RefusesAWhereValueOrExpectedFieldThatIsNotAScalar) {
  const std::string text = std::string(kOneSignature) + R"(  - id: s2
    streams: [kernel]
    severity: warning
    pattern: 'Y (?P<code>\d+)'
    examples: {match: [{line: 'Y 1', fields: {code: [1]}}]}
rules:
  - {id: r1, signature: s, severity: fatal, where: {code: [{a: b}]}}
  - {id: r2, signature: s, severity: fatal, where: {code: }}
  - {id: r3, signature: s, severity: fatal, where: {code: {a: b}}}
  - {id: r4, signature: s, severity: fatal, where: {code: [79, ~]}}
)";
  const std::string what = problemsOf({{"a.yaml", text}});
  for (const char* problem : {
           "a.yaml:11: signature s2: examples.match: fields: each value is a single value",
           "a.yaml:13: rule r1: where: code: each item is a single value",
           "a.yaml:14: rule r2: where: code is a value or a list",
           "a.yaml:15: rule r3: where: code is a value or a list",
           "a.yaml:16: rule r4: where: code: each item is a single value",
       }) {
    EXPECT_TRUE(reports(what, problem)) << problem << "\nin:\n" << what;
  }
}

// The head line of a split printk report gives the tail's rule its entity field through `joins`.
TEST(Bank, AnEntityFieldMayComeFromTheRulesOwnJoin) {
  const std::string text = R"(signatures:
  - id: head
    streams: [kernel]
    severity: info
    pattern: 'HEAD (?P<pci>[0-9:]+)$'
    examples: {match: ['HEAD 0000:01:00']}
  - id: tail
    streams: [kernel]
    severity: fatal
    pattern: 'TAIL fallen'
    examples: {match: ['TAIL fallen']}
rules:
  - {id: head, signature: head, severity: info, entity: [pci]}
  - {id: tail, signature: tail, entity: [pci], joins: {rule: head, within: 5s}}
)";
  EXPECT_EQ(problemsOf({{"a.yaml", text}}), "");
  EXPECT_TRUE(reports(problemsOf({{"a.yaml", text + "  - {id: lone, signature: tail, entity: "
                                                    "[pci], joins: {rule: tail, within: 5s}}\n"}}),
                      "a.yaml:15: rule lone: entity field pci is not captured by tail nor given "
                      "by an alias or join"));
}

// An alias gives its `to` field only to hits that carry its `from` field: a rule on a signature
// that captures neither has an entity field that is always empty, so its hits on every GPU of a
// node would count as one GPU's.
TEST(Bank, AnEntityFieldFromAnAliasNeedsTheAliasSourceField) {
  const std::string text = R"(signatures:
  - id: uuid-line
    streams: [kernel]
    severity: info
    pattern: 'AT (?P<pci>[0-9:]+): (?P<uuid>GPU-\S+)'
    examples: {match: ['AT 0000:01:00: GPU-1']}
  - id: reset
    streams: [kernel]
    severity: info
    pattern: 'RESET (?P<uuid>GPU-\S+)'
    examples: {match: ['RESET GPU-1']}
  - id: ecc
    streams: [kernel]
    severity: warning
    pattern: 'ECC error count (?P<count>\d+)'
    examples: {match: ['ECC error count 3']}
rules:
  - {id: gpu-uuid, signature: uuid-line, severity: info, alias: {from: uuid, to: pci}}
  - {id: reset, signature: reset, severity: info, entity: [pci]}
)";
  EXPECT_EQ(problemsOf({{"a.yaml", text}}), "");
  EXPECT_TRUE(reports(
      problemsOf({{"a.yaml", text + "  - {id: ecc, signature: ecc, entity: [pci], count: 3, "
                                    "window: 1h}\n"}}),
      "a.yaml:20: rule ecc: entity field pci is not captured by ecc nor given by an alias or "
      "join"));
}

// rules/README.md documents `stable` with "0: at once": a bare 0 is the zero duration.
TEST(Bank, AZeroDurationMayBeWrittenAsABareZero) {
  const std::string text = std::string(kOneSignature) + R"(rules:
  - {id: ok, signature: s, severity: info, entity: [pci]}
  - id: r
    signature: s
    severity: warning
    entity: [pci]
    count: 2
    window: 1h
    dedup: 0
    recovery: {by: [ok], stable: 0}
)";
  EXPECT_EQ(problemsOf({{"a.yaml", text}}), "");
}

// The matcher fills kMaxCaptureGroups groups: a field of a later group would never be set.
TEST(Bank, RefusesAPatternWithMoreCaptureGroupsThanTheMatcherFills) {
  auto bankWithGroups = [](int groups) {
    std::string pattern = "E";
    for (int g = 1; g < groups; ++g) {
      pattern += "(a)?";
    }
    return std::string(R"(signatures:
  - id: s
    streams: [kernel]
    severity: fatal
    pattern: ')") +
           pattern + R"(: (?P<code>\d+)'
    examples: {match: [{line: 'E: 79', fields: {code: '79'}}]}
)";
  };
  const std::shared_ptr<const Bank> full =
      loadBank({{"a.yaml", bankWithGroups(kMaxCaptureGroups)}});
  Matcher m(full);
  RecordBatch batch;
  batch.records.push_back({1, "n1", "Eaa: 13", 0, 0, StreamKind::kKernel});
  std::vector<Hit> hits;
  m.match(batch, &hits);
  ASSERT_EQ(hits.size(), 1U);
  EXPECT_EQ(hits[0].field("code"), "13");
  const std::string what = problemsOf({{"a.yaml", bankWithGroups(kMaxCaptureGroups + 1)}});
  EXPECT_TRUE(reports(what,
                      "a.yaml:5: signature s: pattern has 33 capture groups, more than the "
                      "32 the matcher fills"))
      << what;
}

// The examples are checked as `rules test` checks them, and name their own line.
TEST(Bank, RefusesABankWhoseExamplesFail) {
  const std::string what = problemsOf({{"e.yaml", R"(signatures:
  - id: s
    streams: [kernel, pod]
    severity: warning
    pattern: 'X (?P<code>\d+)'
    examples:
      match:
        - 'Y 1'
        - {line: 'X 2', fields: {code: '3'}}
        - {line: 'X 5', fields: {cod: ''}}
      no_match: ['X 4']
)"}});
  for (const char* problem : {
           "e.yaml:8: signature s: match example not matched on stream kernel: Y 1",
           "e.yaml:8: signature s: match example not matched on stream pod: Y 1",
           "e.yaml:9: signature s: field code is '2', expected '3' on stream kernel: X 2",
           "e.yaml:10: signature s: field cod is none of the signature's: X 5",
           "e.yaml:11: signature s: no_match example matched on stream pod: X 4",
       }) {
    EXPECT_TRUE(reports(what, problem)) << problem << "\nin:\n" << what;
  }
}

TEST(Bank, RefusesTableColumnsThatAnotherFieldWouldHide) {
  const std::string text = std::string(kOneSignature) + R"(tables:
  - {id: t, signature: s, key: [code], columns: [class], rows: [[79, fatal]]}
  - {id: t, signature: s, key: [code], columns: [kind], rows: [[79, x]]}
  - {id: u, signature: s, key: [code], columns: [pci], rows: [[79, x]]}
  - {id: v, signature: s, key: [code], columns: [class], rows: [[79, x]]}
  - {id: w, signature: s, key: [code], columns: [a, a], rows: [[79, x, y]]}
)";
  const std::string what = problemsOf({{"a.yaml", text}});
  for (const char* problem : {
           "a.yaml:9: duplicate table id t",
           "a.yaml:10: table u: column pci is also a capture group of signature s",
           "a.yaml:11: table v: column class is given twice to the hits of signature s",
           "a.yaml:12: table w: column a is given twice to the hits of signature s",
       }) {
    EXPECT_TRUE(reports(what, problem)) << problem << "\nin:\n" << what;
  }
}

// A table column holds only its rows' values: a rule asking for another (a case slip) never fires.
TEST(Bank, RefusesAWhereValueThatNoTableRowGives) {
  const std::string text = std::string(kOneSignature) + R"(tables:
  - {id: t, signature: s, key: [code], columns: [class], rows: [[79, fatal], [13, app]]}
rules:
  - {id: r1, signature: s, severity: fatal, where: {class: [Fatal]}}
  - {id: r2, signature: s, severity: fatal, where: {class: [fatal, '']}}
  - {id: r3, signature: s, severity: fatal, where: {code: [Fatal]}}
)";
  EXPECT_EQ(problemsOf({{"a.yaml", text}}),
            "a.yaml:10: rule r1: where: no row of table t gives class 'Fatal'\n");
}

TEST(Bank, AFileOfCommentsOnlyIsEmpty) {
  const auto b = loadBank({{"a.yaml", "# disabled\n"}, {"b.yaml", ""}, {"c.yaml", kOneSignature}});
  EXPECT_EQ(b->signatures.size(), 1U);
  EXPECT_TRUE(b->rules.empty());
  EXPECT_EQ(problemsOf({{"a.yaml", std::string(kOneSignature) + "rules:\n#  - id: r1\n"}}), "");
}

// yaml-cpp's Load() reads the first document only: what follows a `---` would be lost unread.
TEST(Bank, RefusesAFileOfSeveralDocuments) {
  // kOneSignature is 6 lines; the second document starts on line 7.
  const std::string two = "a.yaml:7: more than one YAML document (--- or ...): one per file\n";
  EXPECT_EQ(problemsOf({{"a.yaml", std::string(kOneSignature) + "---\nrules: []\n"}}), two);
  EXPECT_EQ(problemsOf({{"a.yaml", std::string(kOneSignature) + "--- {rules: []}\n"}}), two);
  // A document end marker: Load() stops there too.
  EXPECT_EQ(problemsOf({{"a.yaml", std::string(kOneSignature) + "...\nrules: []\n"}}), two);
  // A `---` before the first document, and one followed by comments only, start no second one;
  // nor does a directive before the first, or a last `...`.
  EXPECT_EQ(problemsOf({{"a.yaml", "# x\n---\n" + std::string(kOneSignature) + "---\n# y\n"}}), "");
  EXPECT_EQ(problemsOf({{"a.yaml", std::string(kOneSignature) + "---\n"}}), "");  // a bare end
  EXPECT_EQ(problemsOf({{"a.yaml", "%YAML 1.2\n---\n" + std::string(kOneSignature) + "...\n"}}),
            "");
  // A byte order mark (an editor's), which yaml-cpp skips, is no content either: the `---` after
  // it and a comment was taken for a second document's start (a review, 2026-12-02).
  EXPECT_EQ(problemsOf({{"a.yaml", "\xEF\xBB\xBF# x\n---\n" + std::string(kOneSignature)}}), "");
  EXPECT_EQ(problemsOf({{"a.yaml", "\xEF\xBB\xBF%YAML 1.2\n---\n" + std::string(kOneSignature)}}),
            "");
}

TEST(Bank, LiteralPrefixIsWhatEveryMatchStartsWith) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"(NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-f:]+)\): (?P<code>\d+))", "NVRM: Xid ("},
      {R"(mlx5_core [0-9a-f:.]+: Port module event)", "mlx5_core "},
      {"abc*d", "ab"},        // c is repeated: not part of every match
      {"abc?", "ab"},         // optional
      {"abc{2}", "abcc"},     // counted
      {"ab(?i)*c", "a"},      // RE2 reads this as `ab*c`
      {"abc|abd", "ab"},      // both branches start with ab
      {"ab(?:c|d)e", "ab"},   //
      {"x[|]y|z", ""},        // a match may start with z
      {"(?i)abc", ""},        // any case
      {"^abc", "abc"},        //
      {R"(\bfoo)", ""},       // \b holds elsewhere than at the start of a text
      {R"((?:\Bx|y)z)", ""},  // so does \B: xz matches in axz
      {".abc", ""},           //
  };
  for (const auto& [pattern, prefix] : cases) {
    const RE2 re(pattern);
    ASSERT_TRUE(re.ok()) << pattern;
    EXPECT_EQ(literalPrefix(re), prefix) << pattern;
  }
}

// Extraction anchors at the first occurrence of the signature's literal prefix, falling back to an
// unanchored search; the fields must be those of an unanchored search, for every signature of the
// real bank, on its example lines, with text before them and with the prefix before them once more
// where no match starts.
TEST(Matcher, FieldsAreThoseOfTheUnanchoredSearch) {
  const std::shared_ptr<const Bank> real = shippedBank();
  Matcher m(real);
  size_t anchored = 0;
  size_t compared = 0;
  for (uint32_t si = 0; si < real->signatures.size(); ++si) {
    const Signature& sig = real->signatures[si];
    anchored += sig.prefix.empty() ? 0 : 1;
    for (const Example& ex : sig.match_examples) {
      for (const std::string& line :
           {ex.line, "kernel: " + ex.line, sig.prefix + " " + ex.line, sig.prefix + ex.line}) {
        RecordBatch batch;
        for (int k = 0; k < kStreamKinds; ++k) {
          if (sig.appliesTo(static_cast<StreamKind>(k))) {
            batch.records.push_back({0, "n1", line, 0, 0, static_cast<StreamKind>(k)});
            break;
          }
        }
        std::vector<Hit> hits;
        m.match(batch, &hits);
        const auto hit =
            std::find_if(hits.begin(), hits.end(), [&](const Hit& h) { return h.signature == si; });
        const int n = static_cast<int>(sig.fields.size()) + 1;
        std::vector<re2::StringPiece> groups(static_cast<size_t>(n));
        const bool matches = sig.re->Match(line, 0, line.size(), RE2::UNANCHORED, groups.data(), n);
        ASSERT_EQ(hit != hits.end(), matches) << sig.id << ": " << line;
        if (!matches) {
          continue;
        }
        std::vector<std::pair<std::string, std::string>> want;
        for (size_t g = 1; g < groups.size(); ++g) {
          if (!sig.fields[g - 1].empty() && groups[g].data() != nullptr) {
            want.emplace_back(sig.fields[g - 1], std::string(groups[g]));
          }
        }
        ASSERT_GE(hit->fields.size(), want.size()) << sig.id << ": " << line;
        EXPECT_TRUE(std::equal(want.begin(), want.end(), hit->fields.begin()))
            << sig.id << ": " << line;
        ++compared;
      }
    }
  }
  EXPECT_GT(anchored, real->signatures.size() / 2);  // most signatures start with a literal
  EXPECT_GT(compared, 4 * real->signatures.size());
}

TEST(Matcher, KernelSignaturesNeverMatchPodStreams) {
  Matcher m(bank());
  RecordBatch batch;
  const std::string line = "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus";
  batch.records.push_back({1, "n1", line, 0, 0, StreamKind::kPod});
  batch.records.push_back({2, "n1", line, 0, 0, StreamKind::kOther});
  batch.records.push_back({3, "n1", line, 0, 0, StreamKind::kKernel});
  std::vector<Hit> hits;
  m.match(batch, &hits);
  ASSERT_EQ(hits.size(), 1U);
  EXPECT_EQ(hits[0].time_ns, 3);
  EXPECT_EQ(hits[0].field("code"), "79");
  EXPECT_EQ(hits[0].field("pci"), "0000:44:00");
  EXPECT_EQ(m.stats().lines, 3U);
}

// The kernel quotes text a process chose in a few reports (quotesProcessText): a process that names
// its file, its command line, its executed path, a crypto algorithm or its driver version after a
// fault line makes the kernel log that line, and it hits nothing. Fault lines that merely name a
// process still hit, as does nccl-segfault, whose match starts at the kernel's own text.
TEST(Matcher, NoSignatureMatchesInTextTheKernelQuotesFromAProcess) {
  Matcher m(shippedBank());
  const std::string xid = "NVRM: Xid (PCI:0000:44:00): 79, pid=1, GPU has fallen off the bus.";
  // Short enough for a module name (55 bytes with "crypto-") and a client's version string (63).
  const std::string brief = "NVRM: Xid (PCI:0000:44:00): 79, GPU off";
  const std::vector<std::string> quoting = {
      "python3[4242]: segfault at 0 ip 00007f0011200123 sp 00007ffd5a0e1e18 error 4 in " + xid +
          "so[7f0011200000+1000]",
      "[ 1234.567890] python3[4242]: segfault at 0 ip 00007f0011200123 sp 00007ffd5a0e1e18 error "
      "6 in " +
          xid + "so[123,7f0011200000+1000] likely on CPU 3 (core 3, socket 0)",
      "Nov 28 10:00:00 gpu-1 kernel: traps: python3[4242] general protection fault "
      "ip:7f0011200123 sp:7ffd5a0e1e18 error:0 in " +
          xid + "[7f0011200000+1000]",
      "traps: python3[4242] trap invalid opcode ip:7f0011200123 sp:7ffd5a0e1e18 error:0 in " + xid +
          "[7f0011200000+1000]",
      "traps: python3[4242] control protection ip:7f0011200123 sp:7ffd5a0e1e18 error:1(near ret) "
      "in " +
          xid + "[7f0011200000+1000]",
      // arch/x86/kernel/cet.c, as LKML's shstk_cp test printed it: the shadow stack pointer too.
      "python3[4242] control protection ip:7f0011200123 sp:7ffd5a0e1e18 ssp:7ffd5a000ff8 "
      "error:1(near ret) in " +
          xid + "so[7f0011200000+1000]",
      "python3[4242] control protection ip:7f0011200123 sp:7ffd5a0e1e18 ssp:7ffd5a000ff8 "
      "error:1(near ret) in enclave in " +
          xid + "so[7f0011200000+1000]",
      "python3[4242] bad frame in rt_sigreturn frame:000000001d7b6e1c ip:7f0011200123 "
      "sp:7ffd5a0e1e18 orax:ffffffffffffffff in " +
          xid + "[7f0011200000+1000]",
      "python3[4242]: unhandled exception: DABT (lower EL), ESR 0x92000006, level 2 translation "
      "fault in " +
          xid + "[400000+1000]",
      "ptrace attach of \"" + xid + "\"[4242] was attempted by \"gdb -p 4242\"[4243]",
      "process 'python3' launched '/tmp/" + xid + "' with NULL argv: empty string added",
      // A path, a crypto algorithm name (AF_ALG, made a module name) and the version string a
      // client of /dev/nvidiactl sends, each of which the kernel prints as given.
      "process '/tmp/" + xid + "' started with executable stack",
      "[ 1234.567890] process 'tmp/" + xid + "' started with executable stack",
      "File: /data/" + xid + " PID: 4242 Comm: python3",
      "Nov 28 10:00:00 gpu-1 kernel: File: /data/" + xid + " PID: 4242 Comm: python3",
      "warning: `/tmp/" + xid +
          "' has both setuid-root and effective capabilities. Therefore not raising all "
          "capabilities.",
      "request_module: kmod_concurrent_max (0) close to 0 (max_modprobes: 50), for module crypto-" +
          brief + ", throttling...",
      "request_module: modprobe crypto-" + brief +
          " cannot be processed, kmod busy with 50 threads for more than 5 seconds now",
      "request_module: sigkill sent for modprobe crypto-" + brief + ", giving up",
      "NVRM: API mismatch: the client has the version " + brief +
          ", but\nNVRM: this kernel module has the version 535.104.05.  Please",
      "NVRM: API mismatch: the client 'python3' (pid 4242) has the version " + brief +
          ",\nNVRM: but this kernel module has the version 595.71.05.",
      // Signatures that take "^[^\n]*" before their text (gpu-fallen-off-bus-unjoined, fatal;
      // kernel-boot) match from the line's start, but their text starts in the process's.
      "python3[4242]: segfault at 0 ip 00007f0011200123 sp 00007ffd5a0e1e18 error 4 in NVRM: "
      "fallen off the bus and is not responding to commands.so[7f0011200000+1000]",
      "process 'python3' launched '/tmp/Kernel command line: ro' with NULL argv: empty string "
      "added",
      // Text in a quote the kernel opened: a mount option's key, a path, an audit record's exe.
      "tmpfs: Unknown parameter '" + xid + "'",
      "[ 1234.567890] overlayfs: failed to resolve '/tmp/" + xid + "': -2",
      "tmpfs: Unknown parameter 'Linux version 9 (a@b) (x'",
      "audit: type=1326 audit(1732960000.123:45): auid=4294967295 uid=0 gid=0 ses=4294967295 "
      "subj=unconfined pid=4242 comm=\"python3\" exe=\"/tmp/NEURON_HW_ERR=DMA_ERROR\" sig=0 "
      "arch=c000003e syscall=39 compat=0 ip=0x7f0011200123 code=0x7ffc0000",
  };
  for (const std::string& line : quoting) {
    RecordBatch batch;
    batch.records.push_back({1, "n1", line, 0, 0, StreamKind::kKernel});
    std::vector<Hit> hits;
    m.match(batch, &hits);
    EXPECT_TRUE(hits.empty()) << line;
  }
  const std::string nccl =
      "pt_main_thread[2536443]: segfault at 7f797fe00000 ip 00007f7c7ac69996 sp 00007f7c12fd7c30 "
      "error 4 in libnccl.so.2[7f7c7ac00000+d3d3000]";
  const std::vector<std::pair<std::string, std::string>> hitting = {
      {xid, "nvidia-xid"},
      {"NVRM: Xid (PCI:0000:44:00): 79, pid=1, name=' launched ', GPU has fallen off the bus.",
       "nvidia-xid"},
      {nccl, "nccl-segfault"},
      {"Nov 28 10:00:00 gpu-1 kernel: " + xid, "nvidia-xid"},
  };
  for (const auto& [line, id] : hitting) {
    RecordBatch batch;
    batch.records.push_back({1, "n1", line, 0, 0, StreamKind::kKernel});
    std::vector<Hit> hits;
    m.match(batch, &hits);
    ASSERT_EQ(hits.size(), 1U) << line;
    EXPECT_EQ(m.bank().signatures[hits[0].signature].id, id) << line;
  }
}

// Kernel warnings that start with the name (comm, up to 15 bytes) of the process they are about
// (mm/mmap.c, fs/proc/base.c, mm/mremap.c; fs/drop_caches.c for root, kernel/exit.c with
// CONFIG_DEBUG_STACK_USAGE), and reports that quote the name within. A process can take any name
// (prctl PR_SET_NAME), so it makes the kernel log any 15 bytes of a fault line: "Linux version X
// (28216) uses deprecated remap_file_pages() syscall" was a boot of the node, and lifted its
// taints. No window of any kernel signature's examples, named so, may hit.
TEST(Matcher, AProcessNamedAfterAFaultLinesPartForgesNoKernelHit) {
  const std::shared_ptr<const Bank> bank = shippedBank();
  Matcher m(bank);
  const auto warnings = [](const std::string& comm) -> std::vector<std::string> {
    return {
        "mmap: " + comm +
            " (28216) uses deprecated remap_file_pages() syscall. See "
            "Documentation/mm/remap_file_pages.rst.",
        comm +
            " (6449): /proc/6449/oom_adj is deprecated, please use /proc/6449/oom_score_adj "
            "instead.",
        comm +
            " (6449): attempted to duplicate a private mapping with mremap.  This is not "
            "supported.",
        comm + " (6449): drop_caches: 3",
        comm + " (6449) used greatest stack depth: 10936 bytes left",
        // and some that quote it within: mm/oom_kill.c, kernel/hung_task.c, arch/x86/mm/fault.c
        "Out of memory: Killed process 6449 (" + comm +
            ") total-vm:1000kB, anon-rss:0kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:0kB "
            "oom_score_adj:0",
        "INFO: task " + comm + ":6449 blocked for more than 122 seconds.",
        comm +
            "[6449]: segfault at 0 ip 00007f0011200123 sp 00007ffd5a0e1e18 error 4 in "
            "libc.so.6[7f0011200000+1000]",
    };
  };
  size_t lines = 0;
  for (const Signature& sig : bank->signatures) {
    if ((sig.streams & (1U << static_cast<unsigned>(StreamKind::kKernel))) == 0) {
      continue;
    }
    for (const Example& example : sig.match_examples) {
      RecordBatch batch;
      for (size_t at = 0; at < example.line.size(); ++at) {
        for (size_t n = 1; n <= 15 && at + n <= example.line.size(); ++n) {
          const std::string comm = example.line.substr(at, n);
          if (comm.find('\n') != std::string::npos) {
            continue;
          }
          for (const std::string& line : warnings(comm)) {
            batch.records.push_back({1, "n1", batch.copy(line), 0, 0, StreamKind::kKernel});
          }
        }
      }
      lines += batch.records.size();
      std::vector<Hit> hits;
      m.match(batch, &hits);
      for (const Hit& h : hits) {
        ADD_FAILURE() << bank->signatures[h.signature].id << " hit a process's name: " << h.line;
      }
    }
  }
  EXPECT_GT(lines, 100000U);  // every kernel signature's examples, not none
}

// A kernel record whose line is a JSON object's text is a shipper's record of a line (Kafka's
// raw encoding of a journald map body; Promtail's journal scrape with json: true), whose escaped
// quotes hid a process's text from quotesProcessText: Yama's report of a ptrace attach quotes the
// target's command line, and wrapped so, it tainted the node (a review, 2026-12-02). No kernel
// signature hits such a line; a pod's JSON log line still hits pod signatures.
TEST(Matcher, AKernelLineThatIsAJsonObjectMakesNoHit) {
  const std::string xid =
      "NVRM: Xid (PCI:0000:44:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the "
      "bus.";
  const std::string nccl =
      "torch.distributed.DistBackendError: NCCL error in: "
      "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1333, unhandled system error (run "
      "with NCCL_DEBUG=INFO for details), NCCL version 2.18.1";
  const std::vector<std::pair<std::string, StreamKind>> lines = {
      {R"({"MESSAGE":"Yama: ptrace attach of \")" + xid + R"(\"[4242] was attempted by \"x\"[1]"})",
       StreamKind::kKernel},
      {" { \"MESSAGE\": \"" + xid + "\"}", StreamKind::kKernel},
      {R"({"level":"error","msg":")" + nccl + R"("})", StreamKind::kPod},
      {xid, StreamKind::kKernel},
  };
  RecordBatch batch;
  for (const auto& [line, stream] : lines) {
    batch.records.push_back({kNanosPerSecond, "n1", batch.copy(line), 0, 0, stream});
  }
  Matcher m(shippedBank());
  std::vector<Hit> hits;
  m.match(batch, &hits);
  std::vector<std::string> got;
  for (const Hit& h : hits) {
    got.push_back(std::string(streamKindName(h.stream)) + " " +
                  m.bank().signatures[h.signature].id);
  }
  EXPECT_EQ(got, (std::vector<std::string>{"pod nccl-error", "kernel nvidia-xid"}));
  EXPECT_EQ(m.stats().json_kernel_lines, 2U);
  EXPECT_TRUE(jsonObjectText(" {}"));
  EXPECT_FALSE(jsonObjectText("{ 3-...D } 21 jiffies"));  // an RCU stall's CPU list
  EXPECT_FALSE(jsonObjectText("[  12.3] {\"MESSAGE\":1}"));
}

TEST(Matcher, RepeatedLinesReuseTheirOutcomeWithTheSameHits) {
  // A flood of one Xid line (the 800K Xid 95 case), another Xid line between, and a line the gate
  // passes that the Set does not match ("NVRM: Xid (PCI:" with no code): each distinct line pays
  // for the Set and the captures once; every repeat gets the same hits, with its own time and node.
  // One second apart, so that no record repeats a hit in its second (next test).
  Matcher m(bank());
  RecordBatch batch;
  const std::string flood = "NVRM: Xid (PCI:0000:3b:00): 95, pid=1234, Uncontained ECC error";
  const std::string other = "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus";
  const std::string vain = "NVRM: Xid (PCI:0000:44:00): unknown";
  for (int64_t i = 0; i < 100; ++i) {
    const std::string& line = i == 50 ? other : i % 10 == 5 ? vain : flood;
    batch.records.push_back(
        {i * kNanosPerSecond, i < 60 ? "n1" : "n2", line, 0, 0, StreamKind::kKernel});
  }
  std::vector<Hit> hits;
  m.match(batch, &hits);
  ASSERT_EQ(hits.size(), 90U);  // 100 lines, 10 vain ones
  for (const Hit& h : hits) {
    const bool is_other = h.time_ns == 50 * kNanosPerSecond;
    EXPECT_EQ(h.line, is_other ? other : flood);
    EXPECT_EQ(h.field("code"), is_other ? "79" : "95");
    EXPECT_EQ(h.field("pci"), is_other ? "0000:44:00" : "0000:3b:00");
    EXPECT_EQ(h.node, h.time_ns < 60 * kNanosPerSecond ? "n1" : "n2");
    EXPECT_EQ(h.repeats, 0U);
  }
  EXPECT_EQ(m.stats().candidates, 100U);
  EXPECT_EQ(m.stats().reused, 100U - 3U);  // all but the first of each distinct line
  EXPECT_EQ(m.stats().hits, 90U);
}

// A record that repeats the node, stream and line of the latest record with hits, in the same
// second and no earlier, makes no hits of its own: the correlator would take them for repeats.
// The matcher counts them in those hits' repeats, and as hits in its stats.
TEST(Matcher, ARecordRepeatingTheLatestHitsInTheirSecondAddsToTheirRepeats) {
  Matcher m(bank());
  RecordBatch batch;
  const std::string xid = "NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus";
  const std::string other = "NVRM: Xid (PCI:0000:45:00): 48, x";
  const std::string quiet = "kernel: nothing to see";
  const int64_t t = 100 * kNanosPerSecond + 500'000'000;
  auto add = [&](int64_t time_ns, const char* node, std::string_view line) {
    batch.records.push_back({time_ns, node, line, 0, 0, StreamKind::kKernel});
  };
  add(t, "n1", xid);
  add(t + 1, "n1", xid);  // repeats
  add(t + 2, "n1", quiet);
  add(t + 3, "n1", xid);  // repeats: the line between made no hits
  add(t - 1, "n1", xid);  // the same second, but earlier than the hit: a hit of its own
  add(t + 4, "n2", xid);  // another node
  add(t + 4, "n1", xid);  // the latest hits are n2's
  add(t + 5, "n1", other);
  add(t + kNanosPerSecond, "n1", other);  // the next second
  std::vector<Hit> hits;
  m.match(batch, &hits);
  std::vector<std::pair<int64_t, uint32_t>> got;  // (time - t, repeats)
  got.reserve(hits.size());
  for (const Hit& h : hits) {
    got.emplace_back(h.time_ns - t, h.repeats);
  }
  EXPECT_EQ(got, (std::vector<std::pair<int64_t, uint32_t>>{
                     {0, 2}, {-1, 0}, {4, 0}, {4, 0}, {5, 0}, {kNanosPerSecond, 0}}));
  EXPECT_EQ(m.stats().hits, 8U);
}

TEST(Correlator, FatalTaintsOnceWithEvidence) {
  const auto b = bank();
  Correlator c(b, Taint{});
  std::vector<Decision> out;
  c.observe(hit(*b, "n1", 100, "79", "0000:44:00"), &out);
  c.observe(hit(*b, "n1", 101, "79", "0000:44:00"), &out);
  c.observe(hit(*b, "n1", 500, "48", "0000:45:00"), &out);
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(out[0].node, "n1");
  EXPECT_EQ(out[0].rule, "xid-fatal");
  EXPECT_EQ(out[0].taint.effect, "NoSchedule");
  EXPECT_EQ(out[0].time_ns, 100 * kNanosPerSecond);
  ASSERT_EQ(out[0].evidence.size(), 1U);
  EXPECT_EQ(out[0].evidence[0].signature, "xid");
}

TEST(Correlator, WarningNeedsCountWithinWindowAndDedupCollapsesRepeats) {
  const auto b = bank();
  Correlator c(b, Taint{});
  std::vector<Decision> out;
  // A burst of identical lines inside the 10s dedup window counts once.
  for (int i = 0; i < 1000; ++i) {
    c.observe(hit(*b, "n1", 0, "13", "0000:44:00"), &out);
  }
  c.observe(hit(*b, "n1", 1800, "13", "0000:44:00"), &out);
  EXPECT_TRUE(out.empty());
  // Different GPUs do not add up: the entity is the PCI address.
  c.observe(hit(*b, "n1", 1900, "13", "0000:45:00"), &out);
  EXPECT_TRUE(out.empty());
  // The third within an hour on the same GPU taints; the first hit has left the window by then.
  c.observe(hit(*b, "n1", 3700, "13", "0000:44:00"), &out);
  EXPECT_TRUE(out.empty());
  c.observe(hit(*b, "n1", 3800, "13", "0000:44:00"), &out);
  ASSERT_EQ(out.size(), 1U);
  EXPECT_EQ(out[0].rule, "xid-13-repeated");
  EXPECT_EQ(out[0].evidence.size(), 3U);
  EXPECT_EQ(out[0].evidence.front().time_ns, 1800 * kNanosPerSecond);
}

TEST(Correlator, UnlistedCodesAndInfoRulesNeverTaint) {
  const auto b = bank();
  Correlator c(b, Taint{});
  std::vector<Decision> out;
  for (int64_t i = 0; i < 100; ++i) {
    c.observe(hit(*b, "n1", i * 60, "45", "0000:44:00"), &out);
  }
  EXPECT_TRUE(out.empty());
}

TEST(Pipeline, ReplayOrderDoesNotChangeDecisions) {
  // Two batches given in either order: the later 79 must never be the evidence.
  auto run = [](bool reversed) {
    CollectingSink sink;
    Pipeline p(bank(), Taint{}, {&sink});
    RecordBatch early;
    RecordBatch late;
    early.records.push_back({10 * kNanosPerSecond, "n1", "NVRM: Xid (PCI:0000:44:00): 79, a", 0, 0,
                             StreamKind::kKernel});
    late.records.push_back({20 * kNanosPerSecond, "n1", "NVRM: Xid (PCI:0000:44:00): 48, b", 0, 0,
                            StreamKind::kKernel});
    p.collect(reversed ? late : early, 0);
    p.collect(reversed ? early : late, 0);
    p.finishReplay();
    return sink.got;
  };
  const auto a = run(false);
  const auto b = run(true);
  ASSERT_EQ(a.size(), 1U);
  ASSERT_EQ(b.size(), 1U);
  EXPECT_EQ(a[0].evidence[0].line, b[0].evidence[0].line);
  EXPECT_EQ(a[0].time_ns, 10 * kNanosPerSecond);
}

// Identical lines in one second of event time are one event, live as in replay (which keeps one
// of them: Pipeline::collect): five "lost carrier" lines in one second are not the five flaps
// ipoib-lost-carrier-repeated (the real bank) counts; five in five seconds are.
TEST(Pipeline, IdenticalLinesInOneSecondCountOnceLiveAsInReplay) {
  auto decisions = [](bool live, int64_t step_ns) {
    CollectingSink sink;
    Pipeline p(shippedBank(), Taint{}, {&sink});
    RecordBatch batch;
    for (int64_t i = 0; i < 5; ++i) {
      batch.records.push_back({100 * kNanosPerSecond + i * step_ns, "n1", "ib0: lost carrier", 0, 0,
                               StreamKind::kKernel});
    }
    if (live) {
      p.process(batch);
    } else {
      p.collect(batch, 0);
      p.finishReplay();
    }
    return sink.got.size();
  };
  for (bool live : {true, false}) {
    EXPECT_EQ(decisions(live, kNanosPerSecond / 10), 0U) << (live ? "live" : "replay");
    EXPECT_EQ(decisions(live, kNanosPerSecond), 1U) << (live ? "live" : "replay");
  }
}

// Pod records tell the pipeline which nodes ran a job's pods (by kJobLabels); a Neuron
// HANG_ON_COLLECTIVES on two of them (the real bank), once its window has passed, makes the
// third suspect, not the reporters nor a node of another job.
TEST(Pipeline, PodJobLabelsMakeThePeersOfAHangSuspect) {
  struct Collect : DecisionSink {
    void write(const Decision& d) override {
      got.push_back(d.node + " " + std::string(actionName(d.action)) + " " + d.rule);
    }
    std::vector<std::string> got;
  } sink;
  Pipeline p(shippedBank(), Taint{}, {&sink});
  RecordBatch pods;
  pods.labels = {{"k8s.pod.name", "train-0"}, {"batch.kubernetes.io/job-name", "train"},
                 {"k8s.pod.name", "train-1"}, {"batch.kubernetes.io/job-name", "train"},
                 {"k8s.pod.name", "train-2"}, {"batch.kubernetes.io/job-name", "train"},
                 {"k8s.pod.name", "other-0"}, {"job-name", "other"}};
  pods.records.push_back({100 * kNanosPerSecond, "n1", "step 10", 0, 2, StreamKind::kPod});
  pods.records.push_back({101 * kNanosPerSecond, "n1", "step 11", 0, 2, StreamKind::kPod});
  pods.records.push_back({100 * kNanosPerSecond, "n2", "step 10", 2, 4, StreamKind::kPod});
  pods.records.push_back({100 * kNanosPerSecond, "n4", "step 10", 4, 6, StreamKind::kPod});
  pods.records.push_back({100 * kNanosPerSecond, "n3", "step 3", 6, 8, StreamKind::kPod});
  p.process(pods);
  RecordBatch kernel;
  for (const char* node : {"n1", "n4", "n3"}) {
    kernel.records.push_back({160 * kNanosPerSecond, node,
                              "NEURON_HW_ERR=HANG_ON_COLLECTIVES instance-id=i-1 nd-id=0 nc-id=0",
                              0, 0, StreamKind::kKernel});
  }
  p.process(kernel);
  EXPECT_TRUE(sink.got.empty());
  RecordBatch later;
  later.records.push_back(
      {800 * kNanosPerSecond, "n3", "systemd[1]: Started session 7.", 0, 0, StreamKind::kKernel});
  p.process(later);
  EXPECT_EQ(sink.got, std::vector<std::string>{"n2 suspect neuron-hang-on-collectives"});
  EXPECT_EQ(p.correlator().state("n2"), Correlator::NodeState::kHealthy);
}

// suppressed_by drops a hit when one of its rules hit first, for an info rule's hits too: one
// that is then corroborated must not fault, or its fault (quiet: 24h) holds the node's taint
// after the suppressing fault has cleared.
TEST(Pipeline, SuppressedByHoldsBackAnInfoRulesCorroboratedHit) {
  const std::string text = R"(signatures:
  - {id: k, streams: [kernel], severity: warning, pattern: 'KDOWN', examples: {match: [KDOWN]}}
  - {id: big, streams: [kernel], severity: fatal, pattern: 'BIGFAULT', examples: {match: [BIGFAULT]}}
  - {id: boot, streams: [kernel], severity: info, pattern: 'BOOTED', examples: {match: [BOOTED]}}
  - {id: p, streams: [pod], severity: info, pattern: 'PODERR', examples: {match: [PODERR]}}
rules:
  - {id: k, signature: k, severity: warning, count: 2, window: 1h}
  - {id: big, signature: big, severity: fatal, recovery: {by: [boot]}}
  - {id: boot, signature: boot, severity: info}
  - id: p
    signature: p
    severity: info
    corroborated_by: {rules: [k], within: 10m}
    suppressed_by: {rules: [big], within: 1h}
    recovery: {quiet: 24h}
)";
  CollectingSink sink;
  Pipeline p(loadBank({{"a.yaml", text}}), Taint{}, {&sink});
  const std::vector<std::tuple<int64_t, std::string, StreamKind>> lines = {
      {100, "BIGFAULT", StreamKind::kKernel},
      {150, "PODERR", StreamKind::kPod},  // within 1h of big: suppressed, corroborated or not
      {200, "KDOWN", StreamKind::kKernel},
      {300, "PODERR", StreamKind::kPod},
      {400, "BOOTED", StreamKind::kKernel},
      {900, "later", StreamKind::kKernel}};
  RecordBatch batch;  // records view the lines
  for (const auto& [sec, line, stream] : lines) {
    batch.records.push_back({sec * kNanosPerSecond, "n1", line, 0, 0, stream});
  }
  p.process(batch);
  ASSERT_EQ(sink.got.size(), 2U);
  EXPECT_EQ(sink.got[0].rule, "big");
  EXPECT_EQ(sink.got[1].action, Decision::Action::kUntaint);
  EXPECT_EQ(p.correlator().stats().suppressed, 2U);
}

// A pod's NCCL error line, which the shipped bank's nccl-error rule counts per job.
constexpr std::string_view kNcclError =
    "torch.distributed.DistBackendError: NCCL error in: "
    "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1333, unhandled system error (run "
    "with NCCL_DEBUG=INFO for details), NCCL version 2.18.1";

// Each decision as "node rule".
struct NodeRuleSink : DecisionSink {
  void write(const Decision& d) override { got.push_back(d.node + " " + d.rule); }
  std::vector<std::string> got;
};

// A pod hit names its pod's job; with distinct_jobs (the NCCL rules) a node taints only when
// episodes of two jobs implicate it: one job's two episodes, and lines of pods without a job,
// count for no node.
TEST(Pipeline, DistinctJobsCountEachJobOnce) {
  NodeRuleSink sink;
  Pipeline p(shippedBank(), Taint{}, {&sink});
  // Each node's pod logs the line 1000 s and 12000 s in: n1 in jobs a then b, n2 in job a twice,
  // n3 with no job label.
  const std::vector<std::pair<std::string, std::vector<std::string>>> nodes = {
      {"n1", {"a", "b"}}, {"n2", {"a", "a"}}, {"n3", {"", ""}}};
  for (int episode = 0; episode < 2; ++episode) {
    RecordBatch b;
    for (const auto& [node, jobs] : nodes) {
      const auto first = static_cast<uint32_t>(b.labels.size());
      b.labels.push_back({"k8s.pod.name", b.copy(node + "-worker")});
      if (!jobs[episode].empty()) {
        b.labels.push_back({"job_name", b.copy(jobs[episode])});
      }
      b.records.push_back({(episode == 0 ? 1000 : 12000) * kNanosPerSecond, b.copy(node),
                           b.copy(kNcclError), first, static_cast<uint32_t>(b.labels.size()),
                           StreamKind::kPod});
    }
    BatchMatch m;
    p.match(0, b, &m);
    ASSERT_EQ(m.hits.size(), 3u);
    EXPECT_EQ(m.hits[0].field("job"), nodes[0].second[episode]);
    EXPECT_EQ(m.hits[2].field("job"), "");
    p.correlate(m);
  }
  // Hits wait while their cluster window (10 min) may still grow into a job-wide event.
  RecordBatch later;
  later.records.push_back(
      {20000 * kNanosPerSecond, "n1", "systemd[1]: Started session 9.", 0, 0, StreamKind::kKernel});
  p.process(later);
  EXPECT_EQ(sink.got, std::vector<std::string>{"n1 nccl-error"});
}

// A job's later episode replaces its earlier one in the count: job a at 0 and at 2 h, job b a
// day after the first: a's second episode and b's are two jobs within the day (the first alone
// counted, a's episode had left the window when b's came, and the node was not tainted).
TEST(Pipeline, DistinctJobsCountEachJobsLatestEpisode) {
  NodeRuleSink sink;
  Pipeline p(shippedBank(), Taint{}, {&sink});
  const int64_t hour = 3600;
  for (const auto& [at, job] : std::vector<std::pair<int64_t, std::string>>{
           {1000, "a"}, {1000 + 2 * hour, "a"}, {1000 + 24 * hour + 600, "b"}}) {
    RecordBatch b;
    b.labels.push_back({"k8s.pod.name", "w-0"});
    b.labels.push_back({"job_name", b.copy(job)});
    b.records.push_back({at * kNanosPerSecond, "n1", b.copy(kNcclError), 0, 2, StreamKind::kPod});
    p.process(b);
  }
  RecordBatch later;  // past the cluster window (10 min) that holds the hits
  later.records.push_back({(1000 + 25 * hour) * kNanosPerSecond, "n1",
                           "systemd[1]: Started session 9.", 0, 0, StreamKind::kKernel});
  p.process(later);
  EXPECT_EQ(sink.got, std::vector<std::string>{"n1 nccl-error"});
}

TEST(Bank, DistinctJobsNeedsACountAndAPodSignature) {
  const std::string sigs = R"(signatures:
  - id: k
    streams: [kernel]
    severity: warning
    pattern: 'kernel thing'
    examples: {match: ['kernel thing']}
  - id: p
    streams: [pod]
    severity: warning
    pattern: 'pod thing'
    examples: {match: ['pod thing']}
rules:
)";
  EXPECT_EQ(problemsOf({{"a.yaml", sigs + "  - {id: r, signature: p, severity: warning, count: 2, "
                                          "window: 1h, distinct_jobs: true}\n"}}),
            "");
  EXPECT_TRUE(reports(problemsOf({{"a.yaml", sigs + "  - {id: r, signature: k, severity: "
                                                    "warning, count: 2, distinct_jobs: true}\n"}}),
                      "a.yaml:13: rule r: distinct_jobs needs a count of at least 2 and a pod "
                      "signature"));
  EXPECT_TRUE(reports(problemsOf({{"a.yaml", sigs + "  - {id: r, signature: p, severity: "
                                                    "warning, distinct_jobs: true}\n"}}),
                      "a.yaml:13: rule r: distinct_jobs needs a count of at least 2 and a pod "
                      "signature"));
  EXPECT_TRUE(
      reports(problemsOf({{"a.yaml", sigs + "  - {id: r, signature: p, severity: "
                                            "warning, count: 2, distinct_jobs: yes please}\n"}}),
              "a.yaml:13: rule r: distinct_jobs is true or false"));
}

// An info rule acts only through corroborated_by, on its first corroborated hit: a count there
// would be ignored (three corroborated hits read as one), as a fatal rule's would, and the
// correlator reads none of the other keys of counting on it: each would load and do nothing.
TEST(Bank, RefusesCountingOnAnInfoRule) {
  const std::string sigs = R"(signatures:
  - id: k
    streams: [kernel]
    severity: warning
    pattern: 'kernel thing'
    examples: {match: ['kernel thing']}
  - id: p
    streams: [pod]
    severity: info
    pattern: 'pod (?P<state>up|down)'
    examples: {match: ['pod up']}
rules:
  - {id: k, signature: k, severity: warning, count: 2, window: 1h}
)";
  const std::string info =
      "  - {id: r, signature: p, severity: info, corroborated_by: {rules: [k], within: 10m}";
  EXPECT_EQ(problemsOf({{"a.yaml", sigs + info + "}\n"}}), "");
  EXPECT_TRUE(reports(problemsOf({{"a.yaml", sigs + info + ", count: 3, window: 1h}\n"}}),
                      "a.yaml:14: rule r: an info rule acts only through corroborated_by, on its "
                      "first hit; use severity warning to count"));
  for (const std::string key :
       {"window: 1h", "dedup: 1m", "burst: 1m", "unless_followed_by: {rules: [k], within: 5m}",
        "cluster: {nodes: 4, within: 10m}",
        "flap: {field: state, down: [down], up: [up], within: 5m}"}) {
    const std::string name = key.substr(0, key.find(':'));
    EXPECT_TRUE(reports(problemsOf({{"a.yaml", sigs + info + ", " + key + "}\n"}}),
                        "a.yaml:14: rule r: " + name +
                            " does nothing on an info rule, which acts only through "
                            "corroborated_by, on its first hit; use severity warning"))
        << key;
  }
}

}  // namespace
}  // namespace faultline
