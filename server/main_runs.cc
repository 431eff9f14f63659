// tessera-runs: the run manager and the admin API, as its own process.
#include "server/serve.h"

int main(int argc, char** argv) {
  return tessera::server::ServeMain(
      {"tessera-runs", "tessera-runs: the run manager and the admin API", true, false, false}, argc,
      argv);
}
