// Teams in PostgreSQL: the whole team in `teams.body`, memberships also in `team_members`
// (whose primary key keeps a user in one team). Edits read the team FOR UPDATE, change it as
// the memory store does (team_edits.h) and write it back.
#include <functional>
#include <pqxx/pqxx>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "base/timestamps.h"
#include "services/store/postgres/pg_codec.h"
#include "services/store/postgres/pg_stores.h"
#include "services/store/team_edits.h"

namespace tessera::store {
namespace {

absl::Status UnknownTeam(std::string_view name) {
  return absl::NotFoundError(absl::StrCat("team ", std::string(name), " not found"));
}

absl::StatusOr<v1::Team> LockTeam(pqxx::work& tx, std::string_view name) {
  const pqxx::result rows =
      tx.exec_params("SELECT body FROM teams WHERE name = $1 FOR UPDATE", std::string(name));
  if (rows.empty()) return UnknownTeam(name);
  v1::Team team;
  TESSERA_RETURN_IF_ERROR(DecodeMessage(rows[0][0], &team));
  return team;
}

void SaveTeam(pqxx::work& tx, const v1::Team& team) {
  tx.exec_params("UPDATE teams SET body = $2 WHERE name = $1", team.name(), EncodeMessage(team));
}

class PgTeamStore final : public TeamStore {
 public:
  explicit PgTeamStore(std::shared_ptr<PgPool> pool) : pool_(std::move(pool)) {}

  absl::Status CreateTeam(const v1::Team& team) override {
    v1::Team stored = team;
    stored.clear_members();
    stored.clear_quotas();
    absl::Status st = pool_->Transact("creating a team", [&](pqxx::work& tx) {
      tx.exec_params(absl::StrCat("INSERT INTO teams (name, created_at, body) VALUES ($1, ",
                                  MicrosParam(2), ", $3)"),
                     stored.name(), absl::ToUnixMicros(FromProtoTime(stored.created_at())),
                     EncodeMessage(stored));
      return absl::OkStatus();
    });
    if (absl::IsAlreadyExists(st)) {
      return absl::AlreadyExistsError(absl::StrCat("team ", team.name(), " already exists"));
    }
    return st;
  }

  absl::Status DeleteTeam(std::string_view name) override {
    return pool_->Transact("deleting a team", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result r = tx.exec_params("DELETE FROM teams WHERE name = $1", std::string(name));
      if (r.affected_rows() == 0) return UnknownTeam(name);
      return absl::OkStatus();
    });
  }

  absl::StatusOr<v1::Team> GetTeam(std::string_view name) override {
    v1::Team team;
    absl::Status st = pool_->Transact("reading a team", [&](pqxx::work& tx) -> absl::Status {
      const pqxx::result rows =
          tx.exec_params("SELECT body FROM teams WHERE name = $1", std::string(name));
      if (rows.empty()) return UnknownTeam(name);
      return DecodeMessage(rows[0][0], &team);
    });
    if (!st.ok()) return st;
    return team;
  }

  absl::StatusOr<std::vector<v1::Team>> ListTeams() override {
    std::vector<v1::Team> out;
    absl::Status st = pool_->Transact("listing teams", [&](pqxx::work& tx) -> absl::Status {
      for (const auto& row : tx.exec("SELECT body FROM teams ORDER BY name COLLATE \"C\"")) {
        v1::Team team;
        TESSERA_RETURN_IF_ERROR(DecodeMessage(row[0], &team));
        out.push_back(std::move(team));
      }
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return out;
  }

  absl::StatusOr<v1::Team> AddMember(std::string_view team, std::string_view user) override {
    return Edit("adding a team member", team, [&](pqxx::work& tx, v1::Team& t) -> absl::Status {
      const pqxx::result current = tx.exec_params(
          "SELECT team FROM team_members WHERE user_name = $1 FOR UPDATE", std::string(user));
      if (!current.empty()) {
        const std::string other = current[0][0].as<std::string>();
        if (other == team) return absl::OkStatus();
        return absl::FailedPreconditionError(
            absl::StrCat("user ", std::string(user), " already belongs to team ", other));
      }
      // A concurrent add of the same user loses on the primary key (ALREADY_EXISTS).
      tx.exec_params("INSERT INTO team_members (user_name, team) VALUES ($1, $2)",
                     std::string(user), std::string(team));
      AddTeamMember(t, user);
      return absl::OkStatus();
    });
  }

  absl::StatusOr<v1::Team> RemoveMember(std::string_view team, std::string_view user) override {
    return Edit("removing a team member", team, [&](pqxx::work& tx, v1::Team& t) {
      TESSERA_RETURN_IF_ERROR(RemoveTeamMember(t, user));
      tx.exec_params("DELETE FROM team_members WHERE user_name = $1 AND team = $2",
                     std::string(user), std::string(team));
      return absl::OkStatus();
    });
  }

  absl::StatusOr<v1::Team> SetQuota(std::string_view team, const v1::TeamQuota& quota,
                                    bool remove) override {
    return Edit("setting a team quota", team,
                [&](pqxx::work&, v1::Team& t) { return EditTeamQuota(t, quota, remove); });
  }

  absl::StatusOr<v1::Team> SetShare(std::string_view team, double share) override {
    return Edit("setting a team share", team, [&](pqxx::work&, v1::Team& t) {
      t.set_share(share);
      return absl::OkStatus();
    });
  }

  absl::StatusOr<std::string> TeamOfUser(std::string_view user) override {
    std::string team;
    absl::Status st = pool_->Transact("reading a user's team", [&](pqxx::work& tx) {
      const pqxx::result rows =
          tx.exec_params("SELECT team FROM team_members WHERE user_name = $1", std::string(user));
      if (!rows.empty()) team = rows[0][0].as<std::string>();
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return team;
  }

 private:
  absl::StatusOr<v1::Team> Edit(const char* what, std::string_view name,
                                const std::function<absl::Status(pqxx::work&, v1::Team&)>& edit) {
    v1::Team team;
    absl::Status st = pool_->Transact(what, [&](pqxx::work& tx) -> absl::Status {
      TESSERA_ASSIGN_OR_RETURN(team, LockTeam(tx, name));
      TESSERA_RETURN_IF_ERROR(edit(tx, team));
      SaveTeam(tx, team);
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    return team;
  }

  std::shared_ptr<PgPool> pool_;
};

}  // namespace

std::shared_ptr<TeamStore> MakePgTeamStore(std::shared_ptr<PgPool> pool) {
  return std::make_shared<PgTeamStore>(std::move(pool));
}

}  // namespace tessera::store
