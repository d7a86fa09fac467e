// The `faultline` command line: replay, serve, rules test.
#pragma once

#include <string>
#include <vector>

#include "ingest/archive/archive_source.h"

namespace faultline {

// Runs the command line; returns the process exit code: 0 success (replay whether or not it
// tainted); 2 a usage or configuration error, a bank that does not load, an error that ends serve
// (a port taken), replay inputs not read in full or decisions not written; 1 only when serve's
// restart on new rules cannot execv the binary.
int runCli(int argc, char** argv);

// Makes glibc's malloc keep freed memory for reuse: blocks under 32 MiB come from the heap and an
// arena's free top goes back to the kernel only past 64 MiB. Called once, before any thread
// starts (main, and the benchmarks, which measure the engine as the command runs it).
void keepFreedMemory();

// The sample archive compiled into the binary (tests/data/sample/), replayed by `faultline
// replay` when no file is given.
std::vector<ArchiveInput> embeddedSample();

}  // namespace faultline
