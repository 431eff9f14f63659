#pragma once
// The connection to the Tessera API: one channel, the `authorization: Bearer KEY` metadata on
// every call, a deadline on unary calls (none on follow streams), and the translation of a
// failed call into one clear error line.

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

namespace tessera::cli {

inline constexpr std::chrono::seconds kCallDeadline{30};

// A random RFC 4122 version 4 UUID.
std::string NewUuid();

// The message for a failed call: UNAUTHENTICATED says how to set a key, UNAVAILABLE names the
// endpoint, and so on. `has_api_key` tells whether a key was sent.
std::string DescribeRpcError(const grpc::Status& status, const std::string& endpoint,
                             bool has_api_key);

class Connection {
 public:
  // `ca`: the cluster CA's PEM file, empty when none is set (see MakeChannel in client.cc).
  // Throws CliError when the endpoint would send the key in clear across a network.
  Connection(std::string endpoint, std::string api_key, const std::string& ca = "");

  const std::string& endpoint() const { return endpoint_; }
  // Services' stubs are made from it: Service::NewStub(connection.channel()).
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  // A context with the API key and the 30 s deadline, for a unary call.
  std::unique_ptr<grpc::ClientContext> UnaryContext() const;
  // A context with the API key and no deadline, for a stream followed until the user stops it.
  std::unique_ptr<grpc::ClientContext> StreamContext() const;

  // Throws CliError (exit 1) with DescribeRpcError's message when `status` is not OK.
  void Check(const grpc::Status& status) const;

  // Makes one unary call: `call(grpc::ClientContext*)` returns its grpc::Status.
  template <typename Call>
  void Unary(Call&& call) const {
    const std::unique_ptr<grpc::ClientContext> context = UnaryContext();
    Check(call(context.get()));
  }

 private:
  void AddMetadata(grpc::ClientContext& context) const;

  std::string endpoint_;
  std::string api_key_;
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace tessera::cli
