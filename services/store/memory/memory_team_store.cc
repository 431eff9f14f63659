// Teams in memory.
#include "absl/strings/str_cat.h"
#include "services/store/memory/memory_database.h"
#include "services/store/team_edits.h"

namespace tessera::store {
namespace {

absl::Status UnknownTeam(std::string_view name) {
  return absl::NotFoundError(absl::StrCat("team ", std::string(name), " not found"));
}

class MemoryTeamStore final : public TeamStore {
 public:
  explicit MemoryTeamStore(std::shared_ptr<MemoryDatabase> db) : db_(std::move(db)) {}

  absl::Status CreateTeam(const v1::Team& team) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    if (db_->teams.count(team.name())) {
      return absl::AlreadyExistsError(absl::StrCat("team ", team.name(), " already exists"));
    }
    v1::Team stored = team;
    stored.clear_members();
    stored.clear_quotas();
    db_->teams[team.name()] = stored;
    return absl::OkStatus();
  }

  absl::Status DeleteTeam(std::string_view name) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    auto it = db_->teams.find(name);
    if (it == db_->teams.end()) return UnknownTeam(name);
    for (const std::string& user : it->second.members()) db_->team_of_user.erase(user);
    db_->teams.erase(it);
    return absl::OkStatus();
  }

  absl::StatusOr<v1::Team> GetTeam(std::string_view name) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    auto it = db_->teams.find(name);
    if (it == db_->teams.end()) return UnknownTeam(name);
    return it->second;
  }

  absl::StatusOr<std::vector<v1::Team>> ListTeams() override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    std::vector<v1::Team> out;
    for (const auto& [name, team] : db_->teams) out.push_back(team);
    return out;
  }

  absl::StatusOr<v1::Team> AddMember(std::string_view team, std::string_view user) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    auto it = db_->teams.find(team);
    if (it == db_->teams.end()) return UnknownTeam(team);
    auto member = db_->team_of_user.find(user);
    if (member != db_->team_of_user.end() && member->second != team) {
      return absl::FailedPreconditionError(
          absl::StrCat("user ", std::string(user), " already belongs to team ", member->second));
    }
    db_->team_of_user[std::string(user)] = std::string(team);
    AddTeamMember(it->second, user);
    return it->second;
  }

  absl::StatusOr<v1::Team> RemoveMember(std::string_view team, std::string_view user) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    auto it = db_->teams.find(team);
    if (it == db_->teams.end()) return UnknownTeam(team);
    if (auto st = RemoveTeamMember(it->second, user); !st.ok()) return st;
    db_->team_of_user.erase(std::string(user));
    return it->second;
  }

  absl::StatusOr<v1::Team> SetQuota(std::string_view team, const v1::TeamQuota& quota,
                                    bool remove) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    auto it = db_->teams.find(team);
    if (it == db_->teams.end()) return UnknownTeam(team);
    if (auto st = EditTeamQuota(it->second, quota, remove); !st.ok()) return st;
    return it->second;
  }

  absl::StatusOr<v1::Team> SetShare(std::string_view team, double share) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    auto it = db_->teams.find(team);
    if (it == db_->teams.end()) return UnknownTeam(team);
    it->second.set_share(share);
    return it->second;
  }

  absl::StatusOr<std::string> TeamOfUser(std::string_view user) override {
    absl::MutexLock lock(&db_->mu);
    if (auto st = db_->CheckAvailable(); !st.ok()) return st;
    auto it = db_->team_of_user.find(user);
    return it == db_->team_of_user.end() ? std::string() : it->second;
  }

 private:
  std::shared_ptr<MemoryDatabase> db_;
};

}  // namespace

std::shared_ptr<TeamStore> MakeMemoryTeamStore(std::shared_ptr<MemoryDatabase> db) {
  return std::make_shared<MemoryTeamStore>(std::move(db));
}

}  // namespace tessera::store
