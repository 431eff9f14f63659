// The real mcli binary, run as a subprocess, against fake RunService, SchedulerService,
// CordonService and AdminService implementations on a real gRPC server at 127.0.0.1:0. The
// fakes record every request and answer UNAUTHENTICATED unless the call carries
// `authorization: Bearer test-key`.

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <vector>

#include "tessera/v1/admin.grpc.pb.h"
#include "tessera/v1/cordon.grpc.pb.h"
#include "tessera/v1/runs.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"

namespace {

namespace v1 = tessera::v1;
using grpc::ServerContext;
using grpc::Status;

constexpr char kApiKey[] = "test-key";

// ---------------------------------------------------------------------------------------------
// Fakes

// Counts calls and rejects those without the right key.
class Recorder {
 public:
  Status Authorize(ServerContext* context) {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    const auto& metadata = context->client_metadata();
    const auto it = metadata.find("authorization");
    const std::string value =
        it == metadata.end() ? "" : std::string(it->second.data(), it->second.size());
    if (value != std::string("Bearer ") + kApiKey) {
      ++rejected_;
      return Status(grpc::StatusCode::UNAUTHENTICATED, "invalid API key");
    }
    return Status::OK;
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  int rejected() {
    std::lock_guard<std::mutex> lock(mu_);
    return rejected_;
  }
  void Reset() {
    std::lock_guard<std::mutex> lock(mu_);
    calls_ = rejected_ = 0;
  }

 private:
  std::mutex mu_;
  int calls_ = 0;
  int rejected_ = 0;
};

google::protobuf::Timestamp At(int64_t seconds) {
  google::protobuf::Timestamp timestamp;
  timestamp.set_seconds(seconds);
  return timestamp;
}

constexpr int64_t kT0 = 1'700'000'000;  // 2023-11-14 22:13:20 UTC

v1::Run SampleRun(const std::string& name, v1::RunStatus status) {
  v1::Run run;
  run.set_id("id-" + name);
  run.set_name(name);
  run.set_user("alice");
  run.set_status(status);
  run.set_resumption_index(0);
  run.mutable_spec()->set_name(name);
  run.mutable_spec()->set_command("python train.py");
  run.mutable_spec()->mutable_compute()->set_cluster("c1");
  run.mutable_spec()->mutable_compute()->set_gpus(8);
  run.mutable_spec()->mutable_scheduling()->set_priority(v1::PRIORITY_MEDIUM);
  *run.mutable_created_at() = At(kT0);
  return run;
}

class FakeRunService : public v1::RunService::Service {
 public:
  explicit FakeRunService(Recorder& recorder) : recorder_(recorder) {}

  Status SubmitRun(ServerContext* context, const v1::SubmitRunRequest* request,
                   v1::SubmitRunResponse* response) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    std::lock_guard<std::mutex> lock(mu);
    submits.push_back(*request);
    *response->mutable_run() =
        SampleRun(request->spec().name() + "-abc123", v1::RUN_STATUS_PENDING);
    *response->mutable_run()->mutable_spec() = request->spec();
    return Status::OK;
  }

  Status GetRun(ServerContext* context, const v1::GetRunRequest* request,
                v1::GetRunResponse* response) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    *response->mutable_run() = SampleRun(request->name(), v1::RUN_STATUS_PENDING);
    return Status::OK;
  }

