#include "core/commands.h"

int main(int argc, char** argv) {
  return faultline::runCli(argc, argv);
}
