#include "worker/engine/train/local_ranks.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tessera::engine {
namespace {

std::optional<std::string> Get(const std::map<std::string, std::string>& env, const char* name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

absl::StatusOr<int> ReadCount(const std::map<std::string, std::string>& env, const char* name,
                              int min, int fallback) {
  const auto text = Get(env, name);
  if (!text) return fallback;
  int v = 0;
  if (!absl::SimpleAtoi(*text, &v) || v < min) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=", *text, ": must be an integer of at least ", min));
  }
  return v;
}

void IgnoreStop(int) {}

int ExitCodeOf(int status) {
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace

absl::StatusOr<std::optional<std::vector<RankEnvironment>>> PlanLocalRanks(
    const std::map<std::string, std::string>& env) {
  if (Get(env, "RANK")) return std::nullopt;  // a rank already
  if (!Get(env, "LOCAL_WORLD_SIZE") && !Get(env, "NODE_RANK")) return std::nullopt;  // alone
  auto local = ReadCount(env, "LOCAL_WORLD_SIZE", 1, 1);
  if (!local.ok()) return local.status();
  auto node_rank = ReadCount(env, "NODE_RANK", 0, 0);
  if (!node_rank.ok()) return node_rank.status();
  auto world = ReadCount(env, "WORLD_SIZE", 1, *local);
  if (!world.ok()) return world.status();
  auto first = ReadCount(env, "TESSERA_FIRST_RANK", 0, *node_rank * *local);
  if (!first.ok()) return first.status();
  if (*first + *local > *world) {
    return absl::InvalidArgumentError(absl::StrCat("this node's ranks ", *first, "..",
                                                   *first + *local - 1,
                                                   " do not fit WORLD_SIZE=", *world));
  }
  const auto progress_dir = Get(env, "TESSERA_PROGRESS_DIR");
  std::vector<RankEnvironment> ranks;
  for (int i = 0; i < *local; ++i) {
    RankEnvironment r = env;
    const int rank = *first + i;
    r["RANK"] = std::to_string(rank);
    r["LOCAL_RANK"] = std::to_string(i);
    r["LOCAL_WORLD_SIZE"] = std::to_string(*local);
    r["WORLD_SIZE"] = std::to_string(*world);
    if (progress_dir)
      r["TESSERA_PROGRESS_FILE"] = absl::StrCat(*progress_dir, "/rank-", rank, ".progress");
    ranks.push_back(std::move(r));
  }
  return ranks;
}

int RunLocalRanks(const std::string& program, const std::vector<std::string>& argv,
                  const std::vector<RankEnvironment>& ranks, absl::Duration grace) {
  // A handler, not SIG_IGN: handlers are reset by exec, so the ranks get the signals' defaults.
  struct sigaction quiet = {};
  quiet.sa_handler = IgnoreStop;
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &quiet, nullptr);

  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::map<pid_t, int> running;  // pid -> local rank
  int result = 0;
  bool stopping = false;
  absl::Time kill_at = absl::InfiniteFuture();
  auto stop_all = [&](int sig) {
    for (const auto& [pid, local] : running) ::kill(pid, sig);
  };
  for (size_t i = 0; i < ranks.size(); ++i) {
    std::vector<std::string> vars;
    for (const auto& [k, v] : ranks[i]) vars.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& kv : vars) envp.push_back(kv.data());
    envp.push_back(nullptr);
    pid_t pid = 0;
    const int err =
        ::posix_spawn(&pid, program.c_str(), nullptr, nullptr, args.data(), envp.data());
    if (err != 0) {
      std::cerr << "tessera-train: cannot start local rank " << i << ": " << std::strerror(err)
                << std::endl;
      result = 1;
      stopping = true;
      stop_all(SIGTERM);
      kill_at = absl::Now() + grace;
      break;
    }
    running[pid] = static_cast<int>(i);
  }
  const absl::Time started = absl::Now();
  while (!running.empty()) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, stopping ? WNOHANG : 0);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;  // no children left that this process knows of
    if (pid == 0) {      // stopping: the others still run
      if (absl::Now() >= kill_at) {
        stop_all(SIGKILL);
        kill_at = absl::InfiniteFuture();
      }
      ::usleep(20'000);
      continue;
    }
    auto it = running.find(pid);
    if (it == running.end()) continue;
    const int local = it->second;
    running.erase(it);
    const int code = ExitCodeOf(status);
    if (code == 0 || stopping) continue;
    std::cerr << "tessera-train: local rank " << local << " (rank " << ranks[local].at("RANK")
              << ") "
              << (WIFSIGNALED(status) ? absl::StrCat("was killed by signal ", WTERMSIG(status))
                                      : absl::StrCat("exited with ", code))
              << " after "
              << absl::FormatDuration(absl::Trunc(absl::Now() - started, absl::Milliseconds(1)))
              << "; stopping the node's " << running.size() << " other rank(s)" << std::endl;
    result = code;
    stopping = true;
    stop_all(SIGTERM);
    kill_at = absl::Now() + grace;
  }
  return result;
}

}  // namespace tessera::engine