  Status ListRuns(ServerContext* context, const v1::ListRunsRequest* request,
                  v1::ListRunsResponse* response) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    std::lock_guard<std::mutex> lock(mu);
    lists.push_back(*request);
    *response->add_runs() = SampleRun("train-a", v1::RUN_STATUS_RUNNING);
    v1::Run& second = *response->add_runs() = SampleRun("train-long-name", v1::RUN_STATUS_QUEUED);
    second.set_user("bob");
    second.set_resumption_index(2);
    second.mutable_progress()->set_step(50);
    second.mutable_progress()->set_total_steps(200);
    return Status::OK;
  }

  Status DescribeRun(ServerContext* context, const v1::DescribeRunRequest* request,
                     v1::DescribeRunResponse* response) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    if (request->name() != "train-a") {
      return Status(grpc::StatusCode::NOT_FOUND, "run \"" + request->name() + "\" not found");
    }
    v1::RunDescription& description = *response->mutable_description();
    *description.mutable_run() = SampleRun("train-a", v1::RUN_STATUS_RUNNING);
    description.mutable_run()->set_resumption_index(1);
    description.mutable_run()->set_pending_seconds(125);
    v1::Attempt& first = *description.add_attempts();
    first.set_resumption_index(0);
    first.set_status(v1::RUN_STATUS_FAILED);
    first.add_nodes()->set_node_name("node-a");
    first.add_nodes()->set_node_name("node-b");
    *first.mutable_started_at() = At(kT0 + 60);
    *first.mutable_ended_at() = At(kT0 + 3600);
    first.set_end_reason(v1::ATTEMPT_END_REASON_GPU_FAULT);
    first.set_reason("XID 79 on GPU 3");
    v1::Attempt& second = *description.add_attempts();
    second.set_resumption_index(1);
    second.set_status(v1::RUN_STATUS_RUNNING);
    second.add_nodes()->set_node_name("node-c");
    v1::RunEvent& event = *description.add_events();
    event.set_type(v1::RUN_EVENT_TYPE_REQUEUED);
    *event.mutable_time() = At(kT0 + 3600);
    event.set_message("Run was placed back in the scheduling queue");
    return Status::OK;
  }

  Status StopRun(ServerContext* context, const v1::StopRunRequest* request,
                 v1::StopRunResponse* response) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    std::lock_guard<std::mutex> lock(mu);
    stops.push_back(*request);
    if (request->name() == "missing") {
      return Status(grpc::StatusCode::NOT_FOUND, "run \"missing\" not found");
    }
    *response->mutable_run() = SampleRun(request->name(), v1::RUN_STATUS_TERMINATING);
    response->mutable_run()->set_stop_requested(true);
    return Status::OK;
  }

  // Streams the run through STARTING, RUNNING and COMPLETED.
  Status WatchRuns(ServerContext* context, const v1::WatchRunsRequest* request,
                   grpc::ServerWriter<v1::RunChange>* writer) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    const std::string name = request->filter().name_globs_size() > 0
                                 ? request->filter().name_globs(0)
                                 : std::string("unknown");
    const std::pair<v1::RunStatus, const char*> steps[] = {
        {v1::RUN_STATUS_STARTING, "Run was placed on node-a"},
        {v1::RUN_STATUS_RUNNING, "Run started"},
        {v1::RUN_STATUS_COMPLETED, "Run completed"}};
    int64_t offset = 1;
    for (const auto& [status, message] : steps) {
      v1::RunChange change;
      *change.mutable_run() = SampleRun(name, status);
      change.mutable_event()->set_type(v1::RUN_EVENT_TYPE_STARTED);
      change.mutable_event()->set_message(message);
      *change.mutable_event()->mutable_time() = At(kT0 + offset++);
      if (!writer->Write(change)) break;
    }
    // Hold the stream open: mcli must end it itself once the run has ended.
    while (!context->IsCancelled()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return Status::OK;
  }

  void Reset() {
    std::lock_guard<std::mutex> lock(mu);
    submits.clear();
    lists.clear();
    stops.clear();
  }

  std::mutex mu;
  std::vector<v1::SubmitRunRequest> submits;
  std::vector<v1::ListRunsRequest> lists;
  std::vector<v1::StopRunRequest> stops;

 private:
  Recorder& recorder_;
};

class FakeSchedulerService : public v1::SchedulerService::Service {
 public:
  explicit FakeSchedulerService(Recorder& recorder) : recorder_(recorder) {}

