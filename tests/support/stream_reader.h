#pragma once
// One server stream read on gRPC's client callback API, so that a test holding hundreds open
// holds no thread for each: what each message says is kept as strings (a follow's lines, a
// watch's run names), and the test waits for them, for the headers, or for the end.

#include <grpcpp/grpcpp.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace tessera::testing {

template <class Req, class Resp>
class StreamReader final : public grpc::ClientReadReactor<Resp> {
 public:
  // What one message adds to the strings kept.
  using Take = std::function<void(const Resp&, std::vector<std::string>&)>;
  // Begins the call: stub.async()->Method(context, request, reactor).
  using Begin =
      std::function<void(grpc::ClientContext*, const Req*, grpc::ClientReadReactor<Resp>*)>;

  // With `key` as the bearer (none when empty).
  StreamReader(const std::string& key, Req request, Take take, const Begin& begin)
      : request_(std::move(request)), take_(std::move(take)) {
    if (!key.empty()) context_.AddMetadata("authorization", "Bearer " + key);
    begin(&context_, &request_, this);
    this->StartRead(&message_);
    this->StartCall();
  }
  ~StreamReader() override {
    context_.TryCancel();
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return status_.has_value(); });
  }

  void OnReadInitialMetadataDone(bool ok) override {
    Update([&] { started_ = ok; });
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    Update([&] { take_(message_, items_); });
    this->StartRead(&message_);
  }
  void OnDone(const grpc::Status& s) override {
    Update([&] { status_ = s; });
  }

  // Whether the headers came (a watch's start is fixed) within `timeout`.
  bool WaitForStart(absl::Duration timeout) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                 [&] { return started_ || status_.has_value(); });
    return started_;
  }
  // Waits (at most `timeout`) for `n` strings; returns how many came.
  size_t WaitFor(size_t n, absl::Duration timeout) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout),
                 [&] { return items_.size() >= n || status_.has_value(); });
    return items_.size();
  }
  // The call's status once it ended (nullopt if it did not within `timeout`).
  std::optional<grpc::Status> WaitForEnd(absl::Duration timeout) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, absl::ToChronoNanoseconds(timeout), [&] { return status_.has_value(); });
    return status_;
  }
  std::vector<std::string> items() {
    std::lock_guard lock(mu_);
    return items_;
  }
  void Cancel() { context_.TryCancel(); }

 private:
  template <class F>
  void Update(F change) {
    {
      std::lock_guard lock(mu_);
      change();
    }
    cv_.notify_all();
  }

  grpc::ClientContext context_;
  const Req request_;
  const Take take_;
  Resp message_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;
  std::vector<std::string> items_;
  std::optional<grpc::Status> status_;
};

}  // namespace tessera::testing
