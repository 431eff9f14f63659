// mcli: the command-line client of Tessera. Everything but this file is in tessera_cli.

#include <grpc/support/log.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "cli/app.h"

namespace {

// gRPC's own log lines would clutter the one "Error: ..." line mcli prints; TESSERA_GRPC_DEBUG
// keeps them.
void DropGrpcLog(gpr_log_func_args*) {}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("TESSERA_GRPC_DEBUG") == nullptr) gpr_set_log_function(DropGrpcLog);
  std::ios::sync_with_stdio(true);
  return tessera::cli::RunMcli(argc, argv, std::cout, std::cerr, tessera::cli::ProcessEnv(),
                               tessera::cli::TerminalWidth(STDOUT_FILENO));
}
