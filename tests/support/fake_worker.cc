#include "tests/support/fake_worker.h"

#include "absl/strings/str_cat.h"

namespace tessera::testing {

FakeWorker::FakeWorker(std::string endpoint, std::string api_key, v1::Node node)
    : endpoint_(std::move(endpoint)), key_(std::move(api_key)), node_(std::move(node)) {}

FakeWorker::~FakeWorker() { Disconnect(); }

absl::Status FakeWorker::Connect(absl::Duration heartbeat) {
  // Like a real worker: retry while the scheduler is starting or is a standby.
  absl::Status st;
  const absl::Time deadline = absl::Now() + absl::Seconds(15);
  do {
    st = ConnectOnce(heartbeat);
    if (st.ok()) return st;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (absl::Now() < deadline);
  return st;
}

absl::Status FakeWorker::ConnectOnce(absl::Duration heartbeat) {
  Disconnect();
  stop_ = false;
  stub_ = v1::WorkerControl::NewStub(
      grpc::CreateChannel(endpoint_, grpc::InsecureChannelCredentials()));
  ctx_ = std::make_unique<grpc::ClientContext>();
  ctx_->AddMetadata("authorization", "Bearer " + key_);
  stream_ = stub_->Connect(ctx_.get());
  v1::WorkerMessage reg;
  *reg.mutable_register_()->mutable_node() = node_;
  reg.mutable_register_()->set_process_id(absl::StrCat("fake-", node_.name()));
  if (!Send(reg)) return absl::UnavailableError("could not send register");
  v1::ControlMessage reply;
  if (!stream_->Read(&reply) || !reply.has_registered()) {
    grpc::Status st = stream_->Finish();
    return absl::UnavailableError(absl::StrCat("registration refused: ", st.error_message()));
  }
  reader_ = std::thread([this] { ReadLoop(); });
  heartbeater_ = std::thread([this, heartbeat] {
    int64_t seq = 0;
    while (!stop_) {
      v1::WorkerMessage hb;
      hb.mutable_heartbeat()->set_sequence(++seq);
      if (!Send(hb)) break;
      for (absl::Duration slept; slept < heartbeat && !stop_; slept += absl::Milliseconds(10)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  });
  return absl::OkStatus();
}

void FakeWorker::Disconnect() {
  stop_ = true;
  if (heartbeater_.joinable()) heartbeater_.join();
  if (ctx_) ctx_->TryCancel();
  if (reader_.joinable()) reader_.join();
  stream_.reset();
  ctx_.reset();
}

bool FakeWorker::Send(const v1::WorkerMessage& m) {
  std::lock_guard<std::mutex> lock(write_mu_);
  return stream_ && stream_->Write(m);
}

void FakeWorker::ReadLoop() {
  v1::ControlMessage msg;
  while (stream_->Read(&msg)) {
    if (msg.has_start_attempt()) {
      const v1::StartAttempt s = msg.start_attempt();
      std::optional<int> exit_code;
      {
        absl::MutexLock lock(&mu_);
        starts_.push_back(s);
        exit_code = auto_exit_;
      }
      v1::WorkerMessage started;
      started.mutable_attempt_update()->set_run_id(s.run_id());
      started.mutable_attempt_update()->set_resumption_index(s.resumption_index());
      started.mutable_attempt_update()->set_phase(v1::ATTEMPT_PHASE_STARTED);
      Send(started);
      if (exit_code) Finish(s.run_id(), s.resumption_index(), *exit_code);
    } else if (msg.has_stop_attempt()) {
      const v1::StopAttempt s = msg.stop_attempt();
      {
        absl::MutexLock lock(&mu_);
        stops_.push_back(s);
      }
      Finish(s.run_id(), s.resumption_index(), 128 + 15);
    }
  }
}

void FakeWorker::FinishImmediately(std::optional<int> exit_code) {
  absl::MutexLock lock(&mu_);
  auto_exit_ = exit_code;
}

void FakeWorker::Finish(const std::string& run_id, int resumption, int exit_code) {
  v1::StartAttempt start;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& s : starts_) {
      if (s.run_id() == run_id && s.resumption_index() == resumption) start = s;
    }
  }
  v1::WorkerMessage done;
  auto* u = done.mutable_attempt_update();
  u->set_run_id(run_id);
  u->set_resumption_index(resumption);
  u->set_phase(v1::ATTEMPT_PHASE_FINISHED);
  for (int i = 0; i < std::max(1, start.local_world_size()); ++i) {
    auto* e = u->add_rank_exits();
    e->set_rank(start.first_rank() + i);
    e->set_node_rank(start.node_rank());
    e->set_node_name(node_.name());
    e->set_exit_code(exit_code);
  }
  Send(done);
}

std::vector<v1::StartAttempt> FakeWorker::starts() {
  absl::MutexLock lock(&mu_);
  return starts_;
}

std::vector<v1::StopAttempt> FakeWorker::stops() {
  absl::MutexLock lock(&mu_);
  return stops_;
}

std::optional<v1::StartAttempt> FakeWorker::WaitForStart(const std::string& run_id, int resumption,
                                                         absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    {
      absl::MutexLock lock(&mu_);
      for (const auto& s : starts_) {
        if (s.run_id() == run_id && (resumption < 0 || s.resumption_index() == resumption))
          return s;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

}  // namespace tessera::testing
