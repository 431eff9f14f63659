#include "worker/daemon/progress_watcher.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "base/timestamps.h"
#include "base/utf8.h"
#include "worker/progress/progress_file.h"

namespace tessera::worker {
namespace {

// True when the process is stopped (SIGSTOP): /proc/PID/stat's state is T.
bool ProcessStopped(pid_t pid) {
  if (pid <= 0) return false;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512] = {};
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return false;
  const char* close_paren = std::strrchr(buf, ')');  // the command name may hold spaces
  return close_paren != nullptr && close_paren[1] == ' ' && close_paren[2] == 'T';
}

constexpr int64_t kMaxBytesPerRead = 1 << 20;
constexpr size_t kMaxLineBytes = 64 << 10;
// The longest reason for a loss rollback passed on (the engine's are under 100 bytes).
constexpr size_t kMaxRollbackReason = 300;

// Up to kMaxBytesPerRead bytes of `path` from `offset`.
std::string ReadRankBytes(const std::string& path, int64_t offset) {
  std::string out;
  const int fd = progress::OpenRankFile(path);
  if (fd < 0) return out;  // not written yet (or never: not tessera-train), or not a file
  char buf[1 << 16];
  while (static_cast<int64_t>(out.size()) < kMaxBytesPerRead) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, offset + static_cast<int64_t>(out.size()));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace

ProgressWatcher::ProgressWatcher(std::shared_ptr<Clock> clock, absl::Duration min_interval)
    : clock_(std::move(clock)), min_interval_(min_interval) {}

ProgressWatcher::~ProgressWatcher() {
  {
    absl::MutexLock lock(&mu_);  // wakes a reader waiting for a rank to follow
    stopping_ = true;
  }
  if (reader_.joinable()) reader_.join();
}

void ProgressWatcher::StartReader(absl::Duration interval) {
  if (reader_running_.exchange(true)) return;
  reader_ = std::thread([this, interval] {
    while (!stopping_) {
      ReadFiles();
      {
        // No rank to follow (an idle node): sleep until one is watched rather than wake five
        // times a second for nothing.
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &ProgressWatcher::StoppingOrFollowing));
      }
      // Not a timed wait on the mutex: absl times those by the wall clock, which an operator or
      // NTP may step by hours (the control_plane_faults e2e test does); a sleep is not.
      if (!stopping_) std::this_thread::sleep_for(absl::ToChronoMilliseconds(interval));
    }
  });
}

void ProgressWatcher::ReadFiles() { Read(nullptr); }

void ProgressWatcher::Read(const FileKey* only) {
  absl::MutexLock reading(&read_mu_);
  struct Pending {
    FileKey key;
    std::string path;
    int64_t offset;
  };
  std::vector<Pending> pending;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, f] : files_) {
      if (f.state.done || (only != nullptr && key != *only)) continue;
      pending.push_back({key, f.path, f.offset});
    }
  }
  for (const auto& p : pending) {
    const std::string bytes = ReadRankBytes(p.path, p.offset);
    if (bytes.empty()) continue;
    absl::MutexLock lock(&mu_);
    auto it = files_.find(p.key);
    if (it != files_.end()) Parse(it->second, bytes);
  }
}

void ProgressWatcher::Watch(const RankOutput& rank) {
  if (rank.progress_path.empty()) return;
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = files_.try_emplace({rank.run_id, rank.resumption_index, rank.rank});
  if (!inserted) return;
  File& f = it->second;
  f.path = rank.progress_path;
  f.state.run_id = rank.run_id;
  f.state.resumption_index = rank.resumption_index;
  f.state.rank = rank.rank;
  f.state.watched_since = clock_->Now();
  f.state.last_change = f.state.watched_since;
  f.state.hang_timeout = rank.hang_timeout;
  f.state.pid = rank.pid;
  f.state.cpu_still_since = f.state.watched_since;
}

void ProgressWatcher::RankDone(const RankOutput& rank) {
  const FileKey key{rank.run_id, rank.resumption_index, rank.rank};
  Read(&key);
  absl::MutexLock lock(&mu_);
  auto it = files_.find(key);
  if (it == files_.end()) return;
  it->second.state.done = true;
}

