#include "worker/progress/progress_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string_view>

namespace tessera::progress {

std::string ProgressToJsonLine(const ProgressRecord& r) {
  return nlohmann::json{{"step", r.step},
                        {"total_steps", r.total_steps},
                        {"loss", r.loss},
                        {"lr", r.learning_rate},
                        {"tokens_per_second", r.tokens_per_second},
                        {"mfu", r.mfu},
                        {"resumed_from_step", r.resumed_from_step},
                        {"time", r.time},
                        {"compute_seconds", r.compute_seconds}}
             .dump() +
         "\n";
}

absl::StatusOr<ProgressRecord> ProgressFromJsonLine(const std::string& line) {
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) {
    return absl::InvalidArgumentError("not a progress record: " + line.substr(0, 200));
  }
  ProgressRecord r;
  r.step = j["step"];
  r.total_steps = j.value("total_steps", int64_t{0});
  r.loss = j.value("loss", 0.0);
  r.learning_rate = j.value("lr", 0.0);
  r.tokens_per_second = j.value("tokens_per_second", 0.0);
  r.mfu = j.value("mfu", 0.0);
  r.resumed_from_step = j.value("resumed_from_step", int64_t{0});
  r.time = j.value("time", 0.0);
  r.compute_seconds = j.value("compute_seconds", 0.0);
  return r;
}

ProgressReporter::ProgressReporter(const std::string& path) {
  if (path.empty()) return;
  file_ = std::fopen(path.c_str(), "a");
  wait_fd_ = ::open((path + ".wait").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  MarkWaiting(false);
}

ProgressReporter::~ProgressReporter() {
  if (file_ != nullptr) std::fclose(file_);
  if (wait_fd_ >= 0) ::close(wait_fd_);
}

void ProgressReporter::MarkWaiting(bool waiting) {
  if (wait_fd_ < 0) return;
  (void)!::pwrite(wait_fd_, waiting ? "waiting\n" : "running\n", 8, 0);
}

int OpenRankFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return -1;
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool ReadWaitingMarker(const std::string& progress_path) {
  const int fd = OpenRankFile(progress_path + ".wait");
  if (fd < 0) return false;
  char buf[8] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  ::close(fd);
  return n == 8 && std::string_view(buf, 7) == "waiting";
}

void ProgressReporter::Report(const ProgressRecord& record) {
  if (file_ == nullptr) return;
  const std::string line = ProgressToJsonLine(record);
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

}  // namespace tessera::progress
