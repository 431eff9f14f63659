// bench_sandbox: what the rank sandbox costs, each figure against a bound measured in the same
// run (these machines are noisy).
//
//   start  a rank running `true`, started and reaped N times directly on the host and in the
//          sandbox (over the host's root, and over a cached image): the median extra latency
//          in ms (target: at most +200 ms).
//   pull   a cold ImageCache::Acquire of an image of --image-mb MiB (one layer of random bytes)
//          from a local docker-registry, against `skopeo copy` alone of the same image: the
//          ratio copy / acquire (target: at least 0.9).
//   step   a LibTorch (python3-torch) matmul loop as a rank on the host and in the sandbox:
//          the ratio of step rates, sandbox / host (target: at least 0.98).
//   node   a node container of 8 local ranks (launch: node) whose command starts 8 processes
//          and waits for them, against the same command run bare: the median extra latency
//          in ms (target: at most +200 ms).
//   shm    one process of a node container writes --shm-mb MiB to /dev/shm and another reads
//          them, against two plain processes on the host's /dev/shm: the ratio of bandwidths,
//          container / host (target: at least 0.9).
//
//   walls  a Gloo all-reduce (python3-torch) of --walls-mb MiB between two processes running as
//          uid 65534 over loopback, with the node's network walls up (network_walls.h: the
//          metadata addresses, 16 walled ports, the run's rendezvous guarded and 16 other
//          runs' guards) and without, alternately: the ratio of bandwidths, walled / open
//          (target: at least 0.95). Needs root; --only walls runs it alone.
//
//   build/bench/bench_sandbox [--runs 20] [--image-mb 1024] [--steps 200] [--shm-mb 1024]
//                             [--walls-mb 64] [--only walls]
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/clock.h"
#include "tests/support/oci_registry.h"
#include "tests/support/process.h"
#include "worker/daemon/network_walls.h"
#include "worker/daemon/rank_environment.h"
#include "worker/daemon/rank_launcher.h"
#include "worker/daemon/rank_sandbox.h"
#include "worker/image/image_cache.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Options {
  int runs = 20;
  int image_mb = 1024;
  int steps = 200;
  int shm_mb = 1024;
  int walls_mb = 64;
  std::string only;  // "walls": that figure alone
};

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

[[noreturn]] void Die(const std::string& what) {
  std::cerr << "bench_sandbox: " << what << "\n";
  std::exit(1);
}

struct Bench {
  std::string root;
  v1::StartAttempt start;
  worker::AttemptPaths paths;
  std::unique_ptr<worker::RankSandbox> sandbox;

  explicit Bench(const std::string& dir) : root(dir) {
    start.set_run_id("bench-run");
    start.set_run_name("bench");
    start.set_command("true");
    start.set_world_size(1);
    start.set_local_world_size(1);
    start.set_num_nodes(1);
    paths = worker::PathsFor(root + "/state", "bench-run", 0);
    for (const auto& d : {paths.work_dir, paths.logs_dir, paths.progress_dir}) {
      fs::create_directories(d);
    }
    std::ofstream(paths.parameters_path) << "{}";
    std::ofstream(paths.parameters_yaml_path) << "{}\n";
    worker::RankSandboxOptions o;
    o.init_path = std::string(TESSERA_BIN_DIR) + "/tessera-sandbox-init";
    o.state_dir = root + "/state";
    o.shm_bytes = 1LL << 30;
    sandbox = std::make_unique<worker::RankSandbox>(o);
    if (auto st = sandbox->Check(); !st.ok()) Die(st.ToString());
  }

  worker::RankSpec Spec(const std::string& command, const worker::RankRoot* in,
                        int node_ranks = 0) {
    start.set_command(command);
    // node_ranks > 0: a node container of that many local ranks, its command run once.
    start.set_launch(node_ranks > 0 ? v1::LAUNCH_MODE_NODE : v1::LAUNCH_MODE_RANK);
    start.set_local_world_size(std::max(1, node_ranks));
    start.set_world_size(std::max(1, node_ranks));
    auto specs = worker::BuildRankSpecs(start, paths, false);
    if (!specs.ok()) Die(specs.status().ToString());
    worker::RankSpec spec = specs->front();
    spec.env["PATH"] = "/usr/bin:/bin";
    if (in != nullptr) {
      if (auto st = sandbox->Apply(start, paths, *in, {}, {}, spec); !st.ok()) {
        Die(st.ToString());
      }
    }
    return spec;
  }

