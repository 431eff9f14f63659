// bench_canary: does the all-reduce canary's bandwidth mean something? Two local processes run
// `tessera-canary allreduce` over Gloo, started the way a sweep starts a 2-node canary (the
// worker's CanaryRunner, a StartCanary per rank); the busbw they report at the largest payload is
// compared with what the same link carries at most, measured in the same run: two threads per
// side streaming the same number of bytes each way at once over loopback TCP (a 2-rank ring
// all-reduce sends and receives its payload once each way: busbw = algbw x 2(n-1)/n = algbw).
// On loopback the "link" is the kernel copying memory, so the bound that counts sends from and
// receives into buffers of the payload's size, as the all-reduce must; the bound over 1 MiB
// buffers that stay in cache (the link alone) is printed beside it.
// Measurements alternate (bound, canary, bound, canary ...) so that drift of the machine falls
// on both. Target: canary busbw at least 0.7 of the bound.
//
//   bench_canary [--rounds N] [--size BYTES]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "worker/daemon/canary_runner.h"

namespace {
using namespace tessera;

// A connected pair of loopback TCP sockets, as two ranks' link would be.
std::pair<int, int> LoopbackPair() {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("listen");
    std::exit(1);
  }
  const int a = ::socket(AF_INET, SOCK_STREAM, 0);
  if (::connect(a, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::perror("connect");
    std::exit(1);
  }
  const int b = ::accept(listener, nullptr, nullptr);
  ::close(listener);
  for (int fd : {a, b}) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  return {a, b};
}

constexpr int64_t kChunk = 1 << 20;  // bytes per send or recv call

// Sends `total` bytes from `buf`, walking through it a chunk at a time (and round again).
void SendAll(int fd, const std::vector<char>& buf, int64_t total) {
  int64_t sent = 0;
  const auto size = static_cast<int64_t>(buf.size());
  while (sent < total) {
    const int64_t at = sent % size;
    const size_t chunk = static_cast<size_t>(std::min({total - sent, kChunk, size - at}));
    const ssize_t n = ::send(fd, buf.data() + at, chunk, 0);
    if (n <= 0) std::exit(1);
    sent += n;
  }
}

void ReceiveAll(int fd, std::vector<char>& buf, int64_t total) {
  int64_t got = 0;
  const auto size = static_cast<int64_t>(buf.size());
  while (got < total) {
    const int64_t at = got % size;
    const size_t chunk = static_cast<size_t>(std::min({total - got, kChunk, size - at}));
    const ssize_t n = ::recv(fd, buf.data() + at, chunk, 0);
    if (n <= 0) std::exit(1);
    got += n;
  }
}

// GB/s each way when both ends send `bytes` to each other at once (best of 3). With `buffer`
// bytes of buffer per direction and side: one chunk (the link alone, with the data hot in cache)
// or the payload (what an all-reduce of it must move: read from and written to memory).
double LoopbackBound(int64_t bytes, int64_t buffer) {
  double best = 0;
  const auto n = static_cast<size_t>(buffer);
  std::vector<char> out_a(n, 'a'), out_b(n, 'b'), in_a(n, 0), in_b(n, 0);
  for (int rep = 0; rep < 3; ++rep) {
    auto [a, b] = LoopbackPair();
    const auto start = std::chrono::steady_clock::now();
    std::thread t1([&, a = a] { SendAll(a, out_a, bytes); });
    std::thread t2([&, b = b] { SendAll(b, out_b, bytes); });
    std::thread t3([&, a = a] { ReceiveAll(a, in_a, bytes); });
    ReceiveAll(b, in_b, bytes);
    t1.join();
    t2.join();
    t3.join();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(bytes) / seconds / 1e9);
    ::close(a);
    ::close(b);
  }
  return best;
}

