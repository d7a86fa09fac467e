#include "core/rules_watch.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

namespace faultline {
namespace {

// A rule directory holding the embedded bank's files, removed at the end.
class RulesWatchTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() / ("rules_watch_test." + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directory(dir_);
    for (const RuleFile& f : embeddedRuleFiles()) {
      std::ofstream(dir_ / std::filesystem::path(f.name).filename()) << f.text;
    }
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
  }
  std::filesystem::path dir_;
};

constexpr const char* kBroken =
    "signatures:\n"
    "  - id: broken\n"
    "    description: a pattern that does not compile\n"
    "    streams: [kernel]\n"
    "    severity: fatal\n"
    "    pattern: 'FLTEST: (unclosed'\n"
    "    examples:\n"
    "      match: ['FLTEST: (unclosed']\n";

constexpr const char* kNewSignature =
    "signatures:\n"
    "  - id: fltest-wedged\n"
    "    description: a test signature\n"
    "    streams: [kernel]\n"
    "    severity: fatal\n"
    "    pattern: 'FLTEST: accelerator \\d+ wedged'\n"
    "    examples:\n"
    "      match: ['FLTEST: accelerator 7 wedged']\n";

// The running bank's files give kRunning; a file that does not load is refused once with its
// file, line and cause, then reported unchanged; the directory back as it was is kRunning again.
TEST_F(RulesWatchTest, ARefusedBankIsReportedOnceAndTheRunningOneStays) {
  RulesWatch watch(dir_.string(), readRuleDir(dir_.string()));
  RulesWatch::Check c = watch.check();
  EXPECT_EQ(c.state, RulesWatch::State::kRunning);
  EXPECT_FALSE(c.changed);

  write("zz-broken.yaml", kBroken);
  c = watch.check();
  EXPECT_EQ(c.state, RulesWatch::State::kRefused);
  EXPECT_TRUE(c.changed);
  EXPECT_NE(watch.message().find("zz-broken.yaml:6: signature broken: pattern does not compile"),
            std::string::npos)
      << watch.message();
  c = watch.check();
  EXPECT_EQ(c.state, RulesWatch::State::kRefused);
  EXPECT_FALSE(c.changed);

  std::filesystem::remove(dir_ / "zz-broken.yaml");
  c = watch.check();
  EXPECT_EQ(c.state, RulesWatch::State::kRunning);
  EXPECT_TRUE(c.changed);
  EXPECT_EQ(watch.message(), "");
}

// Files that load are a new bank when a YAML document changed: a new signature, or one value.
TEST_F(RulesWatchTest, FilesThatLoadAreANewBank) {
  const size_t signatures = loadBank(readRuleDir(dir_.string()))->signatures.size();
  RulesWatch watch(dir_.string(), readRuleDir(dir_.string()));
  write("zz-test.yaml", kNewSignature);
  const RulesWatch::Check c = watch.check();
  EXPECT_EQ(c.state, RulesWatch::State::kNew);
  EXPECT_TRUE(c.changed);
  EXPECT_EQ(watch.message().rfind(std::to_string(signatures + 1) + " signatures and ", 0), 0U)
      << watch.message();

  RulesWatch edited(dir_.string(), readRuleDir(dir_.string()));
  std::string wedged = kNewSignature;
  wedged.replace(wedged.find("a test signature"), 16, "another description");
  write("zz-test.yaml", wedged);
  EXPECT_EQ(edited.check().state, RulesWatch::State::kNew);
}

// Files that load, but on which a restart would refuse to start (`runnable` throws: serve's
// configuration names a rule they lack), are refused with its reason; asked about again at each
// check, reported once while the answer stays, and a new bank once the answer changes.
TEST_F(RulesWatchTest, FilesARestartWouldRefuseAreRefusedUntilItWouldNot) {
  bool refuse = true;
  RulesWatch watch(dir_.string(), readRuleDir(dir_.string()),
                   [&refuse](const std::shared_ptr<const Bank>& bank) {
                     if (refuse && !bank->ruleIndex("fltest-rule")) {
                       throw std::runtime_error("dry_run_rules: no rule 'fltest-rule' in the bank");
                     }
                   });
  write("zz-test.yaml", kNewSignature);
  RulesWatch::Check c = watch.check();
  EXPECT_EQ(c.state, RulesWatch::State::kRefused);
  EXPECT_TRUE(c.changed);
  EXPECT_EQ(watch.message(), "dry_run_rules: no rule 'fltest-rule' in the bank");
  c = watch.check();
  EXPECT_EQ(c.state, RulesWatch::State::kRefused);
  EXPECT_FALSE(c.changed);
  refuse = false;
  c = watch.check();
  EXPECT_EQ(c.state, RulesWatch::State::kNew);
  EXPECT_TRUE(c.changed);
}

// Files that load and differ from the running bank's only in comments, blank lines, indentation
// and quoting are the running bank: reported once as changed, and no restart.
TEST_F(RulesWatchTest, CommentsAndLayoutAloneAreTheRunningBank) {
  write("zz-test.yaml", kNewSignature);
  RulesWatch watch(dir_.string(), readRuleDir(dir_.string()));
  write("zz-test.yaml",
        "# a wedged accelerator\n"
        "signatures:\n"
        "    - id: \"fltest-wedged\"   # quoted now\n"
        "      description: a test signature\n"
        "\n"
        "      streams: [ kernel ]\n"
        "      severity: fatal\n"
        "      pattern: 'FLTEST: accelerator \\d+ wedged'\n"
        "      examples: {match: ['FLTEST: accelerator 7 wedged']}\n");
  RulesWatch::Check c = watch.check();
  EXPECT_EQ(c.state, RulesWatch::State::kRunning);
  EXPECT_TRUE(c.changed);
  EXPECT_EQ(watch.message(), "in other comments or layout");
  c = watch.check();
  EXPECT_EQ(c.state, RulesWatch::State::kRunning);
  EXPECT_FALSE(c.changed);

  // The same document under another file name is another bank's file.
  std::filesystem::rename(dir_ / "zz-test.yaml", dir_ / "zz-wedged.yaml");
  c = watch.check();
  EXPECT_EQ(c.state, RulesWatch::State::kNew);
  EXPECT_TRUE(c.changed);
}

// A directory gone (its ConfigMap deleted) or left with no rule file is refused, not an empty bank.
TEST_F(RulesWatchTest, ADirectoryWithoutRulesIsRefused) {
  RulesWatch watch(dir_.string(), readRuleDir(dir_.string()));
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    std::filesystem::remove(entry.path());
  }
  RulesWatch::Check c = watch.check();
  EXPECT_EQ(c.state, RulesWatch::State::kRefused);
  EXPECT_TRUE(c.changed);
  EXPECT_NE(watch.message().find("no *.yaml rule file"), std::string::npos) << watch.message();
  EXPECT_FALSE(watch.check().changed);

