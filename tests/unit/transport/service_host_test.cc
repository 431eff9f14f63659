// Every Tessera gRPC server answers the standard health service and server reflection, which
// tools use without the API's .proto files: called here as such a tool does, with raw bytes.

#include "transport/service_host.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/client_unary_call.h>
#include <grpcpp/impl/codegen/rpc_method.h>
#include <grpcpp/impl/codegen/sync_stream.h>

#include <catch2/catch.hpp>

#include "tessera/v1/logs.grpc.pb.h"

namespace tessera {
namespace service_host_test {

grpc::ByteBuffer Bytes(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string Text(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  REQUIRE(buffer.Dump(&slices).ok());
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

std::unique_ptr<ServiceHost> StartHost(grpc::Service& service) {
  HostOptions options;
  options.grpc_listen = "127.0.0.1:0";
  options.metrics_listen = "127.0.0.1:0";
  options.tls.plaintext = true;
  options.scrape.open = true;
  auto host = ServiceHost::Start(options, {&service});
  INFO(host.status().ToString());
  REQUIRE(host.ok());
  return *std::move(host);
}

TEST_CASE("a server answers grpc.health.v1.Health/Check: SERVING, NOT_SERVING once it stops") {
  v1::LogService::Service logs;  // every method UNIMPLEMENTED: only its name matters here
  std::unique_ptr<ServiceHost> host = StartHost(logs);
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(host->grpc_port()),
                                     grpc::InsecureChannelCredentials());
  const grpc::internal::RpcMethod check("/grpc.health.v1.Health/Check",
                                        grpc::internal::RpcMethod::NORMAL_RPC);
  const auto ask = [&](const std::string& service) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    // HealthCheckRequest {service = 1}
    std::string request;
    if (!service.empty()) {
      request = std::string("\x0a", 1) + static_cast<char>(service.size()) + service;
    }
    grpc::ByteBuffer response;
    const grpc::Status st = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel.get(), check, &ctx, Bytes(request), &response);
    return std::make_pair(st, st.ok() ? Text(response) : std::string());
  };
  const auto [st, serving] = ask("");
  INFO(st.error_message());
  REQUIRE(st.ok());
  CHECK(serving == std::string("\x08\x01", 2));  // HealthCheckResponse {status = SERVING}
  host->server().GetHealthCheckService()->Shutdown();
  const auto [st2, after] = ask("");
  REQUIRE(st2.ok());
  CHECK(after == std::string("\x08\x02", 2));  // NOT_SERVING
}

TEST_CASE("a server lists its services through server reflection") {
  v1::LogService::Service logs;
  std::unique_ptr<ServiceHost> host = StartHost(logs);
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(host->grpc_port()),
                                     grpc::InsecureChannelCredentials());
  const grpc::internal::RpcMethod info(
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      grpc::internal::RpcMethod::BIDI_STREAMING);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel.get(), info, &ctx));
  // ServerReflectionRequest {list_services = 7: ""}
  REQUIRE(stream->Write(Bytes(std::string("\x3a\x00", 2))));
  REQUIRE(stream->WritesDone());
  grpc::ByteBuffer response;
  REQUIRE(stream->Read(&response));
  const std::string listed = Text(response);
  CHECK(listed.find("tessera.v1.LogService") != std::string::npos);
  CHECK(listed.find("grpc.health.v1.Health") != std::string::npos);
  while (stream->Read(&response)) {
  }
  CHECK(stream->Finish().ok());
}

}  // namespace service_host_test
}  // namespace tessera
