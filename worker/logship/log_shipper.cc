#include "worker/logship/log_shipper.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/backoff.h"
#include "base/timestamps.h"
#include "proto/policy/packed_log_lines.h"
#include "worker/common/worker_channel.h"

namespace tessera::worker {
namespace fs = std::filesystem;

namespace {

constexpr absl::Duration kSaveEvery = absl::Milliseconds(100);

}  // namespace

LogShipper::LogShipper(LogShipperOptions options, std::shared_ptr<Clock> clock,
                       std::shared_ptr<Clock> timer, std::shared_ptr<Random> random)
    : options_(std::move(options)),
      clock_(std::move(clock)),
      timer_(timer ? std::move(timer) : clock_),
      random_(random ? std::move(random) : SystemRandom::Shared()),
      instance_(absl::StrCat(absl::Hex(random_->Next()))) {
  stub_ = v1::LogService::NewStub(WorkerChannel(options_.endpoint, options_.tls));
}

LogShipper::~LogShipper() { Stop(); }

void LogShipper::Start() {
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void LogShipper::Stop() {
  stop_ = true;
  {
    absl::MutexLock lock(&mu_);
    if (active_ctx_) active_ctx_->TryCancel();
  }
  if (thread_.joinable()) thread_.join();
  absl::MutexLock lock(&mu_);
  SaveProgress();
}

bool LogShipper::HasWork() const {
  return stop_ || stream_ended_ || !files_.empty() || !in_flight_.empty();
}

void LogShipper::AddFile(const std::string& path, const RankOutput& out, v1::LogStream stream) {
  // A rank under a node's launcher writes to the launcher's files, not files of its own.
  if (path.empty() || files_.count(path)) return;
  const AckState state = LoadAckState(path);
  if (state.done) return;
  auto f = std::make_unique<File>();
  f->path = path;
  f->proto.set_run_id(out.run_id);
  f->proto.set_resumption_index(out.resumption_index);
  f->proto.set_node_rank(out.node_rank);
  f->proto.set_rank(out.rank);
  f->proto.set_stream(stream);
  f->proto.set_node_name(options_.node_name);
  f->reader = std::make_unique<SpoolReader>(path, state.acked);
  f->acked = f->saved = state.acked;
  files_[path] = std::move(f);
}

void LogShipper::Watch(const RankOutput& out) {
  absl::MutexLock lock(&mu_);
  AddFile(out.stdout_path, out, v1::LOG_STREAM_STDOUT);
  AddFile(out.stderr_path, out, v1::LOG_STREAM_STDERR);
}

void LogShipper::RankDone(const RankOutput& out) {
  absl::MutexLock lock(&mu_);
  for (const auto& path : {out.stdout_path, out.stderr_path}) {
    if (auto it = files_.find(path); it != files_.end()) it->second->final = true;
  }
}

void LogShipper::RecoverSpools(const std::string& state_dir) {
  std::error_code ec;
  const fs::path runs = fs::path(state_dir) / "runs";
  if (!fs::exists(runs, ec)) return;
  for (const auto& run : fs::directory_iterator(runs, ec)) {
    for (const auto& attempt : fs::directory_iterator(run.path(), ec)) {
      const std::string name = attempt.path().filename().string();
      int resumption = 0;
      if (!absl::StartsWith(name, "attempt-") || !absl::SimpleAtoi(name.substr(8), &resumption)) {
        continue;
      }
      int node_rank = 0;
      std::ifstream meta(attempt.path() / "node_rank");
      meta >> node_rank;
      for (const auto& file : fs::directory_iterator(attempt.path() / "logs", ec)) {
        const std::string fname = file.path().filename().string();  // rank-R.stdout
        const std::string ext = file.path().extension().string();
        int rank = 0;
        if (!absl::StartsWith(fname, "rank-") || (ext != ".stdout" && ext != ".stderr") ||
            !absl::SimpleAtoi(fname.substr(5, fname.size() - 5 - ext.size()), &rank)) {
          continue;
        }
        RankOutput out;
        out.run_id = run.path().filename().string();
        out.resumption_index = resumption;
        out.node_rank = node_rank;
        out.rank = rank;
        absl::MutexLock lock(&mu_);
        AddFile(file.path().string(), out,
                ext == ".stdout" ? v1::LOG_STREAM_STDOUT : v1::LOG_STREAM_STDERR);
        if (auto it = files_.find(file.path().string()); it != files_.end()) {
          it->second->final = true;
        }
      }
    }
  }
}

std::optional<LogShipper::InFlight> LogShipper::NextBatch(v1::LogBatch& batch) {
  InFlight flight;
  size_t bytes = 0;
  std::vector<SpoolLine> lines;
  const auto now = ToProtoTime(clock_->Now());
  const int64_t now_micros = LogTimeMicros(now);
  for (auto it = files_.begin(); it != files_.end();) {
    File& f = *it->second;
    const bool final = f.final;  // read before reading the file, so no byte is left behind
    lines.clear();
    if (flight.lines < options_.batch_lines && bytes < options_.batch_bytes) {
      auto st = f.reader->Read(options_.batch_lines - flight.lines, options_.batch_bytes - bytes,
                               final, lines);
      if (!st.ok()) spdlog::warn("log shipper: {}", st.ToString());
    }
    if (packed_ && !lines.empty()) {
      // The file's fields once, then each line's bytes: no message per line to build, send
      // and parse again in the log service.
      v1::PackedLogLines* group = batch.add_packed();
      CopyStreamFields(f.proto, *group);
      std::string& packed = *group->mutable_lines();
      for (const auto& line : lines) {
        AppendChunkLine({.sequence = line.end.sequence - 1,
                         .micros = now_micros,
                         .dropped = 0,
                         .text = line.text},
                        packed);
        bytes += line.text.size();
      }
    } else {
      for (auto& line : lines) {
        v1::LogLine* l = batch.add_lines();
        *l = f.proto;
        l->set_sequence(line.end.sequence - 1);
        *l->mutable_time() = now;
        bytes += line.text.size();
        l->set_text(std::move(line.text));
      }
    }
    if (!lines.empty()) {
      flight.ends.emplace_back(&f, f.reader->position());
      flight.lines += lines.size();
    }
    // Complete and acknowledged: shipped for good.
    if (lines.empty() && final && f.reader->AtEnd(true) &&
        f.acked.offset == f.reader->position().offset) {
      (void)SaveAckState(f.path, {f.acked, true});
      it = files_.erase(it);
      continue;
    }
    ++it;
  }
  if (flight.lines == 0) return std::nullopt;
  flight.key = absl::StrCat(options_.node_name, "/", instance_, "/", ++batch_counter_);
  batch.set_idempotency_key(flight.key);
  batch.set_node_name(options_.node_name);
  return flight;
}

void LogShipper::OnAck(const v1::LogAck& ack) {
  absl::MutexLock lock(&mu_);
  // This stream's service stores packed lines: the next batches go so.
  if (ack.accepts_packed()) packed_ = true;
  // The service answers batches in order; an ack also covers every batch sent before it.
  auto match = std::find_if(in_flight_.begin(), in_flight_.end(),
                            [&](const InFlight& f) { return f.key == ack.idempotency_key(); });
  if (match == in_flight_.end()) {
    spdlog::warn("log shipper: ack for unknown batch {}", ack.idempotency_key());
    return;
  }
  ++match;
  for (auto it = in_flight_.begin(); it != match; ++it) {
    for (auto& [file, end] : it->ends) {
      if (end.offset > file->acked.offset) file->acked = end;
    }
    stats_.lines_acked += static_cast<int64_t>(it->lines);
  }
  in_flight_.erase(in_flight_.begin(), match);
}

void LogShipper::RewindAll() {
  for (auto& [path, f] : files_) f->reader->Rewind(f->acked);
  stats_.batches_resent += static_cast<int64_t>(in_flight_.size());
  in_flight_.clear();
}

void LogShipper::SaveProgress() {
  for (auto& [path, f] : files_) {
    if (f->acked.offset == f->saved.offset) continue;
    if (SaveAckState(path, {f->acked, false}).ok()) f->saved = f->acked;
  }
}

bool LogShipper::RunStream() {
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + options_.api_key);
  {
    absl::MutexLock lock(&mu_);
    if (stop_) return false;
    active_ctx_ = &ctx;
    stream_ended_ = false;
    // Until this stream's service says it stores packed lines (it may be an older one than the
    // last stream's), lines go one message each.
    packed_ = false;
  }
  auto stream = stub_->PushLogs(&ctx);
  int64_t acked_before;
  {
    absl::MutexLock lock(&mu_);
    acked_before = stats_.lines_acked;
  }
  std::thread reader([&] {
    v1::LogAck ack;
    while (stream->Read(&ack)) OnAck(ack);
    // The service went away: resend from the acknowledged positions. Set under mu_, so that it
    // also wakes a loop asleep for want of files.
    absl::MutexLock lock(&mu_);
    stream_ended_ = true;
  });
  absl::Time last_save = timer_->Now();
  bool broken = false;
  absl::Duration idle = options_.idle_poll;
  while (!stop_ && !broken) {
    v1::LogBatch batch;
    std::optional<InFlight> flight;
    {
      absl::MutexLock lock(&mu_);
      if (stream_ended_) break;
      if (!HasWork()) {
        // No rank's output to follow: sleep until Watch, RecoverSpools, Stop or the stream's
        // end. An untimed wait, so that neither clock's steps matter.
        mu_.Await(absl::Condition(this, &LogShipper::HasWork));
        idle = options_.idle_poll;
        continue;
      }
      if (in_flight_.size() < options_.max_in_flight) {
        flight = NextBatch(batch);
        if (flight) {
          stats_.lines_sent += static_cast<int64_t>(flight->lines);
          in_flight_.push_back(std::move(*flight));
        }
      }
      if (timer_->Now() - last_save >= kSaveEvery) {
        SaveProgress();
        last_save = timer_->Now();
      }
    }
    if (flight) {
      idle = options_.idle_poll;
      if (!stream->Write(batch)) broken = true;
    } else {
      // Nothing to send: look less often the longer nothing comes (a rank that starts printing
      // is seen within idle_poll_max).
      timer_->SleepFor(idle);
      idle = std::min(idle * 2, options_.idle_poll_max);
    }
  }
  ctx.TryCancel();
  reader.join();
  const grpc::Status st = stream->Finish();
  absl::MutexLock lock(&mu_);
  active_ctx_ = nullptr;
  if (!stop_) {
    spdlog::warn("log shipper: stream to {} ended: {}; resending {} unacknowledged batch(es)",
                 options_.endpoint, st.error_message(), in_flight_.size());
  }
  RewindAll();
  SaveProgress();
  return stats_.lines_acked > acked_before;
}

void LogShipper::Loop() {
  Backoff backoff({.first = absl::Milliseconds(100), .max = absl::Seconds(2)}, random_);
  while (!stop_) {
    if (RunStream()) backoff.Reset();
    if (stop_) break;
    {
      absl::MutexLock lock(&mu_);
      ++stats_.reconnects;
    }
    const absl::Time until = timer_->Now() + backoff.Next();
    while (!stop_ && timer_->Now() < until) timer_->SleepFor(absl::Milliseconds(20));
  }
}

bool LogShipper::Shipped(const RankOutput& out) {
  absl::MutexLock lock(&mu_);
  // A file leaves files_ only once it is final and acknowledged to its end (NextBatch).
  return !files_.count(out.stdout_path) && !files_.count(out.stderr_path);
}

LogShipperStats LogShipper::stats() {
  absl::MutexLock lock(&mu_);
  LogShipperStats s = stats_;
  s.files_tracked = static_cast<int>(files_.size());
  for (const auto& [path, f] : files_) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && st.st_size > f->acked.offset) {
      s.backlog_bytes += st.st_size - f->acked.offset;
    }
  }
  return s;
}

bool LogShipper::Drained() {
  absl::MutexLock lock(&mu_);
  if (!in_flight_.empty()) return false;
  for (const auto& [path, f] : files_) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && st.st_size > f->acked.offset) return false;
  }
  return true;
}

}  // namespace tessera::worker
