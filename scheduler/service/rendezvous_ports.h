#pragma once
// The rendezvous ports (MASTER_PORT) in use on each node: rank 0 of an attempt listens on its
// head node's port, so two attempts whose first node is the same must never share one, or the
// second run's rendezvous fails (or, worse, joins the first's). Built by each placing cycle from
// the active and draining runs (Run.master_port, recorded with the placement), then asked for a
// free port for every attempt the cycle starts.

#include <map>
#include <set>
#include <string>
#include <string_view>

#include "tessera/v1/runs.pb.h"

namespace tessera::scheduler {

class RendezvousPorts {
 public:
  // Ports are drawn from [first, first + span).
  RendezvousPorts(int first, int span);

  // `run`'s current attempt holds its port on its head node (node rank 0), when the run still
  // has that node and a port was recorded.
  void Taken(const v1::Run& run);
  // A port free on `head_node`, now taken. The search starts at a point spread by the attempt
  // (so runs do not crowd the first ports) and goes up, wrapping. When every port of the range
  // is in use there, the spread point itself (logged): the range is configured far larger than
  // a node's runs.
  int Choose(const std::string& head_node, std::string_view run_id, int resumption);

 private:
  const int first_;
  const int span_;
  std::map<std::string, std::set<int>, std::less<>> taken_;
};

// The name of `run`'s head node (node rank 0), or empty when it has none.
std::string HeadNodeOf(const v1::Run& run);

}  // namespace tessera::scheduler
