#include "tests/integration/engine/engine_job.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/integration/control_plane/control_plane.h"

namespace tessera::testing {

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  return ntohs(addr.sin_port);
}

const std::string& LicenceDataset() {
  static const std::string folder = [] {
    const std::string out = absl::StrCat("/tmp/tessera-engine-data-", getpid());
    std::filesystem::remove_all(out);
    auto converted = RunCommand({BinaryPath("tessera-data"), "convert", "--input",
                                 "/usr/share/common-licenses", "--output", out, "--tokenizer",
                                 "bpe", "--vocab-size", "512", "--seq-len", "32"});
    INFO(converted.status().ToString());
    REQUIRE(converted.ok());
    return out;
  }();
  return folder;
}

EngineJob::EngineJob(const std::string& folder, const std::string& config_path, int world,
                     std::map<std::string, std::string> extra_env)
    : folder_(folder) {
  std::filesystem::create_directories(folder);
  const int port = FreePort();
  static int job = 0;
  ++job;
  for (int r = 0; r < world; ++r) {
    progress_files_.push_back(absl::StrCat(folder, "/job", job, "-rank", r, ".progress"));
    logs_.push_back(absl::StrCat(folder, "/job", job, "-rank", r, ".log"));
    std::vector<std::string> argv = {"/usr/bin/env",
                                     absl::StrCat("RANK=", r),
                                     absl::StrCat("WORLD_SIZE=", world),
                                     absl::StrCat("LOCAL_RANK=", r),
                                     absl::StrCat("LOCAL_WORLD_SIZE=", world),
                                     "MASTER_ADDR=127.0.0.1",
                                     absl::StrCat("MASTER_PORT=", port),
                                     "TESSERA_PROGRESS_FILE=" + progress_files_.back(),
                                     "TESSERA_CACHE_DIR=" + folder + "/cache"};
    for (const auto& [k, v] : extra_env) argv.push_back(k + "=" + v);
    argv.push_back(BinaryPath("tessera-train"));
    argv.push_back("--config");
    argv.push_back(config_path);
    auto p = Process::Start(argv, logs_.back());
    REQUIRE(p.ok());
    ranks_.push_back(*std::move(p));
  }
}

std::vector<int> EngineJob::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<int> codes;
  for (auto& p : ranks_) {
    while (p.Running() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
    auto status = p.Kill(SIGKILL, absl::Seconds(5));  // collects the exit status
    if (!status.ok()) {
      codes.push_back(-1);
    } else {
      codes.push_back(WIFEXITED(*status) ? WEXITSTATUS(*status) : 128 + WTERMSIG(*status));
    }
  }
  return codes;
}

void EngineJob::KillWhenStopped(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (auto& p : ranks_) {
    for (;;) {
      std::ifstream stat(absl::StrCat("/proc/", p.pid(), "/stat"));
      std::string pid, comm, state;
      stat >> pid >> comm >> state;
      if (state == "T") break;
      INFO("rank pid " << p.pid() << " state " << state << "\n" << p.Log());
      REQUIRE(absl::Now() < deadline);
      REQUIRE(state != "Z");
      absl::SleepFor(absl::Milliseconds(10));
    }
  }
  for (auto& p : ranks_) REQUIRE(p.Kill(SIGKILL).ok());
}

std::map<int64_t, engine::ProgressRecord> EngineJob::Progress(int rank) const {
  std::map<int64_t, engine::ProgressRecord> by_step;
  std::ifstream in(progress_files_[static_cast<size_t>(rank)]);
  std::string line;
  while (std::getline(in, line)) {
    auto r = engine::ProgressFromJsonLine(line);
    if (r.ok()) by_step[r->step] = *r;
  }
  return by_step;
}

std::string EngineJob::Log(int rank) const { return ranks_[static_cast<size_t>(rank)].Log(); }

}  // namespace tessera::testing
