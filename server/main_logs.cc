// tessera-logs: the log service, as its own process.
#include "server/serve.h"

int main(int argc, char** argv) {
  return tessera::server::ServeMain(
      {"tessera-logs", "tessera-logs: the log service", false, false, false, true}, argc, argv);
}