// The busbw (GB/s) the 2-rank canary reports at `bytes`, as a sweep would get it.
double CanaryBusbw(std::vector<std::unique_ptr<worker::CanaryRunner>>& runners, int64_t bytes,
                   int port, int round) {
  for (int rank = 0; rank < 2; ++rank) {
    v1::StartCanary c;
    c.set_sweep_id(absl::StrCat("bench-", round));
    c.set_kind(v1::HEALTH_CHECK_KIND_ALLREDUCE);
    c.add_group("node-0");
    c.add_group("node-1");
    c.set_rank(rank);
    c.set_master_addr("127.0.0.1");
    c.set_master_port(port);
    c.add_payload_bytes(bytes);
    c.mutable_timeout()->set_seconds(120);
    if (!runners[static_cast<size_t>(rank)]->Start(c).ok()) std::abort();
  }
  double busbw = -1;
  for (auto& r : runners) {
    for (;;) {
      auto results = r->TakeResults();
      if (!results.empty()) {
        const auto& res = results[0];
        if (res.verdict() != v1::HEALTH_VERDICT_PASSED || res.samples_size() == 0) {
          std::fprintf(stderr, "canary failed: %s\n", res.error().c_str());
          std::exit(1);
        }
        const double b = res.samples(res.samples_size() - 1).busbw_gbps();
        busbw = busbw < 0 ? b : std::min(busbw, b);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  return busbw;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  int64_t bytes = 64 << 20;
  CLI::App app{"bench_canary: the all-reduce canary's bandwidth against the loopback TCP bound"};
  app.add_option("--rounds", rounds, "rounds, each measuring the bound and the canary in turn")
      ->capture_default_str();
  app.add_option("--size", bytes, "the all-reduce's payload in bytes")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (rounds < 1 || bytes < 4096) {
    std::cerr << "need --rounds >= 1 and --size >= 4096\n";
    return 2;
  }
  const std::string canary = std::string(TESSERA_BIN_DIR) + "/tessera-canary";
  std::vector<std::unique_ptr<worker::CanaryRunner>> runners;
  for (int n = 0; n < 2; ++n) {
    runners.push_back(std::make_unique<worker::CanaryRunner>(
        canary, absl::StrCat("node-", n), "/tmp/tessera-bench-canary", SystemClock::Shared()));
  }
  std::vector<double> ratios, hot_ratios;
  std::printf(
      "round  loopback TCP GB/s: payload buffers  1 MiB buffers  canary busbw GB/s  ratio  "
      "ratio to 1 MiB\n");
  for (int r = 0; r < rounds; ++r) {
    const double before = LoopbackBound(bytes, bytes);
    const double hot_before = LoopbackBound(bytes, std::min(bytes, kChunk));
    const double busbw = CanaryBusbw(runners, bytes, 39500 + r, r);
    const double hot_after = LoopbackBound(bytes, std::min(bytes, kChunk));
    const double after = LoopbackBound(bytes, bytes);
    const double bound = (before + after) / 2, hot = (hot_before + hot_after) / 2;
    ratios.push_back(busbw / bound);
    hot_ratios.push_back(busbw / hot);
    std::printf("%5d  %32.2f  %13.2f  %17.2f  %5.2f  %14.2f\n", r, bound, hot, busbw, busbw / bound,
                busbw / hot);
  }
  std::sort(ratios.begin(), ratios.end());
  std::sort(hot_ratios.begin(), hot_ratios.end());
  std::printf(
      "canary busbw at %lld bytes over the loopback TCP bound (payload-sized buffers): median "
      "%.2f (min %.2f, max %.2f; target >= 0.70)\n",
      static_cast<long long>(bytes), ratios[ratios.size() / 2], ratios.front(), ratios.back());
  std::printf(
      "  over the link alone (1 MiB buffers, hot in cache): median %.2f (min %.2f, max %.2f)\n",
      hot_ratios[hot_ratios.size() / 2], hot_ratios.front(), hot_ratios.back());
  return 0;
}
