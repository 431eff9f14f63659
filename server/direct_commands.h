#pragma once
// `create-api-key` and `create-join-token`, which every control-plane binary has: run by an
// operator on the server's machine, they write a key or a join token into the database directly
// (no service, no caller) and print its secret once. The first admin's key is made this way.

#include <CLI/CLI.hpp>
#include <string>

#include "base/clock.h"
#include "services/store/stores.h"
#include "tessera/v1/admin.pb.h"

namespace tessera::server {

struct DirectCommands {
  CLI::App* create_key = nullptr;
  CLI::App* create_token = nullptr;
  v1::CreateApiKeyRequest key;
  std::string key_role = "user";
  v1::CreateJoinTokenRequest token;

  // Whether one of them is what the command line asked for.
  bool parsed() const { return create_key->parsed() || create_token->parsed(); }
};

void AddDirectCommands(CLI::App& app, DirectCommands& d);

// Runs the one parsed against `stores`, printing its secret; returns the process's exit status
// (2 for a bad argument, with one line naming it).
int RunDirectCommand(const DirectCommands& d, const store::Stores& stores, const Clock& clock);

}  // namespace tessera::server
