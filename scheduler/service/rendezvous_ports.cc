#include "scheduler/service/rendezvous_ports.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

#include "absl/hash/hash.h"

namespace tessera::scheduler {

RendezvousPorts::RendezvousPorts(int first, int span) : first_(first), span_(span) {
  if (first <= 0 || span <= 0 || first + span - 1 > 65535) {
    // SchedulerConfig's range is the program's, not a person's input: a wrong one is a bug.
    spdlog::critical("rendezvous ports: {} ports from {} is not a range of TCP ports", span, first);
    std::abort();
  }
}

std::string HeadNodeOf(const v1::Run& run) {
  for (const auto& n : run.nodes()) {
    if (n.node_rank() == 0) return n.node_name();
  }
  return "";
}

void RendezvousPorts::Taken(const v1::Run& run) {
  const std::string head = HeadNodeOf(run);
  if (head.empty() || run.master_port() <= 0) return;
  taken_[head].insert(run.master_port());
}

int RendezvousPorts::Choose(const std::string& head_node, std::string_view run_id, int resumption) {
  const int offset =
      static_cast<int>(absl::HashOf(run_id, resumption) % static_cast<size_t>(span_));
  std::set<int>& in_use = taken_[head_node];
  for (int i = 0; i < span_; ++i) {
    const int port = first_ + (offset + i) % span_;
    if (in_use.insert(port).second) return port;
  }
  spdlog::warn("every rendezvous port {}-{} is in use on node {}: run {} shares port {}", first_,
               first_ + span_ - 1, head_node, run_id, first_ + offset);
  return first_ + offset;
}

}  // namespace tessera::scheduler