  std::filesystem::remove_all(dir_);
  c = watch.check();
  EXPECT_EQ(c.state, RulesWatch::State::kRefused);
  EXPECT_TRUE(c.changed);  // another cause
  EXPECT_NE(watch.message().find("No such file or directory"), std::string::npos)
      << watch.message();
}

// An entry whose type cannot be read (a symbolic link loop; in a directory synced by another tool,
// or a link into a directory the service may not search) is refused as a file that does not load:
// it neither throws out of check() nor ends the service. A link to nothing (a key the kubelet
// removed) is no file.
TEST_F(RulesWatchTest, AnEntryThatCannotBeStattedIsRefused) {
  RulesWatch watch(dir_.string(), readRuleDir(dir_.string()));
  std::filesystem::create_symlink("zz-gone.yaml", dir_ / "zz-dangling.yaml");
  EXPECT_FALSE(watch.check().changed);

  std::filesystem::create_symlink("zz-loop.yaml", dir_ / "zz-loop.yaml");
  RulesWatch::Check c;
  ASSERT_NO_THROW(c = watch.check());
  EXPECT_EQ(c.state, RulesWatch::State::kRefused);
  EXPECT_TRUE(c.changed);
  EXPECT_NE(watch.message().find("zz-loop.yaml: Too many levels of symbolic links"),
            std::string::npos)
      << watch.message();

  std::filesystem::remove(dir_ / "zz-loop.yaml");
  c = watch.check();
  EXPECT_EQ(c.state, RulesWatch::State::kRunning);
  EXPECT_TRUE(c.changed);
}

