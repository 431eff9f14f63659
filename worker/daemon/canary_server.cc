#include "worker/daemon/canary_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "worker/daemon/integration_script.h"  // ShellQuote

namespace tessera::worker {
namespace {

// An answer is one line of JSON; the largest (a result with a sample per payload size) is a few
// hundred bytes.
constexpr size_t kMaxAnswerBytes = 1 << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<CanaryServer>> CanaryServer::Start(const std::string& binary,
                                                                  const std::string& node_name,
                                                                  const std::string& stderr_path) {
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) {
    return absl::ResourceExhaustedError(absl::StrCat("socketpair: ", std::strerror(errno)));
  }
  UniqueFd ours(ends[0]), theirs(ends[1]);
  RankSpec spec;
  spec.command = absl::StrCat("exec ", ShellQuote(binary), " serve");
  spec.stdin_fd = theirs.get();
  spec.stdout_fd = theirs.get();
  spec.stderr_path = stderr_path;
  spec.env["TESSERA_NODE_NAME"] = node_name;
  auto process = RankProcess::Start(spec);
  if (!process.ok()) return process.status();
  return std::unique_ptr<CanaryServer>(
      new CanaryServer(*std::move(process), std::move(ours), stderr_path));
}

CanaryServer::~CanaryServer() {
  socket_.Reset();
  (void)process_->Kill();
  process_.reset();  // reaps it
  std::error_code ec;
  std::filesystem::remove(stderr_path_, ec);
}

absl::Status CanaryServer::Ended(const std::string& what) {
  socket_.Reset();
  // It has closed its end: it is ending, if not gone already.
  auto exit = process_->WaitFor(absl::Seconds(2));
  std::ifstream err(stderr_path_);
  std::stringstream text;
  text << err.rdbuf();
  return absl::UnavailableError(absl::StrCat("tessera-canary ",
                                             exit.ok() ? exit->ToString() : "ended", " ", what,
                                             ": ", text.str().substr(0, 500)));
}

absl::StatusOr<std::string> CanaryServer::Ask(const std::vector<std::string>& args,
                                              absl::Duration limit) {
  if (socket_.get() < 0) return absl::UnavailableError("tessera-canary: the server has ended");
  const std::string request = nlohmann::json(args).dump() + "\n";
  for (size_t sent = 0; sent < request.size();) {
    // MSG_NOSIGNAL: a server that has died is an error here, not a SIGPIPE ending the worker.
    const ssize_t n =
        ::send(socket_.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Ended("could not be asked");
    sent += static_cast<size_t>(n);
  }
  using SteadyClock = std::chrono::steady_clock;
  const auto deadline = SteadyClock::now() + absl::ToChronoNanoseconds(limit);
  for (;;) {
    if (const size_t end = unread_.find('\n'); end != std::string::npos) {
      std::string line = unread_.substr(0, end);
      unread_.erase(0, end + 1);
      // Anything else a library prints on stdout is not an answer.
      if (line.empty() || line.front() != '{') continue;
      ++answered_;
      return line;
    }
    if (unread_.size() > kMaxAnswerBytes) return Ended("wrote over 1 MiB without an answer");
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
    if (left <= 0) {
      return absl::DeadlineExceededError(
          absl::StrCat("the canary did not end within ", absl::FormatDuration(limit)));
    }
    pollfd p{.fd = socket_.get(), .events = POLLIN, .revents = 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (ready == 0 || (ready < 0 && errno == EINTR)) continue;
    char buffer[4096];
    const ssize_t n = ::recv(socket_.get(), buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Ended("without a result");
    unread_.append(buffer, static_cast<size_t>(n));
  }
}

}  // namespace tessera::worker
