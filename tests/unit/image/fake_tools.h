#pragma once
// A fake skopeo for the image cache's tests: records every command, answers inspect from a table
// (and inspect --config with a config of one layer), and for copy writes a docker-archive into
// the pipe it is given: one layer holding bin/tool of a known size.

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "tests/unit/image/tar_builder.h"
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
    const std::string command = CommandOf(argv);
    if (command == "skopeo inspect" && argv.size() > 2 && argv[2] == "--config") {
      absl::MutexLock lock(&mu);
      if (config_answer) return *config_answer;
      return ToolResult{0, config_json};
    }
    if (command == "skopeo inspect") {
      absl::MutexLock lock(&mu);
      if (inspect_answer) return *inspect_answer;
      const auto it = digests.find(argv.back());
      if (it == digests.end()) return ToolResult{1, kManifestUnknown};
      return ToolResult{0, "some warning\n" + it->second + "\n"};
    }
    if (command == "skopeo copy") {
      if (hook) hook();
      std::string archive;
      {
        absl::MutexLock lock(&mu);
        if (copy_answer) return *copy_answer;
        archive = archive_override ? *archive_override : Archive();
      }
      const std::string dest = argv.back();
      if (dest.rfind("docker-archive:", 0) != 0) return ToolResult{1, "not a docker-archive"};
      const int fd = ::open(dest.substr(15).c_str(), O_WRONLY | O_CLOEXEC);
      if (fd < 0) return ToolResult{1, "cannot open the archive"};
      for (size_t done = 0; done < archive.size();) {
        const ssize_t n = ::write(fd, archive.data() + done, archive.size() - done);
        if (n <= 0) break;  // the reader gave up (a broken archive): as skopeo, just stop
        done += static_cast<size_t>(n);
      }
      ::close(fd);
      return ToolResult{0,
                        "Getting image source signatures\nWriting manifest to image destination\n"};
    }
    return absl::InternalError("fake tools: unexpected command " + command);
  }

  void CancelAll() override { cancelled.Notify(); }

  // The tool and its subcommand ("skopeo copy"), past skopeo's global --tmpdir DIR.
  static std::string CommandOf(const std::vector<std::string>& argv) {
    if (argv.size() < 2) return "";
    const size_t sub = argv[1] == "--tmpdir" && argv.size() > 3 ? 3 : 1;
    return argv[0] + " " + argv[sub];
  }

  // The commands whose tool and subcommand are `command` ("skopeo copy").
  std::vector<std::vector<std::string>> Calls(const std::string& command) {
    absl::MutexLock lock(&mu);
    std::vector<std::vector<std::string>> out;
    for (const auto& c : calls) {
      if (CommandOf(c) == command) out.push_back(c);
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
  std::optional<ToolResult> inspect_answer, config_answer, copy_answer;
  std::optional<std::string> archive_override;  // what copy writes instead of the archive
  std::function<void()> before_copy;            // runs (unlocked) at the start of each copy
  absl::Notification cancelled;                 // CancelAll was called
  int64_t file_bytes = 100'000;                 // the rootfs file's size
  std::string config_json = R"({"config": {"Env": ["PATH=/usr/bin:/bin", "LANG=C.UTF-8"],
                                            "WorkingDir": "/workspace"},
                                 "rootfs": {"type": "layers", "diff_ids": ["sha256:)" +
                            std::string(64, 'e') + R"("]}})";

 private:
  // The docker-archive of an image of one layer (named by its diff id, as skopeo names it).
  std::string Archive() const {
    const std::string layer =
        TarBuilder()
            .Dir("bin")
            .File("bin/tool", std::string(static_cast<size_t>(file_bytes), 'x'))
            .Finish();
    return TarBuilder()
        .File(std::string(64, 'e') + ".tar", layer, 0444)
        .File("config.json", "{}")
        .File("manifest.json", "[]")
        .Finish();
  }
};

}  // namespace tessera::worker::image::testing
