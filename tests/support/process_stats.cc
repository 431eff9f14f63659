#include "tests/support/process_stats.h"

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace tessera::testing {
namespace {

// The fields of /proc/PID/stat after the command (field 3, the state, first); empty when the
// process is gone.
std::vector<std::string> StatFields(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 > stat.size()) return {};
  std::istringstream in_fields(stat.substr(close + 2));
  std::vector<std::string> fields;
  for (std::string f; in_fields >> f;) fields.push_back(std::move(f));
  return fields;
}

}  // namespace

// CPU time (user + system: fields 14 and 15) of a process, in seconds; 0 when it is gone.
double CpuSeconds(pid_t pid) {
  const auto f = StatFields(pid);
  if (f.size() < 13) return 0;
  return (std::stod(f[11]) + std::stod(f[12])) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Field 20, the threads; 0 when the process is gone.
int ThreadsOf(pid_t pid) {
  const auto f = StatFields(pid);
  return f.size() < 18 ? 0 : std::stoi(f[17]);
}

// Field 4; -1 when the process is gone.
pid_t ParentOf(pid_t pid) {
  const auto f = StatFields(pid);
  return f.size() < 2 ? -1 : static_cast<pid_t>(std::stol(f[1]));
}

int64_t RssBytes(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return 0;
}

// The PostgreSQL server's processes: the postmaster and its children.
std::vector<pid_t> DatabaseProcesses(pid_t postmaster) {
  std::vector<pid_t> out = {postmaster};
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return out;
  while (dirent* e = readdir(dir)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid > 0 && ParentOf(pid) == postmaster) out.push_back(pid);
  }
  closedir(dir);
  return out;
}

// Backends come and go, so the database's CPU is the sum over those alive at each end of the
// window, per pid (a backend that ended meanwhile is missed; the pool keeps its connections).
std::map<pid_t, double> DatabaseCpu(pid_t postmaster) {
  std::map<pid_t, double> out;
  for (pid_t p : DatabaseProcesses(postmaster)) out[p] = CpuSeconds(p);
  return out;
}

}  // namespace tessera::testing
