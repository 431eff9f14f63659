#pragma once
// Message-size limits, stated on every gRPC server and channel rather than left to gRPC's
// defaults (4 MiB received, unlimited sent), so that what fits is a decision, not an accident.
// A request is one thing a caller sends (a run spec is at most 1 MiB, runspec/spec_limits.h; a
// log batch is smaller still); a reply may be a list, which callers that can get long lists
// narrow or page (the scheduler lists runs without their parameters).

#include <grpcpp/grpcpp.h>

namespace tessera {

inline constexpr int kMaxRequestBytes = 8 << 20;
inline constexpr int kMaxReplyBytes = 64 << 20;

// For a server: requests up to kMaxRequestBytes, replies up to kMaxReplyBytes.
inline void ApplyMessageLimits(grpc::ServerBuilder& builder) {
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  builder.SetMaxSendMessageSize(kMaxReplyBytes);
}

// For a channel: the same limits from the caller's side.
inline void ApplyMessageLimits(grpc::ChannelArguments& args) {
  args.SetMaxSendMessageSize(kMaxRequestBytes);
  args.SetMaxReceiveMessageSize(kMaxReplyBytes);
}

// A channel with the limits (and no other arguments).
inline std::shared_ptr<grpc::Channel> CreateLimitedChannel(
    const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  grpc::ChannelArguments args;
  ApplyMessageLimits(args);
  return grpc::CreateCustomChannel(target, credentials, args);
}

}  // namespace tessera
