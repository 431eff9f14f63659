#include "tests/support/postgres_server.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <pqxx/pqxx>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tests/support/process.h"

namespace tessera::testing {
namespace {

std::string Script() { return std::string(TESSERA_SOURCE_DIR) + "/deploy/pg-instance.sh"; }

}  // namespace

absl::Status PostgresServer::RunScript(const std::string& args, std::string* output) {
  const std::string cmd = absl::StrCat(Script(), " ", args);
  ShellResult result = RunShell(cmd);
  if (output) *output = result.output;
  if (result.exit_code != 0) {
    return absl::InternalError(
        absl::StrCat("`", cmd, "` failed (", result.exit_code, "): ", result.output));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::StartWith(
    const std::string& command, const std::string& args) {
  std::string templ = (std::filesystem::temp_directory_path() / "tessera-pg-XXXXXX").string();
  if (mkdtemp(templ.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  std::unique_ptr<PostgresServer> server(new PostgresServer(templ));
  std::string out;
  if (auto st = server->RunScript(absl::StrCat(command, " ", templ, " ", args), &out); !st.ok()) {
    return st;
  }
  server->url_ = std::string(absl::StripAsciiWhitespace(out));
  const auto colon = server->url_.rfind(':');
  const auto slash = server->url_.rfind('/');
  if (colon == std::string::npos || slash == std::string::npos ||
      !absl::SimpleAtoi(server->url_.substr(colon + 1, slash - colon - 1), &server->port_)) {
    return absl::InternalError(absl::StrCat("unexpected URL from pg-instance.sh: ", out));
  }
  return server;
}

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Start(bool ephemeral) {
  auto server = StartWith("start", ephemeral ? "--ephemeral" : "");
  if (server.ok()) (*server)->ephemeral_ = ephemeral;
  return server;
}

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::StartStandby(
    const PostgresServer& primary) {
  auto server = StartWith("standby", std::to_string(primary.port()));
  if (server.ok()) (*server)->ephemeral_ = false;
  return server;
}

PostgresServer::~PostgresServer() {
  (void)RunScript(absl::StrCat("destroy ", dir_));
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

absl::Status PostgresServer::Stop() { return RunScript(absl::StrCat("stop ", dir_, " fast")); }

absl::Status PostgresServer::Resume() {
  return RunScript(absl::StrCat("start ", dir_, " ", port_, ephemeral_ ? " --ephemeral" : ""));
}

absl::Status PostgresServer::Kill() { return RunScript(absl::StrCat("stop ", dir_, " immediate")); }

absl::Status PostgresServer::Promote() { return RunScript(absl::StrCat("promote ", dir_)); }

absl::Status PostgresServer::SetSynchronousReplication(bool on) {
  return RunScript(absl::StrCat("sync ", dir_, on ? " on" : " off"));
}

absl::Status PostgresServer::ResetDatabase() {
  try {
    pqxx::connection admin(absl::StrCat("postgresql://tessera@127.0.0.1:", port_, "/postgres"));
    pqxx::nontransaction tx(admin);
    tx.exec("DROP DATABASE IF EXISTS tessera WITH (FORCE)");
    tx.exec("CREATE DATABASE tessera");
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("resetting the test database: ", e.what()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> PostgresServer::CreateDatabase(const std::string& name) {
  try {
    pqxx::connection admin(absl::StrCat("postgresql://tessera@127.0.0.1:", port_, "/postgres"));
    pqxx::nontransaction tx(admin);
    tx.exec(absl::StrCat("CREATE DATABASE ", tx.quote_name(name)));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("creating database ", name, ": ", e.what()));
  }
  return absl::StrCat("postgresql://tessera@127.0.0.1:", port_, "/", name);
}

PostgresServer& SharedPostgres() {
  static std::unique_ptr<PostgresServer> server = [] {
    auto started = PostgresServer::Start();
    if (!started.ok()) {
      std::cerr << "cannot start the test PostgreSQL server: " << started.status() << "\n";
      std::abort();
    }
    return *std::move(started);
  }();
  return *server;
}

}  // namespace tessera::testing
