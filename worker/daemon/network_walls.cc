#include "worker/daemon/network_walls.h"

#include <arpa/inet.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace tessera::worker {
namespace {

constexpr absl::string_view kMarkPrefix = "tessera-walls:";
constexpr absl::Duration kTimeout = absl::Seconds(30);

// Whether `address` (without its prefix) is IPv6, IPv4, or neither.
enum class Family { kV4, kV6, kNone };
Family FamilyOf(const std::string& address) {
  const std::string host(address.substr(0, address.find('/')));
  unsigned char buf[16];
  if (::inet_pton(AF_INET, host.c_str(), buf) == 1) return Family::kV4;
  if (::inet_pton(AF_INET6, host.c_str(), buf) == 1) return Family::kV6;
  return Family::kNone;
}

bool ValidPrefix(const std::string& address, Family family) {
  const size_t slash = address.find('/');
  if (slash == std::string::npos) return true;
  int bits = 0;
  return absl::SimpleAtoi(address.substr(slash + 1), &bits) && bits >= 0 &&
         bits <= (family == Family::kV4 ? 32 : 128);
}

// The program's path: iptables lives in /usr/sbin, which an ordinary PATH may not have.
std::string Located(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  for (const char* dir : {"/usr/sbin/", "/sbin/"}) {
    const std::string path = dir + program;
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return program;
}

}  // namespace

absl::StatusOr<WalledDestination> ParseWalledDestination(absl::string_view text) {
  const std::string t(absl::StripAsciiWhitespace(text));
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", t, "': ", why, " (ADDRESS[/PREFIX][:PORT], [IPv6]:PORT or :PORT)"));
  };
  if (t.empty()) return bad("empty");
  WalledDestination d;
  std::string port;
  if (t.front() == '[') {
    const size_t close = t.find(']');
    if (close == std::string::npos) return bad("no closing ]");
    d.address = t.substr(1, close - 1);
    const std::string rest = t.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return bad("what follows ] must be :PORT");
      port = rest.substr(1);
    }
  } else if (std::count(t.begin(), t.end(), ':') > 1) {
    d.address = t;  // IPv6 without a port
  } else if (const size_t colon = t.find(':'); colon != std::string::npos) {
    d.address = t.substr(0, colon);
    port = t.substr(colon + 1);
  } else {
    d.address = t;
  }
  if (!d.address.empty()) {
    const Family family = FamilyOf(d.address);
    if (family == Family::kNone) return bad("not an IP address (a name is not resolved)");
    if (!ValidPrefix(d.address, family)) return bad("a bad /prefix");
  }
  if (!port.empty() || t.back() == ':') {
    if (!absl::SimpleAtoi(port, &d.port) || d.port < 1 || d.port > 65535) {
      return bad("the port must be 1 to 65535");
    }
  }
  if (d.address.empty() && d.port == 0) return bad("an address or a port, please");
  return d;
}

std::vector<WalledDestination> MetadataDestinations() {
  return {{.address = "169.254.169.254", .port = 0}, {.address = "fd00:ec2::254", .port = 0}};
}

std::vector<std::string> SplitRuleWords(absl::string_view rule) {
  std::vector<std::string> words;
  std::string word;
  bool quoted = false, any = false;
  for (size_t i = 0; i < rule.size(); ++i) {
    const char c = rule[i];
    if (quoted && c == '\\' && i + 1 < rule.size()) {
      word += rule[++i];
    } else if (c == '"') {
      quoted = !quoted;
      any = true;
    } else if (!quoted && absl::ascii_isspace(static_cast<unsigned char>(c))) {
      if (any) words.push_back(std::move(word));
      word.clear();
      any = false;
    } else {
      word += c;
      any = true;
    }
  }
  if (any) words.push_back(std::move(word));
  return words;
}

std::string NetworkWalls::Mark(const std::string& state_dir) {
  return absl::StrCat(kMarkPrefix, state_dir);
}

std::string NetworkWalls::ChainFor(const std::string& state_dir) {
  // FNV-1a: stable across builds and runs (absl::Hash is seeded per process), and short enough
  // for iptables' 28-character chain names.
  uint32_t h = 2166136261u;
  for (unsigned char c : state_dir) h = (h ^ c) * 16777619u;
  return absl::StrFormat("TSW-%08x", h);
}

NetworkWalls::NetworkWalls(NetworkWallsOptions options, image::ToolRunner& runner)
    : options_(std::move(options)), runner_(runner), chain_(ChainFor(options_.state_dir)) {
  options_.iptables = Located(options_.iptables);
  options_.ip6tables = Located(options_.ip6tables);
}

absl::Status NetworkWalls::Run(const std::string& program, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {program, "-w"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto result = runner_.Run(argv, kTimeout);
  if (!result.ok()) return result.status();
  if (result->exit_code != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(absl::StrJoin(argv, " "), ": ", image::LastLine(result->output)));
  }
  return absl::OkStatus();
}