  Status ListNodes(ServerContext* context, const v1::ListNodesRequest* request,
                   v1::ListNodesResponse* response) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    v1::Node& node = *response->add_nodes();
    node.set_name("node-a");
    node.set_cluster(request->filter().cluster());
    node.set_gpu_count(8);
    node.set_admin_state(v1::NODE_ADMIN_STATE_SCHEDULABLE);
    return Status::OK;
  }

 private:
  Recorder& recorder_;
};

class FakeCordonService : public v1::CordonService::Service {
 public:
  explicit FakeCordonService(Recorder& recorder) : recorder_(recorder) {}

  Status CordonNode(ServerContext* context, const v1::CordonNodeRequest* request,
                    v1::CordonNodeResponse* response) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    std::lock_guard<std::mutex> lock(mu);
    cordons.push_back(*request);
    response->mutable_node()->set_name(request->node_name());
    response->mutable_node()->set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
    return Status::OK;
  }

  // Two events, a moment apart, then the end of the stream.
  Status WatchNodeEvents(ServerContext* context, const v1::WatchNodeEventsRequest* request,
                         grpc::ServerWriter<v1::NodeEvent>* writer) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    {
      std::lock_guard<std::mutex> lock(mu);
      watches.push_back(*request);
    }
    const char* reasons[] = {"XID 79 on GPU 3", "passed the all-reduce canary"};
    const v1::NodeEventType types[] = {v1::NODE_EVENT_TYPE_CORDONED,
                                       v1::NODE_EVENT_TYPE_HEALTH_CHECK_PASSED};
    for (int i = 0; i < 2; ++i) {
      v1::NodeEvent event;
      event.set_id(i + 1);
      event.set_node_name("node-a");
      event.set_type(types[i]);
      *event.mutable_time() = At(kT0 + i);
      event.mutable_actor()->set_name("health-api");
      event.set_reason(reasons[i]);
      writer->Write(event);
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
    }
    return Status::OK;
  }

  void Reset() {
    std::lock_guard<std::mutex> lock(mu);
    cordons.clear();
    watches.clear();
  }

  std::mutex mu;
  std::vector<v1::CordonNodeRequest> cordons;
  std::vector<v1::WatchNodeEventsRequest> watches;

 private:
  Recorder& recorder_;
};

class FakeAdminService : public v1::AdminService::Service {
 public:
  explicit FakeAdminService(Recorder& recorder) : recorder_(recorder) {}

  Status WhoAmI(ServerContext* context, const v1::WhoAmIRequest*,
                v1::WhoAmIResponse* response) override {
    if (Status auth = recorder_.Authorize(context); !auth.ok()) return auth;
    response->set_user("alice");
    response->set_role(v1::ROLE_ADMIN);
    return Status::OK;
  }

 private:
  Recorder& recorder_;
};

class FakeServer {
 public:
  FakeServer() : runs(recorder), scheduler(recorder), cordon(recorder), admin(recorder) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&runs);
    builder.RegisterService(&scheduler);
    builder.RegisterService(&cordon);
    builder.RegisterService(&admin);
    server_ = builder.BuildAndStart();
    REQUIRE(server_ != nullptr);
    REQUIRE(port_ > 0);
  }

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }

  void Reset() {
    recorder.Reset();
    runs.Reset();
    cordon.Reset();
  }

  Recorder recorder;
  FakeRunService runs;
  FakeSchedulerService scheduler;
  FakeCordonService cordon;
  FakeAdminService admin;

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// Started once for the whole binary and never destroyed (its threads outlive the tests).
FakeServer& Instance() {
  static FakeServer* server = new FakeServer();
  return *server;
}

// The server with nothing recorded yet, for a test to start with.
FakeServer& Server() {
  FakeServer& server = Instance();
  server.Reset();
  return server;
}

// ---------------------------------------------------------------------------------------------
// Running mcli

