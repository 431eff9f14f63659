#pragma once
// The shared main of tessera-server and the per-service binaries.

namespace tessera::server {

struct Parts {
  const char* binary;
  const char* description;
  bool runs = false;       // run manager + admin API
  bool scheduler = false;  // scheduler + worker control stream
  bool cordon = false;     // cordon service
  bool logs = false;       // log service
  bool health = false;     // health API (sweeps, remediation)
};

// Parses flags, opens the database, hosts the chosen parts and serves until SIGINT/SIGTERM.
// Also offers `create-api-key`. Returns the process exit code.
int ServeMain(const Parts& parts, int argc, char** argv);

}  // namespace tessera::server
