#pragma once
// Runs the real mcli binary (MCLI_PATH) as a subprocess against the fake Tessera services
// (tests/support/fake_services.h), with its settings pointed at them, and captures its exit code,
// stdout and stderr.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/fake_services.h"
#include "tests/support/temp_dir.h"

namespace mcli_test {

namespace v1 = tessera::v1;
using FakeServer = tessera::testing::FakeServices;
using tessera::testing::kT0;
using tessera::testing::TempDir;
inline constexpr const char* kApiKey = tessera::testing::kFakeApiKey;

// ---------------------------------------------------------------------------------------------
// The fake server

// The fakes as mcli sees a real server: runs go through attempts whose logs mcli follows, node
// events come two, 400 ms apart (so that each is seen printed before the next comes). Started
// once for the whole binary and never destroyed (its threads outlive the tests).
inline FakeServer& Instance() {
  static FakeServer* server = [] {
    auto* fakes = new FakeServer();
    fakes->runs.simulate_attempts = true;
    fakes->logs.simulate_attempts = true;
    fakes->stream.events = 2;
    fakes->stream.pause = std::chrono::milliseconds(400);
    return fakes;
  }();
  return *server;
}

// The server with nothing recorded yet, for a test to start with.
inline FakeServer& Server() {
  FakeServer& server = Instance();
  server.Reset();
  return server;
}

// ---------------------------------------------------------------------------------------------
// Running mcli

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
  // When each line of stdout arrived, to tell streamed output from output printed at the end.
  std::vector<std::chrono::steady_clock::time_point> out_line_times;
};

inline std::ostream& operator<<(std::ostream& os, const Result& result) {
  return os << "exit " << result.exit_code << "\n--- stdout\n"
            << result.out << "--- stderr\n"
            << result.err;
}

// Runs the mcli binary with exactly `env` as its environment; kills it after 60 s. With
// `interrupt_after_lines`, sends it SIGINT (Ctrl-C) once it has printed that many lines.
inline Result RunMcli(const std::vector<std::string>& args,
                      const std::map<std::string, std::string>& env,
                      size_t interrupt_after_lines = 0) {
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
          if (interrupt_after_lines > 0 && result.out_line_times.size() >= interrupt_after_lines) {
            kill(pid, SIGINT);
            interrupt_after_lines = 0;
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
inline Result Mcli(const std::vector<std::string>& args,
                   std::map<std::string, std::string> overrides = {},
                   size_t interrupt_after_lines = 0) {
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
  return RunMcli(args, env, interrupt_after_lines);
}

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

inline bool IsUuid(const std::string& text) {
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

}  // namespace mcli_test
