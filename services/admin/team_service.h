#pragma once
// The gRPC adapter of TeamHandler: authenticates, forwards, maps the status.

#include "services/admin/team_handler.h"
#include "services/common/rpc.h"
#include "tessera/v1/teams.grpc.pb.h"

namespace tessera::admin {

class TeamService final : public v1::TeamService::Service {
 public:
  using Api = v1::TeamService;

  TeamService(std::shared_ptr<TeamHandler> handler, std::shared_ptr<auth::Authenticator> auth)
      : h_(std::move(handler)), auth_(std::move(auth)) {}

  TESSERA_UNARY_RPC(h_, CreateTeam)
  TESSERA_UNARY_RPC(h_, DeleteTeam)
  TESSERA_UNARY_RPC(h_, GetTeam)
  TESSERA_UNARY_RPC(h_, ListTeams)
  TESSERA_UNARY_RPC(h_, AddTeamMember)
  TESSERA_UNARY_RPC(h_, RemoveTeamMember)
  TESSERA_UNARY_RPC(h_, SetTeamQuota)
  TESSERA_UNARY_RPC(h_, SetTeamShare)
  TESSERA_UNARY_RPC(h_, GetUsage)

 private:
  std::shared_ptr<TeamHandler> h_;
  std::shared_ptr<auth::Authenticator> auth_;
};

}  // namespace tessera::admin
