"""The SDK as a CI pipeline uses it, against a real cluster: every call over TLS with mcli's
settings, runs that really run (ranks in sandboxes on the workers), and a log follow the server
ends every few seconds (--max-stream-lifetime-seconds 4) that must go on without a line lost or
repeated."""

import time
import uuid

import pytest

import tessera_sdk
from tessera_sdk import RunConfig, RunStatus

LINES = 400


def counting_run(name: str, lines: int = LINES, **fields) -> RunConfig:
    """A run that prints `lines` numbered lines over several seconds, reports progress to step 5,
    and completes."""
    command = (
        f"for i in $(seq 1 {lines}); do echo \"line $i\"; sleep 0.02; done\n"
        "for s in 1 2 3 4 5; do\n"
        "  echo \"{\\\"step\\\": $s, \\\"total_steps\\\": 5, \\\"loss\\\": $((10 - s)).5,"
        " \\\"time\\\": $(date +%s)}\" >> \"$TESSERA_PROGRESS_FILE\"\n"
        "  sleep 0.5\n"
        "done\n"
        "sleep 3\n")
    # launch: rank: the command is rank 0 itself, and TESSERA_PROGRESS_FILE is its report file.
    return RunConfig(name=name, image="host", command=command, compute={"gpus": 1},
                     launch="rank", **fields)


def test_submit_follow_and_wait_a_run_to_its_end(alice):
    run = tessera_sdk.create_run(counting_run("sdk-count"), client=alice)
    assert run.name.startswith("sdk-count-")
    assert run.status in (RunStatus.PENDING, RunStatus.QUEUED)

    # The follow outlives several of the server's 4-second stream lifetimes.
    started = time.monotonic()
    lines = [line.text for line in tessera_sdk.follow_run_logs(run, client=alice)]
    assert time.monotonic() - started > 8
    assert lines[:LINES] == [f"line {i}" for i in range(1, LINES + 1)]

    done = tessera_sdk.wait_for_run_status(run, RunStatus.COMPLETED, timeout=120, client=alice)
    assert done.status == RunStatus.COMPLETED
    assert done.ended_at is not None
    # Reached already: a wait for an earlier status returns at once.
    assert tessera_sdk.wait_for_run_status(run, "running", timeout=10,
                                           client=alice).status == RunStatus.COMPLETED

    # The progress it reported, as a chart draws it; the latest report is always kept.
    deadline = time.monotonic() + 30
    while True:
        metrics = tessera_sdk.get_run_metrics(run, client=alice)
        if metrics.points and metrics.points[-1].step == 5 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert metrics.run_name == run.name
    assert metrics.total_steps == 5
    assert metrics.points[-1].step == 5
    assert metrics.points[-1].loss == pytest.approx(5.5)
    assert [a.attempt for a in metrics.attempts] == [0]

    # The whole lines were kept: read again without following.
    again = [line.text for line in tessera_sdk.get_run_logs(run, client=alice)]
    assert again[:LINES] == lines[:LINES]


def test_typed_errors_name_what_is_wrong(alice, bob):
    bad = RunConfig(name="sdk-bad", image="host", command="true", compute={"gpus": -2})
    with pytest.raises(tessera_sdk.InvalidArgumentError) as invalid:
        tessera_sdk.create_run(bad, client=alice)
    assert invalid.value.field == "compute.gpus"
    assert "compute.gpus" in invalid.value.message

    with pytest.raises(tessera_sdk.NotFoundError):
        tessera_sdk.get_run("sdk-no-such-run", client=alice)

    # Another user's run is not there for bob.
    run = tessera_sdk.create_run(
        RunConfig(name="sdk-private", image="host", command="sleep 60", compute={"gpus": 1}),
        client=alice)
    with pytest.raises(tessera_sdk.NotFoundError):
        tessera_sdk.stop_run(run, client=bob)
    assert all(r.name != run.name for r in tessera_sdk.get_runs(client=bob))
    tessera_sdk.stop_run(run, client=alice)

    with tessera_sdk.connect(api_key="tsk_" + "0" * 40) as stranger:
        with pytest.raises(tessera_sdk.AuthenticationError):
            tessera_sdk.get_runs(client=stranger)
    with pytest.raises(tessera_sdk.InvalidArgumentError) as priority:
        tessera_sdk.update_run(run, priority="urgent", client=alice)
    assert priority.value.field == "priority"


