#include "services/runs/run_event_tail.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "base/status_macros.h"
#include "services/store/filters.h"

namespace tessera::runs {
namespace {

constexpr size_t kPage = 500;

}  // namespace

RunEventTail::RunEventTail(std::shared_ptr<store::RunStore> runs,
                           std::shared_ptr<store::ChangeFeed> changes, std::shared_ptr<Clock> clock,
                           RunEventTailOptions options)
    : runs_(std::move(runs)),
      changes_(std::move(changes)),
      clock_(std::move(clock)),
      options_(options) {}

RunEventTail::~RunEventTail() {
  if (listener_ >= 0) changes_->Unlisten(listener_);
  reader_.reset();  // a read it began ends first
}

bool RunEventTail::Sends(const auth::Principal& who, const v1::RunFilter& filter,
                         const Entry& entry) {
  return entry.run != nullptr && who.may_see(entry.run->user()) &&
         store::RunMatches(*entry.run, filter);
}

v1::RunChange RunEventTail::ChangeFor(const Entry& entry) {
  v1::RunChange change;
  *change.mutable_run() = *entry.run;
  change.mutable_run()->mutable_spec()->clear_metadata();  // as lists carry runs
  *change.mutable_event() = entry.event;
  return change;
}

absl::StatusOr<int64_t> RunEventTail::Newest() {
  TESSERA_RETURN_IF_ERROR(CatchUp(changes_->Generation(store::ChangeTopic::kRunEvents)));
  absl::MutexLock lock(&mu_);
  return newest_;
}

absl::StatusOr<int64_t> RunEventTail::NewestInStore(int64_t after) {
  int64_t newest = after;
  for (;;) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<v1::RunEvent> page, runs_->ListAllEvents(newest, 1000));
    if (page.empty()) return newest;
    newest = page.back().id();
  }
}

absl::StatusOr<RunEventTail::Entries> RunEventTail::After(int64_t after_id, size_t limit) {
  TESSERA_RETURN_IF_ERROR(CatchUp(0));
  Entries out;
  {
    absl::MutexLock lock(&mu_);
    if (after_id >= floor_) {
      auto it = std::upper_bound(
          entries_.begin(), entries_.end(), after_id,
          [](int64_t id, const std::shared_ptr<const Entry>& e) { return id < e->event.id(); });
      for (; it != entries_.end() && out.size() < limit; ++it) out.push_back(*it);
      return out;
    }
  }
  // Further behind than the tail holds: this watch reads for itself.
  return ReadFromStore(after_id, std::min(limit, kPage));
}

bool RunEventTail::FreshLocked(uint64_t generation) const {
  return known_ && read_generation_ >= generation && clock_->Now() - read_at_ < options_.fresh_for;
}

absl::Status RunEventTail::CatchUp(uint64_t generation) {
  for (;;) {
    // Noted before the read (and outside mu_: the feed calls OnCommit under its own lock).
    const uint64_t began = changes_->Generation(store::ChangeTopic::kRunEvents);
    bool known = false;
    int64_t newest = 0;
    {
      absl::MutexLock lock(&mu_);
      if (FreshLocked(generation)) return absl::OkStatus();
      if (reading_) {
        const auto read = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !reading_; };
        mu_.Await(absl::Condition(&read));
        continue;  // that read may be enough
      }
      reading_ = true;
      known = known_;
      newest = newest_;
    }
    int64_t new_newest = newest;
    absl::StatusOr<Entries> fresh = ReadNews(known, newest, &new_newest);
    absl::MutexLock waking(&waking_);  // before mu_ is let go: see RemoveWatcher
    std::vector<std::function<void()>> wakes;
    {
      absl::MutexLock lock(&mu_);
      reading_ = false;
      ++reads_;
      if (!fresh.ok()) return fresh.status();
      KeepLocked(*fresh, new_newest);
      read_generation_ = std::max(read_generation_, began);
      read_at_ = clock_->Now();
      wakes = TakeWakesLocked(*fresh);
    }
    for (auto& wake : wakes) wake();
  }
}

absl::StatusOr<RunEventTail::Entries> RunEventTail::ReadNews(bool known, int64_t newest,
                                                             int64_t* new_newest) {
  if (!known) {  // the tail starts at the newest event
    TESSERA_ASSIGN_OR_RETURN(*new_newest, NewestInStore(newest));
    return Entries{};
  }
  Entries fresh;
  for (int64_t after = newest;;) {
    TESSERA_ASSIGN_OR_RETURN(Entries page, ReadFromStore(after, kPage));
    if (page.empty()) break;
    after = page.back()->event.id();
    *new_newest = after;
    const bool last = page.size() < kPage;
    fresh.insert(fresh.end(), std::make_move_iterator(page.begin()),
                 std::make_move_iterator(page.end()));
    if (last) break;
  }
  return fresh;
}

