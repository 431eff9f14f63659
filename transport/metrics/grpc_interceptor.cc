#include "transport/metrics/grpc_interceptor.h"

#include <array>
#include <atomic>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace tessera::metrics {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::Interceptor;
using grpc::experimental::InterceptorBatchMethods;
using grpc::experimental::ServerInterceptorFactoryInterface;
using grpc::experimental::ServerRpcInfo;

constexpr int kCanonicalCodes = 17;  // OK (0) .. UNAUTHENTICATED (16)

std::vector<double> HandlingBuckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

// The children of one method, looked up once per method and then shared by its calls.
struct MethodMetrics {
  std::string service;
  std::string method;
  Counter* started = nullptr;
  Histogram* handling = nullptr;
  std::array<std::atomic<Counter*>, kCanonicalCodes> handled{};
};

// What the factory and its interceptors share; an interceptor keeps it alive.
class State {
 public:
  State(Family<Counter>* started, Family<Counter>* handled, Family<Histogram>* seconds,
        SteadyNowFn now)
      : started_(started), handled_(handled), seconds_(seconds), now_(std::move(now)) {}

  std::chrono::steady_clock::time_point Now() const {
    return now_ ? now_() : std::chrono::steady_clock::now();
  }

  // `full_method` is "/package.Service/Method" (gRPC names unregistered methods "unknown").
  MethodMetrics& ForMethod(const char* full_method) {
    const std::string_view key = full_method != nullptr ? full_method : "";
    {
      absl::ReaderMutexLock lock(&mu_);
      if (auto it = methods_.find(key); it != methods_.end()) return *it->second;
    }
    absl::MutexLock lock(&mu_);
    auto it = methods_.find(key);
    if (it != methods_.end()) return *it->second;
    auto m = std::make_unique<MethodMetrics>();
    std::string_view name = key;
    if (!name.empty() && name.front() == '/') name.remove_prefix(1);
    const std::size_t slash = name.find('/');
    if (slash == std::string_view::npos || slash == 0 || slash + 1 == name.size()) {
      m->service = "unknown";
      m->method = name.empty() ? "unknown" : std::string(name);
    } else {
      m->service = std::string(name.substr(0, slash));
      m->method = std::string(name.substr(slash + 1));
    }
    m->started = &started_->WithLabels({m->service, m->method});
    m->handling = &seconds_->WithLabels({m->service, m->method});
    return *methods_.emplace(std::string(key), std::move(m)).first->second;
  }

  Counter& Handled(MethodMetrics& m, grpc::StatusCode code) {
    const int i = static_cast<int>(code);
    if (i < 0 || i >= kCanonicalCodes) {
      return handled_->WithLabels({m.service, m.method, GrpcCodeName(code)});
    }
    Counter* counter = m.handled[i].load(std::memory_order_acquire);
    if (counter == nullptr) {
      counter = &handled_->WithLabels({m.service, m.method, GrpcCodeName(code)});
      m.handled[i].store(counter, std::memory_order_release);  // same pointer if two race
    }
    return *counter;
  }

 private:
  Family<Counter>* started_;
  Family<Counter>* handled_;
  Family<Histogram>* seconds_;
  SteadyNowFn now_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<MethodMetrics>, std::less<>> methods_ ABSL_GUARDED_BY(mu_);
};

// One per call.
class MetricsInterceptor final : public Interceptor {
 public:
  MetricsInterceptor(std::shared_ptr<State> state, MethodMetrics& method)
      : state_(std::move(state)), method_(method), start_(state_->Now()) {
    method_.started->Increment();
  }

  ~MetricsInterceptor() override {
    if (!handled_.load(std::memory_order_acquire)) Finish(grpc::StatusCode::CANCELLED);
  }

  void Intercept(InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      Finish(methods->GetSendStatus().error_code());
    }
    methods->Proceed();
  }

 private:
  void Finish(grpc::StatusCode code) {
    if (handled_.exchange(true, std::memory_order_acq_rel)) return;
    const std::chrono::duration<double> elapsed = state_->Now() - start_;
    state_->Handled(method_, code).Increment();
    method_.handling->Observe(elapsed.count());
  }

  std::shared_ptr<State> state_;
  MethodMetrics& method_;
  const std::chrono::steady_clock::time_point start_;
  std::atomic<bool> handled_{false};
};

class MetricsInterceptorFactory final : public ServerInterceptorFactoryInterface {
 public:
  explicit MetricsInterceptorFactory(std::shared_ptr<State> state) : state_(std::move(state)) {}

  Interceptor* CreateServerInterceptor(ServerRpcInfo* info) override {
    return new MetricsInterceptor(state_, state_->ForMethod(info->method()));
  }

 private:
  std::shared_ptr<State> state_;
};

}  // namespace

std::string_view GrpcCodeName(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK:
      return "OK";
    case grpc::StatusCode::CANCELLED:
      return "CANCELLED";
    case grpc::StatusCode::UNKNOWN:
      return "UNKNOWN";
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "INVALID_ARGUMENT";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::NOT_FOUND:
      return "NOT_FOUND";
    case grpc::StatusCode::ALREADY_EXISTS:
      return "ALREADY_EXISTS";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
      return "FAILED_PRECONDITION";
    case grpc::StatusCode::ABORTED:
      return "ABORTED";
    case grpc::StatusCode::OUT_OF_RANGE:
      return "OUT_OF_RANGE";
    case grpc::StatusCode::UNIMPLEMENTED:
      return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL:
      return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE:
      return "UNAVAILABLE";
    case grpc::StatusCode::DATA_LOSS:
      return "DATA_LOSS";
    case grpc::StatusCode::UNAUTHENTICATED:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN";
  }
}

absl::StatusOr<std::unique_ptr<ServerInterceptorFactoryInterface>> MakeMetricsInterceptorFactory(
    Registry& registry, SteadyNowFn now) {
  auto started = registry.AddCounter(kGrpcStartedTotal, "RPCs started on the server.",
                                     {"grpc_service", "grpc_method"});
  if (!started.ok()) return started.status();
  auto handled =
      registry.AddCounter(kGrpcHandledTotal, "RPCs completed on the server, by status code.",
                          {"grpc_service", "grpc_method", "grpc_code"});
  if (!handled.ok()) return handled.status();
  auto seconds = registry.AddHistogram(
      kGrpcHandlingSeconds, "Time from the server accepting an RPC to sending its status.",
      {"grpc_service", "grpc_method"}, HandlingBuckets());
  if (!seconds.ok()) return seconds.status();
  auto state = std::make_shared<State>(*started, *handled, *seconds, std::move(now));
  return std::make_unique<MetricsInterceptorFactory>(std::move(state));
}

absl::Status AddMetricsInterceptor(grpc::ServerBuilder& builder, Registry& registry,
                                   SteadyNowFn now) {
  auto factory = MakeMetricsInterceptorFactory(registry, std::move(now));
  if (!factory.ok()) return factory.status();
  std::vector<std::unique_ptr<ServerInterceptorFactoryInterface>> creators;
  creators.push_back(*std::move(factory));
  builder.experimental().SetInterceptorCreators(std::move(creators));
  return absl::OkStatus();
}

}  // namespace tessera::metrics
