#include "worker/daemon/attempt_record.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"

namespace tessera::worker {
namespace fs = std::filesystem;

namespace {

std::optional<std::string> ReadStat(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  if (!in) return std::nullopt;
  std::string line;
  std::getline(in, line);
  return line;
}

// The fields after the command name, which may itself contain spaces and parentheses.
std::vector<std::string> FieldsAfterComm(const std::string& stat) {
  std::vector<std::string> out;
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return out;
  std::istringstream rest(stat.substr(close + 1));
  std::string f;
  while (rest >> f) out.push_back(f);
  return out;
}

// Calls `fn(pid, fields)` for every process, with the fields of /proc/PID/stat after the
// command name (state first).
template <typename Fn>
void ForEachProcess(Fn fn) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (auto stat = ReadStat(pid)) fn(pid, FieldsAfterComm(*stat));
  }
}

}  // namespace

std::vector<pid_t> LiveGroupMembers(pid_t pgid, unsigned long long since) {
  std::vector<pid_t> out;
  ForEachProcess([&](pid_t pid, const std::vector<std::string>& f) {
    if (f.size() < 20 || f[0] == "Z" || f[0] == "X") return;
    if (std::stol(f[2]) == pgid && std::stoull(f[19]) >= since) out.push_back(pid);
  });
  return out;
}

std::optional<unsigned long long> ProcessStartTicks(pid_t pid) {
  auto stat = ReadStat(pid);
  if (!stat) return std::nullopt;
  auto fields = FieldsAfterComm(*stat);
  // Field 3 (state) is fields[0]; field 22 (starttime) is fields[19].
  if (fields.size() < 20) return std::nullopt;
  return std::stoull(fields[19]);
}

std::map<pid_t, GroupSample> SampleGroups(const std::set<pid_t>& pgids) {
  std::map<pid_t, GroupSample> out;
  if (pgids.empty()) return out;
  ForEachProcess([&](pid_t, const std::vector<std::string>& f) {
    // Field 3 (state) is f[0], 5 (pgrp) f[2], 14 and 15 (utime, stime) f[11] and f[12].
    if (f.size() < 13 || f[0] == "Z" || f[0] == "X") return;
    const auto pgid = static_cast<pid_t>(std::stol(f[2]));
    if (!pgids.count(pgid)) return;
    GroupSample& g = out[pgid];
    ++g.members;
    g.cpu_ticks += std::stoull(f[11]) + std::stoull(f[12]);
    g.stuck_member = g.stuck_member || f[0] == "T" || f[0] == "t" || f[0] == "D";
  });
  return out;
}

bool ProcessAlive(pid_t pid) {
  auto stat = ReadStat(pid);
  if (!stat) return false;
  auto fields = FieldsAfterComm(*stat);
  return !fields.empty() && fields[0] != "Z" && fields[0] != "X";
}

AttemptRecords::AttemptRecords(std::string state_dir) : dir_(std::move(state_dir) + "/attempts") {}

std::string AttemptRecords::PathOf(const std::string& run_id, int resumption_index) const {
  return absl::StrCat(dir_, "/", run_id, ".", resumption_index, ".json");
}

absl::Status AttemptRecords::Save(const AttemptRecord& r) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return absl::InternalError(absl::StrCat("creating ", dir_, ": ", ec.message()));
  nlohmann::json j = {{"run_id", r.run_id},
                      {"run_name", r.run_name},
                      {"resumption_index", r.resumption_index},
                      {"node_rank", r.node_rank},
                      {"dir", r.dir},
                      {"ranks", nlohmann::json::array()}};
  for (const auto& rank : r.ranks) {
    j["ranks"].push_back(
        {{"rank", rank.rank}, {"pid", rank.pid}, {"start_ticks", rank.start_ticks}});
  }
  const std::string path = PathOf(r.run_id, r.resumption_index);
  const std::string tmp = path + ".tmp";
  const std::string text = j.dump();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat("writing ", tmp, ": ", strerror(errno)));
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                  ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("writing ", path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status AttemptRecords::Remove(const std::string& run_id, int resumption_index) {
  std::error_code ec;
  fs::remove(PathOf(run_id, resumption_index), ec);
  if (ec)
    return absl::InternalError(absl::StrCat("removing the record of ", run_id, ": ", ec.message()));
  return absl::OkStatus();
}

std::vector<AttemptRecord> AttemptRecords::LoadAll(std::vector<std::string>* problems) {
  std::vector<AttemptRecord> out;
  std::error_code ec;
  if (!fs::exists(dir_, ec)) return out;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string path = entry.path().string();
    if (entry.path().extension() != ".json") continue;
    try {
      std::ifstream in(path);
      const auto j = nlohmann::json::parse(in);
      AttemptRecord r;
      r.run_id = j.at("run_id").get<std::string>();
      r.run_name = j.value("run_name", "");
      r.resumption_index = j.at("resumption_index").get<int>();
      r.node_rank = j.value("node_rank", 0);
      r.dir = j.value("dir", "");
      for (const auto& rank : j.at("ranks")) {
        r.ranks.push_back({rank.at("rank").get<int>(), rank.at("pid").get<pid_t>(),
                           rank.at("start_ticks").get<unsigned long long>()});
      }
      out.push_back(std::move(r));
    } catch (const std::exception& e) {
      if (problems) problems->push_back(absl::StrCat(path, ": ", e.what()));
    }
  }
  return out;
}

std::vector<pid_t> ZombieChildren() {
  const std::string self = std::to_string(::getpid());
  std::vector<pid_t> out;
  ForEachProcess([&](pid_t pid, const std::vector<std::string>& f) {
    if (f.size() >= 2 && f[0] == "Z" && f[1] == self) out.push_back(pid);
  });
  return out;
}

std::vector<int> KillRecordedRanks(const AttemptRecord& record) {
  std::vector<int> killed;
  std::vector<pid_t> waiting;
  for (const auto& rank : record.ranks) {
    // The leader may be gone while what it spawned lives on in its group; a member started
    // before the leader means the id was recycled for an unrelated group.
    auto members = LiveGroupMembers(rank.pid, rank.start_ticks);
    auto ticks = ProcessStartTicks(rank.pid);
    const bool leader = ticks && *ticks == rank.start_ticks;
    if (!leader && members.empty()) continue;
    // The whole group: the shell and everything the user's command spawned.
    ::kill(-rank.pid, SIGKILL);
    killed.push_back(rank.rank);
    waiting.insert(waiting.end(), members.begin(), members.end());
  }
  // SIGKILL cannot be ignored; wait (briefly) until the kernel has taken them down.
  for (int i = 0; i < 500; ++i) {
    bool any = false;
    for (pid_t pid : waiting) any = any || ProcessAlive(pid);
    if (!any) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return killed;
}

}  // namespace tessera::worker