// A rule file the service may not read (its mode, an owner other than the service's user) is
// refused, not read as an empty file: that bank would load without the file's signatures and
// rules, and the service restart on it.
TEST_F(RulesWatchTest, AFileThatCannotBeReadIsRefused) {
  RulesWatch watch(dir_.string(), readRuleDir(dir_.string()));
  write("zz-test.yaml", kNewSignature);
  std::filesystem::permissions(dir_ / "zz-test.yaml", std::filesystem::perms::none);
  // Root reads any file: as root, the check runs in a child as nobody.
  auto checked = [&watch] {
    const RulesWatch::State state = watch.check().state;
    return state == RulesWatch::State::kRefused &&
                   watch.message().find("zz-test.yaml: Permission denied") != std::string::npos
               ? 0
               : 1 + static_cast<int>(state);
  };
  if (geteuid() != 0) {
    EXPECT_EQ(checked(), 0) << watch.message();
    return;
  }
  namespace fs = std::filesystem;
  fs::permissions(dir_, fs::perms::others_read | fs::perms::others_exec, fs::perm_options::add);
  for (const auto& entry : fs::directory_iterator(dir_)) {
    if (entry.path().filename() != "zz-test.yaml") {  // whatever the umask
      fs::permissions(entry.path(), fs::perms::others_read, fs::perm_options::add);
    }
  }
  const pid_t child = fork();
  ASSERT_NE(child, -1);
  if (child == 0) {
    _exit(setgid(65534) == 0 && setuid(65534) == 0 ? checked() : 9);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  // 0: refused; 1 + State: another state (2: kRefused with another message, 3: kNew).
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// A rule file that opens but whose read fails (EIO from the disk or a network volume) is refused
// with its file and cause, not read as empty or cut short: that bank would load without the
// file's signatures and rules, and the service restart on it. /proc/self/mem opens and answers
// its first read with EIO.
TEST_F(RulesWatchTest, AFileWhoseReadFailsIsRefused) {
  RulesWatch watch(dir_.string(), readRuleDir(dir_.string()));
  std::filesystem::remove(dir_ / "neuron.yaml");
  std::filesystem::create_symlink("/proc/self/mem", dir_ / "neuron.yaml");
  const RulesWatch::Check c = watch.check();
  EXPECT_EQ(c.state, RulesWatch::State::kRefused);
  EXPECT_NE(watch.message().find("neuron.yaml: Input/output error"), std::string::npos)
      << watch.message();
}

// A ConfigMap volume updated while it is read: each file is a link into `..data`, a link the
// kubelet swaps to a new directory by a rename. The files read are all of one version: a mix of
// two (here a rule naming a signature its file's version does not define) may not load, or load
// as a bank neither version is.
TEST(ReadRuleDir, AConfigMapSwappedWhileReadGivesOneVersion) {
  namespace fs = std::filesystem;
  const fs::path vol = fs::temp_directory_path() / ("rules_swap_test." + std::to_string(getpid()));
  fs::remove_all(vol);
  for (const std::string v : {"one", "two"}) {
    fs::create_directories(vol / (".." + v));
    std::ofstream(vol / (".." + v) / "a.yaml") << "signatures: [{id: sig-" << v << "}]\n";
    std::ofstream(vol / (".." + v) / "b.yaml") << "rules: [{id: r, signature: sig-" << v << "}]\n";
  }
  fs::create_directory_symlink("..one", vol / "..data");
  fs::create_symlink("..data/a.yaml", vol / "a.yaml");
  fs::create_symlink("..data/b.yaml", vol / "b.yaml");
  std::atomic<bool> done = false;
  std::thread kubelet([&] {
    for (int i = 0; !done; ++i) {
      fs::create_directory_symlink(i % 2 == 0 ? "..two" : "..one", vol / "..data_tmp");
      fs::rename(vol / "..data_tmp", vol / "..data");
    }
  });
  int mixed = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::vector<RuleFile> files = readRuleDir(vol.string());
    ASSERT_EQ(files.size(), 2U);
    mixed += static_cast<int>((files[0].text.find("sig-one") == std::string::npos) !=
                              (files[1].text.find("sig-one") == std::string::npos));
  }
  done = true;
  kubelet.join();
  fs::remove_all(vol);
  EXPECT_EQ(mixed, 0);
}

// As the kubelet does it, the directory the old `..data` named is then removed, file by file:
// a read of it that started before the swap finds some of its files gone. The files read are
// still all of one version, and all of them: a version without a file may load, as a bank
// without that file's rules, and the service would restart on it.
TEST(ReadRuleDir, AConfigMapSwappedAndItsOldVersionRemovedWhileReadGivesEveryFile) {
  namespace fs = std::filesystem;
  const fs::path vol =
      fs::temp_directory_path() / ("rules_swap_rm_test." + std::to_string(getpid()));
  fs::remove_all(vol);
  fs::create_directories(vol);
  auto write_version = [&](int v) {
    const fs::path d = vol / ("..v" + std::to_string(v));
    fs::create_directory(d);
    for (const char* name : {"a.yaml", "b.yaml", "c.yaml"}) {
      std::ofstream(d / name) << "# version " << v << "\n";
    }
  };
  write_version(0);
  fs::create_directory_symlink("..v0", vol / "..data");
  for (const char* name : {"a.yaml", "b.yaml", "c.yaml"}) {
    fs::create_symlink(std::string("..data/") + name, vol / name);
  }
  std::atomic<bool> done = false;
  std::thread kubelet([&] {
    for (int v = 1; !done; ++v) {
      write_version(v);
      fs::create_directory_symlink("..v" + std::to_string(v), vol / "..data_tmp");
      fs::rename(vol / "..data_tmp", vol / "..data");
      fs::remove_all(vol / ("..v" + std::to_string(v - 1)));
    }
  });
  int short_reads = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::vector<RuleFile> files = readRuleDir(vol.string());
    short_reads += static_cast<int>(files.size() != 3);
  }
  done = true;
  kubelet.join();
  fs::remove_all(vol);
  EXPECT_EQ(short_reads, 0);
}

