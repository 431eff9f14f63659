#include "tests/support/local_cluster.h"

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "worker/daemon/attempt_record.h"

namespace tessera::testing {
namespace fs = std::filesystem;

bool GroupAlive(pid_t pgid) { return !worker::LiveGroupMembers(pgid).empty(); }

int64_t NowNanos() { return absl::ToUnixNanos(absl::Now()); }

namespace {
std::unique_ptr<PostgresServer> StartPostgres() {
  auto started = PostgresServer::Start();
  REQUIRE(started.ok());
  return *std::move(started);
}
}  // namespace

LocalCluster::LocalCluster(std::vector<std::string> server_flags)
    : LocalCluster(StartPostgres(), "", std::move(server_flags)) {}

LocalCluster::LocalCluster(std::unique_ptr<PostgresServer> primary, std::string url,
                           std::vector<std::string> server_flags)
    : pg(std::move(primary)), database_url(url.empty() ? pg->url() : std::move(url)) {
  admin_key = CreateKey(database_url, "ops", "admin");
  system_key = CreateKey(database_url, "tessera-worker", "system");
  server = StartServer("tessera-server", database_url, server_flags);
  client = std::make_unique<Client>(server.endpoint(), admin_key);
  marks_ = root_.path + "/marks";
  fs::create_directories(marks_);
}

LocalCluster::~LocalCluster() {
  for (auto& w : workers_) {
    if (w->process && w->process->Running()) {
      ::kill(w->process->pid(), SIGCONT);
      (void)w->process->Kill(SIGTERM, absl::Seconds(20));
    }
  }
}

WorkerHandle& LocalCluster::StartWorker(const std::string& name, int gpus,
                                        std::vector<std::string> extra,
                                        const std::string& scheduler_endpoint,
                                        const std::vector<std::string>& env) {
  WorkerHandle* handle = nullptr;
  for (auto& w : workers_) {
    if (w->name == name) handle = w.get();
  }
  if (!handle) {
    workers_.push_back(std::make_unique<WorkerHandle>());
    handle = workers_.back().get();
    handle->name = name;
    handle->state_dir = absl::StrCat(root_.path, "/", name);
  }
  if (handle->key_file.empty()) {
    auto key_file = NodeKeyFile(database_url, name, root_.path);
    INFO(key_file.status().ToString());
    REQUIRE(key_file.ok());
    handle->key_file = *key_file;
  }
  std::vector<std::string> argv =
      WorkerArgv(name, scheduler_endpoint.empty() ? server.endpoint() : scheduler_endpoint,
                 handle->key_file, handle->state_dir, gpus);
  if (std::find(extra.begin(), extra.end(), "--rank-user") != extra.end()) {
    // The test chooses who ranks run as: drop the default.
    auto it = std::find(argv.begin(), argv.end(), "--rank-user");
    argv.erase(it, it + 2);
  }
  if (std::find(extra.begin(), extra.end(), "--sandbox") != extra.end()) {
    auto it = std::find(argv.begin(), argv.end(), "--sandbox");
    argv.erase(it, it + 2);
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  if (!env.empty()) {
    std::vector<std::string> with_env = {"/usr/bin/env"};
    with_env.insert(with_env.end(), env.begin(), env.end());
    argv.insert(argv.begin(), with_env.begin(), with_env.end());
  }
  auto proc = Process::Start(argv, TempLog("worker-" + name));
  REQUIRE(proc.ok());
  handle->process = std::make_unique<Process>(*std::move(proc));
  auto line = handle->process->WaitForLine("registered node " + name, absl::Seconds(20));
  INFO(handle->process->Log());
  REQUIRE(line.ok());
  return *handle;
}

std::string LocalCluster::LogText(const std::string& run_name, std::optional<int> rank) {
  std::string out;
  for (const auto& l : Logs(run_name, rank)) absl::StrAppend(&out, l.text(), "\n");
  return out;
}

ShellResult LocalCluster::Mcli(const std::string& args) {
  return RunShell(absl::StrCat("TESSERA_CONFIG=/nonexistent TESSERA_ENDPOINT=",
                               api_endpoint.empty() ? server.endpoint() : api_endpoint,
                               " TESSERA_API_KEY=", admin_key, " ", BinaryPath("mcli"), " ", args));
}

WorkerHandle& LocalCluster::worker(const std::string& name) {
  for (auto& w : workers_) {
    if (w->name == name) return *w;
  }
  FAIL("no worker " << name);
  return *workers_.front();
}

v1::Node LocalCluster::Node(const std::string& name) {
  v1::GetNodeRequest req;
  req.set_name(name);
  v1::GetNodeResponse resp;
  grpc::Status st = client->scheduler->GetNode(client->Ctx().get(), req, &resp);
  INFO(st.error_message());
  REQUIRE(st.ok());
  return resp.node();
}

absl::Duration LocalCluster::WaitForLiveness(const std::string& name, v1::NodeLiveness liveness,
                                             absl::Duration timeout) {
  const absl::Time start = absl::Now();
  while (absl::Now() - start < timeout) {
    if (Node(name).liveness() == liveness) return absl::Now() - start;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  FAIL("node " << name << " did not become " << v1::NodeLiveness_Name(liveness));
  return timeout;
}

v1::Run LocalCluster::Submit(const std::string& name, const std::string& command, int gpus,
                             int nodes, bool retry, v1::LaunchMode launch) {
  v1::SubmitRunRequest req;
  auto* spec = req.mutable_spec();
  spec->set_name(name);
  spec->set_command(command);
  spec->set_launch(launch);
  spec->mutable_compute()->set_gpus(gpus);
  spec->mutable_compute()->set_nodes(nodes);
  spec->mutable_compute()->set_cluster("local");
  auto* env = spec->add_env_variables();
  env->set_key("MARKS");
  env->set_value(marks_);
  if (retry) spec->mutable_scheduling()->set_retry_on_system_failure(true);
  v1::SubmitRunResponse resp;
  grpc::Status st = client->runs->SubmitRun(client->Ctx().get(), req, &resp);
  INFO(st.error_message());
  REQUIRE(st.ok());
  return resp.run();
}

pid_t LocalCluster::PidMark(const std::string& file) {
  auto text = WaitForMark(file);
  REQUIRE(text.has_value());
  int pid = 0;
  REQUIRE(absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &pid));
  return pid;
}

std::optional<std::string> LocalCluster::WaitForMark(const std::string& file,
                                                     absl::Duration timeout) {
  const std::string path = marks_ + "/" + file;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Marks are written with a trailing newline; an incomplete one is read again.
    if (!text.empty() && text.back() == '\n') {
      text.pop_back();
      return text;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::nullopt;
}

std::vector<v1::LogLine> LocalCluster::Logs(const std::string& run_name, std::optional<int> rank,
                                            const std::string& endpoint) {
  auto stub = v1::LogService::NewStub(grpc::CreateChannel(
      endpoint.empty() ? server.endpoint() : endpoint, grpc::InsecureChannelCredentials()));
  v1::GetLogsRequest req;
  req.set_run_name(run_name);
  if (rank) req.set_rank(*rank);
  auto ctx = client->Ctx();
  auto reader = stub->GetLogs(ctx.get(), req);
  std::vector<v1::LogLine> out;
  v1::LogLine line;
  while (reader->Read(&line)) out.push_back(line);
  grpc::Status st = reader->Finish();
  INFO(st.error_message());
  REQUIRE(st.ok());
  return out;
}

std::string LocalCluster::SpoolOf(const std::string& worker_name, const std::string& run_id,
                                  int resumption, int rank, const std::string& stream) {
  std::ifstream in(absl::StrCat(worker(worker_name).state_dir, "/runs/", run_id, "/attempt-",
                                resumption, "/logs/rank-", rank, ".", stream));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace tessera::testing
