// A simulated node's control stream: what it does with the control plane's messages, and how
// it reconnects when the control plane ends the stream.
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "base/timestamps.h"
#include "tests/support/sim_fleet.h"
#include "tests/support/sim_fleet_node.h"

namespace tessera::testing {

void SimFleet::Stream::OnReadDone(bool ok) {
  if (!ok) return;
  Node& n = *fleet_->nodes_[node_];
  const absl::Time now = absl::Now();
  if (!in_.command_id().empty()) {
    v1::WorkerMessage ack;
    ack.mutable_ack()->set_command_id(in_.command_id());
    ack.mutable_ack()->set_ok(true);
    Send(ack);
  }
  switch (in_.body_case()) {
    case v1::ControlMessage::kRegistered: {
      bool first;
      {
        std::lock_guard<std::mutex> lock(n.mu);
        first = !n.registered;
        n.registered = true;
        if (in_.registered().has_heartbeat_interval()) {
          n.heartbeat_interval = FromProtoDuration(in_.registered().heartbeat_interval());
        }
      }
      // A node that registers again keeps its heartbeat timer.
      if (first) fleet_->Schedule({now + n.heartbeat_interval, node_, TimerKind::kHeartbeat});
      break;
    }
    case v1::ControlMessage::kLeaseRenewed: {
      std::optional<absl::Time> sent;
      {
        std::lock_guard<std::mutex> lock(n.mu);
        auto it = n.sent.find(in_.lease_renewed().heartbeat_sequence());
        if (it != n.sent.end()) sent = it->second;
      }
      if (sent) {
        std::lock_guard<std::mutex> lock(fleet_->rtt_mu_);
        fleet_->rtts_.push_back(absl::ToInt64Microseconds(now - *sent));
      }
      break;
    }
    case v1::ControlMessage::kStartAttempt:
      fleet_->OnStart(node_, in_.start_attempt());
      break;
    case v1::ControlMessage::kStopAttempt:  // ends now (a pusher reports it: it may block)
      fleet_->Schedule({now, node_, TimerKind::kFinishAttempt, in_.stop_attempt().run_id(),
                        in_.stop_attempt().resumption_index()});
      break;
    default:
      break;
  }
  StartRead(&in_);
}

void SimFleet::Stream::OnDone(const grpc::Status& status) {
  Node& n = *fleet_->nodes_[node_];
  bool reconnect = false;
  {
    std::lock_guard<std::mutex> lock(n.mu);
    if (n.stream == this) {
      n.stream = nullptr;
      reconnect = !n.killed;
    }
  }
  if (reconnect) {
    fleet_->streams_dropped_.fetch_add(1);
    {
      std::lock_guard<std::mutex> lock(fleet_->drops_mu_);
      fleet_->drop_reasons_.push_back(
          absl::StrCat(n.name(), ": ",
                       absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())),
                       ": ", status.error_message()));
    }
    fleet_->Schedule({absl::Now() + absl::Seconds(1), node_, TimerKind::kConnect});
  }
  std::lock_guard<std::mutex> lock(mu_);
  done_ = true;
  done_cv_.notify_all();
}

}  // namespace tessera::testing