// A restart's files: read back as written, whatever bytes they hold, the variable unset and the
// descriptor closed; nothing handed over when the variable is unset.
TEST(HandOverRuleFiles, TheFilesReadBackAsWritten) {
  ::unsetenv(kRuleFilesFd);
  EXPECT_FALSE(takeHandedOverRuleFiles().has_value());
  const std::vector<RuleFile> files = {
      {"/rules/a b.yaml", "signatures:\n  - id: x\n"},
      {"/rules/empty.yaml", ""},
      {"/rules/odd\n12 34\n.yaml", std::string("\0\xff 3 4\n", 6)},
  };
  std::string error;
  ASSERT_TRUE(handOverRuleFiles(files, &error)) << error;
  const char* named = std::getenv(kRuleFilesFd);
  ASSERT_NE(named, nullptr);
  const int fd = std::atoi(named);
  const std::optional<std::vector<RuleFile>> taken = takeHandedOverRuleFiles();
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ(*taken, files);
  EXPECT_EQ(std::getenv(kRuleFilesFd), nullptr);
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);  // closed
  EXPECT_FALSE(takeHandedOverRuleFiles().has_value());
}

// A variable set by hand, not by a restart: refused with what it named, never read as rules.
TEST(HandOverRuleFiles, WhatARestartDidNotWriteIsRefused) {
  auto refusal = [](const std::string& value) {
    ::setenv(kRuleFilesFd, value.c_str(), 1);
    try {
      (void)takeHandedOverRuleFiles();
    } catch (const BankError& e) {
      EXPECT_EQ(std::getenv(kRuleFilesFd), nullptr);
      return std::string(e.what());
    }
    return std::string("taken");
  };
  EXPECT_EQ(refusal("x3"), "FAULTLINE_RULE_FILES_FD=x3: not a file descriptor\n");
  EXPECT_EQ(refusal("999"), "FAULTLINE_RULE_FILES_FD=999: Bad file descriptor\n");
  for (const std::string text : {"", "5 1\nab", "3 x\nabc", "2 1\nab", "1 0 a", "01 0\na"}) {
    char path[] = "/tmp/fl-handed-XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    ::unlink(path);
    ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    const std::string why = refusal(std::to_string(fd));
    EXPECT_NE(why, "taken") << text;
    EXPECT_NE(why.find("FAULTLINE_RULE_FILES_FD=" + std::to_string(fd) + ": "), std::string::npos)
        << why;
    EXPECT_EQ(fcntl(fd, F_GETFD), -1) << text;  // closed
  }
}

}  // namespace
}  // namespace faultline