void NetworkWalls::RemoveStaleJumps(const std::string& program) {
  auto listed = runner_.Run({program, "-w", "-S", "OUTPUT"}, kTimeout);
  if (!listed.ok() || listed->exit_code != 0) return;
  std::vector<std::string> emptied;
  for (absl::string_view line : absl::StrSplit(listed->output, '\n')) {
    if (!absl::StartsWith(line, "-A OUTPUT ") || !absl::StrContains(line, kMarkPrefix)) continue;
    std::vector<std::string> words = SplitRuleWords(line);
    std::string owner, chain;
    for (size_t i = 0; i + 1 < words.size(); ++i) {
      if (words[i] == "--comment" && absl::StartsWith(words[i + 1], kMarkPrefix)) {
        owner = words[i + 1].substr(kMarkPrefix.size());
      }
      if (words[i] == "-j") chain = words[i + 1];
    }
    std::error_code ec;
    if (owner.empty() || (owner != options_.state_dir && std::filesystem::exists(owner, ec))) {
      continue;
    }
    words[0] = "-D";
    if (Run(program, words).ok() && owner != options_.state_dir) {
      spdlog::info("network walls: removed those of a worker that is gone ({})", owner);
    }
    if (!chain.empty()) emptied.push_back(chain);
  }
  emptied.push_back(chain_);
  for (const std::string& chain : emptied) {
    // A chain another jump still names stays (-X refuses it): its last jump's removal takes it.
    (void)Run(program, {"-F", chain});
    (void)Run(program, {"-X", chain});
  }
}

std::vector<std::string> NetworkWalls::ProgramsFor(const WalledDestination& d) const {
  std::vector<std::string> out;
  const Family family = d.address.empty() ? Family::kNone : FamilyOf(d.address);
  for (const std::string& p : programs_) {
    const bool v6 = p == options_.ip6tables;
    if (family == Family::kNone || (family == Family::kV6) == v6) out.push_back(p);
  }
  return out;
}

absl::Status NetworkWalls::Install(const std::vector<WalledDestination>& also) {
  absl::MutexLock lock(&mu_);
  options_.walled.insert(options_.walled.end(), also.begin(), also.end());
  programs_.clear();
  if (options_.rank_uids.empty()) {
    return absl::FailedPreconditionError("ranks run as root or as the worker: no uid to wall");
  }
  for (const std::string& program : {options_.iptables, options_.ip6tables}) {
    if (auto st = Run(program, {"-S", "OUTPUT"}); !st.ok()) {
      if (program == options_.iptables) return st;
      spdlog::warn("network walls: IPv4 only ({})", std::string(st.message()));
      continue;
    }
    programs_.push_back(program);
  }
  for (const std::string& program : programs_) {
    RemoveStaleJumps(program);
    if (auto st = Run(program, {"-N", chain_}); !st.ok()) return st;
  }
  for (const WalledDestination& d : options_.walled) {
    std::vector<std::string> args = {"-A", chain_};
    if (!d.address.empty()) args.insert(args.end(), {"-d", d.address});
    if (d.port > 0) args.insert(args.end(), {"-p", "tcp", "--dport", std::to_string(d.port)});
    args.insert(args.end(), {"-j", "REJECT"});
    for (const std::string& program : ProgramsFor(d)) {
      if (auto st = Run(program, args); !st.ok()) return st;
    }
  }
  for (const std::string& program : programs_) {
    for (const std::string& uids : options_.rank_uids) {
      if (auto st = Run(program, {"-I", "OUTPUT", "1", "-m", "owner", "--uid-owner", uids, "-m",
                                  "comment", "--comment", Mark(options_.state_dir), "-j", chain_});
          !st.ok()) {
        return st;
      }
    }
  }
  return absl::OkStatus();
}

void NetworkWalls::Remove() {
  absl::MutexLock lock(&mu_);
  for (const std::string& program : programs_) RemoveStaleJumps(program);
  programs_.clear();
}

std::vector<std::string> NetworkWalls::GuardArgs(const char* verb, int port, uid_t uid) const {
  std::vector<std::string> args = {verb, chain_};
  if (absl::string_view(verb) == "-I") args.push_back("1");
  args.insert(args.end(), {"-p", "tcp", "--dport", std::to_string(port), "-m", "owner", "!",
                           "--uid-owner", std::to_string(uid), "-j", "REJECT"});
  return args;
}

absl::Status NetworkWalls::GuardPort(int port, uid_t uid) {
  absl::MutexLock lock(&mu_);
  for (const std::string& program : programs_) {
    if (auto st = Run(program, GuardArgs("-I", port, uid)); !st.ok()) return st;
  }
  return absl::OkStatus();
}

void NetworkWalls::ReleasePort(int port, uid_t uid) {
  absl::MutexLock lock(&mu_);
  for (const std::string& program : programs_) {
    if (auto st = Run(program, GuardArgs("-D", port, uid)); !st.ok()) {
      spdlog::warn("network walls: {}", std::string(st.message()));
    }
  }
}

}  // namespace tessera::worker
