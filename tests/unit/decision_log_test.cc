// The decision log: one JSON line per decision, and write errors that are not lost in silence.
#include "sinks/decision_log/decision_log.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
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

}  // namespace
}  // namespace faultline