def test_lists_filter_by_metadata_and_status_pages_hidden(alice):
    sweep = uuid.uuid4().hex[:8]
    mine = [tessera_sdk.create_run(
        RunConfig(name=f"sdk-sweep-{i}", image="host", command="sleep 300",
                  compute={"gpus": 1}, metadata={"sweep": sweep, "lr": str(i)}),
        client=alice) for i in range(3)]
    found = tessera_sdk.get_runs(metadata={"sweep": sweep}, client=alice)
    assert sorted(r.name for r in found) == sorted(r.name for r in mine)
    one = tessera_sdk.get_runs(metadata={"sweep": sweep, "lr": "1"}, client=alice)
    assert [r.name for r in one] == [mine[1].name]
    assert len(tessera_sdk.get_runs("sdk-sweep-*", limit=2, client=alice)) == 2
    # The whole run has its metadata and command; a list's has neither.
    whole = tessera_sdk.get_run(mine[0], client=alice)
    assert whole.config.metadata == {"sweep": sweep, "lr": "0"}
    assert whole.config.command == "sleep 300"
    tessera_sdk.stop_runs(mine, reason="sdk test", client=alice)
    for run in mine:
        ended = tessera_sdk.wait_for_run_status(run, RunStatus.STOPPED, timeout=60, client=alice)
        assert ended.status == RunStatus.STOPPED
    stopped = tessera_sdk.get_runs(metadata={"sweep": sweep}, statuses=["stopped"], client=alice)
    assert len(stopped) == 3


def test_change_stop_and_delete_a_running_run(alice):
    run = tessera_sdk.create_run(
        RunConfig(name="sdk-long", image="host", command="sleep 600", compute={"gpus": 1},
                  scheduling={"retry_on_system_failure": True}),
        client=alice)
    running = tessera_sdk.wait_for_run_status(run, RunStatus.RUNNING, timeout=120, client=alice)
    assert running.status == RunStatus.RUNNING

    changed = tessera_sdk.update_run(run, retry_on_system_failure=False, max_duration=2,
                                     priority="low", client=alice)
    scheduling = changed.config.scheduling
    assert scheduling["retry_on_system_failure"] is False
    assert scheduling["max_duration"] == 2
    assert scheduling["priority"] == "low"

    tessera_sdk.stop_run(run, reason="done with it", client=alice)
    with pytest.raises(tessera_sdk.RunEndedError) as ended:
        tessera_sdk.wait_for_run_status(run, RunStatus.COMPLETED, timeout=60, client=alice)
    assert ended.value.run.status == RunStatus.STOPPED
    assert "done with it" in ended.value.run.reason

    # A clone of its config, changed in code, runs as a new run.
    config = tessera_sdk.get_run(run, client=alice).config
    config.command = "echo cloned"
    config.scheduling["max_duration"] = 1
    copy = tessera_sdk.create_run(config, client=alice)
    assert copy.name != run.name and copy.name.startswith("sdk-long-")
    assert tessera_sdk.wait_for_run_status(copy, RunStatus.COMPLETED, timeout=120,
                                           client=alice).status == RunStatus.COMPLETED

    tessera_sdk.delete_run(run, client=alice)
    with pytest.raises(tessera_sdk.NotFoundError):
        tessera_sdk.get_run(run, client=alice)


def test_a_retried_submit_creates_one_run(alice):
    key = str(uuid.uuid4())
    config = RunConfig(name="sdk-once", image="host", command="true", compute={"gpus": 1})
    first = tessera_sdk.create_run(config, idempotency_key=key, client=alice)
    second = tessera_sdk.create_run(config, idempotency_key=key, client=alice)
    assert first.name == second.name
    assert len(tessera_sdk.get_runs("sdk-once-*", client=alice)) == 1


def test_a_wait_times_out_as_asked(alice):
    run = tessera_sdk.create_run(
        RunConfig(name="sdk-wait", image="host", command="sleep 300", compute={"gpus": 1}),
        client=alice)
    started = time.monotonic()
    with pytest.raises(tessera_sdk.DeadlineExceededError):
        tessera_sdk.wait_for_run_status(run, RunStatus.COMPLETED, timeout=2, client=alice)
    assert time.monotonic() - started < 10
    tessera_sdk.stop_run(run, client=alice)
