#include "matcher/matcher.h"

#include <algorithm>
#include <array>
#include <functional>

#include "core/time.h"

namespace faultline {

std::string_view fieldOf(const std::vector<std::pair<std::string, std::string>>& fields,
                         std::string_view name) {
  for (const auto& [k, v] : fields) {
    if (k == name) {
      return v;
    }
  }
  return {};
}

bool quotesProcessText(std::string_view text) {
  // Each head is the kernel's own text and, but for ' launched ' and the last three, longer than
  // a process name (TASK_COMM_LEN, 15 bytes), so a process cannot forge one in its name. The first
  // form covers x86's segfault reports (arch/x86/mm/fault.c), the second its trap, general
  // protection, control protection, split lock and bad frame reports (arch/x86/kernel/traps.c,
  // cet.c, whose control protection report prints the shadow stack pointer `ssp:` too, signal.c),
  // the third arm64's (arch/arm64/kernel/traps.c). Then: the module name of request_module() when
  // modprobe is busy (kernel/module/kmod.c), which a process names by binding an AF_ALG socket to
  // the algorithm "crypto-" stands before; the version string a client of /dev/nvidiactl sends (the
  // NVIDIA driver's version check). The executable stack warning (fs/exec.c, the last four
  // components of the executed path), the direct I/O one (mm/filemap.c or fs/direct-io.c,
  // dio_warn_stale_pagecache, the path of the file written) and the one for a setuid-root file with
  // capabilities (security/commoncap.c, the path execve() was given) quote at the very start of
  // their message, so their head is that start: of the line, or after a dmesg stamp or a syslog
  // tag. A process named so hides only a match that starts after its name in a line naming it, and
  // every shipped signature's match in such a line (an Xid's "name=") starts before the name.
  // Last, a quote opened after a space or '=' and not closed: the kernel quotes what a process gave
  // it in many more reports than these (a mount option's key in "tmpfs: Unknown parameter 'KEY'",
  // fs/fs_parser.c; overlayfs's "failed to resolve 'PATH'"; audit's exe="PATH" and name="PATH",
  // quoted when they hold no space or quote, kernel/audit.c), and no fault line starts in one.
  static const RE2 head(
      R"((?:segfault at [0-9a-f]+ ip [0-9a-f]+ sp [0-9a-f]+ error [0-9a-f]+|)"
      R"( ip:[0-9a-f]+ sp:[0-9a-f]+ (?:ssp:[0-9a-f]+ )?(?:error|orax):[0-9a-f]+(?:\([^)]*\))?|)"
      R"(\]: unhandled exception: .*?) in |ptrace (?:attach|traceme) of "|' launched '|)"
      R"(request_module: (?:sigkill sent for )?modprobe |\(max_modprobes: \d+\), for module |)"
      R"(NVRM: API mismatch: the client |(?:^|\] |kernel: )(?:process '|File: |warning: `)|)"
      R"([ =]'[^']*$|[ =]"[^"]*$)");
  constexpr size_t kShortest = 2;  // " '"
  return text.size() >= kShortest && RE2::PartialMatch(text, head);
}

bool jsonObjectText(std::string_view line) {
  constexpr std::string_view kBlank = " \t\r\n";
  const size_t open = line.find_first_not_of(kBlank);
  if (open == std::string_view::npos || line[open] != '{') {
    return false;
  }
  const size_t key = line.find_first_not_of(kBlank, open + 1);
  return key != std::string_view::npos && (line[key] == '"' || line[key] == '}');
}

std::string_view Hit::field(std::string_view name) const {
  return fieldOf(fields, name);
}

std::vector<ExampleFailure> checkExamples(const Bank& bank) {
  Matcher matcher(std::shared_ptr<const Bank>(&bank, [](const Bank*) {}));
  std::vector<ExampleFailure> failures;
  // An example's hits, matched as the service matches a line of stream kind `kind`.
  const auto hitsOf = [&](const std::string& line, StreamKind kind) {
    RecordBatch batch;
    LogRecord& rec = batch.records.emplace_back();
    rec.line = line;
    rec.stream = kind;
    std::vector<Hit> hits;
    matcher.match(batch, &hits);
    return hits;
  };
  for (uint32_t i = 0; i < bank.signatures.size(); ++i) {
    const Signature& sig = bank.signatures[i];
    const auto has_field = [&](const std::string& name) {
      return std::find(sig.fields.begin(), sig.fields.end(), name) != sig.fields.end() ||
             std::any_of(sig.tables.begin(), sig.tables.end(), [&](uint32_t t) {
               const std::vector<std::string>& columns = bank.tables[t].columns;
               return std::find(columns.begin(), columns.end(), name) != columns.end();
             });
    };
    for (const Example& ex : sig.match_examples) {
      for (const auto& [name, value] : ex.fields) {
        if (!has_field(name)) {  // else an expected '' would pass unchecked
          failures.push_back({i, &ex, "field " + name + " is none of the signature's"});
        }
      }
    }
    for (int k = 0; k < kStreamKinds; ++k) {
      const auto kind = static_cast<StreamKind>(k);
      if (!sig.appliesTo(kind)) {
        continue;
      }
      const std::string on = " on stream " + std::string(streamKindName(kind));
      for (const Example& ex : sig.match_examples) {
        const std::vector<Hit> hits = hitsOf(ex.line, kind);
        const auto hit =
            std::find_if(hits.begin(), hits.end(), [&](const Hit& h) { return h.signature == i; });
        if (hit == hits.end()) {
          failures.push_back({i, &ex, "match example not matched" + on});
          continue;
        }
        for (const auto& [name, value] : ex.fields) {
          if (hit->field(name) != value) {
            failures.push_back({i, &ex,
                                "field " + name + " is '" + std::string(hit->field(name)) +
                                    "', expected '" + value + "'" + on});
          }
        }
      }
      for (const Example& ex : sig.no_match_examples) {
        const std::vector<Hit> hits = hitsOf(ex.line, kind);
        if (std::any_of(hits.begin(), hits.end(), [&](const Hit& h) { return h.signature == i; })) {
          failures.push_back({i, &ex, "no_match example matched" + on});
        }
      }
    }
  }
  return failures;
}

Matcher::Matcher(std::shared_ptr<const Bank> bank) : bank_(std::move(bank)) {
  for (int k = 0; k < kStreamKinds; ++k) {
    gates_.push_back(bank_->sets[static_cast<size_t>(k)].gate);
    tuned_[static_cast<size_t>(k)] = !bank_->sets[static_cast<size_t>(k)].set;
  }
}

void Matcher::sample(const LogRecord& rec) {
  const auto k = static_cast<size_t>(rec.stream);
  sample_[k].append(rec.line.substr(0, kTuneLineBytes)).push_back('\n');
  if (++sampled_[k] == kTuneLines) {
    gates_[k] = LiteralGate(bank_->patterns(rec.stream), sample_[k]);
    tuned_[k] = true;
    sample_[k] = std::string();
  }
}

void Matcher::matchSet(std::string_view line, StreamKind kind) {
  sigs_.clear();
  const CompiledSet& cs = bank_->sets[static_cast<size_t>(kind)];
  if (!cs.set) {
    return;
  }
  const std::vector<uint32_t>& index = cs.signature;
  RE2::Set::ErrorInfo info{};
  ids_.clear();
  const bool any = cs.set->Match(line, &ids_, &info);
  if (!any && info.kind != RE2::Set::kNoError) {
    // The DFA ran out of memory (or the set is inconsistent): a false here does not mean "no
    // match", so fall back to each pattern on its own. Debian's RE2 (20220601) does not get here
    // for a compiled Set (it compiles only with DFA room for 20 of its largest states, and a Set's
    // search resets its cache rather than bail out), so no test provokes it; other RE2 versions
    // may.
    ++stats_.set_errors;
    for (uint32_t sig : index) {
      if (RE2::PartialMatch(line, *bank_->signatures[sig].re)) {
        sigs_.push_back(sig);
      }
    }
    return;
  }
  for (int id : ids_) {
    sigs_.push_back(index[static_cast<size_t>(id)]);
  }
  std::sort(sigs_.begin(), sigs_.end());
}

std::vector<uint32_t> Matcher::matchLine(std::string_view line, StreamKind kind) {
  sigs_.clear();
  if (gates_[static_cast<size_t>(kind)].mayMatch(line)) {
    matchSet(line, kind);
  }
  return sigs_;
}

bool Matcher::extract(std::string_view line, StreamKind kind, const Signature& sig,
                      Fields* fields) {
  std::array<re2::StringPiece, kMaxCaptureGroups + 1> groups;  // loadBank refuses more groups
  const int n = static_cast<int>(sig.fields.size()) + 1;
  // Every match starts with the prefix, so the leftmost match starts at its first occurrence if
  // any match starts there: a search anchored there skips the two DFA passes (forward, then
  // reverse) that an unanchored search spends finding where the match starts.
  const size_t at = sig.prefix.empty() ? std::string_view::npos : line.find(sig.prefix);
  if ((at == std::string_view::npos ||
       !sig.re->Match(line, at, line.size(), RE2::ANCHOR_START, groups.data(), n)) &&
      !sig.re->Match(line, 0, line.size(), RE2::UNANCHORED, groups.data(), n)) {
    return false;  // the Set and the single pattern disagree only on pathological input
  }
  // Only the text before the match is searched: for most lines a few bytes of envelope. A pattern
  // that takes "^[^\n]*" before its own text starts at the line's start whatever that text
  // follows, so its own text's start is its body's leftmost match.
  if (kind == StreamKind::kKernel) {
    auto start = static_cast<size_t>(groups[0].data() - line.data());
    re2::StringPiece body;
    if (start == 0 && sig.body &&
        sig.body->Match(line, 0, line.size(), RE2::UNANCHORED, &body, 1)) {
      start = static_cast<size_t>(body.data() - line.data());
    }
    if (quotesProcessText(line.substr(0, start))) {
      return false;  // the leftmost match starts in a process's text, so every match does
    }
  }
  fields->clear();
  size_t columns = 0;
  for (uint32_t t : sig.tables) {
    columns += bank_->tables[t].columns.size();
  }
  fields->reserve(static_cast<size_t>(n - 1) + columns);  // one allocation for a hit's fields
  for (int g = 1; g < n; ++g) {
    const std::string& name = sig.fields[static_cast<size_t>(g - 1)];
    if (!name.empty() && groups[static_cast<size_t>(g)].data() != nullptr) {
      fields->emplace_back(name, std::string(groups[static_cast<size_t>(g)]));
    }
  }
  for (uint32_t t : sig.tables) {
    const Table& table = bank_->tables[t];
    table_key_.clear();
    for (size_t i = 0; i < table.key.size(); ++i) {
      if (i > 0) {
        table_key_ += '\x1f';
      }
      table_key_ += fieldOf(*fields, table.key[i]);
    }
    if (const auto row = table.rows.find(table_key_); row != table.rows.end()) {
      for (size_t c = 0; c < table.columns.size(); ++c) {
        fields->emplace_back(table.columns[c], row->second[c]);
      }
    }
  }
  return true;
}

void Matcher::match(const RecordBatch& batch, std::vector<Hit>* hits) {
  // The gate first, over each kind's lines of the batch; the Set then only where it passed.
  // Sampling for the tune shares the one pass that sorts the lines by kind: a kind that never
  // comes (pod lines on a kernel topic) stays untuned and must not cost a pass of its own.
  const size_t n = batch.records.size();
  may_.assign(n, 0);
  for (auto& l : lines_) {
    l.clear();
  }
  for (auto& i : index_) {
    i.clear();
  }
  for (size_t i = 0; i < n; ++i) {
    const LogRecord& rec = batch.records[i];
    const auto k = static_cast<size_t>(rec.stream);
    if (!tuned_[k]) {
      sample(rec);
    }
    if (bank_->sets[k].set) {
      lines_[k].push_back(rec.line);
      index_[k].push_back(static_cast<uint32_t>(i));
    }
  }
  for (size_t k = 0; k < kStreamKinds; ++k) {
    flags_.resize(lines_[k].size());
    gates_[k].mayMatch(lines_[k].data(), lines_[k].size(), flags_.data());
    for (size_t j = 0; j < flags_.size(); ++j) {
      may_[index_[k][j]] = flags_[j];
    }
  }
  const LogRecord* last = nullptr;  // the latest record that made hits, from hits[last_hits] on
  size_t last_hits = 0;
  for (size_t i = 0; i < n; ++i) {
    const LogRecord& rec = batch.records[i];
    ++stats_.lines;
    ++seq_;
    if (may_[i] == 0) {
      continue;  // the common case: no literal of the bank, so no signature can match
    }
    ++stats_.candidates;
    if (last != nullptr && rec.line == last->line && rec.node == last->node &&
        rec.stream == last->stream && rec.time_ns >= last->time_ns &&
        secondOf(rec.time_ns) == secondOf(last->time_ns) &&
        (rec.stream != StreamKind::kPod || batch.job(rec) == batch.job(*last))) {
      for (size_t h = last_hits; h < hits->size(); ++h) {  // a flood of one line
        ++(*hits)[h].repeats;
      }
      stats_.hits += hits->size() - last_hits;
      continue;
    }
    const size_t first_hit = hits->size();
    auto emit = [&](uint32_t sig) -> Hit& {
      Hit& hit = hits->emplace_back();
      hit.time_ns = rec.time_ns;
      hit.node = rec.node;
      hit.signature = sig;
      hit.stream = rec.stream;
      hit.line = rec.line;
      hit.seq = seq_;
      ++stats_.hits;
      return hit;
    };
    Seen& seen = seen_[std::hash<std::string_view>()(rec.line) % kSeenSlots];
    if (seen.valid && seen.stream == rec.stream && seen.line == rec.line) {
      ++stats_.reused;
      for (const auto& [sig, f] : seen.hits) {
        emit(sig).fields = f;
      }
    } else {
      matchSet(rec.line, rec.stream);
      if (rec.stream == StreamKind::kKernel && !sigs_.empty() && jsonObjectText(rec.line)) {
        ++stats_.json_kernel_lines;  // once per line, however many signatures it matched
        sigs_.clear();
      }
      seen.valid = rec.line.size() <= kSeenLineBytes;
      seen.stream = rec.stream;
      seen.line.assign(seen.valid ? rec.line : std::string_view());
      seen.hits.clear();
      for (uint32_t sig : sigs_) {
        Hit& hit = emit(sig);
        if (!extract(rec.line, rec.stream, bank_->signatures[sig], &hit.fields)) {
          hits->pop_back();
          --stats_.hits;
          continue;
        }
        if (seen.valid) {
          seen.hits.emplace_back(sig, hit.fields);
        }
      }
    }
    if (hits->size() > first_hit) {
      last = &rec;
      last_hits = first_hit;
      if (const std::string_view job = rec.stream == StreamKind::kPod ? batch.job(rec) : "";
          !job.empty()) {
        for (size_t h = first_hit; h < hits->size(); ++h) {
          (*hits)[h].fields.emplace_back(kJobField, job);
        }
      }
    }
  }
}

}  // namespace faultline
