#include "core/commands.h"

int main(int argc, char** argv) {
  faultline::keepFreedMemory();
  return faultline::runCli(argc, argv);
}
