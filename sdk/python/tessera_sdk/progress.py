"""Progress from your own training script to its Tessera worker, as tessera-train reports it.

A rank that reports its steps gets what tessera-train's ranks get: its progress in `mcli get runs`
and `mcli describe run`, hang detection that blames the rank that stopped (not the ones waiting for
it), the checkpoint interval advice, and, for a run that accepts fewer nodes
(`compute.min_nodes`), growing back onto all of them right after its next checkpoint once they
are free. Outside Tessera (no progress file in the environment) every call does nothing.

    from tessera_sdk.progress import ProgressReporter

    progress = ProgressReporter()          # this rank's file, from the environment
    progress.ready(start)                  # set up: the hang watch runs from here
    for step in range(start, total):
        loss = train_step()
        if saved_checkpoint_now:
            progress.checkpoint_committed(step)   # the newest committed checkpoint
        progress.report(step + 1, total_steps=total, loss=loss)
        with progress.waiting():           # around a wait for the other ranks
            barrier()

Only the standard library: it imports in a run's image without grpcio (`import
tessera_sdk.progress` loads nothing else of the SDK). The records are JSON lines, one per call,
with the fields of worker/progress/progress_file.h; the worker reads the newest.
"""

import contextlib
import json
import math
import os
import time

__all__ = ["ProgressReporter", "progress_path_from_environment"]


def progress_path_from_environment(env=None):
    """This rank's progress file: TESSERA_PROGRESS_FILE (a rank started by the worker, `launch:
    rank`), else TESSERA_PROGRESS_DIR/rank-RANK.progress (a rank started by the node's launcher,
    `launch: node`: torchrun, composer and the like set RANK). None outside Tessera.

    Raises ValueError when TESSERA_PROGRESS_DIR is set without a RANK of digits: the launcher
    did not say which rank this process is."""
    env = os.environ if env is None else env
    path = env.get("TESSERA_PROGRESS_FILE", "")
    if path:
        return path
    folder = env.get("TESSERA_PROGRESS_DIR", "")
    if not folder:
        return None
    rank = env.get("RANK", "")
    if not rank.isdigit():
        raise ValueError("TESSERA_PROGRESS_DIR is set but RANK is %r, not a rank number: start "
                         "this process with a launcher that sets RANK (torchrun, composer), or "
                         "give ProgressReporter its path" % rank)
    return os.path.join(folder, "rank-%d.progress" % int(rank))


def _integer(name, value, minimum=0):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError("%s must be an integer of at least %d, not %r" % (name, minimum, value))
    return value


def _number(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("%s must be a number, not %r" % (name, value))
    return float(value)


class ProgressReporter:
    """Appends this rank's progress records to its file and marks its waits for the other ranks.

    `path`: the file; by default progress_path_from_environment(). `clock`: seconds since the
    epoch for each record's time (time.time)."""

    def __init__(self, path=None, clock=time.time):
        self.path = progress_path_from_environment() if path is None else path
        self._clock = clock
        self._file = None
        self._wait_fd = None
        self._checkpoint_step = 0
        self._resumed_from_step = 0
        if self.path:
            # Line-buffered: each record reaches the file whole, when it is written.
            self._file = open(self.path, "a", buffering=1, encoding="utf-8")
            self._wait_fd = os.open(self.path + ".wait", os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC,
                                    0o644)
            self._mark(False)

    @property
    def enabled(self):
        """Whether records go anywhere (False outside Tessera)."""
        return self._file is not None

    def resumed_from(self, step):
        """This attempt started from the checkpoint of `step` (said in each record from now on);
        it is also the newest committed checkpoint until checkpoint_committed says a later one."""
        self._resumed_from_step = _integer("step", step)
        self._checkpoint_step = max(self._checkpoint_step, self._resumed_from_step)

    def ready(self, step=None):
        """This rank is set up (its checkpoint loaded, its peers met) and takes its first step,
        from `step` (by default the step it resumed from), now. From here the worker's hang
        watch (the run's hang_timeout) runs: a first step that never ends, a GPU kernel that
        never returns or a first collective that never completes, is a hang like any later one,
        while silence before this call is start-up, which may take as long as it takes. Call it
        right before the training loop; a first step that legitimately runs longer than the
        hang_timeout (compiling the model, say) belongs before it."""
        start = self._resumed_from_step if step is None else _integer("step", step)
        record = {"step": start, "ready": True, "resumed_from_step": self._resumed_from_step,
                  "time": float(self._clock())}
        if self._checkpoint_step > 0:
            record["checkpoint_step"] = self._checkpoint_step
        if self._file is not None:
            self._file.write(json.dumps(record, allow_nan=False) + "\n")
        return record

    def checkpoint_committed(self, step):
        """A checkpoint of `step` is committed (whole and durable, every rank's part): a run on
        fewer nodes than it asks for may now be stopped to grow back without losing steps."""
        self._checkpoint_step = max(self._checkpoint_step, _integer("step", step))

    def report(self, step, total_steps=0, loss=None, learning_rate=None, tokens_per_second=None,
               mfu=None, compute_seconds=None, checkpoint_interval_steps=0,
               checkpoint_save_seconds=None):
        """One record: `step` optimizer steps are done. A loss that is not finite (NaN, inf) is
        left out of the record (JSON has no NaN); the step still counts. Raises ValueError naming
        a field of the wrong type."""
        record = {"step": _integer("step", step), "total_steps": _integer("total_steps",
                                                                        total_steps)}
        for key, value in (("loss", loss), ("lr", learning_rate),
                           ("tokens_per_second", tokens_per_second), ("mfu", mfu),
                           ("compute_seconds", compute_seconds)):
            if value is None:
                continue
            number = _number(key, value)
            if math.isfinite(number):
                record[key] = number
        record["resumed_from_step"] = self._resumed_from_step
        record["time"] = float(self._clock())
        if _integer("checkpoint_interval_steps", checkpoint_interval_steps) > 0:
            record["checkpoint_interval_steps"] = checkpoint_interval_steps
            if checkpoint_save_seconds is not None:
                record["checkpoint_save_seconds"] = _number("checkpoint_save_seconds",
                                                            checkpoint_save_seconds)
        if self._checkpoint_step > 0:
            record["checkpoint_step"] = self._checkpoint_step
        if self._file is not None:
            self._file.write(json.dumps(record, allow_nan=False) + "\n")
        return record

    @contextlib.contextmanager
    def waiting(self):
        """Marks this rank as waiting for the other ranks (a collective, a barrier, a
        rendezvous) while the block runs: if the job hangs, the worker blames the ranks that
        stopped elsewhere, not this one."""
        self._mark(True)
        try:
            yield
        finally:
            self._mark(False)

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._wait_fd is not None:
            os.close(self._wait_fd)
            self._wait_fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _mark(self, waiting):
        if self._wait_fd is not None:
            os.pwrite(self._wait_fd, b"waiting\n" if waiting else b"running\n", 0)
