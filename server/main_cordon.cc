// tessera-cordon: the cordon service, as its own process.
#include "server/serve.h"

int main(int argc, char** argv) {
  return tessera::server::ServeMain(
      {"tessera-cordon", "tessera-cordon: the cordon service", false, false, true}, argc, argv);
}
