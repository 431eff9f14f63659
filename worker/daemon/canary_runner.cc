#include "worker/daemon/canary_runner.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/timestamps.h"
#include "worker/canary/canary_result.h"

namespace tessera::worker {
namespace {

double TimeoutSeconds(const v1::StartCanary& start) {
  const double t = start.timeout().seconds() + start.timeout().nanos() / 1e9;
  return t > 0 ? t : 60;
}

// The lowest port any process may bind (net.ipv4.ip_unprivileged_port_start; 1024 where it
// cannot be read, the kernel's default).
int UnprivilegedPortStart() {
  std::ifstream in("/proc/sys/net/ipv4/ip_unprivileged_port_start");
  int port = 1024;
  if (!(in >> port)) return 1024;
  return port;
}

bool IsHexToken(const std::string& token) {
  return !token.empty() && token.size() <= 64 &&
         token.find_first_not_of("0123456789abcdef") == std::string::npos;
}

}  // namespace

CanaryRunner::CanaryRunner(std::string binary, std::string node_name, std::string state_dir,
                           std::shared_ptr<Clock> clock, absl::Duration idle_limit,
                           std::shared_ptr<NetworkWalls> walls)
    : binary_(std::move(binary)),
      node_name_(std::move(node_name)),
      state_dir_(std::move(state_dir)),
      clock_(std::move(clock)),
      idle_limit_(idle_limit),
      walls_(std::move(walls)) {}

CanaryRunner::~CanaryRunner() {
  std::list<Worker> workers;
  std::vector<IdleServer> idle;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (pid_t g : busy_) ::kill(-g, SIGKILL);
    workers.swap(workers_);
    idle.swap(idle_);
  }
  idle.clear();
  for (auto& w : workers) w.thread.join();
}

absl::StatusOr<std::vector<std::string>> CanaryRunner::Arguments(const v1::StartCanary& s) {
  const std::string timeout = absl::StrCat(TimeoutSeconds(s));
  switch (s.kind()) {
    case v1::HEALTH_CHECK_KIND_COMPUTE_STRESS: {
      if (s.threads() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("start_canary.threads: ", s.threads(), " must not be negative"));
      }
      std::vector<std::string> args = {"compute", "--seconds",
                                       absl::StrCat(s.seconds() > 0 ? s.seconds() : 1.0),
                                       "--timeout", timeout};
      if (s.threads() > 0) {
        args.push_back("--threads");
        args.push_back(absl::StrCat(s.threads()));
      }
      return args;
    }
    case v1::HEALTH_CHECK_KIND_ALLREDUCE: {
      if (s.group_size() < 1 || s.rank() < 0 || s.rank() >= s.group_size()) {
        return absl::InvalidArgumentError(absl::StrCat("start_canary.rank: ", s.rank(),
                                                       " is not in a group of ", s.group_size()));
      }
      if (s.master_addr().empty() || s.master_port() <= 0 || s.master_port() > 65535) {
        return absl::InvalidArgumentError("start_canary.master_addr/master_port: required");
      }
      if (!s.rendezvous_token().empty() && !IsHexToken(s.rendezvous_token())) {
        return absl::InvalidArgumentError(
            "start_canary.rendezvous_token: must be 1 to 64 lowercase hex digits");
      }
      std::vector<std::string> sizes;
      for (int64_t b : s.payload_bytes()) {
        if (b <= 0)
          return absl::InvalidArgumentError("start_canary.payload_bytes: must be positive");
        sizes.push_back(absl::StrCat(b));
      }
      std::vector<std::string> args = {"allreduce",
                                       "--rank",
                                       absl::StrCat(s.rank()),
                                       "--world",
                                       absl::StrCat(s.group_size()),
                                       "--master-addr",
                                       s.master_addr(),
                                       "--master-port",
                                       absl::StrCat(s.master_port()),
                                       "--timeout",
                                       timeout};
      if (!sizes.empty()) {
        args.push_back("--sizes");
        args.push_back(absl::StrJoin(sizes, ","));
      }
      if (!s.rendezvous_token().empty()) {
        args.push_back("--token");
        args.push_back(s.rendezvous_token());
      }
      return args;
    }
    default:
      return absl::InvalidArgumentError("start_canary.kind: must be ALLREDUCE or COMPUTE_STRESS");
  }
}