  // Seconds from Start to the rank's exit, and its exit.
  double RunOnce(const worker::RankSpec& spec, worker::ExitInfo* exit = nullptr) {
    const auto t0 = Clock::now();
    auto proc = worker::RankProcess::Start(spec);
    if (!proc.ok()) Die(proc.status().ToString());
    auto e = (*proc)->WaitFor(absl::Minutes(10));
    const auto t1 = Clock::now();
    if (!e.ok()) Die(e.status().ToString());
    if (exit != nullptr) *exit = *e;
    return Seconds(t0, t1);
  }

  // Runs `spec` 3 times; each run writes a rate to `file` in its work folder: their median.
  double MedianRate(const worker::RankSpec& spec, const std::string& file,
                    const std::string& what_is_missing) {
    std::vector<double> rates;
    for (int i = 0; i < 3; ++i) {
      RunOnce(spec);
      std::ifstream f(paths.work_dir + "/" + file);
      double r = 0;
      f >> r;
      if (r <= 0)
        Die(absl::StrCat("the run printed no rate to ", file, " (", what_is_missing, ")"));
      rates.push_back(r);
    }
    return Median(rates);
  }

  double MedianStart(const worker::RankSpec& spec, int runs) {
    std::vector<double> t;
    for (int i = 0; i < runs; ++i) t.push_back(RunOnce(spec));
    return Median(t);
  }
};

absl::StatusOr<std::string> PushRandomImage(testing::OciRegistry& registry, const std::string& dir,
                                            int mb) {
  const std::string layout = dir + "/big-layout", bundle = dir + "/big-bundle";
  testing::ShellResult r = testing::RunShell(
      absl::StrCat("set -e; umoci init --layout ", layout, " && umoci new --image ", layout, ":1",
                   " && umoci unpack --rootless --image ", layout, ":1 ", bundle, " && head -c ",
                   mb, "M /dev/urandom > ", bundle, "/rootfs/payload", " && umoci repack --image ",
                   layout, ":1 ", bundle, " && skopeo copy --dest-tls-verify=false oci:", layout,
                   ":1 docker://", registry.address(), "/bench/big:1 2>&1"));
  if (r.exit_code != 0) return absl::InternalError(r.output);
  return absl::StrCat(registry.address(), "/bench/big:1");
}

// The walls figure (see the top of this file).
void WallsFigure(const Options& o, const std::string& dir) {
  if (::geteuid() != 0) {
    std::printf("walls  skipped: iptables and ranks of another uid need root\n");
    return;
  }
  const int port = 29500 + ::getpid() % 1000;
  std::ofstream(dir + "/allreduce.py") << absl::StrCat(
      "import time, torch, torch.distributed as dist\n"
      "dist.init_process_group('gloo')\n"
      "x = torch.ones(",
      o.walls_mb,
      " * 262144)\n"
      "for _ in range(3): dist.all_reduce(x)\n"
      "t = time.perf_counter()\n"
      "for _ in range(10): dist.all_reduce(x)\n"
      "if dist.get_rank() == 0: print(",
      o.walls_mb, " * 10 / (time.perf_counter() - t))\n");
  fs::permissions(dir, fs::perms(0755));
  // MiB/s of one all-reduce of the pair (a 2-rank ring's bus bandwidth is its algorithm's).
  auto rate = [&] {
    testing::ShellResult r = testing::RunShell(absl::StrCat(
        "cd ", dir, " && for r in 0 1; do MASTER_ADDR=127.0.0.1 MASTER_PORT=", port,
        " WORLD_SIZE=2 RANK=$r setpriv --reuid=65534 --regid=65534 --clear-groups "
        "/usr/bin/python3 allreduce.py > allreduce-$r.txt 2>&1 & done; wait; cat allreduce-0.txt"));
    double v = 0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(r.output), &v) || v <= 0) {
      Die("the all-reduce printed no rate (is python3-torch installed?): " + r.output);
    }
    return v;
  };
  worker::image::ProcessToolRunner runner;
  std::vector<double> open, walled;
  for (int round = 0; round < 5; ++round) {
    open.push_back(rate());
    worker::NetworkWallsOptions w{
        .state_dir = dir, .rank_uids = {"65534"}, .walled = worker::MetadataDestinations()};
    for (int i = 0; i < 16; ++i) w.walled.push_back({.address = "127.0.0.1", .port = 40001 + i});
    worker::NetworkWalls walls(std::move(w), runner);
    if (auto st = walls.Install(); !st.ok()) Die(st.ToString());
    for (int i = 0; i < 16; ++i) (void)walls.GuardPort(41001 + i, 100001 + i);
    if (auto st = walls.GuardPort(port, 65534); !st.ok()) Die(st.ToString());
    walled.push_back(rate());
    walls.Remove();
  }
  std::printf(
      "walls  %d MiB all-reduce between two ranks: %.0f MiB/s open, %.0f behind the network "
      "walls: ratio %.3f   target: at least 0.95\n",
      o.walls_mb, Median(open), Median(walled), Median(walled) / Median(open));
}

