#include "worker/daemon/control_session.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "base/timestamps.h"
#include "transport/endpoints.h"
#include "worker/common/worker_channel.h"
#include "worker/daemon/worker_metrics.h"

namespace tessera::worker {
ControlSession::ControlSession(ControlSessionOptions options, AttemptManager& attempts,
                               std::shared_ptr<Clock> clock, std::shared_ptr<Random> random)
    : options_(std::move(options)),
      attempts_(attempts),
      clock_(std::move(clock)),
      backoff_({.first = absl::Milliseconds(100), .max = absl::Seconds(5)}, std::move(random)),
      commands_(attempts, options_.canaries, options_.faults, options_.spares,
                [this](const v1::WorkerMessage& m) { return Send(m); }) {
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  for (const std::string& e : SplitEndpoints(options_.endpoint)) {
    endpoints_.push_back(e);
    stubs_.push_back(v1::WorkerControl::NewStub(WorkerChannel(e, options_.tls)));
  }
  if (stubs_.empty()) {  // WorkerDaemon refuses an empty list; keep the string as given
    endpoints_.push_back(options_.endpoint);
    stubs_.push_back(v1::WorkerControl::NewStub(WorkerChannel(options_.endpoint, options_.tls)));
  }
}

ControlSession::~ControlSession() {
  Stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void ControlSession::Start() {
  stop_ = false;
  loop_ = std::thread([this] { Loop(); });
  fence_ = std::thread([this] { FenceLoop(); });
}

void ControlSession::Wake(bool busy) {
  if (busy) {
    absl::MutexLock lock(&wake_mu_);
    busy_until_ = clock_->Now() + options_.busy_after_command;
  }
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof one);
}

void ControlSession::Pause(absl::Time idle_until) {
  // Ranks exit and progress files grow without telling: while the node has attempts (or was
  // just told something), look every poll_interval.
  const bool has_attempts = attempts_.HasAttempts();
  const absl::Time now = clock_->Now();
  bool busy;
  {
    absl::MutexLock lock(&wake_mu_);
    busy = has_attempts || now < busy_until_;
  }
  // Without an eventfd nothing could wake the loop early: it looks every poll_interval.
  const absl::Duration wait = busy || wake_fd_ < 0
                                  ? options_.poll_interval
                                  : std::max(absl::ZeroDuration(), idle_until - now);
  pollfd p{wake_fd_, POLLIN, 0};
  const int ms = static_cast<int>(std::min<int64_t>(
      absl::ToInt64Milliseconds(absl::Ceil(wait, absl::Milliseconds(1))), 60'000));
  if (::poll(&p, 1, ms) > 0) {
    uint64_t count;
    (void)!::read(wake_fd_, &count, sizeof count);  // non-blocking: clears the wake-ups
  }
}

void ControlSession::Stop() {
  stop_ = true;
  Wake(false);
  {
    absl::MutexLock lock(&mu_);
    if (ctx_) ctx_->TryCancel();
  }
  if (loop_.joinable()) loop_.join();
  if (fence_.joinable()) fence_.join();
}

ControlSessionStats ControlSession::stats() {
  absl::MutexLock lock(&mu_);
  return stats_;
}

bool ControlSession::Send(const v1::WorkerMessage& m) {
  absl::MutexLock lock(&write_mu_);
  return stream_ != nullptr && stream_->Write(m);
}

void ControlSession::DropNetwork(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  network_dropped_until_ = clock_->Now() + d;
  if (ctx_) ctx_->TryCancel();
  spdlog::warn("network of node {} dropped for {}", options_.node.name(), absl::FormatDuration(d));
}

bool ControlSession::SendHealthReports(absl::Time probe_due_by) {
  if (options_.canaries != nullptr) {
    for (auto& r : options_.canaries->TakeResults()) {
      v1::WorkerMessage m;
      *m.mutable_health_result() = std::move(r);
      if (!Send(m)) return false;  // a result lost with the stream times out in its sweep
    }
  }
  if (options_.gpu_probe != nullptr && next_gpu_probe_ <= probe_due_by) {
    next_gpu_probe_ = clock_->Now() + options_.gpu_probe_interval;
    WorkerEventMetrics::Default().GpuProbed();
    for (auto& f : options_.gpu_probe->Poll()) {
      WorkerEventMetrics::Default().GpuFault(f.kind());
      spdlog::error("GPU fault on {} GPU {}: {}", options_.node.name(), f.gpu_index(), f.detail());
      unsent_faults_.push_back(std::move(f));
    }
  }
  while (!unsent_faults_.empty()) {  // faults are kept until they go out
    v1::WorkerMessage m;
    *m.mutable_gpu_fault() = unsent_faults_.front();
    if (!Send(m)) return false;
    unsent_faults_.erase(unsent_faults_.begin());
  }
  if (options_.progress != nullptr) {
    for (auto& h : options_.progress->TakeHangs()) {
      h.set_node_name(options_.node.name());
      spdlog::error("run {} attempt {}: rank {} made no progress for {:.1f} s (last step {})",
                    h.run_id(), h.resumption_index(), h.rank(), h.seconds_without_progress(),
                    h.last_step());
      v1::WorkerMessage m;
      *m.mutable_rank_hang() = std::move(h);
      if (!Send(m)) return false;
    }
  }
  return true;
}

void ControlSession::Loop() {
  size_t tried_in_round = 0;
  while (!stop_) {
    absl::Time cut_until;
    {
      absl::MutexLock lock(&mu_);
      cut_until = network_dropped_until_;
    }
    if (clock_->Now() < cut_until) {  // cut off: no stream until the network is back
      while (!stop_ && clock_->Now() < cut_until) clock_->SleepFor(absl::Milliseconds(20));
      continue;
    }
    const std::string& endpoint = endpoints_[current_];
    if (RunStream()) {
      backoff_.Reset();
      tried_in_round = 0;
    }
    if (stop_) break;
    // With several instances, the next one may be the leader now (this one stepped down, is
    // frozen or gone): each is tried at once, and the backoff waits only after a whole round.
    current_ = (current_.load() + 1) % stubs_.size();
    if (++tried_in_round < stubs_.size()) continue;
    tried_in_round = 0;
    const absl::Duration wait = backoff_.Next();
    spdlog::info("control stream to {} lost; reconnecting in {}", endpoint,
                 absl::FormatDuration(wait));
    const absl::Time until = clock_->Now() + wait;
    while (!stop_ && clock_->Now() < until) clock_->SleepFor(absl::Milliseconds(20));
  }
}

std::optional<v1::Registered> ControlSession::Register(
    grpc::ClientReaderWriter<v1::WorkerMessage, v1::ControlMessage>& stream,
    grpc::ClientContext& ctx, absl::Time sent) {
  v1::WorkerMessage reg;
  *reg.mutable_register_()->mutable_node() = options_.node;
  reg.mutable_register_()->set_process_id(options_.process_id);
  for (auto& a : attempts_.LocalAttempts()) *reg.mutable_register_()->add_attempts() = a;
  {
    absl::MutexLock lock(&mu_);
    registering_since_ = sent;
  }
  v1::ControlMessage reply;
  const bool registered = Send(reg) && stream.Read(&reply) && reply.has_registered();
  {
    absl::MutexLock lock(&mu_);
    registering_since_ = absl::InfinitePast();
  }
  if (!registered) {
    // Only an unexpected first reply needs cancelling; otherwise Finish has the server's reason.
    if (reply.body_case() != v1::ControlMessage::BODY_NOT_SET) ctx.TryCancel();
    stream.WritesDone();
    const grpc::Status st = stream.Finish();
    if (!stop_) {
      const bool unexpected = reply.body_case() != v1::ControlMessage::BODY_NOT_SET;
      spdlog::warn("registration with {} failed: {}", endpoints_[current_],
                   unexpected ? absl::StrCat("the first reply was not `registered` but `",
                                             v1::ControlMessage::GetDescriptor()
                                                 ->FindFieldByNumber(reply.body_case())
                                                 ->name(),
                                             "`")
                   : st.ok()  ? std::string("no answer")
                              : st.error_message());
    }
    return std::nullopt;
  }
  return reply.registered();
}

bool ControlSession::SendAttemptNews() {
  auto updates = attempts_.TakeUpdates();
  for (size_t i = 0; i < updates.size(); ++i) {
    v1::WorkerMessage m;
    *m.mutable_attempt_update() = updates[i];
    if (!Send(m)) {
      // Kept for the next stream; heartbeats also carry the same facts.
      attempts_.Requeue({updates.begin() + static_cast<long>(i), updates.end()});
      return false;
    }
  }
  if (options_.progress == nullptr) return true;
  // Progress is advisory: what a broken stream loses, the next record replaces.
  for (auto& p : options_.progress->Poll()) {
    v1::WorkerMessage m;
    *m.mutable_progress() = std::move(p);
    if (!Send(m)) return false;
  }
  return true;
}

bool ControlSession::SendHeartbeat(int64_t sequence, absl::Time now) {
  v1::WorkerMessage hb;
  hb.mutable_heartbeat()->set_sequence(sequence);
  for (auto& a : attempts_.LocalAttempts()) *hb.mutable_heartbeat()->add_attempts() = a;
  {
    absl::MutexLock lock(&mu_);
    lease_.HeartbeatSent(sequence, now);
    if (options_.clock_skew != nullptr) options_.clock_skew->HeartbeatSent(sequence);
    ++stats_.heartbeats;
  }
  return Send(hb);
}

bool ControlSession::RunStream() {
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + options_.api_key);
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return false;
    ctx_ = &ctx;
  }
  auto stream = stubs_[current_]->Connect(&ctx);
  auto detach = [&] {
    {
      absl::MutexLock lock(&write_mu_);
      stream_ = nullptr;
    }
    absl::MutexLock lock(&mu_);
    ctx_ = nullptr;
    stats_.connected = false;
  };
  {
    absl::MutexLock lock(&write_mu_);
    stream_ = stream.get();
  }
  // The lease counts from before the registration is sent: never later than the scheduler's.
  const absl::Time sent = clock_->Now();
  const std::optional<v1::Registered> registered = Register(*stream, ctx, sent);
  if (!registered) {
    detach();
    return false;
  }
  const v1::Registered& r = *registered;
  {
    absl::MutexLock lock(&mu_);
    lease_duration_ = FromProtoDuration(r.lease_duration());
    lease_.Registered(sent, lease_duration_);
    PublishDeadline();
    ++stats_.registrations;
    stats_.connected = true;
  }
  spdlog::info("registered node {} (incarnation {}, lease {})", options_.node.name(),
               r.incarnation(), absl::FormatDuration(FromProtoDuration(r.lease_duration())));

  std::atomic<bool> read_ended{false};
  std::thread reader([&] {
    ReadLoop(stream.get());
    read_ended = true;
    Wake(false);
  });
  // The interval the scheduler gave at this registration.
  const absl::Duration beat_interval =
      std::max(absl::Milliseconds(50), FromProtoDuration(r.heartbeat_interval()));
  int64_t sequence = 0;
  absl::Time next_heartbeat = clock_->Now();
  bool broken = false;
  while (!stop_ && !broken && !read_ended) {
    attempts_.Poll();
    broken = !SendAttemptNews();
    {
      // A probe that would come due before the next heartbeat is taken with this one: an idle
      // node wakes once per heartbeat, not once more per probe.
      const absl::Time looked_at = clock_->Now();
      const absl::Time probe_due_by =
          looked_at >= next_heartbeat ? looked_at + beat_interval / 2 : looked_at;
      if (!broken && !SendHealthReports(probe_due_by)) broken = true;
    }
    {
      absl::MutexLock lock(&mu_);
      if (clock_->Now() < network_dropped_until_) broken = true;
    }
    const absl::Time now = clock_->Now();
    if (!broken && now >= next_heartbeat) {
      if (!SendHeartbeat(++sequence, now)) broken = true;
      next_heartbeat = now + beat_interval;
    }
    // A probe due within half a heartbeat of the next one waits for it (see probe_due_by).
    absl::Time idle_until = next_heartbeat;
    if (options_.gpu_probe != nullptr && next_gpu_probe_ < next_heartbeat - beat_interval / 2) {
      idle_until = std::min(idle_until, next_gpu_probe_);
    }
    Pause(idle_until);
  }
  ctx.TryCancel();
  reader.join();
  const grpc::Status st = stream->Finish();
  detach();
  if (!stop_) spdlog::warn("control stream ended: {}", st.error_message());
  return true;
}

void ControlSession::ReadLoop(
    grpc::ClientReaderWriter<v1::WorkerMessage, v1::ControlMessage>* stream) {
  v1::ControlMessage msg;
  while (stream->Read(&msg)) Handle(msg);
}

void ControlSession::Handle(const v1::ControlMessage& msg) {
  switch (msg.body_case()) {
    case v1::ControlMessage::kLeaseRenewed: {
      absl::MutexLock lock(&mu_);
      if (options_.clock_skew != nullptr && msg.lease_renewed().has_expires_at()) {
        options_.clock_skew->Answered(
            msg.lease_renewed().heartbeat_sequence(),
            FromProtoTime(msg.lease_renewed().expires_at()) - lease_duration_);
      }
      lease_.Renewed(msg.lease_renewed().heartbeat_sequence());
      PublishDeadline();
      return;  // not a command
    }
    case v1::ControlMessage::kRegistered:
      Wake(true);
      return;
    default:
      // Whatever the command, its effects (an attempt's updates, a canary's result, a cut
      // network) are looked for at once and then often for a while.
      Wake(true);
      commands_.Execute(msg);
  }
}

void ControlSession::PublishDeadline() {
  if (options_.on_fence_deadline && lease_.valid_until()) {
    options_.on_fence_deadline(*lease_.valid_until() - options_.fence_margin);
  }
}

void ControlSession::FenceLoop() {
  bool fenced = false;
  while (!stop_) {
    bool must;
    bool connected;
    {
      absl::MutexLock lock(&mu_);
      must = lease_.MustFence(clock_->Now(), options_.fence_margin);
      connected = stats_.connected;
    }
    {
      // No renewal for a whole lease: the stream is dead even if the transport has not noticed
      // (a cut network drops packets silently). Cancel it so the session reconnects.
      absl::MutexLock lock(&mu_);
      if (ctx_ && stats_.connected && lease_.MustFence(clock_->Now(), absl::ZeroDuration())) {
        ctx_->TryCancel();
      }
      // With standbys to go to, half a lease without renewal is enough: the leader is frozen
      // or has stepped down, and the rest of the lease is the time to find the new one.
      if (ctx_ && stats_.connected && stubs_.size() > 1 &&
          lease_.MustFence(clock_->Now(), lease_duration_ / 2)) {
        spdlog::warn("no lease renewal from {} for half a lease; trying the other instances",
                     endpoints_[current_]);
        ctx_->TryCancel();
      }
      // A registration nobody answers (a frozen instance accepts connections): the next
      // instance may lead.
      if (ctx_ && !stats_.connected && stubs_.size() > 1 &&
          registering_since_ != absl::InfinitePast() &&
          clock_->Now() - registering_since_ > options_.registration_timeout) {
        ctx_->TryCancel();
      }
    }
    if (must && !fenced) {
      const int killed = attempts_.KillAll();
      if (killed > 0) {
        spdlog::error("lease about to end without renewal: fenced node {} (killed {} rank(s))",
                      options_.node.name(), killed);
        absl::MutexLock lock(&mu_);
        ++stats_.fences;
      }
      fenced = true;
    } else if (!must) {
      fenced = false;
    }
    // While fenced, anything started late (a StartAttempt read just before the cut) dies too.
    const bool ranks = attempts_.running_ranks() > 0;
    if (must && ranks) fenced = false;
    // Ranks to fence, or a stream being set up: look often. An idle, connected node has
    // nothing to kill (a start arrives on a live stream, with a fresh lease): it looks next
    // when the lease could first be found unrenewed (half a lease before its end with
    // standbys, else its end less the margin), and at least every second.
    absl::Duration pause = absl::Milliseconds(25);
    if (!ranks && connected) {
      absl::MutexLock lock(&mu_);
      pause = absl::Seconds(1);
      if (const auto until = lease_.valid_until()) {
        const absl::Duration early = stubs_.size() > 1
                                         ? std::max(options_.fence_margin, lease_duration_ / 2)
                                         : options_.fence_margin;
        pause =
            std::clamp(*until - early - clock_->Now(), absl::Milliseconds(25), absl::Seconds(1));
      }
    }
    clock_->SleepFor(pause);
  }
}

}  // namespace tessera::worker
