#include "healthcheck/sweep_plan.h"

#include <openssl/rand.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <tuple>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"

namespace tessera::health {
namespace {

std::string Label(const v1::Node& n, const char* key) {
  auto it = n.labels().find(key);
  return it == n.labels().end() ? "" : it->second;
}

void SetDuration(google::protobuf::Duration* d, absl::Duration t) {
  d->set_seconds(absl::ToInt64Seconds(t));
  d->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(t - absl::Seconds(d->seconds()))));
}

}  // namespace

std::vector<v1::Node> NeighbourOrder(std::vector<v1::Node> nodes) {
  std::sort(nodes.begin(), nodes.end(), [](const v1::Node& a, const v1::Node& b) {
    return std::make_tuple(Label(a, "switch"), Label(a, "rack"), a.name()) <
           std::make_tuple(Label(b, "switch"), Label(b, "rack"), b.name());
  });
  return nodes;
}

std::vector<std::vector<std::string>> RingPairs(const std::vector<std::string>& ordered) {
  std::vector<std::vector<std::string>> groups;
  const size_t n = ordered.size();
  if (n < 2) return groups;
  if (n == 2) return {{ordered[0], ordered[1]}};
  for (size_t i = 0; i < n; ++i) groups.push_back({ordered[i], ordered[(i + 1) % n]});
  return groups;
}

std::vector<std::vector<std::vector<std::string>>> Rounds(
    const std::vector<std::vector<std::string>>& groups) {
  std::vector<std::vector<std::vector<std::string>>> rounds;
  std::vector<std::set<std::string>> busy;
  for (const auto& g : groups) {
    size_t r = 0;
    for (; r < rounds.size(); ++r) {
      bool free = true;
      for (const auto& m : g) free = free && !busy[r].count(m);
      if (free) break;
    }
    if (r == rounds.size()) {
      rounds.emplace_back();
      busy.emplace_back();
    }
    rounds[r].push_back(g);
    busy[r].insert(g.begin(), g.end());
  }
  return rounds;
}

std::vector<std::vector<std::string>> ComputeRounds(const std::vector<std::string>& nodes,
                                                    const std::map<std::string, v1::Node>& known) {
  std::map<std::string, int> seen;  // address -> nodes already placed in rounds
  std::vector<std::vector<std::string>> rounds;
  for (const auto& name : nodes) {
    auto it = known.find(name);
    const std::string address =
        it == known.end() || it->second.address().empty() ? name : it->second.address();
    const size_t r = static_cast<size_t>(seen[address]++);
    if (r >= rounds.size()) rounds.resize(r + 1);
    rounds[r].push_back(name);
  }
  return rounds;
}

std::vector<CanaryDispatch> ComputePhase(const std::string& sweep_id,
                                         const std::vector<std::string>& nodes,
                                         const CanaryConfig& config) {
  std::vector<CanaryDispatch> out;
  for (const auto& node : nodes) {
    CanaryDispatch d;
    d.node = node;
    d.canary.set_sweep_id(sweep_id);
    d.canary.set_kind(v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
    d.canary.add_group(node);
    d.canary.set_seconds(config.compute_seconds);
    d.canary.set_threads(config.compute_threads);
    SetDuration(d.canary.mutable_timeout(), config.compute_timeout);
    out.push_back(std::move(d));
  }
  return out;
}

std::string RendezvousToken() {
  unsigned char raw[16];
  if (RAND_bytes(raw, sizeof raw) != 1) {
    spdlog::critical("OpenSSL's RAND_bytes failed: no canary rendezvous token can be made");
    std::abort();
  }
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(raw), sizeof raw));
}

std::vector<CanaryDispatch> AllReducePhase(const std::string& sweep_id,
                                           const std::vector<std::vector<std::string>>& groups,
                                           const std::map<std::string, v1::Node>& nodes,
                                           const RendezvousPorts& ports,
                                           const CanaryConfig& config) {
  std::vector<CanaryDispatch> out;
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& group = groups[g];
    const std::string token = RendezvousToken();
    const v1::Node& first = nodes.at(group[0]);
    bool gpus = true;
    for (const auto& name : group)
      gpus = gpus && nodes.at(name).gpu_count() > 0 && nodes.at(name).gpu_type() != "simulated";
    for (size_t r = 0; r < group.size(); ++r) {
      CanaryDispatch d;
      d.node = group[r];
      d.canary.set_sweep_id(sweep_id);
      d.canary.set_kind(v1::HEALTH_CHECK_KIND_ALLREDUCE);
      for (const auto& name : group) d.canary.add_group(name);
      d.canary.set_rank(static_cast<int>(r));
      d.canary.set_master_addr(first.address().empty() ? first.name() : first.address());
      d.canary.set_master_port(ports.For(g));
      d.canary.set_rendezvous_token(token);
      for (int64_t b : gpus ? config.gpu_payload_bytes : config.cpu_payload_bytes) {
        d.canary.add_payload_bytes(b);
      }
      SetDuration(d.canary.mutable_timeout(), config.allreduce_timeout);
      out.push_back(std::move(d));
    }
  }
  return out;
}

std::vector<std::string> IdlePeers(const std::map<std::string, v1::Node>& nodes,
                                   const std::set<std::string>& busy, int max_peers) {
  std::vector<std::string> peers;
  for (const auto& [name, n] : nodes) {
    if (static_cast<int>(peers.size()) >= max_peers) break;
    if (n.liveness() == v1::NODE_LIVENESS_ONLINE &&
        n.admin_state() == v1::NODE_ADMIN_STATE_SCHEDULABLE && !busy.count(name)) {
      peers.push_back(name);
    }
  }
  return peers;
}

int ExpectedResults(const std::vector<std::string>& nodes) {
  int members = 0;
  for (const auto& g : RingPairs(nodes)) members += static_cast<int>(g.size());
  return static_cast<int>(nodes.size()) + members;
}

}  // namespace tessera::health
