#include "worker/progress/progress_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tessera::progress {

std::string ProgressToJsonLine(const ProgressRecord& r) {
  nlohmann::json j{{"step", r.step},
                   {"total_steps", r.total_steps},
                   {"loss", r.loss},
                   {"lr", r.learning_rate},
                   {"tokens_per_second", r.tokens_per_second},
                   {"mfu", r.mfu},
                   {"resumed_from_step", r.resumed_from_step},
                   {"time", r.time},
                   {"compute_seconds", r.compute_seconds}};
  if (r.checkpoint_interval_steps > 0) {
    j["checkpoint_interval_steps"] = r.checkpoint_interval_steps;
    j["checkpoint_save_seconds"] = r.checkpoint_save_seconds;
  }
  if (r.ready) j["ready"] = true;
  if (r.checkpoint_step > 0) j["checkpoint_step"] = r.checkpoint_step;
  if (r.loss_rollbacks > 0) j["loss_rollbacks"] = r.loss_rollbacks;
  if (r.last_rollback.number > 0) {
    j["last_rollback"] = {{"number", r.last_rollback.number},
                          {"max", r.last_rollback.max},
                          {"bad_step", r.last_rollback.bad_step},
                          {"checkpoint_step", r.last_rollback.checkpoint_step},
                          {"reason", r.last_rollback.reason}};
  }
  return j.dump() + "\n";
}

namespace {

using nlohmann::json;

// `object[key]` into `out` where it is there: an integer in [min, max], else the error naming it.
template <typename Int>
absl::Status ReadInteger(const json& object, const char* key, Int& out) {
  auto it = object.find(key);
  if (it == object.end()) return absl::OkStatus();
  constexpr auto kMin = static_cast<int64_t>(std::numeric_limits<Int>::min());
  constexpr auto kMax = static_cast<int64_t>(std::numeric_limits<Int>::max());
  const bool in_range =
      it->is_number_unsigned()
          ? it->get<uint64_t>() <= static_cast<uint64_t>(kMax)
          : it->is_number_integer() && it->get<int64_t>() >= kMin && it->get<int64_t>() <= kMax;
  if (in_range) {
    out = static_cast<Int>(it->get<int64_t>());
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("not a progress record: ", key, " is ",
                                                 it->dump().substr(0, 40), ", not an integer"));
}

// `object[key]` into `out` where it is there: a number, else the error naming it.
absl::Status ReadNumber(const json& object, const char* key, double& out) {
  auto it = object.find(key);
  if (it == object.end()) return absl::OkStatus();
  if (!it->is_number()) {
    return absl::InvalidArgumentError(absl::StrCat("not a progress record: ", key, " is ",
                                                   it->dump().substr(0, 40), ", not a number"));
  }
  out = it->get<double>();
  return absl::OkStatus();
}

absl::Status ReadRollback(const json& j, LossRollbackRecord& out) {
  auto it = j.find("last_rollback");
  if (it == j.end()) return absl::OkStatus();
  if (!it->is_object()) {
    return absl::InvalidArgumentError("not a progress record: last_rollback is not an object");
  }
  TESSERA_RETURN_IF_ERROR(ReadInteger(*it, "number", out.number));
  TESSERA_RETURN_IF_ERROR(ReadInteger(*it, "max", out.max));
  TESSERA_RETURN_IF_ERROR(ReadInteger(*it, "bad_step", out.bad_step));
  TESSERA_RETURN_IF_ERROR(ReadInteger(*it, "checkpoint_step", out.checkpoint_step));
  if (auto reason = it->find("reason"); reason != it->end()) {
    if (!reason->is_string()) {
      return absl::InvalidArgumentError("not a progress record: last_rollback.reason is not text");
    }
    out.reason = reason->get<std::string>();
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ProgressRecord> ProgressFromJsonLine(const std::string& line) {
  // A rank writes the line: every field is checked for its type, so that nothing in it throws.
  auto j = json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) {
    return absl::InvalidArgumentError("not a progress record: " + line.substr(0, 200));
  }
  ProgressRecord r;
  TESSERA_RETURN_IF_ERROR(ReadInteger(j, "step", r.step));
  TESSERA_RETURN_IF_ERROR(ReadInteger(j, "total_steps", r.total_steps));
  TESSERA_RETURN_IF_ERROR(ReadNumber(j, "loss", r.loss));
  TESSERA_RETURN_IF_ERROR(ReadNumber(j, "lr", r.learning_rate));
  TESSERA_RETURN_IF_ERROR(ReadNumber(j, "tokens_per_second", r.tokens_per_second));
  TESSERA_RETURN_IF_ERROR(ReadNumber(j, "mfu", r.mfu));
  TESSERA_RETURN_IF_ERROR(ReadInteger(j, "resumed_from_step", r.resumed_from_step));
  TESSERA_RETURN_IF_ERROR(ReadNumber(j, "time", r.time));
  TESSERA_RETURN_IF_ERROR(ReadNumber(j, "compute_seconds", r.compute_seconds));
  TESSERA_RETURN_IF_ERROR(ReadNumber(j, "checkpoint_save_seconds", r.checkpoint_save_seconds));
  TESSERA_RETURN_IF_ERROR(ReadInteger(j, "checkpoint_interval_steps", r.checkpoint_interval_steps));
  TESSERA_RETURN_IF_ERROR(ReadInteger(j, "checkpoint_step", r.checkpoint_step));
  TESSERA_RETURN_IF_ERROR(ReadInteger(j, "loss_rollbacks", r.loss_rollbacks));
  TESSERA_RETURN_IF_ERROR(ReadRollback(j, r.last_rollback));
  if (auto ready = j.find("ready"); ready != j.end()) {
    if (!ready->is_boolean()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "not a progress record: ready is ", ready->dump().substr(0, 40), ", not true or false"));
    }
    r.ready = ready->get<bool>();
  }
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
