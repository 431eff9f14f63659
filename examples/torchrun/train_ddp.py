"""A PyTorch training script as users write them, run by Tessera without changes to how it starts.

torchrun starts it once per rank (the run's command runs torchrun once per node, as mcli runs a
command); it trains a small regression model with DistributedDataParallel over Gloo (NCCL on GPU
nodes), saves a checkpoint to the cluster's shared folder every --save-every steps, resumes from
the newest one on whatever number of nodes the run has now, and tells Tessera its progress
through tessera_sdk.progress: when it is ready to take its first step, steps and loss for `mcli
get runs`, waits for the other ranks for hang detection, and each committed checkpoint, after
which a run that lost a node and resumed on fewer (compute.min_nodes) grows back onto all of
them.

The global batch is the same on any world size (each rank takes its slice of it), so the loss
curve does not depend on how many nodes an attempt had.
"""

import argparse
import glob
import math
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from tessera_sdk.progress import ProgressReporter


def batch(step, size):
    """The global batch of `step`: the same samples whoever draws them."""
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(size, 16, generator=g)
    y = torch.sin(x[:, :8].sum(dim=1, keepdim=True)) + 0.1 * x[:, 8:].sum(dim=1, keepdim=True)
    return x, y


def newest_checkpoint(folder):
    """The newest committed checkpoint (one whose file was renamed into place) and its step."""
    paths = sorted(glob.glob(os.path.join(folder, "step-*.pt")))
    if not paths:
        return None, 0
    return paths[-1], int(os.path.basename(paths[-1])[5:-3])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--save-every", type=int, default=20)
    parser.add_argument("--global-batch", type=int, default=32)
    parser.add_argument("--step-seconds", type=float, default=0.0,
                        help="at least this long a step (a stand-in for a larger model)")
    parser.add_argument("--checkpoints", required=True, help="a folder every node shares")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.global_batch % world:
        raise SystemExit("--global-batch %d is not a multiple of the %d ranks"
                         % (args.global_batch, world))
    progress = ProgressReporter()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    os.makedirs(args.checkpoints, exist_ok=True)
    path, start = newest_checkpoint(args.checkpoints)
    if path:
        state = torch.load(path)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        progress.resumed_from(start)
    if rank == 0:
        print("%s from step %d on %d ranks" % ("resumed" if path else "starting", start, world),
              flush=True)
    ddp = DistributedDataParallel(model)  # meets the other ranks: start-up, however long
    per_rank = args.global_batch // world
    progress.ready(start)  # from here a step that never ends is a hang (the run's hang_timeout)
    for step in range(start, args.steps):
        began = time.monotonic()
        x, y = batch(step, args.global_batch)
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        loss = torch.nn.functional.mse_loss(ddp(x[mine]), y[mine])
        optimizer.zero_grad()
        with progress.waiting():  # backward all-reduces the gradients with the other ranks
            loss.backward()
        optimizer.step()
        mean = loss.detach().clone()
        with progress.waiting():
            dist.all_reduce(mean)
        mean = mean.item() / world
        done = step + 1
        if done % args.save_every == 0 or done == args.steps:
            if rank == 0:
                final = os.path.join(args.checkpoints, "step-%08d.pt" % done)
                with open(final + ".tmp", "wb") as out:
                    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()},
                               out)
                    out.flush()
                    os.fsync(out.fileno())
                os.replace(final + ".tmp", final)  # committed: whole, or not there
            with progress.waiting():
                dist.barrier()
            progress.checkpoint_committed(done)
        progress.report(done, total_steps=args.steps, loss=mean,
                        checkpoint_interval_steps=args.save_every)
        if rank == 0 and (done % 10 == 0 or done == args.steps):
            print("step %d/%d: loss %.6f" % (done, args.steps, mean), flush=True)
        if not math.isfinite(mean):
            raise SystemExit("the loss is %r at step %d" % (mean, done))
        time.sleep(max(0.0, args.step_seconds - (time.monotonic() - began)))
    if rank == 0:
        print("training finished: %d steps" % args.steps, flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
