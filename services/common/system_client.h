#pragma once
// How one Tessera service calls another: over a ChannelRef (in the all-in-one server it is set
// only once the server runs), authenticated with this process's system API key, each call with
// a deadline. Every client of another service's API (the run manager's fit checks, the
// scheduler's run and health reports, the health API's calls ...) makes its calls through one.
//
//   SystemClient<v1::RunService> runs(channel, key, "the run manager", options);
//   v1::GetRunResponse resp;
//   absl::Status st = runs.Call(&v1::RunService::Stub::GetRun, req, &resp);

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "services/common/standby.h"
#include "services/common/system_credential.h"
#include "services/store/traffic_class.h"
#include "transport/channel_ref.h"
#include "transport/client_address.h"
#include "transport/grpc_status.h"

namespace tessera {

struct ServiceClientOptions {
  // How long one call waits for its answer before it fails with DEADLINE_EXCEEDED. gRPC
  // deadlines are wall-clock times, so this is not the injected Clock's time.
  absl::Duration deadline = absl::Seconds(30);
};

// Prepares the context of one call: the system key as the caller's credential, a deadline
// `deadline` from now, and whether it serves a person's call.
inline void PrepareSystemCall(grpc::ClientContext& context, const std::string& system_key,
                              absl::Duration deadline) {
  context.AddMetadata("authorization", "Bearer " + system_key);
  // Made while serving a person's call (Serve set the thread's class): the callee serves it as
  // that person's traffic too.
  if (store::current_traffic_class == store::TrafficClass::kUser) {
    context.AddMetadata(kUserTrafficMetadata, "1");
  }
  context.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
}

template <typename Service>
class SystemClient {
 public:
  template <typename Request, typename Response>
  using Method = grpc::Status (Service::Stub::*)(grpc::ClientContext*, const Request&, Response*);

  // `name` names the service in the error while the channel is not set ("the run manager").
  SystemClient(std::shared_ptr<ChannelRef> channel, SystemCredential system_key, std::string name,
               ServiceClientOptions options)
      : channel_(std::move(channel)),
        key_(std::move(system_key)),
        name_(std::move(name)),
        options_(options) {}

  // One unary call with the options' deadline. UNAVAILABLE while the channel is not set;
  // otherwise the call's status.
  template <typename Request, typename Response>
  absl::Status Call(Method<Request, Response> method, const Request& request,
                    Response* response) const {
    return Call(method, request, response, options_.deadline);
  }

  // The same with its own deadline, for a call whose answer takes as long as its request says.
  // With one channel per instance, an instance that answers UNAVAILABLE (a standby's refusal,
  // or none at all) is left for the next, each tried once; the error returned is the most
  // telling one (a leader's own UNAVAILABLE before a standby's refusal).
  template <typename Request, typename Response>
  absl::Status Call(Method<Request, Response> method, const Request& request, Response* response,
                    absl::Duration deadline) const {
    const size_t instances = channel_->size();
    absl::Status telling;
    for (size_t tried = 0; tried < std::max<size_t>(1, instances); ++tried) {
      auto [channel, at] = channel_->Current();
      if (!channel) return absl::UnavailableError(absl::StrCat(name_, " is not reachable yet"));
      auto stub = Service::NewStub(channel);
      grpc::ClientContext context;
      PrepareSystemCall(context, key_.secret(), deadline);
      absl::Status st = FromGrpcStatus(((*stub).*method)(&context, request, response));
      if (!absl::IsUnavailable(st) || instances <= 1) return st;
      if (telling.ok() || IsStandbyRefusal(telling)) telling = st;
      channel_->MoveOn(at);
    }
    return telling;
  }

  const ServiceClientOptions& options() const { return options_; }

 private:
  std::shared_ptr<ChannelRef> channel_;
  SystemCredential key_;
  std::string name_;
  ServiceClientOptions options_;
};

}  // namespace tessera