absl::Status CanaryRunner::Start(const v1::StartCanary& start) {
  auto args = Arguments(start);
  if (!args.ok()) return args.status();
  std::vector<std::thread> finished;
  std::vector<IdleServer> expired;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("the worker is stopping");
    if (start.kind() == v1::HEALTH_CHECK_KIND_ALLREDUCE && clock_->Now() < link_down_until_) {
      results_.push_back(LinkDownResult(start));
      return absl::OkStatus();
    }
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (it->done) {
        finished.push_back(std::move(it->thread));
        it = workers_.erase(it);
      } else {
        ++it;
      }
    }
    expired = TakeExpiredServers();
    Worker& worker = workers_.emplace_back();
    worker.thread =
        std::thread([this, start, a = *std::move(args), w = &worker] { Run(start, a, w); });
  }
  for (auto& t : finished) t.join();
  return absl::OkStatus();
}

void CanaryRunner::SetLinkDown(absl::Duration down) {
  absl::MutexLock lock(&mu_);
  link_down_until_ =
      down == absl::InfiniteDuration() ? absl::InfiniteFuture() : clock_->Now() + down;
}

v1::HealthCheckResult CanaryRunner::ResultFor(const v1::StartCanary& start) const {
  v1::HealthCheckResult result;
  result.set_sweep_id(start.sweep_id());
  result.set_node_name(node_name_);
  result.set_kind(start.kind());
  *result.mutable_group() = start.group();
  result.set_step(start.step());
  *result.mutable_started_at() = ToProtoTime(clock_->Now());
  return result;
}

v1::HealthCheckResult CanaryRunner::LinkDownResult(const v1::StartCanary& start) const {
  v1::HealthCheckResult result = ResultFor(start);
  result.set_verdict(v1::HEALTH_VERDICT_ERROR);
  result.set_error("no peer reachable: the node's data link is down (injected fault)");
  *result.mutable_finished_at() = result.started_at();
  spdlog::info("canary {} of sweep {}: {} {}", v1::HealthCheckKind_Name(start.kind()),
               start.sweep_id(), v1::HealthVerdict_Name(result.verdict()), result.error());
  return result;
}

