// tessera-canary as the worker runs it: real processes, Gloo over loopback.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <thread>

#include "absl/strings/str_cat.h"
#include "tests/support/control_plane.h"
#include "tests/support/free_port.h"
#include "worker/canary/canary_result.h"

namespace tessera::testing {
namespace canary_test {

struct Ran {
  int exit_code = -1;
  v1::HealthCheckResult result;
  std::string output;
};

Ran RunCanary(const std::string& args) {
  ShellResult r = RunShell(BinaryPath("tessera-canary") + " " + args + " 2>/dev/null");
  Ran ran;
  ran.exit_code = r.exit_code;
  ran.output = r.output;
  auto parsed = canary::ResultFromJsonLine(r.output);
  if (parsed.ok()) ran.result = *parsed;
  return ran;
}

TEST_CASE("an all-reduce canary between two processes checks the data and measures busbw") {
  // Over one connection, and in parts over several at once (the default: 4).
  const std::string connections = GENERATE(std::string(""), std::string(" --connections 1"));
  INFO("connections: " << connections);
  const int port = FreePort();
  const std::string common =
      absl::StrCat(" --world 2 --master-addr 127.0.0.1 --master-port ", port,
                   " --sizes 1MiB,4MiB --timeout 60 --token 5eed", connections);
  Ran r0, r1;
  std::thread t([&] { r1 = RunCanary("allreduce --rank 1" + common); });
  r0 = RunCanary("allreduce --rank 0" + common);
  t.join();
  for (const Ran* r : {&r0, &r1}) {
    INFO(r->output);
    CHECK(r->exit_code == 0);
    CHECK(r->result.verdict() == v1::HEALTH_VERDICT_PASSED);
    CHECK(r->result.kind() == v1::HEALTH_CHECK_KIND_ALLREDUCE);
    REQUIRE(r->result.samples_size() == 2);
    CHECK(r->result.samples(1).payload_bytes() == 4 << 20);
    CHECK(r->result.samples(1).busbw_gbps() > 0);
    // nccl-tests' relation for 2 ranks: busbw = algbw * 2(n-1)/n = algbw.
    CHECK(r->result.samples(1).busbw_gbps() == Approx(r->result.samples(1).algbw_gbps()));
  }
}

TEST_CASE("canaries of another rendezvous token never join: neither passes, within its timeout") {
  // What a stranger who reaches the master's port, or a canary of another stage, meets: the
  // group's keys are under its secret token, so nothing is exchanged across tokens.
  const std::string common = absl::StrCat(" --world 2 --master-addr 127.0.0.1 --master-port ",
                                          FreePort(), " --sizes 1MiB --timeout 3");
  Ran r0, r1;
  std::thread t([&] { r1 = RunCanary("allreduce --rank 1 --token 0bad" + common); });
  r0 = RunCanary("allreduce --rank 0 --token 600d" + common);
  t.join();
  // The first to give up is a timeout; its partner may see the connection go first.
  CHECK((r0.result.verdict() == v1::HEALTH_VERDICT_TIMEOUT ||
         r1.result.verdict() == v1::HEALTH_VERDICT_TIMEOUT));
  for (const Ran* r : {&r0, &r1}) {
    INFO(r->output);
    CHECK(r->exit_code != 0);
    CHECK((r->result.verdict() == v1::HEALTH_VERDICT_TIMEOUT ||
           r->result.verdict() == v1::HEALTH_VERDICT_ERROR));
    CHECK(r->result.samples_size() == 0);  // nothing was exchanged
    // Whatever went wrong, the error never carries the token (Gloo names its group in its).
    CHECK(r->output.find("0bad") == std::string::npos);
    CHECK(r->output.find("600d") == std::string::npos);
  }
  // A token is hex, checked before anything runs.
  const Ran bad = RunCanary(absl::StrCat("allreduce --rank 0 --world 1 --token 'x;y'"));
  CHECK(bad.exit_code != 0);
  CHECK(bad.result.verdict() != v1::HEALTH_VERDICT_PASSED);
}

TEST_CASE("a partner that never comes is a timeout, with its exit code") {
  const Ran r = RunCanary(absl::StrCat("allreduce --rank 0 --world 2 --master-addr 127.0.0.1 ",
                                       "--master-port ", FreePort(), " --timeout 2"));
  INFO(r.output);
  CHECK(r.exit_code == canary::kExitTimeout);
  CHECK(r.result.verdict() == v1::HEALTH_VERDICT_TIMEOUT);
  CHECK(r.result.error() == "did not finish within 2 s");
}

TEST_CASE("the compute stress test measures and compares with the expected rate") {
  Ran r = RunCanary("compute --seconds 0.3");
  INFO(r.output);
  CHECK(r.exit_code == 0);
  CHECK(r.result.kind() == v1::HEALTH_CHECK_KIND_COMPUTE_STRESS);
  CHECK(r.result.compute_tflops() > 0);
  r = RunCanary("compute --seconds 0.2 --expected-tflops 1000");  // no CPU does a petaflop
  CHECK(r.exit_code == canary::kExitBelowThreshold);
  CHECK(r.result.verdict() == v1::HEALTH_VERDICT_SLOW);
  CHECK(RunShell(BinaryPath("tessera-canary") + " allreduce --rank 0 --world 2 --sizes 7XB")
            .exit_code == canary::kExitUsage);
}

}  // namespace canary_test
}  // namespace tessera::testing