absl::StatusOr<RunEventTail::Entries> RunEventTail::ReadFromStore(int64_t after_id, size_t limit) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<v1::RunEvent> events,
                           runs_->ListAllEvents(after_id, static_cast<int>(limit)));
  absl::flat_hash_map<std::string, std::shared_ptr<const v1::Run>> runs;
  Entries page;
  page.reserve(events.size());
  for (auto& event : events) {
    auto [it, added] = runs.try_emplace(event.run_id());
    if (added) {
      absl::StatusOr<v1::Run> run = runs_->GetRunById(event.run_id());
      if (run.ok()) {
        // A list's summary, with the metadata that filters ask about.
        auto metadata = std::move(*run->mutable_spec()->mutable_metadata());
        store::SummarizeRun(&*run);
        *run->mutable_spec()->mutable_metadata() = std::move(metadata);
        it->second = std::make_shared<const v1::Run>(*std::move(run));
      } else if (!absl::IsNotFound(run.status())) {
        return run.status();
      }  // else deleted since: nobody is sent its events
    }
    auto entry = std::make_shared<Entry>();
    entry->event = std::move(event);
    entry->run = it->second;
    entry->bytes = entry->event.ByteSizeLong() + (entry->run ? entry->run->ByteSizeLong() : 0);
    page.push_back(std::move(entry));
  }
  return page;
}

void RunEventTail::KeepLocked(const Entries& fresh, int64_t new_newest) {
  if (!known_) {  // where the tail starts: nothing before it is held
    known_ = true;
    newest_ = floor_ = std::max(newest_, new_newest);
    return;
  }
  for (const auto& entry : fresh) {
    if (entry->event.id() <= newest_) continue;  // a read that raced with another's
    bytes_ += entry->bytes;
    entries_.push_back(entry);
  }
  newest_ = std::max(newest_, new_newest);
  while (!entries_.empty() &&
         (entries_.size() > options_.max_events || bytes_ > options_.max_bytes)) {
    const Entry& oldest = *entries_.front();
    bytes_ -= oldest.bytes;
    floor_ = oldest.event.id();
    entries_.pop_front();
  }
}

std::vector<std::function<void()>> RunEventTail::TakeWakesLocked(const Entries& fresh) {
  std::vector<std::function<void()>> wakes;
  if (fresh.empty()) return wakes;
  absl::flat_hash_set<WatcherId> candidates = sees_all_;
  for (const auto& entry : fresh) {
    if (!entry->run) continue;
    if (auto it = by_user_.find(entry->run->user()); it != by_user_.end()) {
      candidates.insert(it->second.begin(), it->second.end());
    }
  }
  for (WatcherId id : candidates) {
    Watcher& w = watchers_.at(id);
    if (!w.wake) continue;
    const bool news = std::any_of(fresh.begin(), fresh.end(), [&](const auto& entry) {
      return entry->event.id() > w.after && Sends(w.who, w.filter, *entry);
    });
    if (news) wakes.push_back(std::exchange(w.wake, nullptr));
  }
  return wakes;
}

RunEventTail::WatcherId RunEventTail::AddWatcher(auth::Principal who, v1::RunFilter filter) {
  absl::call_once(reading_started_, [this] {
    reader_ = std::make_unique<ThreadPool>(1);
    listener_ = changes_->Listen(store::ChangeTopic::kRunEvents, [this] { OnCommit(); });
  });
  absl::MutexLock lock(&mu_);
  const WatcherId id = next_watcher_++;
  if (who.sees_all_runs()) {
    sees_all_.insert(id);
  } else {
    by_user_[who.user].insert(id);
  }
  watchers_.emplace(id, Watcher{std::move(who), std::move(filter), 0, nullptr});
  return id;
}

void RunEventTail::RemoveWatcher(WatcherId id) {
  {
    absl::MutexLock lock(&mu_);
    auto w = watchers_.find(id);
    if (w == watchers_.end()) return;
    if (auto it = by_user_.find(w->second.who.user); it != by_user_.end()) {
      it->second.erase(id);
      if (it->second.empty()) by_user_.erase(it);
    }
    sees_all_.erase(id);
    watchers_.erase(w);
  }
  absl::MutexLock waking(&waking_);  // a wake taken before the erase has been called
}

void RunEventTail::WakeWhenNews(WatcherId id, int64_t after_id, std::function<void()> wake) {
  {
    absl::MutexLock lock(&mu_);
    auto w = watchers_.find(id);
    if (w == watchers_.end()) return;
    bool news = after_id < floor_;  // behind what is held: it reads the store
    for (auto it = entries_.rbegin(); !news && it != entries_.rend(); ++it) {
      if ((*it)->event.id() <= after_id) break;
      news = Sends(w->second.who, w->second.filter, **it);
    }
    if (!news) {
      w->second.after = after_id;
      w->second.wake = std::move(wake);
      return;
    }
  }
  wake();
}

void RunEventTail::OnCommit() {
  absl::MutexLock lock(&mu_);
  if (watchers_.empty()) {
    // Nobody to tell: no read per commit. What is held is let go; the next watch's start reads
    // on from the newest id held, ids only (NewestInStore).
    known_ = false;
    entries_.clear();
    bytes_ = 0;
    return;
  }
  if (read_queued_) return;
  read_queued_ = true;
  reader_->Submit([this] {
    {
      absl::MutexLock lock(&mu_);
      read_queued_ = false;
    }
    // A failed read is tried again by the watches' own steps (fresh_for).
    (void)CatchUp(changes_->Generation(store::ChangeTopic::kRunEvents));
  });
}

uint64_t RunEventTail::reads() const {
  absl::MutexLock lock(&mu_);
  return reads_;
}

}  // namespace tessera::runs
