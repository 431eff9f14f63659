"""Runs: submit, read, list, change, stop, delete and wait, in the shapes of mcli's SDK."""

import datetime
import enum
import random
import time
import uuid
from typing import Any, Dict, Iterable, List, Optional, Sequence, Union

import grpc
from google.protobuf import json_format

from . import errors
from ._proto import run_spec_pb2, runs_pb2
from .connection import Client, default_client
from .run_config import RunConfig

__all__ = ["RunStatus", "Run", "create_run", "get_run", "get_runs", "stop_run", "stop_runs",
           "update_run", "delete_run", "restart_run", "clone_run", "wait_for_run_status"]


class RunStatus(enum.Enum):
    """A run's status, in lifecycle order; COMPLETED, STOPPED and FAILED end it."""

    PENDING = runs_pb2.RUN_STATUS_PENDING
    QUEUED = runs_pb2.RUN_STATUS_QUEUED
    STARTING = runs_pb2.RUN_STATUS_STARTING
    RUNNING = runs_pb2.RUN_STATUS_RUNNING
    TERMINATING = runs_pb2.RUN_STATUS_TERMINATING
    COMPLETED = runs_pb2.RUN_STATUS_COMPLETED
    STOPPED = runs_pb2.RUN_STATUS_STOPPED
    FAILED = runs_pb2.RUN_STATUS_FAILED

    @classmethod
    def parse(cls, value: Union["RunStatus", str, int]) -> "RunStatus":
        """From a RunStatus, a name in any case ("running", "RUN_STATUS_RUNNING") or a number."""
        if isinstance(value, RunStatus):
            return value
        if isinstance(value, int):
            return cls(value)
        name = str(value).upper()
        if name.startswith("RUN_STATUS_"):
            name = name[len("RUN_STATUS_"):]
        try:
            return cls[name]
        except KeyError:
            known = ", ".join(s.name.lower() for s in cls)
            raise errors.InvalidArgumentError(
                f"status: unknown run status {value!r} (one of {known})", None, "status") from None

    def is_terminal(self) -> bool:
        return self in (RunStatus.COMPLETED, RunStatus.STOPPED, RunStatus.FAILED)

    def reached(self, target: "RunStatus") -> bool:
        """Whether a run in this status has reached `target` or gone past it: every ended status
        is past every status before the end (a run that failed while queued never runs)."""
        if self == target:
            return True
        if self.is_terminal():
            return not target.is_terminal()
        return not target.is_terminal() and self.value > target.value

    def __str__(self) -> str:
        return self.name


def _time(ts) -> Optional[datetime.datetime]:
    if ts.seconds == 0 and ts.nanos == 0:
        return None
    return ts.ToDatetime(tzinfo=datetime.timezone.utc)


def config_of(spec: "run_spec_pb2.RunSpec") -> RunConfig:
    """A run's spec as the run YAML writes it (what clone_run and Run.config give)."""
    document = json_format.MessageToDict(spec, preserving_proto_field_name=True)
    scheduling = document.get("scheduling", {})
    if "priority" in scheduling:
        scheduling["priority"] = scheduling["priority"].replace("PRIORITY_", "").lower()
    if "max_duration_hours" in scheduling:
        scheduling["max_duration"] = scheduling.pop("max_duration_hours")
    if "hang_timeout_seconds" in scheduling:
        scheduling["hang_timeout"] = scheduling.pop("hang_timeout_seconds")
    if "launch" in document:
        document["launch"] = document["launch"].replace("LAUNCH_MODE_", "").lower()
    if "env_variables" in document:
        document["env_variables"] = {e["key"]: e.get("value", "")
                                     for e in document["env_variables"]}
    if document.pop("all_secrets", False):
        document["secrets"] = "all"
    integrations = []
    for integration in document.get("integrations", []):
        flat = {"integration_type": integration.get("integration_type", "")}
        flat.update(integration.get("fields", {}))
        integrations.append(flat)
    if integrations:
        document["integrations"] = integrations
    return RunConfig.from_dict(document)


