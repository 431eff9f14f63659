// tessera-scheduler: the scheduler and the workers' control stream, as its own process.
#include "server/serve.h"

int main(int argc, char** argv) {
  return tessera::server::ServeMain(
      {"tessera-scheduler", "tessera-scheduler: the scheduler and the workers' control stream",
       false, true, false},
      argc, argv);
}
