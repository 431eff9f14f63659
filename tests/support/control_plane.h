#pragma once
// A real control plane for integration tests: a private PostgreSQL server, tessera-server (or
// the per-service binaries) as child processes, an admin API key, and clients for every service.

#include <grpcpp/grpcpp.h>

#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/sim_fleet.h"
#include "tessera/v1/admin.grpc.pb.h"
#include "tessera/v1/cordon.grpc.pb.h"
#include "tessera/v1/runs.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"
#include "tessera/v1/secrets.grpc.pb.h"
#include "tests/support/binaries.h"
#include "tests/support/fake_worker.h"
#include "tests/support/postgres_server.h"
#include "tests/support/process.h"

namespace tessera::testing {

std::string TempLog(const std::string& name);

// Starts a control-plane binary with the database URL and free ports plus `extra` flags; waits
// for its "listening grpc=PORT" line.
struct ServerProcess {
  Process process;
  int grpc_port = 0;
  int http_port = 0;  // the REST gateway of tessera-server
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(grpc_port); }
};
ServerProcess StartServer(const std::string& binary, const std::string& database_url,
                          const std::vector<std::string>& extra = {});

// An API key created with `tessera-server create-api-key`.
// `node`: the node a node key (role "node") acts as.
std::string CreateKey(const std::string& database_url, const std::string& user,
                      const std::string& role, const std::string& node = "");
// A node key for `node` (what a worker of that node connects with).
inline std::string NodeKey(const std::string& database_url, const std::string& node) {
  return CreateKey(database_url, node, "node", node);
}

class Client {
 public:
  // Plain text to `endpoint` (a loopback address), or over `channel` (TLS).
  Client(const std::string& endpoint, std::string key);
  Client(const std::shared_ptr<grpc::Channel>& channel, std::string key);
  // A context with the key and a 30 s deadline.
  std::unique_ptr<grpc::ClientContext> Ctx() const;

  v1::Run Submit(const std::string& name, int gpus, bool retry = false,
                 const std::string& key = "");
  v1::Run Get(const std::string& name);
  v1::RunDescription Describe(const std::string& name);
  // Polls until the run reaches `status` (or fails the test).
  v1::Run WaitForStatus(const std::string& name, v1::RunStatus status,
                        absl::Duration timeout = absl::Seconds(20));

  std::unique_ptr<v1::RunService::Stub> runs;
  std::unique_ptr<v1::SchedulerService::Stub> scheduler;
  std::unique_ptr<v1::CordonService::Stub> cordon;
  std::unique_ptr<v1::AdminService::Stub> admin;
  std::unique_ptr<v1::SecretService::Stub> secrets;
  std::string key;
};


}  // namespace tessera::testing
