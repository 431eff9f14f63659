// mcli's launch contract, all real: tessera-server, PostgreSQL, tessera-worker with bubblewrap
// and simulated GPU device nodes. A run's command runs once per node in one container holding
// all of the run's GPUs on that node (launch: node, the default): torchrun (Debian's
// python3-torch) starts the ranks, which agree on the world over Gloo and read the parameters
// at /mnt/config/parameters.yaml; processes of one run share /dev/shm, IPC and PIDs, another
// run's see none of them; a launcher that leaves its processes behind fails its run; a fork bomb
// stops at its run's process limit.

#include <catch2/catch.hpp>
#include <fstream>
#include <regex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/integration/sandbox/sandbox_helpers.h"
#include "tests/support/local_cluster.h"
#include "tests/support/temp_dir.h"

namespace tessera::testing {
namespace node_container_test {

// A folder of simulated GPU device nodes (nvidia0..N-1, nvidiactl), open to every rank's uid.
struct SimulatedGpus {
  explicit SimulatedGpus(int count) {
    for (int i = 0; i < count; ++i) std::ofstream(absl::StrCat(dev.path, "/nvidia", i)) << "";
    std::ofstream(dev.path + "/nvidiactl") << "";
    OpenToPassThrough(dev.path);
  }
  TempDir dev{"tessera-dev"};
};

// How many times `pattern` matches in `text`.
int Matches(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

TEST_CASE("torchrun once per node: 2 nodes × 2 GPUs make 4 ranks, one world, mcli's parameters",
          "[sandbox][node_container]") {
  LocalCluster c;
  SimulatedGpus gpus(2);
  SharedScratch scratch;
  for (const char* node : {"node-a", "node-b"}) {
    c.StartWorker(node, 2, {"--sandbox", "bwrap", "--gpu-device-dir", gpus.dev.path});
    OpenToPassThrough(c.worker(node).state_dir);
  }
  // Each rank: a Gloo all-reduce of its rank + 1 (the sum is 10 only if all 4 took part), the
  // device its LOCAL_RANK picks from what the node container shows, and a parameter.
  const std::string script = scratch.path + "/rank.py";
  std::ofstream(script) << R"(import os, yaml
import torch, torch.distributed as dist
dist.init_process_group("gloo")
total = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(total)
params = yaml.safe_load(open("/mnt/config/parameters.yaml"))
devices = os.environ["CUDA_VISIBLE_DEVICES"].split(",")
print(f"rank={dist.get_rank()} world={dist.get_world_size()} sum={int(total.item())} "
      f"node={os.environ['NODE_RANK']} device={devices[int(os.environ['LOCAL_RANK'])]} "
      f"lr={params['optimizer']['lr']} name={os.environ['COMPOSER_RUN_NAME']}", flush=True)
dist.barrier()
)";
  v1::RunSpec spec;
  spec.set_name("torchrun");
  spec.set_image("host");
  // As llm-foundry's and the examples' YAMLs write it; a launcher per node, not per GPU.
  // (--redirects 1 --tee 1: Debian 12's torch 1.13 cannot read its own default of 0 under
  // Python 3.11, whose IntFlag no longer lists the zero member; stdout still reaches the log.)
  spec.set_command(absl::StrCat(
      "echo launcher on node $NODE_RANK of $NUM_NODES: LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE "
      "WORLD_SIZE=$WORLD_SIZE RANK=${RANK:-unset}\n"
      "exec /usr/bin/python3 -m torch.distributed.run --nnodes $NUM_NODES "
      "--nproc_per_node $LOCAL_WORLD_SIZE --node_rank $NODE_RANK --master_addr $MASTER_ADDR "
      "--master_port $MASTER_PORT --redirects 1 --tee 1 ",
      script));
  spec.mutable_compute()->set_gpus(4);
  spec.mutable_compute()->set_nodes(2);
  auto* lo = spec.add_env_variables();  // Gloo's ranks reach each other over loopback here
  lo->set_key("GLOO_SOCKET_IFNAME");
  lo->set_value("lo");
  (*(*spec.mutable_parameters()->mutable_fields())["optimizer"]
        .mutable_struct_value()
        ->mutable_fields())["lr"]
      .set_number_value(0.5);
  const v1::Run run = SubmitSpec(*c.client, spec);
  const v1::Run done = WaitForEnd(*c.client, run.name(), absl::Seconds(180));
  // Each node's output is its launcher's: node 0's under rank 0, node 1's under its first rank.
  // Each node's ranks print in either order; their last lines may come after the status.
  WaitForOutput(c, run.name(), "rank=0 world=4");
  WaitForOutput(c, run.name(), "rank=2 world=4", absl::Seconds(40), 2);
  const std::string node0 = WaitForOutput(c, run.name(), "rank=1 world=4");
  const std::string node1 = WaitForOutput(c, run.name(), "rank=3 world=4", absl::Seconds(40), 2);
  INFO(done.status_reason() << "\nnode 0:\n" << node0 << "\nnode 1:\n" << node1);
  REQUIRE(done.status() == v1::RUN_STATUS_COMPLETED);
  // One launcher per node, told mcli's variables and no RANK of its own.
  CHECK(Matches(node0, "launcher on node 0 of 2: LOCAL_WORLD_SIZE=2 WORLD_SIZE=4 RANK=unset") == 1);
  CHECK(Matches(node1, "launcher on node 1 of 2: LOCAL_WORLD_SIZE=2 WORLD_SIZE=4 RANK=unset") == 1);
  const std::string all = node0 + node1;
  for (int rank = 0; rank < 4; ++rank) {
    INFO("rank " << rank);
    CHECK(Matches(all, absl::StrCat("rank=", rank, " world=4 sum=10 node=", rank / 2,
                                    " device=", rank % 2, " lr=0.5 name=", run.name())) == 1);
  }
}

TEST_CASE("one run's processes on a node share /dev/shm, IPC and PIDs, and another run's see none",
          "[sandbox][node_container]") {
  LocalCluster c;
  SimulatedGpus gpus(3);
  c.StartWorker("node-a", 3, {"--sandbox", "bwrap", "--gpu-device-dir", gpus.dev.path});
  OpenToPassThrough(c.worker("node-a").state_dir);
  // In the style of NeMo's `seq 0 7 | parallel 'CUDA_VISIBLE_DEVICES={} ...'`: the command
  // starts one process per local GPU itself. Process 0 publishes its PID and a message in
  // POSIX shared memory; process 1 finds both.
  v1::RunSpec a;
  a.set_name("shares");
  a.set_image("host");
  a.set_command(R"sh(for i in $(seq 0 $((LOCAL_WORLD_SIZE - 1))); do
  dev=$(echo "$CUDA_VISIBLE_DEVICES" | cut -d, -f$((i + 1)))
  CUDA_VISIBLE_DEVICES=$dev LOCAL_RANK=$i sh -c '
    gpus=$(ls /dev | grep -c "^nvidia[0-9]")
    echo "local $LOCAL_RANK picked device $CUDA_VISIBLE_DEVICES of $gpus ipc=$(readlink /proc/self/ns/ipc)"
    if [ $LOCAL_RANK = 0 ]; then
      echo $$ > /dev/shm/peer-pid; echo hello-from-0 > /dev/shm/message; exec sleep 300
    fi
    while [ ! -s /dev/shm/peer-pid ]; do sleep 0.05; done
    peer=$(cat /dev/shm/peer-pid)
    kill -0 $peer && echo "local 1 sees local 0 pid $peer: $(cat /dev/shm/message)"
    exec sleep 300' &
done
wait
)sh");
  a.mutable_compute()->set_gpus(2);
  a.mutable_compute()->set_nodes(1);
  const v1::Run run_a = SubmitSpec(*c.client, a);
  const std::string out_a =
      WaitForOutput(c, run_a.name(), "local 1 sees local 0", absl::Seconds(60));
  INFO("run a:\n" << out_a);
  REQUIRE(absl::StrContains(out_a, "local 1 sees local 0 pid"));
  CHECK(absl::StrContains(out_a, "hello-from-0"));
  CHECK(absl::StrContains(out_a, "local 0 picked device 0 of 2"));
  CHECK(absl::StrContains(out_a, "local 1 picked device 1 of 2"));
  // Both processes in one IPC namespace.
  std::smatch m;
  REQUIRE(std::regex_search(out_a, m, std::regex("ipc=(ipc:\\[[0-9]+\\])")));
  const std::string ipc_a = m[1];
  CHECK(Matches(out_a, std::regex_replace(ipc_a, std::regex("[\\[\\]]"), "\\$&")) == 2);

  // Another run on the same node, while the first runs.
  v1::RunSpec b;
  b.set_name("neighbour");
  b.set_image("host");
  b.set_command(
      "echo shm: $(ls -A /dev/shm | tr '\\n' ' ')end; echo ipc=$(readlink /proc/self/ns/ipc); "
      "echo procs: $(ps -e -o comm= | tr '\\n' ' '); echo neighbour-done");
  b.mutable_compute()->set_gpus(1);
  b.mutable_compute()->set_nodes(1);
  const v1::Run run_b = SubmitSpec(*c.client, b);
  const v1::Run done_b = WaitForEnd(*c.client, run_b.name(), absl::Seconds(60));
  const std::string out_b = WaitForOutput(c, run_b.name(), "neighbour-done");
  INFO("run b:\n" << out_b);
  REQUIRE(done_b.status() == v1::RUN_STATUS_COMPLETED);
  CHECK(absl::StrContains(out_b, "shm: end"));  // an empty /dev/shm of its own
  CHECK_FALSE(absl::StrContains(out_b, ipc_a));
  CHECK_FALSE(absl::StrContains(out_b, "sleep"));
  CHECK(c.client->Get(run_a.name()).status() == v1::RUN_STATUS_RUNNING);
}

TEST_CASE("a launcher that exits while its processes run fails its run, and they die with it",
          "[sandbox][node_container]") {
  LocalCluster c;
  c.StartWorker("node-a", 1, {"--sandbox", "bwrap"});
  OpenToPassThrough(c.worker("node-a").state_dir);
  v1::RunSpec spec;
  spec.set_name("orphans");
  spec.set_image("host");
  spec.set_command("sleep 1239 & echo launched; exit 0");
  spec.mutable_compute()->set_gpus(1);
  spec.mutable_compute()->set_nodes(1);
  const v1::Run run = SubmitSpec(*c.client, spec);
  const v1::Run done = WaitForEnd(*c.client, run.name(), absl::Seconds(60));
  const std::string out = WaitForOutput(c, run.name(), "while processes it started");
  INFO(done.status_reason() << "\n" << out);
  CHECK(done.status() == v1::RUN_STATUS_FAILED);
  CHECK(absl::StrContains(
      out, "the command exited with 0 while processes it started were still running"));
  CHECK(done.resumption_index() == 0);  // the run's failure, not retried as a node's
  CHECK(c.Node("node-a").liveness() == v1::NODE_LIVENESS_ONLINE);
}

TEST_CASE("a fork bomb stops at its run's process limit, and the node's other run goes on",
          "[sandbox][node_container]") {
  LocalCluster c;
  c.StartWorker("node-a", 2, {"--sandbox", "bwrap", "--rank-process-limit", "64"});
  OpenToPassThrough(c.worker("node-a").state_dir);
  // 300 processes asked for, at most 64 had (the sandbox's and the shell's own among them): the
  // subshell that asks dies when it cannot fork (as dash does). The count is a glob, a builtin:
  // at the limit not even a $(...) can fork.
  v1::RunSpec bomb;
  bomb.set_name("bomb");
  bomb.set_image("host");
  bomb.set_command(
      "(for i in $(seq 1 300); do sleep 300 & done) 2>/dev/null\n"
      "set -- /proc/[0-9]*; echo \"processes: $#\"; echo bomb-done; exec sleep 300");
  bomb.mutable_compute()->set_gpus(1);
  bomb.mutable_compute()->set_nodes(1);
  const v1::Run run = SubmitSpec(*c.client, bomb);
  const std::string out = WaitForOutput(c, run.name(), "bomb-done", absl::Seconds(60));
  INFO(out);
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex("processes: ([0-9]+)")));
  const int processes = std::stoi(m[1]);
  CHECK(processes <= 64);
  CHECK(processes >= 32);  // it did start many: the limit, not something else, stopped it

  v1::RunSpec other;
  other.set_name("neighbour");
  other.set_image("host");
  other.set_command("for i in 1 2 3 4 5 6 7 8; do sleep 0.1 & done; wait; echo neighbour-ok");
  other.mutable_compute()->set_gpus(1);
  other.mutable_compute()->set_nodes(1);
  const v1::Run neighbour = SubmitSpec(*c.client, other);
  const v1::Run done = WaitForEnd(*c.client, neighbour.name(), absl::Seconds(60));
  const std::string neighbour_out = WaitForOutput(c, neighbour.name(), "neighbour-ok");
  INFO(neighbour_out);
  CHECK(done.status() == v1::RUN_STATUS_COMPLETED);
  CHECK(absl::StrContains(neighbour_out, "neighbour-ok"));
  CHECK(c.client->Get(run.name()).status() == v1::RUN_STATUS_RUNNING);
  CHECK(c.Node("node-a").liveness() == v1::NODE_LIVENESS_ONLINE);
}

}  // namespace node_container_test
}  // namespace tessera::testing
