// The decision log: one JSON line per decision, and write errors that are not lost in silence.
#include "sinks/decision_log/decision_log.h"

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>
#include <unistd.h>

namespace faultline {
namespace {

Decision decision() {
  Decision d;
  d.node = "gpu-node-7";
  d.rule = "xid-fatal";
  d.evidence.push_back({0, "xid-79", "NVRM: Xid (PCI:0000:44:00): 79", {{"pci", "0000:44:00"}}});
  return d;
}

TEST(DecisionLog, AppendsOneLinePerDecision) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("decision_log_test." + std::to_string(getpid())))
          .string();
  std::filesystem::remove(path);
  {
    DecisionLog log(path);
    log.write(decision());
    log.write(decision());
    log.flush();
    EXPECT_EQ(log.errors(), 0u);
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string line = decisionToJson(decision()) + "\n";
  EXPECT_EQ(text.str(), line + line);
  std::filesystem::remove(path);
}

// A writer killed mid-line left the file without its last newline: the next process's first
// line starts after one, whole.
TEST(DecisionLog, AFileLeftMidLineGetsItsNewlineFirst) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("decision_log_torn." + std::to_string(getpid())))
          .string();
  for (const std::string& before : {std::string(R"({"time":"2026-12-0)"), std::string("{}\n")}) {
    std::ofstream(path, std::ios::trunc) << before;
    {
      DecisionLog log(path);
      log.write(decision());
    }
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const std::string newline = before.ends_with('\n') ? "" : "\n";
    EXPECT_EQ(text.str(), before + newline + decisionToJson(decision()) + "\n");
  }
  std::filesystem::remove(path);
}

// A decision of a rule in dry run says so, so that the log does not read as if the node had been
// tainted.
TEST(DecisionLog, MarksDryRunDecisions) {
  Decision dry = decision();
  dry.dry_run = true;
  const std::string line = decisionToJson(dry);
  EXPECT_NE(line.find(R"("action":"taint","dry_run":true,)"), std::string::npos) << line;
  EXPECT_EQ(decisionToJson(decision()).find("dry_run"), std::string::npos);
}

TEST(DecisionLog, ASuspectNamesNoTaint) {
  Decision suspect = decision();
  suspect.action = Decision::Action::kSuspect;
  suspect.rule = "neuron-hang-on-collectives";
  const std::string line = decisionToJson(suspect);
  EXPECT_NE(
      line.find(R"("node":"gpu-node-7","action":"suspect","rule":"neuron-hang-on-collectives",)"),
      std::string::npos)
      << line;
  EXPECT_EQ(line.find(R"("taint":)"), std::string::npos) << line;
}

TEST(DecisionLog, AWriteErrorIsReported) {
  DecisionLog log("/dev/full");  // every write fails with ENOSPC
  EXPECT_EQ(log.errors(), 0u);
  log.write(decision());
  EXPECT_EQ(log.errors(), 1u);
  log.write(decision());
  EXPECT_EQ(log.errors(), 2u);
}

// A full disk takes what fits of a line: the next decision's line starts after a newline, so
// that it stays whole. It was written right after the part left, two decisions unreadable and
// every JSON reader stopped there (a review, 2026-12-02). The file size limit makes the write
// short, then fail (EFBIG), as a full disk does; in a child process (tornWrite), which the limit
// must not outlive.
// The child: 0 when the first write failed, leaving part of its line, and the second
// decision's line is the file's last, whole.
int tornWrite() {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("fl-decisions-torn-" + std::to_string(getpid()) + ".jsonl"))
                               .string();
  std::signal(SIGXFSZ, SIG_IGN);  // else the short write kills the process
  rlimit limit{};
  getrlimit(RLIMIT_FSIZE, &limit);
  const rlimit full = limit;
  limit.rlim_cur = 100;
  setrlimit(RLIMIT_FSIZE, &limit);
  std::string last;
  uint64_t errors = 0;
  bool part_left = false;
  {
    DecisionLog log(path);
    log.write(decision());
    part_left = std::filesystem::file_size(path) == 100;
    setrlimit(RLIMIT_FSIZE, &full);
    log.flush();  // nothing left to write: it succeeds, and the part of a line stays unended
    Decision second = decision();
    second.node = "gpu-node-8";
    log.write(second);
    errors = log.errors();
  }
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    last = line;
  }
  std::filesystem::remove(path);
  const auto j = nlohmann::json::parse(last, nullptr, /*allow_exceptions=*/false);
  return errors == 1 && part_left && !j.is_discarded() && j.value("node", "") == "gpu-node-8" ? 0
                                                                                              : 1;
}

TEST(DecisionLog, ALineAfterAFailedWriteStaysWhole) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(tornWrite()), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace faultline
