#pragma once
// The gRPC adapter of LogHandler.

#include "base/status_macros.h"
#include "services/common/auth/stream_guard.h"
#include "services/common/rpc.h"
#include "services/logs/line_batcher.h"
#include "services/logs/log_handler.h"

namespace tessera::logs {

class LogService final : public v1::LogService::Service {
 public:
  using Api = v1::LogService;

  LogService(std::shared_ptr<LogHandler> handler, std::shared_ptr<auth::Authenticator> auth)
      : h_(std::move(handler)), auth_(std::move(auth)) {}

  // Each batch is stored and acknowledged before the next is read; a malformed batch ends the
  // stream with INVALID_ARGUMENT naming the field.
  grpc::Status PushLogs(grpc::ServerContext* ctx,
                        grpc::ServerReaderWriter<v1::LogAck, v1::LogBatch>* stream) override {
    return Serve(
        *auth_, ctx, TESSERA_RPC_NAME(PushLogs), [&](const auth::Principal& who) -> absl::Status {
          TESSERA_ASSIGN_OR_RETURN(
              auto guard,
              auth::StreamGuard::Open(*auth_, *ctx, who, auth::StreamGuard::Lifetime::kUnbounded));
          v1::LogBatch batch;
          while (stream->Read(&batch)) {
            TESSERA_RETURN_IF_ERROR(guard.CheckKey());
            v1::LogAck ack;
            TESSERA_RETURN_IF_ERROR(h_->PushBatch(who, std::move(batch), &ack));
            if (!stream->Write(ack)) return absl::CancelledError("the log stream was closed");
          }
          return absl::OkStatus();
        });
  }

  grpc::Status GetLogs(grpc::ServerContext* ctx, const v1::GetLogsRequest* req,
                       grpc::ServerWriter<v1::LogLine>* writer) override {
    return Serve(
        *auth_, ctx, TESSERA_RPC_NAME(GetLogs), [&](const auth::Principal& who) -> absl::Status {
          TESSERA_ASSIGN_OR_RETURN(
              auto guard, auth::StreamGuard::Open(*auth_, *ctx, who,
                                                  auth::StreamGuard::Lifetime::kReconnecting));
          return guard.Outcome(h_->GetLogs(
              who, *req, [&](const v1::LogLine& l) { return writer->Write(l); },
              [&] { return guard.Done(); }));
        });
  }

  grpc::Status StreamLogs(grpc::ServerContext* ctx, const v1::GetLogsRequest* req,
                          grpc::ServerWriter<v1::LogLines>* writer) override {
    return Serve(
        *auth_, ctx, TESSERA_RPC_NAME(StreamLogs), [&](const auth::Principal& who) -> absl::Status {
          TESSERA_ASSIGN_OR_RETURN(
              auto guard, auth::StreamGuard::Open(*auth_, *ctx, who,
                                                  auth::StreamGuard::Lifetime::kReconnecting));
          const auto cancelled = [&] { return guard.Done(); };
          if (req->packed()) {
            PackedLineBatcher<grpc::ServerWriter<v1::LogLines>> packed(writer);
            absl::Status st = h_->GetLogs(
                who, *req, [&](const v1::LogLine& l) { return packed.Add(l); }, cancelled,
                [&] { return packed.Flush(); },
                [&](const v1::PackedLogLines& group, absl::string_view lines, int64_t count) {
                  return packed.AddPacked(group, lines, count);
                },
                [&](const v1::LogCursor& start) { return packed.Start(start); });
            packed.Flush();  // the lines before an error too
            return guard.Outcome(st);
          }
          LineBatcher<grpc::ServerWriter<v1::LogLines>> batch(writer);
          absl::Status st = h_->GetLogs(
              who, *req, [&](const v1::LogLine& l) { return batch.Add(l); }, cancelled,
              [&] { return batch.Flush(); }, nullptr,
              [&](const v1::LogCursor& start) { return batch.Start(start); });
          batch.Flush();  // the lines before an error too
          return guard.Outcome(st);
        });
  }

  TESSERA_UNARY_RPC(h_, DeleteRunLogs)

 private:
  std::shared_ptr<LogHandler> h_;
  std::shared_ptr<auth::Authenticator> auth_;
};

}  // namespace tessera::logs
