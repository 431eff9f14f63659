#pragma once
// The node's walls around its ranks' network traffic: iptables rules (and ip6tables', where the
// node has IPv6) on packets the ranks send, matched by the ranks' uids (the owner match of
// locally generated packets, so nothing about a run's own traffic between its ranks changes).
//
// A rank may not reach:
//   - the cloud's metadata address (169.254.169.254, fd00:ec2::254), where a node's own
//     credentials are;
//   - the worker's own ports (its /metrics);
//   - what the operator names (--network-wall: the control plane's database, say);
//   - another run's rendezvous port (MASTER_PORT on that run's first node): only the ranks of
//     the run's own user connect to it. Two runs of one user share a uid and so are not walled
//     from each other (one tenant); a rendezvous port is walled from the ranks of the nodes the
//     run is on, not from nodes it does not use.
//
// Each worker keeps its rules in a chain of its own (TSW-<hash of its state folder>), jumped to
// from OUTPUT by a rule whose comment names that folder. A worker that starts removes its own
// rules of before and those of workers whose state folder is gone (killed, their folder
// deleted), and removes its rules when it stops.
#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "worker/image/tool_runner.h"

namespace tessera::worker {

// Where ranks may not connect: an address, with an optional /prefix (IPv4 or IPv6; empty: any),
// and a TCP port (0: every port and protocol).
struct WalledDestination {
  std::string address;
  int port = 0;
  bool operator==(const WalledDestination&) const = default;
};

// "10.0.0.5:5432", "10.0.0.0/8", "[fd00::1]:80", "fd00::/8", ":9100" (a port on any address).
// INVALID_ARGUMENT naming what is wrong.
absl::StatusOr<WalledDestination> ParseWalledDestination(absl::string_view text);

// What every node walls off: the cloud's metadata addresses.
std::vector<WalledDestination> MetadataDestinations();

struct NetworkWallsOptions {
  std::string state_dir;               // the worker's: names its chain and its rules
  std::vector<std::string> rank_uids;  // the uids ranks run as: "65534", "100000-4294967294"
  std::vector<WalledDestination> walled;
  std::string iptables = "iptables";
  std::string ip6tables = "ip6tables";  // skipped where it does not work
};

class NetworkWalls {
 public:
  NetworkWalls(NetworkWallsOptions options, image::ToolRunner& runner);

  // Builds the walls, with `also` walled besides the options' (the worker's own ports, known
  // once it listens), removing this worker's of before and dead workers'. FAILED_PRECONDITION
  // with iptables' own words where the node cannot (no iptables, not root, no CAP_NET_ADMIN).
  absl::Status Install(const std::vector<WalledDestination>& also = {});
  // Removes this worker's rules and chain.
  void Remove();
  // Only `uid`'s ranks, of all ranks on this node, may connect to TCP `port` (a run's
  // rendezvous); Release takes that back.
  absl::Status GuardPort(int port, uid_t uid);
  void ReleasePort(int port, uid_t uid);

  const std::string& chain() const { return chain_; }
  // The comment that marks a worker's jump rules: "tessera-walls:" and its state folder.
  static std::string Mark(const std::string& state_dir);
  static std::string ChainFor(const std::string& state_dir);

 private:
  // Runs one of the programs with `args`; the status carries its output where it failed.
  absl::Status Run(const std::string& program, const std::vector<std::string>& args);
  // Removes OUTPUT's jumps to chains of workers whose folder is gone, and to this worker's.
  void RemoveStaleJumps(const std::string& program) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::string> ProgramsFor(const WalledDestination& d) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<std::string> GuardArgs(const char* verb, int port, uid_t uid) const;

  absl::Mutex mu_;  // guards and releases come from attempts' threads
  NetworkWallsOptions options_ ABSL_GUARDED_BY(mu_);
  image::ToolRunner& runner_;
  std::string chain_;
  std::vector<std::string> programs_
      ABSL_GUARDED_BY(mu_);  // iptables, and ip6tables where it works
};

// Splits a rule as `iptables -S` prints it into its words (a quoted comment is one word).
std::vector<std::string> SplitRuleWords(absl::string_view rule);

}  // namespace tessera::worker