std::vector<CanaryRunner::IdleServer> CanaryRunner::TakeExpiredServers() {
  std::vector<IdleServer> expired;
  const absl::Time now = clock_->Now();
  for (auto it = idle_.begin(); it != idle_.end();) {
    if (now - it->since >= idle_limit_) {
      expired.push_back(std::move(*it));
      it = idle_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

absl::StatusOr<std::unique_ptr<CanaryServer>> CanaryRunner::TakeServer(bool fresh) {
  std::unique_ptr<CanaryServer> server;
  std::vector<IdleServer> ended;
  int number = 0;
  {
    absl::MutexLock lock(&mu_);
    // The most recently used first: the others may reach their idle limit.
    while (!fresh && !server && !idle_.empty()) {
      IdleServer idle = std::move(idle_.back());
      idle_.pop_back();
      if (idle.server->Running()) {
        server = std::move(idle.server);
      } else {
        ended.push_back(std::move(idle));  // killed meanwhile (an injected crash of its group)
      }
    }
    if (!server) number = servers_started_++;
  }
  if (!server) {
    const std::string dir = absl::StrCat(state_dir_, "/canaries");
    const std::string err = absl::StrCat(dir, "/server-", number, ".err");
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    std::filesystem::remove(err, ec);  // a previous worker's
    auto started = CanaryServer::Start(binary_, node_name_, err);
    if (!started.ok()) return started.status();
    server = *std::move(started);
  }
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the worker is stopping");
  busy_.push_back(server->pid());
  return server;
}

void CanaryRunner::Run(v1::StartCanary start, std::vector<std::string> args, Worker* worker) {
  v1::HealthCheckResult result = ResultFor(start);
  // The canary enforces its own timeout; this one catches a canary that cannot (stopped).
  const absl::Duration limit = absl::Seconds(TimeoutSeconds(start) + 5);
  absl::StatusOr<std::unique_ptr<CanaryServer>> server = TakeServer(/*fresh=*/false);
  const bool guarded = GuardRendezvous(start);
  const absl::StatusOr<std::string> answer = Ask(args, limit, server);
  if (guarded) ReleaseRendezvous(start);
  const absl::StatusOr<v1::HealthCheckResult> parsed =
      answer.ok() ? canary::ResultFromJsonLine(*answer) : answer.status();
  if (absl::IsDeadlineExceeded(answer.status())) {
    result.set_verdict(v1::HEALTH_VERDICT_TIMEOUT);
    result.set_error(std::string(answer.status().message()));
  } else if (parsed.ok()) {
    result.set_verdict(parsed->verdict());
    result.set_error(parsed->error());
    *result.mutable_samples() = parsed->samples();
    result.set_compute_tflops(parsed->compute_tflops());
    result.set_expected_tflops(parsed->expected_tflops());
  } else {
    result.set_verdict(v1::HEALTH_VERDICT_ERROR);
    result.set_error(answer.ok() ? absl::StrCat("tessera-canary answered what is not a result: ",
                                                parsed.status().message())
                                 : std::string(answer.status().message()));
  }
  // A server that timed out ends itself; one that answered anything else is of no more use.
  if (server.ok()) {
    ReleaseServer(*std::move(server),
                  parsed.ok() && parsed->verdict() != v1::HEALTH_VERDICT_TIMEOUT);
  }
  *result.mutable_finished_at() = ToProtoTime(clock_->Now());
  spdlog::info("canary {} of sweep {}: {} {}", v1::HealthCheckKind_Name(start.kind()),
               start.sweep_id(), v1::HealthVerdict_Name(result.verdict()), result.error());
  absl::MutexLock lock(&mu_);
  results_.push_back(std::move(result));
  worker->done = true;
}

absl::StatusOr<std::string> CanaryRunner::Ask(
    const std::vector<std::string>& args, absl::Duration limit,
    absl::StatusOr<std::unique_ptr<CanaryServer>>& server) {
  absl::StatusOr<std::string> answer = server.ok() ? (*server)->Ask(args, limit) : server.status();
  if (server.ok() && (*server)->answered() > 0 && absl::IsUnavailable(answer.status())) {
    // A kept server that had ended unseen (killed between checks): the check goes to a new one.
    // One that ended in the check ends the new one too, and that is what is reported.
    spdlog::warn("canary server {} of node {} had ended: {}", (*server)->pid(), node_name_,
                 answer.status().ToString());
    ReleaseServer(*std::move(server), /*keep=*/false);
    server = TakeServer(/*fresh=*/true);
    answer = server.ok() ? (*server)->Ask(args, limit) : server.status();
  }
  return answer;
}

bool CanaryRunner::GuardRendezvous(const v1::StartCanary& start) {
  if (start.kind() != v1::HEALTH_CHECK_KIND_ALLREDUCE) return false;
  const int unprivileged = UnprivilegedPortStart();
  if (start.rank() == 0 && start.master_port() >= unprivileged && !warned_port_.exchange(true)) {
    spdlog::warn(
        "canary rendezvous port {} is one any process on node {} may bind "
        "(net.ipv4.ip_unprivileged_port_start {}): a run could hold it and fail this node's "
        "all-reduce canaries; give the health API ports below it (--canary-ports)",
        start.master_port(), node_name_, unprivileged);
  } else if (start.rank() == 0 && start.master_port() < unprivileged && ::geteuid() != 0 &&
             !warned_port_.exchange(true)) {
    spdlog::error(
        "canary rendezvous port {} is below net.ipv4.ip_unprivileged_port_start ({}), and this "
        "worker is not root: its all-reduce canaries cannot bind it and fail; give the health "
        "API ports this worker may bind (--canary-ports)",
        start.master_port(), unprivileged);
  }
  if (!walls_) return false;
  // The worker's own uid is no rank's: every rank of the node is walled from the port.
  if (auto st = walls_->GuardPort(start.master_port(), ::getuid()); !st.ok()) {
    spdlog::warn("canary rendezvous port {} not walled from the ranks: {}", start.master_port(),
                 st.ToString());
    return false;
  }
  return true;
}

void CanaryRunner::ReleaseRendezvous(const v1::StartCanary& start) {
  walls_->ReleasePort(start.master_port(), ::getuid());
}

void CanaryRunner::ReleaseServer(std::unique_ptr<CanaryServer> server, bool keep) {
  {
    absl::MutexLock lock(&mu_);
    std::erase(busy_, server->pid());
    if (keep && !stopping_ && idle_.size() < kMaxIdleServers) {
      idle_.push_back({std::move(server), clock_->Now()});
    }
  }
  server.reset();  // one not kept ends here, outside the lock
}

std::vector<v1::HealthCheckResult> CanaryRunner::TakeResults() {
  std::vector<IdleServer> expired;
  absl::MutexLock lock(&mu_);
  expired = TakeExpiredServers();
  return std::exchange(results_, {});
}

std::vector<pid_t> CanaryRunner::ProcessGroups() {
  absl::MutexLock lock(&mu_);
  std::vector<pid_t> groups = busy_;
  for (const auto& idle : idle_) groups.push_back(idle.server->pid());
  return groups;
}

size_t CanaryRunner::IdleServers() {
  absl::MutexLock lock(&mu_);
  return idle_.size();
}

}  // namespace tessera::worker
