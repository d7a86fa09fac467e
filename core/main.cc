#include <malloc.h>

#include "core/commands.h"

int main(int argc, char** argv) {
  // Batches of a few hundred KiB (a push body's decoding, over 10 MiB for a large OTLP JSON one)
  // are allocated and freed thousands of times a second, often on different threads. With glibc's
  // defaults an arena gives its free top back to the kernel once it passes 128 KiB, and larger
  // blocks are mapped one by one until a freed one raises both thresholds, so each batch faulted
  // the same pages in again, and on two CPUs each unmap also stopped the other CPU to flush its
  // TLB. Starting at the ceiling glibc's own adjustment reaches (map from 32 MiB, trim past
  // 64 MiB) cut serve's page faults 3 to 25 times and raised lines per CPU-second by up to a
  // quarter (bench/README.md, "Memory reuse"). Freed memory stays mapped for the next batch, so
  // resident memory falls back more slowly after a flood.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  return faultline::runCli(argc, argv);
}
