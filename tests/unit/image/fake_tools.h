#pragma once
// A fake skopeo and umoci for the image cache's tests: records every command, answers inspect from
// a table, does nothing for copy, and makes a bundle (rootfs with one file of a known size, and a
// config.json) for unpack.

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "worker/image/tool_runner.h"

namespace tessera::worker::image::testing {

inline std::string Digest(char c) { return "sha256:" + std::string(64, c); }

// skopeo's own words for common failures (containers/image 5.x, as Debian's skopeo 1.9 prints).
inline const char kManifestUnknown[] =
    "time=\"2024-05-01T10:00:00Z\" level=fatal msg=\"Error reading manifest 9 in "
    "docker.io/library/nope: manifest unknown\"\n";
inline const char kUnauthorized[] =
    "time=\"2024-05-01T10:00:00Z\" level=fatal msg=\"Error reading manifest 1 in "
    "r.example.com/private/x: unauthorized: authentication required\"\n";
inline const char kRefused[] =
    "time=\"2024-05-01T10:00:00Z\" level=fatal msg=\"pinging container registry "
    "r.example.com: Get \\\"https://r.example.com/v2/\\\": dial tcp 10.0.0.9:443: connect: "
    "connection refused\"\n";
inline const char kHttpToHttps[] =
    "time=\"2024-05-01T10:00:00Z\" level=fatal msg=\"pinging container registry "
    "127.0.0.1:5000: Get \\\"https://127.0.0.1:5000/v2/\\\": http: server gave HTTP response to "
    "HTTPS client\"\n";

class FakeTools final : public ToolRunner {
 public:
  absl::StatusOr<ToolResult> Run(const std::vector<std::string>& argv,
                                 absl::Duration timeout) override {
    std::function<void()> hook;
    {
      absl::MutexLock lock(&mu);
      calls.push_back(argv);
      timeouts.push_back(timeout);
      hook = before_copy;
    }
    // No REQUIRE here: Catch2's assertions are not for other threads (the concurrent tests).
    if (argv.size() < 2) return absl::InternalError("fake tools: no command");
    const std::string command = argv[0] + " " + argv[1];
    if (command == "skopeo inspect") {
      absl::MutexLock lock(&mu);
      if (inspect_answer) return *inspect_answer;
      const auto it = digests.find(argv.back());
      if (it == digests.end()) return ToolResult{1, kManifestUnknown};
      return ToolResult{0, "some warning\n" + it->second + "\n"};
    }
    if (command == "skopeo copy") {
      if (hook) hook();
      absl::MutexLock lock(&mu);
      if (copy_answer) return *copy_answer;
      return ToolResult{0,
                        "Getting image source signatures\nWriting manifest to image destination\n"};
    }
    if (command == "umoci unpack") {
      absl::MutexLock lock(&mu);
      if (unpack_answer) return *unpack_answer;
      return MakeBundle(argv.back());
    }
    return absl::InternalError("fake tools: unexpected command " + command);
  }

  // The commands whose first two words are `command` ("skopeo copy").
  std::vector<std::vector<std::string>> Calls(const std::string& command) {
    absl::MutexLock lock(&mu);
    std::vector<std::vector<std::string>> out;
    for (const auto& c : calls) {
      if (c.size() >= 2 && c[0] + " " + c[1] == command) out.push_back(c);
    }
    return out;
  }
  size_t CallCount() {
    absl::MutexLock lock(&mu);
    return calls.size();
  }

  absl::Mutex mu;
  std::vector<std::vector<std::string>> calls;
  std::vector<absl::Duration> timeouts;
  std::map<std::string, std::string> digests;  // skopeo's docker:// argument -> digest
  std::optional<ToolResult> inspect_answer, copy_answer, unpack_answer;
  std::function<void()> before_copy;  // runs (unlocked) at the start of each copy
  int64_t file_bytes = 100'000;       // the rootfs file's size
  std::string config_json = R"({"process": {"env": ["PATH=/usr/bin:/bin", "LANG=C.UTF-8"],
                                             "cwd": "/workspace"}})";

 private:
  ToolResult MakeBundle(const std::string& bundle) {
    namespace fs = std::filesystem;
    if (fs::exists(bundle)) return ToolResult{1, "bundle exists"};  // as umoci refuses it
    fs::create_directories(bundle + "/rootfs/bin");
    std::ofstream(bundle + "/rootfs/bin/tool") << std::string(static_cast<size_t>(file_bytes), 'x');
    std::ofstream(bundle + "/config.json") << config_json;
    return ToolResult{0, ""};
  }
};

}  // namespace tessera::worker::image::testing