class Run:
    """A run as the server showed it last. `proto` is the whole message (tessera.v1.Run)."""

    def __init__(self, proto: "runs_pb2.Run"):
        self.proto = proto

    name = property(lambda self: self.proto.name)
    id = property(lambda self: self.proto.id)
    user = property(lambda self: self.proto.user)
    status = property(lambda self: RunStatus(self.proto.status))
    # Why it is in its status (a failure's cause, a stop's reason); "" when nothing to say.
    reason = property(lambda self: self.proto.status_reason)
    created_at = property(lambda self: _time(self.proto.created_at))
    started_at = property(lambda self: _time(self.proto.started_at))
    ended_at = property(lambda self: _time(self.proto.ended_at))
    # The current (or last) attempt: 0, 1, ... (-1 before the first).
    attempt = property(lambda self: self.proto.resumption_index)
    retries_used = property(lambda self: self.proto.retries_used)
    image_digest = property(lambda self: self.proto.image_digest)

    @property
    def progress(self) -> Dict[str, Any]:
        """The ranks' latest report: step, total_steps, loss, learning_rate, tokens_per_second,
        mfu ({} before the first)."""
        return json_format.MessageToDict(self.proto.progress, preserving_proto_field_name=True)

    @property
    def config(self) -> RunConfig:
        """The spec it runs. Lists (get_runs) carry no command, env, parameters or metadata:
        get_run(run) has them."""
        return config_of(self.proto.spec)

    def is_terminal(self) -> bool:
        return self.status.is_terminal()

    def __repr__(self) -> str:
        reason = f", reason={self.reason!r}" if self.reason else ""
        return f"Run(name={self.name!r}, status={self.status}{reason})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Run) and other.proto == self.proto


RunRef = Union[Run, str]


def _name(run: RunRef) -> str:
    return run.name if isinstance(run, Run) else str(run)


def _client(client: Optional[Client]) -> Client:
    return client if client is not None else default_client()


def create_run(run_config: Union[RunConfig, Dict[str, Any]], *,
               idempotency_key: Optional[str] = None, timeout: Optional[float] = 30,
               client: Optional[Client] = None) -> Run:
    """Submits a run. Retried with the same key while the server is unavailable, so it is
    created once; give your own `idempotency_key` to make a retried CI job submit once too."""
    config = run_config if isinstance(run_config, RunConfig) else RunConfig.from_dict(run_config)
    request = runs_pb2.SubmitRunRequest(idempotency_key=idempotency_key or str(uuid.uuid4()),
                                        spec_text=config.to_json())
    c = _client(client)
    return Run(c.change(c.runs.SubmitRun, request, timeout).run)


def get_run(run: RunRef, *, timeout: Optional[float] = 30, client: Optional[Client] = None) -> Run:
    """The whole run (its full spec too). NotFoundError when there is none of yours."""
    c = _client(client)
    return Run(c.call(c.runs.GetRun, runs_pb2.GetRunRequest(name=_name(run)), timeout).run)


def _timestamp(value: Union[datetime.datetime, str], field: str):
    from google.protobuf import timestamp_pb2
    ts = timestamp_pb2.Timestamp()
    try:
        if isinstance(value, datetime.datetime):
            if value.tzinfo is None:
                raise ValueError("a datetime needs a time zone")
            ts.FromDatetime(value.astimezone(datetime.timezone.utc))
        else:
            ts.FromJsonString(value)
    except ValueError as e:
        raise errors.InvalidArgumentError(f"{field}: {e}", None, field) from None
    return ts


