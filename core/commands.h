// The `faultline` command line: replay, serve, rules test.
#pragma once

#include <string>
#include <vector>

#include "ingest/archive/archive_source.h"

namespace faultline {

// Runs the command line; returns the process exit code (0 ok, 1 failure found, 2 usage or
// configuration error).
int runCli(int argc, char** argv);

// Makes glibc's malloc keep freed memory for reuse: blocks under 32 MiB come from the heap and an
// arena's free top goes back to the kernel only past 64 MiB. Called once, before any thread
// starts (main, and the benchmarks, which measure the engine as the command runs it).
void keepFreedMemory();

// The sample archive compiled into the binary (tests/data/sample/), replayed by `faultline
// replay` when no file is given.
std::vector<ArchiveInput> embeddedSample();

}  // namespace faultline