void ProgressWatcher::Parse(File& f, const std::string& bytes) {
  f.offset += static_cast<int64_t>(bytes.size());
  f.partial.append(bytes);
  size_t start = 0;
  for (size_t nl; (nl = f.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    auto record = progress::ProgressFromJsonLine(f.partial.substr(start, nl - start));
    if (!record.ok()) continue;  // not ours to judge: skip what is not a record
    if (record->ready) {
      // No step's progress to pass on: the hang watch's start.
      f.state.ready_step = record->step;
      f.state.last_change = clock_->Now();
      continue;
    }
    v1::RunProgress p;
    p.set_step(record->step);
    p.set_total_steps(record->total_steps);
    p.set_loss(record->loss);
    p.set_learning_rate(record->learning_rate);
    p.set_tokens_per_second(record->tokens_per_second);
    p.set_mfu(record->mfu);
    p.set_resumed_from_step(record->resumed_from_step);
    p.set_compute_seconds(record->compute_seconds);
    p.set_checkpoint_save_seconds(record->checkpoint_save_seconds);
    p.set_checkpoint_interval_steps(record->checkpoint_interval_steps);
    p.set_checkpoint_step(std::max<int64_t>(0, record->checkpoint_step));
    p.set_loss_rollbacks(record->loss_rollbacks);
    if (const auto& b = record->last_rollback; b.number > 0) {
      auto* out = p.mutable_last_loss_rollback();
      out->set_number(b.number);
      out->set_max_rollbacks(b.max);
      out->set_bad_step(b.bad_step);
      out->set_checkpoint_step(b.checkpoint_step);
      // The rank wrote it: bounded, and valid UTF-8 for protobuf.
      out->set_reason(ToValidUtf8(std::string_view(b.reason).substr(0, kMaxRollbackReason)));
    }
    *p.mutable_reported_at() =
        ToProtoTime(absl::FromUnixMicros(static_cast<int64_t>(record->time * 1e6)));
    f.state.latest = std::move(p);
    f.state.last_change = clock_->Now();
  }
  f.partial.erase(0, start);
  // No record is this long: what is, is not a record (and must not grow without bound).
  if (f.partial.size() > kMaxLineBytes) f.partial.clear();
}

std::vector<v1::ProgressUpdate> ProgressWatcher::Poll() {
  if (!reader_running_) ReadFiles();
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  // The lowest local rank of each attempt speaks for it.
  std::map<AttemptKey, File*> speaker;
  for (auto& [key, f] : files_) {
    auto& s = speaker[{f.state.run_id, f.state.resumption_index}];
    if (s == nullptr) s = &f;
  }
  std::vector<v1::ProgressUpdate> updates;
  for (auto& [attempt, f] : speaker) {
    AttemptSent& sent = sent_[attempt];
    if (!f->state.latest) continue;
    // A loss rollback goes at once, whatever the step and the interval: each is a run event.
    const int rollback = f->state.latest->last_loss_rollback().number();
    const bool news = rollback != sent.rollback;
    if (f->state.latest->step() == sent.step && !news) continue;
    if (now - sent.at < min_interval_ && !f->state.done && !news) continue;
    v1::ProgressUpdate u;
    u.set_run_id(attempt.first);
    u.set_resumption_index(attempt.second);
    u.set_rank(f->state.rank);
    *u.mutable_progress() = *f->state.latest;
    updates.push_back(std::move(u));
    sent.at = now;
    sent.step = f->state.latest->step();
    sent.rollback = rollback;
  }
  // Forget attempts whose ranks are all done and whose newest record went out.
  for (auto it = files_.begin(); it != files_.end();) {
    const AttemptKey attempt{it->second.state.run_id, it->second.state.resumption_index};
    const bool flushed = !it->second.state.latest ||
                         sent_[attempt].step == it->second.state.latest->step() ||
                         speaker[attempt] != &it->second;
    if (it->second.state.done && flushed) {
      it = files_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = sent_.begin(); it != sent_.end();) {
    if (!speaker.count(it->first)) {
      it = sent_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = hang_reported_.begin(); it != hang_reported_.end();) {
    it = speaker.count(*it) ? std::next(it) : hang_reported_.erase(it);
  }
  return updates;
}

std::vector<v1::RankHang> ProgressWatcher::TakeHangs() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  std::vector<v1::RankHang> hangs;
  // The process groups of the ranks that have not reported yet, looked at in one pass.
  std::set<pid_t> silent;
  for (const auto& [key, f] : files_) {
    const RankState& s = f.state;
    if (!s.done && !s.latest && !s.ready_step && s.hang_timeout > absl::ZeroDuration() &&
        s.pid > 0) {
      silent.insert(s.pid);
    }
  }
  const std::map<pid_t, GroupSample> groups = SampleGroups(silent);
  for (auto& [key, f] : files_) {
    RankState& s = f.state;
    if (s.done || s.hang_timeout <= absl::ZeroDuration()) continue;
    if (!s.latest && !s.ready_step) {
      const auto group = groups.find(s.pid);
      if (group == groups.end() || !StuckBeforeFirstReport(s, group->second, now)) continue;
      if (!hang_reported_.insert({s.run_id, s.resumption_index}).second) continue;
      v1::RankHang h;
      h.set_run_id(s.run_id);
      h.set_resumption_index(s.resumption_index);
      h.set_rank(s.rank);
      h.set_seconds_without_progress(absl::ToDoubleSeconds(now - s.watched_since));
      h.set_before_first_report(true);
      hangs.push_back(std::move(h));
      continue;
    }
    if (now - s.last_change < s.hang_timeout) continue;
    const bool waiting = progress::ReadWaitingMarker(f.path) && !ProcessStopped(s.pid);
    if (waiting && now - s.last_change < 2 * s.hang_timeout) continue;
    if (!hang_reported_.insert({s.run_id, s.resumption_index}).second) continue;
    v1::RankHang h;
    h.set_run_id(s.run_id);
    h.set_resumption_index(s.resumption_index);
    h.set_rank(s.rank);
    h.set_last_step(s.latest ? s.latest->step() : *s.ready_step);
    h.set_before_first_step(!s.latest);
    h.set_seconds_without_progress(absl::ToDoubleSeconds(now - s.last_change));
    h.set_in_collective(waiting);
    hangs.push_back(std::move(h));
  }
  return hangs;
}

bool ProgressWatcher::StuckBeforeFirstReport(RankState& s, const GroupSample& group,
                                             absl::Time now) {
  if (group.cpu_ticks != s.cpu_ticks) {
    s.cpu_ticks = group.cpu_ticks;
    s.cpu_still_since = now;
    return false;
  }
  return group.stuck_member && now - s.cpu_still_since >= s.hang_timeout;
}

std::vector<ProgressWatcher::RankState> ProgressWatcher::Ranks() {
  absl::MutexLock lock(&mu_);
  std::vector<RankState> out;
  for (const auto& [key, f] : files_) out.push_back(f.state);
  return out;
}

}  // namespace tessera::worker
