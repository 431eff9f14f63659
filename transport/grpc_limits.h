#pragma once
// The transport settings of every gRPC server and channel of Tessera.
//
// Message-size limits, stated rather than left to gRPC's defaults (4 MiB received, unlimited
// sent), so that what fits is a decision, not an accident. A request is one thing a caller sends
// (a run spec is at most 1 MiB, runspec/spec_limits.h; a log batch is smaller still); a reply may
// be a list, which callers that can get long lists narrow or page (the scheduler lists runs
// without their parameters).
//
// No BDP probing: HTTP/2's bandwidth-delay probe sends a PING with each burst of data to size the
// flow-control window, and over TLS each is a record of its own to encrypt and send. Tessera's
// streams are mostly small messages (heartbeats, acks), for which that cost 40% of a TLS
// heartbeat's server CPU (bench_scheduler_grpc); bulk streams (log batches) get a large fixed
// window instead.

#include <grpcpp/grpcpp.h>

namespace tessera {

inline constexpr int kMaxRequestBytes = 8 << 20;
inline constexpr int kMaxReplyBytes = 64 << 20;
// The flow-control window a stream starts (and stays) with without BDP probing: several log
// batches in flight.
inline constexpr int kStreamWindowBytes = 8 << 20;

// For a server: requests up to kMaxRequestBytes, replies up to kMaxReplyBytes.
inline void ApplyTransportSettings(grpc::ServerBuilder& builder) {
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  builder.SetMaxSendMessageSize(kMaxReplyBytes);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kStreamWindowBytes);
}

// For a channel: the same limits from the caller's side.
inline void ApplyTransportSettings(grpc::ChannelArguments& args) {
  args.SetMaxSendMessageSize(kMaxRequestBytes);
  args.SetMaxReceiveMessageSize(kMaxReplyBytes);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kStreamWindowBytes);
}

// A channel with these settings (and no other arguments).
inline std::shared_ptr<grpc::Channel> CreateLimitedChannel(
    const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& credentials) {
  grpc::ChannelArguments args;
  ApplyTransportSettings(args);
  return grpc::CreateCustomChannel(target, credentials, args);
}

}  // namespace tessera