def get_runs(name_globs: Union[str, Sequence[str], None] = None, *,
             statuses: Optional[Iterable[Union[RunStatus, str]]] = None,
             user: Optional[str] = None, cluster: Optional[str] = None,
             gpu_type: Optional[str] = None,
             before: Union[datetime.datetime, str, None] = None,
             after: Union[datetime.datetime, str, None] = None,
             metadata: Optional[Dict[str, str]] = None, limit: Optional[int] = None,
             timeout: Optional[float] = 30, client: Optional[Client] = None) -> List[Run]:
    """Your runs (everyone's for an operator's key) matching every filter given, newest first.
    Pages are read for you. Lists carry no command, env, parameters or metadata."""
    f = runs_pb2.RunFilter()
    if isinstance(name_globs, str):
        name_globs = [name_globs]
    f.name_globs.extend(name_globs or [])
    f.statuses.extend(RunStatus.parse(s).value for s in (statuses or []))
    f.user = user or ""
    f.cluster = cluster or ""
    f.gpu_type = gpu_type or ""
    if before is not None:
        f.created_before.CopyFrom(_timestamp(before, "before"))
    if after is not None:
        f.created_after.CopyFrom(_timestamp(after, "after"))
    for key, value in (metadata or {}).items():
        f.metadata[key] = value
    if limit is not None:
        if limit < 0:
            raise errors.InvalidArgumentError("limit: must be 0 or more", None, "limit")
        f.limit = limit
    c = _client(client)
    runs: List[Run] = []
    request = runs_pb2.ListRunsRequest(filter=f)
    while True:
        page = c.call(c.runs.ListRuns, request, timeout)
        runs.extend(Run(r) for r in page.runs)
        if not page.next_page_token or (limit and len(runs) >= limit):
            return runs[:limit] if limit else runs
        request.page_token = page.next_page_token


def stop_run(run: RunRef, *, reason: str = "", timeout: Optional[float] = 30,
             client: Optional[Client] = None) -> Run:
    """Asks the run to stop (its ranks get SIGTERM, then SIGKILL after the grace period)."""
    c = _client(client)
    request = runs_pb2.StopRunRequest(idempotency_key=str(uuid.uuid4()), name=_name(run),
                                      reason=reason)
    return Run(c.change(c.runs.StopRun, request, timeout).run)


def stop_runs(runs: Iterable[RunRef], *, reason: str = "", timeout: Optional[float] = 30,
              client: Optional[Client] = None) -> List[Run]:
    return [stop_run(r, reason=reason, timeout=timeout, client=client) for r in runs]


def update_run(run: RunRef, *, priority: Optional[str] = None,
               preemptible: Optional[bool] = None, max_duration: Optional[float] = None,
               retry_on_system_failure: Optional[bool] = None,
               max_retries: Optional[int] = None, timeout: Optional[float] = 30,
               client: Optional[Client] = None) -> Run:
    """Changes a waiting or running run's scheduling: priority ("low" ... "high"), preemptible,
    max_duration (hours, 0: unlimited), the watchdog (retry_on_system_failure) and max_retries."""
    request = runs_pb2.UpdateRunRequest(idempotency_key=str(uuid.uuid4()), name=_name(run))
    if priority is not None:
        name = str(priority).upper()
        name = "PRIORITY_MEDIUM" if name == "AUTO" else name
        name = name if name.startswith("PRIORITY_") else "PRIORITY_" + name
        if name not in run_spec_pb2.Priority.keys() or name == "PRIORITY_UNSPECIFIED":
            raise errors.InvalidArgumentError(
                f"priority: unknown priority {priority!r} (lowest, low, medium, high, auto)",
                None, "priority")
        request.priority = run_spec_pb2.Priority.Value(name)
    if preemptible is not None:
        request.preemptible = bool(preemptible)
    if max_duration is not None:
        request.max_duration_hours = float(max_duration)
    if retry_on_system_failure is not None:
        request.retry_on_system_failure = bool(retry_on_system_failure)
    if max_retries is not None:
        request.max_retries = int(max_retries)
    c = _client(client)
    return Run(c.change(c.runs.UpdateRun, request, timeout).run)


