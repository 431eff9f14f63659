#include "tests/support/fake_services.h"

#include <utility>

namespace tessera::testing {

using grpc::ServerContext;
using grpc::Status;

google::protobuf::Timestamp TimeAt(int64_t unix_seconds) {
  google::protobuf::Timestamp timestamp;
  timestamp.set_seconds(unix_seconds);
  return timestamp;
}

v1::Run SampleRun(const std::string& name, v1::RunStatus status) {
  v1::Run run;
  run.set_id("id-" + name);
  run.set_name(name);
  run.set_user("alice");
  run.set_status(status);
  run.set_resumption_index(0);
  run.mutable_spec()->set_name(name);
  run.mutable_spec()->set_command("python train.py");
  run.mutable_spec()->mutable_compute()->set_cluster("c1");
  run.mutable_spec()->mutable_compute()->set_gpus(8);
  run.mutable_spec()->mutable_scheduling()->set_priority(v1::PRIORITY_MEDIUM);
  *run.mutable_created_at() = TimeAt(kT0);
  return run;
}

bool IsMissingRun(const std::string& name) { return name == "missing" || name == "nope"; }

// Recorder

Status Recorder::Record(ServerContext* context, const std::string& method,
                        const google::protobuf::Message& request) {
  std::string authorization, client_address;
  const auto& metadata = context->client_metadata();
  if (const auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization.assign(it->second.data(), it->second.size());
  }
  if (const auto it = metadata.find("x-tessera-client-address"); it != metadata.end()) {
    client_address.assign(it->second.data(), it->second.size());
  }
  std::shared_ptr<google::protobuf::Message> copy(request.New());
  copy->CopyFrom(request);
  std::lock_guard lock(mu_);
  calls_.push_back(Call{method, std::move(copy), authorization, client_address});
  if (authorization != kFakeAuthorization) {
    ++rejected_;
    return Status(grpc::StatusCode::UNAUTHENTICATED, "invalid API key");
  }
  if (next_error_.has_value()) {
    Status error = *std::move(next_error_);
    next_error_.reset();
    return error;
  }
  return Status::OK;
}

void Recorder::FailNext(Status status) {
  std::lock_guard lock(mu_);
  next_error_ = std::move(status);
}

std::size_t Recorder::count() {
  std::lock_guard lock(mu_);
  return calls_.size();
}

int Recorder::calls() { return static_cast<int>(count()); }

int Recorder::rejected() {
  std::lock_guard lock(mu_);
  return rejected_;
}

Recorder::Call Recorder::Last() {
  std::lock_guard lock(mu_);
  REQUIRE(!calls_.empty());
  return calls_.back();
}

void Recorder::Reset() {
  std::lock_guard lock(mu_);
  calls_.clear();
  rejected_ = 0;
  next_error_.reset();
}

// StreamControl

bool StreamControl::WaitCancelled(int n) {
  std::unique_lock lock(mu);
  return cv.wait_for(lock, std::chrono::seconds(20), [&] { return cancelled >= n; });
}

bool StreamControl::WaitStarted(int n) {
  std::unique_lock lock(mu);
  return cv.wait_for(lock, std::chrono::seconds(20), [&] { return started >= n; });
}

void StreamControl::Reset() {
  std::lock_guard lock(mu);
  started = cancelled = 0;
}

void StreamControl::WaitForCancel(ServerContext* context) {
  // The short wait only bounds how often IsCancelled is checked.
  std::unique_lock lock(mu);
  while (!context->IsCancelled()) cv.wait_for(lock, std::chrono::milliseconds(5));
  ++cancelled;
  cv.notify_all();
}

// FakeSchedulerService

FakeSchedulerService::FakeSchedulerService(Recorder& recorder) : recorder_(recorder) {
  v1::Node& node = nodes.emplace_back();
  node.set_name("node-a");
  node.set_gpu_count(8);
  node.set_admin_state(v1::NODE_ADMIN_STATE_SCHEDULABLE);
}

Status FakeSchedulerService::ListNodes(ServerContext* context, const v1::ListNodesRequest* request,
                                       v1::ListNodesResponse* response) {
  if (Status st = recorder_.Record(context, "ListNodes", *request); !st.ok()) return st;
  for (const v1::Node& node : nodes) {
    v1::Node& listed = *response->add_nodes() = node;
    listed.set_cluster(request->filter().cluster());
  }
  return Status::OK;
}

Status FakeSchedulerService::GetNode(ServerContext* context, const v1::GetNodeRequest* request,
                                     v1::GetNodeResponse* response) {
  response->mutable_node()->set_name(request->name());
  response->add_run_names("train-1");
  return recorder_.Record(context, "GetNode", *request);
}

Status FakeSchedulerService::GetQueue(ServerContext* context, const v1::GetQueueRequest* request,
                                      v1::GetQueueResponse* response) {
  response->add_entries()->set_waiting_reason("needs 4 nodes");
  return recorder_.Record(context, "GetQueue", *request);
}

// FakeCordonService

FakeCordonService::FakeCordonService(Recorder& recorder, StreamControl& stream)
    : recorder_(recorder), stream_(stream) {}

Status FakeCordonService::CordonNode(ServerContext* context, const v1::CordonNodeRequest* request,
                                     v1::CordonNodeResponse* response) {
  if (Status st = recorder_.Record(context, "CordonNode", *request); !st.ok()) return st;
  std::lock_guard lock(mu);
  cordons.push_back(*request);
  response->mutable_node()->set_name(request->node_name());
  response->mutable_node()->set_admin_state(v1::NODE_ADMIN_STATE_CORDONED);
  return Status::OK;
}

Status FakeCordonService::UncordonNode(ServerContext* context,
                                       const v1::UncordonNodeRequest* request,
                                       v1::UncordonNodeResponse* response) {
  response->mutable_node()->set_name(request->node_name());
  return recorder_.Record(context, "UncordonNode", *request);
}

Status FakeCordonService::DrainNode(ServerContext* context, const v1::DrainNodeRequest* request,
                                    v1::DrainNodeResponse* response) {
  response->mutable_node()->set_name(request->node_name());
  return recorder_.Record(context, "DrainNode", *request);
}

Status FakeCordonService::ListNodeEvents(ServerContext* context,
                                         const v1::ListNodeEventsRequest* request,
                                         v1::ListNodeEventsResponse* response) {
  response->add_events()->set_id(7);
  return recorder_.Record(context, "ListNodeEvents", *request);
}

Status FakeCordonService::WatchNodeEvents(ServerContext* context,
                                          const v1::WatchNodeEventsRequest* request,
                                          grpc::ServerWriter<v1::NodeEvent>* writer) {
  if (Status st = recorder_.Record(context, "WatchNodeEvents", *request); !st.ok()) return st;
  {
    std::lock_guard lock(mu);
    watches.push_back(*request);
  }
  const int64_t after = request->filter().after_id();
  return stream_.Serve(context, writer, [after](int i) {
    const bool cordoned = i % 2 == 0;
    v1::NodeEvent event;
    event.set_id(after + i + 1);
    event.set_node_name("node-a");
    event.set_type(cordoned ? v1::NODE_EVENT_TYPE_CORDONED
                            : v1::NODE_EVENT_TYPE_HEALTH_CHECK_PASSED);
    *event.mutable_time() = TimeAt(kT0 + i);
    event.mutable_actor()->set_name("health-api");
    event.set_reason(cordoned ? "XID 79 on GPU 3" : "passed the all-reduce canary");
    return event;
  });
}

void FakeCordonService::Reset() {
  std::lock_guard lock(mu);
  cordons.clear();
  watches.clear();
}

// FakeHealthService

FakeHealthService::FakeHealthService(Recorder& recorder) : recorder_(recorder) {}

Status FakeHealthService::StartSweep(ServerContext* context, const v1::StartSweepRequest* request,
                                     v1::StartSweepResponse* response) {
  response->mutable_sweep()->set_id("sweep-1");
  response->mutable_sweep()->set_state(v1::SWEEP_STATE_RUNNING);
  return recorder_.Record(context, "StartSweep", *request);
}

Status FakeHealthService::GetSweep(ServerContext* context, const v1::GetSweepRequest* request,
                                   v1::GetSweepResponse* response) {
  response->mutable_sweep()->set_id(request->id());
  if (request->id() == "sweep-suspects") {  // a follow-up sweep that confirmed and doubted
    auto& s = *response->mutable_sweep();
    s.set_follows_sweep_id("sweep-1");
    s.add_anomalous_nodes("node-4");
    s.add_findings(
        "node-4: slow: 0.793 x its peers' compute rate over 3 pairs measured in turn with them");
    s.add_suspects(
        "node-4: slow: 0.793 x its peers' compute rate over 3 pairs measured in turn with them");
    s.add_suspects("node-6: inconclusive: 0.917 x its peers' compute rate over 10 pairs");
    s.add_inconclusive_nodes("node-6");
    s.add_suspects(
        "node-7: slow: 0.810 x its peers' compute rate over 6 pairs measured in turn with them; "
        "not cordoned "
        "on one sweep: the next sweep measures it again");
    s.add_repeat_nodes("node-7");
  }
  return recorder_.Record(context, "GetSweep", *request);
}

Status FakeHealthService::ListSweeps(ServerContext* context, const v1::ListSweepsRequest* request,
                                     v1::ListSweepsResponse* response) {
  response->add_sweeps()->set_id("sweep-1");
  return recorder_.Record(context, "ListSweeps", *request);
}

Status FakeHealthService::ListHealthResults(ServerContext* context,
                                            const v1::ListHealthResultsRequest* request,
                                            v1::ListHealthResultsResponse* response) {
  response->add_results()->set_node_name("node-1");
  return recorder_.Record(context, "ListHealthResults", *request);
}

// FakeAdminService

Status FakeSecretService::CreateSecret(ServerContext* context,
                                       const v1::CreateSecretRequest* request,
                                       v1::CreateSecretResponse* response) {
  *response->mutable_secret() = request->secret();
  response->mutable_secret()->set_user("alice");
  return recorder_.Record(context, "CreateSecret", *request);
}

Status FakeSchedulerService::GetUtilization(ServerContext* context,
                                            const v1::GetUtilizationRequest* request,
                                            v1::GetUtilizationResponse* response) {
  v1::ClusterUtilization* c = response->add_clusters();
  c->set_cluster("local");
  c->add_gpu_types("sim");
  c->set_nodes(2);
  c->set_gpus_total(16);
  c->set_gpus_in_use(8);
  c->set_gpus_free(8);
  c->set_runs_running(1);
  c->set_runs_queued(1);
  return recorder_.Record(context, "GetUtilization", *request);
}

namespace {

v1::Team SampleTeam(const std::string& name) {
  v1::Team team;
  team.set_name(name.empty() ? "vision" : name);
  team.set_share(1);
  team.add_members("ann");
  v1::TeamQuota* q = team.add_quotas();
  q->set_cluster("local");
  q->set_gpus(8);
  return team;
}

}  // namespace

Status FakeTeamService::CreateTeam(ServerContext* c, const v1::CreateTeamRequest* r,
                                   v1::CreateTeamResponse* a) {
  *a->mutable_team() = SampleTeam(r->name());
  return recorder_.Record(c, "CreateTeam", *r);
}
Status FakeTeamService::DeleteTeam(ServerContext* c, const v1::DeleteTeamRequest* r,
                                   v1::DeleteTeamResponse*) {
  return recorder_.Record(c, "DeleteTeam", *r);
}
Status FakeTeamService::GetTeam(ServerContext* c, const v1::GetTeamRequest* r,
                                v1::GetTeamResponse* a) {
  *a->mutable_team() = SampleTeam(r->name());
  return recorder_.Record(c, "GetTeam", *r);
}
Status FakeTeamService::ListTeams(ServerContext* c, const v1::ListTeamsRequest* r,
                                  v1::ListTeamsResponse* a) {
  *a->add_teams() = SampleTeam("");
  return recorder_.Record(c, "ListTeams", *r);
}
Status FakeTeamService::AddTeamMember(ServerContext* c, const v1::AddTeamMemberRequest* r,
                                      v1::AddTeamMemberResponse* a) {
  *a->mutable_team() = SampleTeam(r->team());
  return recorder_.Record(c, "AddTeamMember", *r);
}
Status FakeTeamService::RemoveTeamMember(ServerContext* c, const v1::RemoveTeamMemberRequest* r,
                                         v1::RemoveTeamMemberResponse* a) {
  *a->mutable_team() = SampleTeam(r->team());
  return recorder_.Record(c, "RemoveTeamMember", *r);
}
Status FakeTeamService::SetTeamQuota(ServerContext* c, const v1::SetTeamQuotaRequest* r,
                                     v1::SetTeamQuotaResponse* a) {
  *a->mutable_team() = SampleTeam(r->team());
  return recorder_.Record(c, "SetTeamQuota", *r);
}
Status FakeTeamService::SetTeamShare(ServerContext* c, const v1::SetTeamShareRequest* r,
                                     v1::SetTeamShareResponse* a) {
  *a->mutable_team() = SampleTeam(r->team());
  return recorder_.Record(c, "SetTeamShare", *r);
}
Status FakeTeamService::GetUsage(ServerContext* c, const v1::GetUsageRequest* r,
                                 v1::GetUsageResponse* a) {
  v1::UsageRow* row = a->add_rows();
  row->set_day("2026-11-20");
  row->set_cluster("local");
  row->set_team("vision");
  row->set_user("ann");
  row->set_outcome("completed");
  row->set_gpu_hours(12.5);
  row->set_attempts(2);
  return recorder_.Record(c, "GetUsage", *r);
}

Status FakeSecretService::ListSecrets(ServerContext* context, const v1::ListSecretsRequest* request,
                                      v1::ListSecretsResponse* response) {
  v1::Secret* s = response->add_secrets();
  s->set_name("hf");
  s->set_user("alice");
  s->set_type(v1::SECRET_TYPE_ENVIRONMENT);
  s->set_env_key("HF_TOKEN");
  return recorder_.Record(context, "ListSecrets", *request);
}

Status FakeSecretService::DeleteSecret(ServerContext* context,
                                       const v1::DeleteSecretRequest* request,
                                       v1::DeleteSecretResponse*) {
  return recorder_.Record(context, "DeleteSecret", *request);
}

FakeAdminService::FakeAdminService(Recorder& recorder) : recorder_(recorder) {}

Status FakeAdminService::CreateApiKey(ServerContext* context,
                                      const v1::CreateApiKeyRequest* request,
                                      v1::CreateApiKeyResponse* response) {
  response->mutable_key()->set_id("key-1");
  response->mutable_key()->set_user(request->user());
  response->set_secret("s3cret");
  return recorder_.Record(context, "CreateApiKey", *request);
}

Status FakeAdminService::ListApiKeys(ServerContext* context, const v1::ListApiKeysRequest* request,
                                     v1::ListApiKeysResponse* response) {
  response->add_keys()->set_id("key-1");
  return recorder_.Record(context, "ListApiKeys", *request);
}

Status FakeAdminService::RevokeApiKey(ServerContext* context,
                                      const v1::RevokeApiKeyRequest* request,
                                      v1::RevokeApiKeyResponse*) {
  return recorder_.Record(context, "RevokeApiKey", *request);
}

Status FakeAdminService::WhoAmI(ServerContext* context, const v1::WhoAmIRequest* request,
                                v1::WhoAmIResponse* response) {
  response->set_user("alice");
  response->set_role(v1::ROLE_ADMIN);
  return recorder_.Record(context, "WhoAmI", *request);
}

Status FakeAdminService::CreateJoinToken(ServerContext* context,
                                         const v1::CreateJoinTokenRequest* request,
                                         v1::CreateJoinTokenResponse* response) {
  response->mutable_token()->set_id("jt-1");
  response->mutable_token()->set_node(request->node());
  response->set_secret("tjt_s3cret");
  return recorder_.Record(context, "CreateJoinToken", *request);
}

Status FakeAdminService::ListJoinTokens(ServerContext* context,
                                        const v1::ListJoinTokensRequest* request,
                                        v1::ListJoinTokensResponse* response) {
  response->add_tokens()->set_id("jt-1");
  return recorder_.Record(context, "ListJoinTokens", *request);
}

Status FakeAdminService::RevokeJoinToken(ServerContext* context,
                                         const v1::RevokeJoinTokenRequest* request,
                                         v1::RevokeJoinTokenResponse*) {
  return recorder_.Record(context, "RevokeJoinToken", *request);
}

Status FakeAdminService::ListAuditRecords(ServerContext* context,
                                          const v1::ListAuditRecordsRequest* request,
                                          v1::ListAuditRecordsResponse* response) {
  auto* r = response->add_records();
  r->set_id(1);
  r->set_actor("ops");
  r->set_role(v1::ROLE_OPERATOR);
  r->set_action("CordonService/CordonNode");
  r->set_target("node_name node-1");
  r->set_source("10.0.0.7:40000 via the REST gateway (in-process)");
  r->set_outcome("OK");
  return recorder_.Record(context, "ListAuditRecords", *request);
}

// FakeServices

FakeServices::FakeServices()
    : runs(recorder, stream),
      scheduler(recorder),
      cordon(recorder, stream),
      health(recorder),
      admin(recorder),
      logs(recorder, stream, &runs),
      secrets(recorder),
      metrics(recorder),
      teams(recorder) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(&runs);
  builder.RegisterService(&scheduler);
  builder.RegisterService(&cordon);
  builder.RegisterService(&health);
  builder.RegisterService(&admin);
  builder.RegisterService(&logs);
  builder.RegisterService(&secrets);
  builder.RegisterService(&metrics);
  builder.RegisterService(&teams);
  server_ = builder.BuildAndStart();
  REQUIRE(server_ != nullptr);
  REQUIRE(port_ > 0);
}

FakeServices::~FakeServices() { Shutdown(); }

void FakeServices::Reset() {
  recorder.Reset();
  stream.Reset();
  runs.Reset();
  cordon.Reset();
  logs.Reset();
}

void FakeServices::Shutdown() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

}  // namespace tessera::testing
