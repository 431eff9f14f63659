"""A training script's progress, as its worker reads it: the file from the environment, one JSON
record per call with checked fields, the wait marker; nothing at all outside Tessera."""

import json
import os
import subprocess
import sys

import pytest

from tessera_sdk.progress import ProgressReporter, progress_path_from_environment


def records(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_the_file_comes_from_the_environment_as_the_worker_names_it():
    assert progress_path_from_environment({"TESSERA_PROGRESS_FILE": "/p/rank-3.progress",
                                           "TESSERA_PROGRESS_DIR": "/q", "RANK": "7"}) \
        == "/p/rank-3.progress"  # a rank the worker started itself
    assert progress_path_from_environment({"TESSERA_PROGRESS_DIR": "/q", "RANK": "7"}) \
        == "/q/rank-7.progress"  # a rank of the node's launcher
    assert progress_path_from_environment({}) is None  # outside Tessera
    with pytest.raises(ValueError, match="RANK"):
        progress_path_from_environment({"TESSERA_PROGRESS_DIR": "/q", "RANK": "zero"})
    with pytest.raises(ValueError, match="RANK"):
        progress_path_from_environment({"TESSERA_PROGRESS_DIR": "/q"})


def test_records_carry_the_step_the_checkpoint_and_where_the_attempt_resumed(tmp_path):
    path = str(tmp_path / "rank-0.progress")
    with ProgressReporter(path, clock=lambda: 1700000000.5) as p:
        assert p.enabled
        p.report(1, total_steps=100, loss=5.5, learning_rate=1e-3, tokens_per_second=5000,
                 mfu=0.25, compute_seconds=0.125)
        p.resumed_from(40)
        p.report(41, total_steps=100, loss=2.5, checkpoint_interval_steps=25,
                 checkpoint_save_seconds=0.5)
        p.checkpoint_committed(50)
        p.checkpoint_committed(45)  # an older one changes nothing
        p.report(52, total_steps=100, loss=float("nan"))
    first, resumed, committed = records(path)
    assert first == {"step": 1, "total_steps": 100, "loss": 5.5, "lr": 1e-3,
                     "tokens_per_second": 5000.0, "mfu": 0.25, "compute_seconds": 0.125,
                     "resumed_from_step": 0, "time": 1700000000.5}
    assert resumed["resumed_from_step"] == 40
    assert resumed["checkpoint_step"] == 40  # the checkpoint it resumed from is committed
    assert resumed["checkpoint_interval_steps"] == 25
    assert resumed["checkpoint_save_seconds"] == 0.5
    assert committed["checkpoint_step"] == 50
    assert "loss" not in committed  # JSON has no NaN: left out, the step still counts
    assert committed["step"] == 52


def test_ready_says_where_the_first_step_starts_from_with_no_step_of_its_own(tmp_path):
    path = str(tmp_path / "rank-0.progress")
    with ProgressReporter(path, clock=lambda: 1700000000.5) as p:
        p.resumed_from(40)
        p.ready()
        p.ready(0)
        with pytest.raises(ValueError, match="step"):
            p.ready(-3)
    resumed, fresh = records(path)
    assert resumed == {"step": 40, "ready": True, "resumed_from_step": 40,
                       "time": 1700000000.5, "checkpoint_step": 40}
    assert fresh["step"] == 0 and fresh["ready"] is True
    assert ProgressReporter("").ready(5)["step"] == 5  # no file: nothing written


def test_a_field_of_the_wrong_type_is_named_and_nothing_is_written(tmp_path):
    path = str(tmp_path / "rank-0.progress")
    p = ProgressReporter(path)
    for call, field in ((lambda: p.report("7"), "step"), (lambda: p.report(-1), "step"),
                        (lambda: p.report(True), "step"),
                        (lambda: p.report(3, total_steps=2.5), "total_steps"),
                        (lambda: p.report(3, loss="low"), "loss"),
                        (lambda: p.checkpoint_committed(None), "step")):
        with pytest.raises(ValueError, match=field):
            call()
    p.close()
    assert records(path) == []


def test_waits_for_other_ranks_are_marked_and_unmarked(tmp_path):
    path = str(tmp_path / "rank-2.progress")
    p = ProgressReporter(path)
    marker = path + ".wait"
    assert open(marker).read() == "running\n"
    with p.waiting():
        assert open(marker).read() == "waiting\n"
    assert open(marker).read() == "running\n"
    with pytest.raises(RuntimeError):
        with p.waiting():
            raise RuntimeError("a collective failed")
    assert open(marker).read() == "running\n"  # a failure inside is no wait
    p.close()


def test_outside_tessera_every_call_does_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("TESSERA_PROGRESS_FILE", raising=False)
    monkeypatch.delenv("TESSERA_PROGRESS_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    p = ProgressReporter()
    assert not p.enabled
    assert p.report(3, loss=1.0)["step"] == 3  # still checked, and returned
    with p.waiting():
        pass
    p.close()
    assert os.listdir(tmp_path) == []


def test_it_imports_in_an_image_without_grpcio_or_protobuf():
    code = ("import sys\n"
            "sys.modules['grpc'] = None\n"
            "sys.modules['google.protobuf'] = None\n"
            "from tessera_sdk.progress import ProgressReporter\n"
            "import tessera_sdk\n"
            "print(ProgressReporter(None).enabled)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, TESSERA_PROGRESS_FILE=""))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
