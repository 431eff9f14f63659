"""Tessera's Python SDK: submit runs, wait for them, follow their logs and read their metrics,
with the settings mcli uses (TESSERA_ENDPOINT, TESSERA_API_KEY, TESSERA_CA, ~/.tessera/config.yaml).

    from tessera_sdk import RunConfig, RunStatus, create_run, wait_for_run_status, follow_run_logs

    run = create_run(RunConfig.from_file("run.yaml"))
    wait_for_run_status(run, RunStatus.RUNNING, timeout=600)
    for line in follow_run_logs(run):
        print(line)
    run = wait_for_run_status(run, RunStatus.COMPLETED)   # RunEndedError if it failed

Every failure is a TesseraError (InvalidArgumentError with the `field` it names, NotFoundError,
PermissionDeniedError, AuthenticationError, UnavailableError ...)."""

from .config import Settings, resolve_settings
from .connection import Client, connect, default_client, set_default_client
from .errors import (AlreadyExistsError, AuthenticationError, ConfigError,
                     DeadlineExceededError, FailedPreconditionError, InvalidArgumentError,
                     NotFoundError, PermissionDeniedError, ResourceExhaustedError, RunEndedError,
                     TesseraError, UnavailableError)
from .logs import LogLine, follow_run_logs, get_run_logs
from .metrics import AttemptSummary, MetricPoint, RunMetrics, get_run_metrics
from .run_config import RunConfig
from .runs import (Run, RunStatus, clone_run, create_run, delete_run, get_run, get_runs,
                   restart_run, stop_run, stop_runs, update_run, wait_for_run_status)

__version__ = "0.1.0"

__all__ = [
    "Settings", "resolve_settings", "Client", "connect", "default_client", "set_default_client",
    "TesseraError", "ConfigError", "InvalidArgumentError", "NotFoundError", "AlreadyExistsError",
    "PermissionDeniedError", "AuthenticationError", "FailedPreconditionError",
    "ResourceExhaustedError", "UnavailableError", "DeadlineExceededError", "RunEndedError",
    "LogLine", "follow_run_logs", "get_run_logs", "MetricPoint", "AttemptSummary", "RunMetrics",
    "get_run_metrics", "RunConfig", "Run", "RunStatus", "create_run", "get_run", "get_runs",
    "stop_run", "stop_runs", "update_run", "delete_run", "restart_run", "clone_run",
    "wait_for_run_status",
]
