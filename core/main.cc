#include <spdlog/cfg/env.h>

#include "core/commands.h"

int main(int argc, char** argv) {
  faultline::keepFreedMemory();
  spdlog::cfg::load_env_levels();  // SPDLOG_LEVEL=debug, warn, ... (default: info)
  return faultline::runCli(argc, argv);
}