struct TempDir {
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "mcli-it-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string file = path + "/" + name;
    std::ofstream(file) << text;
    return file;
  }
  std::string path;
};

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
  // When each line of stdout arrived, to tell streamed output from output printed at the end.
  std::vector<std::chrono::steady_clock::time_point> out_line_times;
};

std::ostream& operator<<(std::ostream& os, const Result& result) {
  return os << "exit " << result.exit_code << "\n--- stdout\n"
            << result.out << "--- stderr\n"
            << result.err;
}

// Runs the mcli binary with exactly `env` as its environment; kills it after 60 s.
Result RunMcli(const std::vector<std::string>& args,
               const std::map<std::string, std::string>& env) {
  int out_pipe[2];
  int err_pipe[2];
  REQUIRE(pipe2(out_pipe, O_CLOEXEC) == 0);
  REQUIRE(pipe2(err_pipe, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);

  std::vector<std::string> argv_strings = {MCLI_PATH};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_strings) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (const auto& [name, value] : env) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);

  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, MCLI_PATH, &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  REQUIRE(spawned == 0);

  Result result;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      kill(pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, static_cast<int>(left.count())) < 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
        if (i == 0) {
          const auto now = std::chrono::steady_clock::now();
          for (ssize_t j = 0; j < n; ++j) {
            if (buffer[j] == '\n') result.out_line_times.push_back(now);
          }
        }
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (pollfd& fd : fds) {
    if (fd.fd >= 0) close(fd.fd);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// mcli against the fake server, with the right key, a private HOME and UTC times.
Result Mcli(const std::vector<std::string>& args,
            std::map<std::string, std::string> overrides = {}) {
  static TempDir home;
  std::map<std::string, std::string> env = {{"HOME", home.path},
                                            {"PATH", "/usr/bin:/bin"},
                                            {"TZ", "UTC"},
                                            {"TESSERA_ENDPOINT", Instance().endpoint()},
                                            {"TESSERA_API_KEY", kApiKey}};
  for (auto& [name, value] : overrides) {
    if (value.empty()) {
      env.erase(name);
    } else {
      env[name] = value;
    }
  }
  return RunMcli(args, env);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

bool IsUuid(const std::string& text) {
  if (text.size() != 36) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash != (text[i] == '-')) return false;
    if (!dash && !std::isxdigit(static_cast<unsigned char>(text[i]))) return false;
  }
  return true;
}

constexpr const char* kRunYaml = R"(name: train
image: pytorch:2.1
command: python train.py --steps 100
compute:
  cluster: c1
  gpus: 8
  gpu_type: h100
scheduling:
  priority: low
  max_duration: 12
env_variables:
  SEED: "17"
)";

}  // namespace

