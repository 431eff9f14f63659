// tessera-server: every control-plane service in one process, for a laptop or a small cluster.
#include "server/serve.h"

int main(int argc, char** argv) {
  return tessera::server::ServeMain(
      {"tessera-server", "tessera-server: the Tessera control plane in one process", true, true,
       true, true, true},
      argc, argv);
}