int Main(int argc, char** argv) {
  Options o;
  CLI::App app{"bench_sandbox: what the rank sandbox costs, each figure against a bound"};
  app.add_option("--runs", o.runs, "starts timed of each kind (the start and node figures)")
      ->capture_default_str();
  app.add_option("--image-mb", o.image_mb, "the pulled image's size in MiB")->capture_default_str();
  app.add_option("--steps", o.steps, "matmul steps of the step figure")->capture_default_str();
  app.add_option("--shm-mb", o.shm_mb, "MiB written to /dev/shm and read back")
      ->capture_default_str();
  app.add_option("--walls-mb", o.walls_mb, "MiB of the all-reduce behind the network walls")
      ->capture_default_str();
  app.add_option("--only", o.only, "walls: the network walls' figure alone (needs root)")
      ->check(CLI::IsMember({"walls"}));
  CLI11_PARSE(app, argc, argv);
  if (o.runs < 1 || o.image_mb < 1 || o.steps < 1 || o.shm_mb < 1 || o.walls_mb < 1) {
    std::cerr << "need --runs, --image-mb, --steps, --shm-mb and --walls-mb >= 1\n";
    return 2;
  }
  char pattern[] = "/var/tmp/tessera-bench-sandbox-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) Die("mkdtemp");
  const std::string dir = pattern;
  if (o.only == "walls") {
    WallsFigure(o, dir);
    fs::remove_all(dir);
    return 0;
  }
  Bench bench(dir);

  auto registry = testing::OciRegistry::Start(dir + "/registry");
  if (!registry.ok()) Die(registry.status().ToString());
  auto small = registry->PushBusyboxImage("bench/busybox", "1", {"sh", "true"});
  if (!small.ok()) Die(small.status().ToString());
  worker::image::ImageCacheOptions cache_options;
  cache_options.dir = dir + "/images";
  cache_options.insecure_registries = {registry->address()};
  worker::image::ImageCache cache(
      cache_options, std::make_shared<worker::image::ProcessToolRunner>(), SystemClock::Shared());
  auto busybox = cache.Acquire(*small, "", nullptr);
  if (!busybox.ok()) Die(busybox.status().ToString());

  // start
  const worker::RankRoot host_root;
  const worker::RankRoot image_root{busybox->rootfs, busybox->env};
  const double direct = bench.MedianStart(bench.Spec("true", nullptr), o.runs);
  const double on_host = bench.MedianStart(bench.Spec("true", &host_root), o.runs);
  const double in_image = bench.MedianStart(bench.Spec("true", &image_root), o.runs);
  std::printf(
      "start  direct %.1f ms; sandbox over the host's root %.1f ms (+%.1f ms); "
      "over a cached image %.1f ms (+%.1f ms)   target: at most +200 ms\n",
      direct * 1e3, on_host * 1e3, (on_host - direct) * 1e3, in_image * 1e3,
      (in_image - direct) * 1e3);

  // pull
  auto big = PushRandomImage(*registry, dir, o.image_mb);
  if (!big.ok()) Die(big.status().ToString());
  // Each measurement starts with the page cache's dirty pages written out, so that neither
  // pays for the other's writes; the copy is timed before and after the pull (the mean).
  auto copy_once = [&](int i) {
    testing::RunShell("sync");
    const auto c0 = Clock::now();
    testing::ShellResult copy =
        testing::RunShell(absl::StrCat("skopeo copy --src-tls-verify=false docker://", *big,
                                       " oci:", dir, "/copy-only-", i, ":1 2>&1"));
    const auto c1 = Clock::now();
    if (copy.exit_code != 0) Die(copy.output);
    return Seconds(c0, c1);
  };
  const double copy_before = copy_once(0);
  testing::RunShell("sync");
  const auto a0 = Clock::now();
  auto acquired = cache.Acquire(*big, "", nullptr);
  const auto a1 = Clock::now();
  if (!acquired.ok()) Die(acquired.status().ToString());
  const double copy_s = (copy_before + copy_once(1)) / 2;
  std::printf(
      "pull   %d MiB: skopeo copy alone %.2f s, cold pull and unpack %.2f s: ratio %.2f   "
      "target: at least 0.9\n",
      o.image_mb, copy_s, Seconds(a0, a1), copy_s / Seconds(a0, a1));

  // step
  const std::string loop = absl::StrCat(
      "/usr/bin/python3 -c \"import time, torch\ntorch.set_num_threads(1)\n"
      "a = torch.randn(256, 256)\nfor _ in range(20): a = torch.tanh(a @ a)\n"
      "t = time.perf_counter()\nfor _ in range(",
      o.steps, "): a = torch.tanh(a @ a)\nprint(", o.steps,
      " / (time.perf_counter() - t))\" > steps.txt");
  auto rate = [&](const worker::RankRoot* in) {
    return bench.MedianRate(bench.Spec(loop, in), "steps.txt", "is python3-torch installed?");
  };
  const double host_rate = rate(nullptr);
  const double sandbox_rate = rate(&host_root);
  std::printf(
      "step   %.0f steps/s on the host, %.0f in the sandbox: ratio %.3f   target: at "
      "least 0.98\n",
      host_rate, sandbox_rate, sandbox_rate / host_rate);
  // node
  const std::string eight = "for i in 1 2 3 4 5 6 7 8; do /bin/true & done; wait";
  const double bare8 = bench.MedianStart(bench.Spec(eight, nullptr, 8), o.runs);
  const double node8 = bench.MedianStart(bench.Spec(eight, &host_root, 8), o.runs);
  std::printf(
      "node   8 processes bare %.1f ms, in an 8-rank node container %.1f ms (+%.1f ms)   "
      "target: at most +200 ms\n",
      bare8 * 1e3, node8 * 1e3, (node8 - bare8) * 1e3);

  // shm: the writer, then the reader (a second process), each timed inside; MiB/s of the pair.
  auto shm_rate = [&](const worker::RankRoot* in, const std::string& shm_dir) {
    const std::string pair = absl::StrCat(
        "d=", shm_dir, "; t0=$(date +%s.%N); dd if=/dev/zero of=$d/x bs=1M count=", o.shm_mb,
        " 2>/dev/null; sh -c \"dd if=$d/x of=/dev/null bs=1M 2>/dev/null\"; t1=$(date +%s.%N); "
        "rm -f $d/x; awk \"BEGIN { print ",
        o.shm_mb, " / ($t1 - $t0) }\" > shm.txt");
    return bench.MedianRate(bench.Spec(pair, in, 2), "shm.txt", "are dd and awk installed?");
  };
  const std::string host_shm = absl::StrCat("/dev/shm/tessera-bench-", ::getpid());
  fs::create_directories(host_shm);
  const double host_shm_rate = shm_rate(nullptr, host_shm);
  fs::remove_all(host_shm);
  const double node_shm_rate = shm_rate(&host_root, "/dev/shm");
  std::printf(
      "shm    %d MiB written and read by two processes: %.0f MiB/s on the host, %.0f in a node "
      "container: ratio %.3f   target: at least 0.9\n",
      o.shm_mb, host_shm_rate, node_shm_rate, node_shm_rate / host_shm_rate);

  WallsFigure(o, dir);

  std::error_code ignored;
  fs::remove_all(dir, ignored);
  return 0;
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) { return tessera::Main(argc, argv); }