TEST_CASE("run submit sends the YAML's fields with the overrides applied", "[cli][submit]") {
  FakeServer& server = Server();
  TempDir dir;
  const std::string file = dir.Write("run.yaml", kRunYaml);

  const Result result = Mcli({"run", "submit", "-f", file, "--gpus", "16", "--priority", "high",
                              "--name", "renamed", "--cluster", "c2"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  CHECK(result.out == "renamed-abc123\n");
  CHECK(result.err.empty());

  std::lock_guard<std::mutex> lock(server.runs.mu);
  REQUIRE(server.runs.submits.size() == 1);
  const v1::SubmitRunRequest& request = server.runs.submits[0];
  CHECK(IsUuid(request.idempotency_key()));
  CHECK(request.spec().name() == "renamed");
  CHECK(request.spec().image() == "pytorch:2.1");
  CHECK(request.spec().command() == "python train.py --steps 100");
  CHECK(request.spec().compute().gpus() == 16);
  CHECK(request.spec().compute().cluster() == "c2");
  CHECK(request.spec().compute().gpu_type() == "h100");
  CHECK(request.spec().scheduling().priority() == v1::PRIORITY_HIGH);
  CHECK(request.spec().scheduling().max_duration_hours() == 12);
  REQUIRE(request.spec().env_variables_size() == 1);
  CHECK(request.spec().env_variables(0).key() == "SEED");
  CHECK(request.spec().env_variables(0).value() == "17");
}

TEST_CASE("mcli run -f is the short form, with a fresh or given idempotency key", "[cli][submit]") {
  FakeServer& server = Server();
  TempDir dir;
  const std::string file = dir.Write("run.yaml", kRunYaml);
  REQUIRE(Mcli({"run", "-f", file}).exit_code == 0);
  REQUIRE(Mcli({"run", "-f", file}).exit_code == 0);
  const Result keyed = Mcli({"run", "-f", file, "--idempotency-key", "my-key"});
  INFO(keyed);
  REQUIRE(keyed.exit_code == 0);
  CHECK(keyed.out == "train-abc123\n");

  std::lock_guard<std::mutex> lock(server.runs.mu);
  REQUIRE(server.runs.submits.size() == 3);
  CHECK(server.runs.submits[0].spec().compute().gpus() == 8);
  CHECK(server.runs.submits[0].spec().scheduling().priority() == v1::PRIORITY_LOW);
  CHECK(server.runs.submits[0].idempotency_key() != server.runs.submits[1].idempotency_key());
  CHECK(server.runs.submits[2].idempotency_key() == "my-key");
}

TEST_CASE("a bad run YAML fails with its line and sends nothing", "[cli][submit]") {
  FakeServer& server = Server();
  TempDir dir;
  const std::string file =
      dir.Write("bad.yaml", "name: train\ncommand: python train.py\ncompute:\n  gpus: lots\n");
  const Result result = Mcli({"run", "submit", "-f", file});
  INFO(result);
  CHECK(result.exit_code == 2);
  CHECK(result.out.empty());
  CHECK_THAT(result.err, Catch::StartsWith("Error: " + file + ": line 4"));
  CHECK_THAT(result.err, Catch::Contains("compute.gpus"));
  CHECK(Lines(result.err).size() == 1);
  CHECK(server.recorder.calls() == 0);

  const std::string unknown =
      dir.Write("unknown.yaml", "name: t\ncommand: c\ncompute:\n  gpu: 8\n");
  const Result unknown_result = Mcli({"run", "-f", unknown});
  CHECK(unknown_result.exit_code == 2);
  CHECK_THAT(unknown_result.err, Catch::Contains("line 4") && Catch::Contains("compute.gpu"));
  CHECK(server.recorder.calls() == 0);
}

TEST_CASE("run submit --follow prints status changes until the run ends", "[cli][submit]") {
  Server();
  TempDir dir;
  const std::string file = dir.Write("run.yaml", kRunYaml);
  const Result result = Mcli({"run", "submit", "-f", file, "--follow"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  const auto lines = Lines(result.out);
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] == "train-abc123");
  CHECK_THAT(lines[1], Catch::Contains("PENDING"));
  CHECK(lines[2] == "2023-11-14 22:13:21  STARTING     Run was placed on node-a");
  CHECK(lines[3] == "2023-11-14 22:13:22  RUNNING      Run started");
  CHECK(lines[4] == "2023-11-14 22:13:23  COMPLETED    Run completed");
}

TEST_CASE("get runs prints an aligned table and sends the filter", "[cli][get]") {
  FakeServer& server = Server();
  const Result result =
      Mcli({"get", "runs", "train-*", "--status", "running", "--status", "queued,failed", "--user",
            "alice", "--cluster", "c1", "--gpu-type", "h100", "--limit", "5", "--after", "2h",
            "--before", "2023-11-14T22:13:20Z"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  const auto lines = Lines(result.out);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] ==
        "NAME             USER   CLUSTER  GPUS  STATUS   RESUMPTION  PROGRESS      CREATED");
  CHECK(lines[1] ==
        "train-a          alice  c1       8     RUNNING  0           -             2023-11-14 "
        "22:13:20");
  CHECK(lines[2] ==
        "train-long-name  bob    c1       8     QUEUED   2           50/200 (25%)  2023-11-14 "
        "22:13:20");

  std::lock_guard<std::mutex> lock(server.runs.mu);
  REQUIRE(server.runs.lists.size() == 1);
  const v1::RunFilter& filter = server.runs.lists[0].filter();
  REQUIRE(filter.name_globs_size() == 1);
  CHECK(filter.name_globs(0) == "train-*");
  REQUIRE(filter.statuses_size() == 3);
  CHECK(filter.statuses(0) == v1::RUN_STATUS_RUNNING);
  CHECK(filter.statuses(1) == v1::RUN_STATUS_QUEUED);
  CHECK(filter.statuses(2) == v1::RUN_STATUS_FAILED);
  CHECK(filter.user() == "alice");
  CHECK(filter.cluster() == "c1");
  CHECK(filter.gpu_type() == "h100");
  CHECK(filter.limit() == 5);
  CHECK(filter.created_before().seconds() == kT0);
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  CHECK(std::abs(filter.created_after().seconds() - (now - 7200)) < 120);
}

TEST_CASE("get runs -o json prints protobuf JSON with proto field names", "[cli][get]") {
  Server();
  const Result result = Mcli({"get", "runs", "-o", "json"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  const auto json = nlohmann::json::parse(result.out);
  REQUIRE(json.is_array());
  REQUIRE(json.size() == 2);
  CHECK(json[0]["name"] == "train-a");
  CHECK(json[0]["status"] == "RUN_STATUS_RUNNING");
  CHECK(json[0]["spec"]["compute"]["gpus"] == 8);
  CHECK(json[0]["created_at"] == "2023-11-14T22:13:20Z");
  CHECK(json[1]["resumption_index"] == 2);
  CHECK(json[1]["progress"]["total_steps"] == "200");  // int64 is a string in proto JSON
  CHECK(json[0].contains("status_reason"));
}

TEST_CASE("get runs -o yaml prints the same document as YAML", "[cli][get]") {
  Server();
  const Result result = Mcli({"--output", "yaml", "get", "runs"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  const YAML::Node yaml = YAML::Load(result.out);
  REQUIRE(yaml.IsSequence());
  REQUIRE(yaml.size() == 2);
  CHECK(yaml[0]["name"].as<std::string>() == "train-a");
  CHECK(yaml[0]["status"].as<std::string>() == "RUN_STATUS_RUNNING");
  CHECK(yaml[1]["user"].as<std::string>() == "bob");
  CHECK(yaml[1]["resumption_index"].as<int>() == 2);
}

TEST_CASE("get nodes and whoami", "[cli][get]") {
  Server();
  const Result nodes = Mcli({"get", "nodes", "--cluster", "c7"});
  INFO(nodes);
  REQUIRE(nodes.exit_code == 0);
  const auto lines = Lines(nodes.out);
  REQUIRE(lines.size() == 2);
  CHECK_THAT(lines[0], Catch::StartsWith("NAME    CLUSTER"));
  CHECK_THAT(lines[1], Catch::StartsWith("node-a  c7") && Catch::Contains("SCHEDULABLE"));

  const Result whoami = Mcli({"whoami"});
  INFO(whoami);
  REQUIRE(whoami.exit_code == 0);
  CHECK(whoami.out == "alice (admin) at " + Instance().endpoint() + "\n");
}

TEST_CASE("describe run shows attempts, their nodes and reasons, and events", "[cli][describe]") {
  Server();
  const Result result = Mcli({"describe", "run", "train-a"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  const std::string& text = result.out;
  CHECK_THAT(text, Catch::Contains("Run:") && Catch::Contains("train-a"));
  CHECK_THAT(text, Catch::Contains("Compute:") && Catch::Contains("8 GPUs, cluster c1"));
  CHECK_THAT(text, Catch::Contains("Pending time:") && Catch::Contains("2m 5s"));
  CHECK_THAT(text, Catch::Contains("Attempts:"));
  CHECK_THAT(text, Catch::Contains("2023-11-14 22:14:20  2023-11-14 23:13:20  node-a,node-b"));
  CHECK_THAT(text, Catch::Contains("GPU_FAULT: XID 79 on GPU 3"));
  CHECK_THAT(text, Catch::Contains("node-c"));
  CHECK_THAT(text, Catch::Contains("Events:"));
  CHECK_THAT(text, Catch::Contains("2023-11-14 23:13:20") &&
                       Catch::Contains("Run was placed back in the scheduling queue"));
  CHECK_THAT(text, Catch::Contains("Run spec:") && Catch::Contains("python train.py"));

  const Result json = Mcli({"describe", "run", "train-a", "-o", "json"});
  REQUIRE(json.exit_code == 0);
  const auto document = nlohmann::json::parse(json.out);
  CHECK(document["attempts"][0]["end_reason"] == "ATTEMPT_END_REASON_GPU_FAULT");
  CHECK(document["events"][0]["message"] == "Run was placed back in the scheduling queue");

  const Result missing = Mcli({"describe", "run", "nope"});
  CHECK(missing.exit_code == 1);
  CHECK(missing.err == "Error: run \"nope\" not found\n");
}

TEST_CASE("stop run sends each name with the reason", "[cli][stop]") {
  FakeServer& server = Server();
  const Result result = Mcli({"stop", "run", "train-a", "train-b", "--reason", "bad lr"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  CHECK(result.out == "Stopping run train-a (TERMINATING)\nStopping run train-b (TERMINATING)\n");

  {
    std::lock_guard<std::mutex> lock(server.runs.mu);
    REQUIRE(server.runs.stops.size() == 2);
    CHECK(server.runs.stops[0].name() == "train-a");
    CHECK(server.runs.stops[1].name() == "train-b");
    CHECK(server.runs.stops[0].reason() == "bad lr");
    CHECK(server.runs.stops[1].reason() == "bad lr");
    CHECK(IsUuid(server.runs.stops[0].idempotency_key()));
    CHECK(server.runs.stops[0].idempotency_key() != server.runs.stops[1].idempotency_key());
  }

  // A run that does not exist fails alone; the others are still stopped.
  const Result partial = Mcli({"stop", "run", "missing", "train-c"});
  INFO(partial);
  CHECK(partial.exit_code == 1);
  CHECK(partial.err == "Error: missing: run \"missing\" not found\n");
  CHECK(partial.out == "Stopping run train-c (TERMINATING)\n");
}

TEST_CASE("cordon sends the node and the reason", "[cli][cordon]") {
  FakeServer& server = Server();
  const Result result = Mcli({"cordon", "node-a", "--reason", "XID 79 on GPU 3"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  CHECK(result.out == "Cordoned node node-a (CORDONED)\n");
  std::lock_guard<std::mutex> lock(server.cordon.mu);
  REQUIRE(server.cordon.cordons.size() == 1);
  CHECK(server.cordon.cordons[0].node_name() == "node-a");
  CHECK(server.cordon.cordons[0].reason() == "XID 79 on GPU 3");
  CHECK(IsUuid(server.cordon.cordons[0].idempotency_key()));
}

TEST_CASE("get events -f prints streamed events as they come", "[cli][events]") {
  FakeServer& server = Server();
  const Result result = Mcli({"get", "events", "-f", "--node", "node-a"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  const auto lines = Lines(result.out);
  REQUIRE(lines.size() == 3);
  CHECK_THAT(lines[0], Catch::StartsWith("TIME") && Catch::Contains("REASON"));
  CHECK(lines[1].find("NODE") == std::string::npos);
  CHECK_THAT(lines[1], Catch::StartsWith("2023-11-14 22:13:20  node-a") &&
                           Catch::Contains("CORDONED") && Catch::Contains("health-api") &&
                           Catch::EndsWith("XID 79 on GPU 3"));
  CHECK_THAT(lines[2], Catch::StartsWith("2023-11-14 22:13:21  node-a") &&
                           Catch::Contains("HEALTH_CHECK_PASSED") &&
                           Catch::EndsWith("passed the all-reduce canary"));
  CHECK(lines[1].find("CORDONED") == lines[0].find("EVENT"));
  // The first event was printed when it came, not when the stream ended.
  REQUIRE(result.out_line_times.size() == 3);
  CHECK(result.out_line_times[2] - result.out_line_times[1] > std::chrono::milliseconds(200));

  std::lock_guard<std::mutex> lock(server.cordon.mu);
  REQUIRE(server.cordon.watches.size() == 1);
  REQUIRE(server.cordon.watches[0].filter().node_names_size() == 1);
  CHECK(server.cordon.watches[0].filter().node_names(0) == "node-a");
}

TEST_CASE("get events --follow -o json prints one JSON document per line", "[cli][events]") {
  Server();
  const Result result = Mcli({"get", "events", "--follow", "-o", "json"});
  INFO(result);
  REQUIRE(result.exit_code == 0);
  const auto lines = Lines(result.out);
  REQUIRE(lines.size() == 2);
  CHECK(nlohmann::json::parse(lines[0])["reason"] == "XID 79 on GPU 3");
  CHECK(nlohmann::json::parse(lines[1])["type"] == "NODE_EVENT_TYPE_HEALTH_CHECK_PASSED");
}

TEST_CASE("a wrong API key is exit 1 with the hint to set one", "[cli][auth]") {
  FakeServer& server = Server();
  const Result result = Mcli({"get", "runs"}, {{"TESSERA_API_KEY", "wrong-key"}});
  INFO(result);
  CHECK(result.exit_code == 1);
  CHECK(result.out.empty());
  CHECK_THAT(result.err, Catch::StartsWith("Error: the server rejected the API key") &&
                             Catch::Contains("mcli set api-key"));
  CHECK(Lines(result.err).size() == 1);
  CHECK(server.recorder.rejected() == 1);

  const Result none = Mcli({"get", "runs"}, {{"TESSERA_API_KEY", ""}});
  CHECK(none.exit_code == 1);
  CHECK_THAT(none.err, Catch::Contains("no API key is set") && Catch::Contains("mcli set api-key"));
}

TEST_CASE("the key and endpoint saved by mcli set are used", "[cli][auth]") {
  FakeServer& server = Server();
  TempDir home;
  const std::map<std::string, std::string> env = {
      {"HOME", home.path}, {"TESSERA_API_KEY", ""}, {"TESSERA_ENDPOINT", ""}};
  REQUIRE(Mcli({"set", "api-key", kApiKey}, env).exit_code == 0);
  REQUIRE(Mcli({"set", "endpoint", server.endpoint()}, env).exit_code == 0);
  const Result result = Mcli({"whoami"}, env);
  INFO(result);
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Catch::StartsWith("alice (admin)"));
  // A flag beats the file.
  const Result flagged = Mcli({"whoami", "--api-key", "wrong"}, env);
  CHECK(flagged.exit_code == 1);
}

TEST_CASE("a server that is down is exit 1 naming the endpoint", "[cli][auth]") {
  // A port nothing listens on: bound, read, and closed again.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
  socklen_t length = sizeof(address);
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  const std::string endpoint = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  close(fd);

  const Result result = Mcli({"get", "runs"}, {{"TESSERA_ENDPOINT", endpoint}});
  INFO(result);
  CHECK(result.exit_code == 1);
  CHECK(result.out.empty());
  CHECK_THAT(result.err,
             Catch::StartsWith("Error: cannot reach the Tessera server at " + endpoint));
  CHECK(Lines(result.err).size() == 1);
}