def delete_run(run: RunRef, *, timeout: Optional[float] = 30,
               client: Optional[Client] = None) -> None:
    """Deletes an ended (or still waiting) run and its logs."""
    c = _client(client)
    request = runs_pb2.DeleteRunRequest(idempotency_key=str(uuid.uuid4()), name=_name(run))
    c.change(c.runs.DeleteRun, request, timeout)


def restart_run(run: RunRef, *, timeout: Optional[float] = 30,
                client: Optional[Client] = None) -> Run:
    """Starts an ended run again, as its next attempt (mcli run -r)."""
    c = _client(client)
    request = runs_pb2.RestartRunRequest(idempotency_key=str(uuid.uuid4()), name=_name(run))
    return Run(c.change(c.runs.RestartRun, request, timeout).run)


def clone_run(run: RunRef, *, timeout: Optional[float] = 30,
              client: Optional[Client] = None) -> Run:
    """Submits a copy of a run (mcli run --clone); for a changed copy, create_run(
    get_run(run).config) with the changes."""
    c = _client(client)
    request = runs_pb2.CloneRunRequest(idempotency_key=str(uuid.uuid4()), name=_name(run))
    return Run(c.change(c.runs.CloneRun, request, timeout).run)


def wait_for_run_status(run: RunRef, status: Union[RunStatus, str], *,
                        timeout: Optional[float] = None,
                        client: Optional[Client] = None) -> Run:
    """Waits until the run reaches `status` or a later one (RUNNING is reached by a run that
    already completed), and returns it as it was then. Waiting for an end (COMPLETED) that the
    run cannot reach any more (it FAILED or was STOPPED) raises RunEndedError, which carries the
    run. DeadlineExceededError (a TimeoutError) after `timeout` seconds.

    It watches the run's changes rather than polling, and opens the watch again when the
    server ends it (a watch's maximum lifetime, a restart)."""
    target = RunStatus.parse(status)
    name = _name(run)
    c = _client(client)
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = 0.25

    def left() -> Optional[float]:
        if deadline is None:
            return None
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise errors.DeadlineExceededError(
                f"run {name} did not reach {target} within {timeout} s",
                grpc.StatusCode.DEADLINE_EXCEEDED, None)
        return remaining

    def done(current: Run) -> Optional[Run]:
        if current.status.reached(target):
            return current
        if current.status.is_terminal():
            raise errors.RunEndedError(
                f"run {name} ended {current.status}"
                + (f": {current.reason}" if current.reason else "")
                + f", not {target}", current)
        return None

    while True:
        request = runs_pb2.WatchRunsRequest(filter=runs_pb2.RunFilter(name_globs=[name]))
        stream = c.runs.WatchRuns(request, metadata=c.metadata(), timeout=left())
        try:
            # The watch's start is fixed once its headers arrive: every change after the state
            # read next is seen.
            stream.initial_metadata()
            current = get_run(name, timeout=left(), client=c)
            if (found := done(current)) is not None:
                return found
            for change in stream:
                pause = 0.25
                if change.run.name != name:
                    continue
                # A change's run may be summarized (a list's view): read the whole run.
                status_now = RunStatus(change.run.status)
                if status_now.reached(target) or status_now.is_terminal():
                    current = get_run(name, timeout=left(), client=c)
                    if (found := done(current)) is not None:
                        return found
        except grpc.RpcError as e:
            error = errors.from_rpc_error(e)
            if isinstance(error, errors.DeadlineExceededError):
                left()  # raises the wait's own timeout
            if not isinstance(error, errors.UnavailableError):
                raise error from None
        finally:
            stream.cancel()
        # The server ended the watch: open it again (at once, then after doubling pauses).
        time.sleep(min(pause, left() or pause) * random.uniform(0.5, 1.0))
        pause = min(pause * 2, 5.0)
