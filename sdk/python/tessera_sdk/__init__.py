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

# Loaded on first use (PEP 562), so that `import tessera_sdk.progress` in a run's image needs
# neither grpcio nor protobuf.
_EXPORTS = {
    "config": ["Settings", "resolve_settings"],
    "connection": ["Client", "connect", "default_client", "set_default_client"],
    "errors": ["AlreadyExistsError", "AuthenticationError", "ConfigError",
               "DeadlineExceededError", "FailedPreconditionError", "InvalidArgumentError",
               "NotFoundError", "PermissionDeniedError", "ResourceExhaustedError",
               "RunEndedError", "TesseraError", "UnavailableError"],
    "logs": ["LogLine", "follow_run_logs", "get_run_logs"],
    "metrics": ["AttemptSummary", "MetricPoint", "RunMetrics", "get_run_metrics"],
    "run_config": ["RunConfig"],
    "runs": ["Run", "RunStatus", "clone_run", "create_run", "delete_run", "get_run", "get_runs",
             "restart_run", "stop_run", "stop_runs", "update_run", "wait_for_run_status"],
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}


def __getattr__(name):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError("module 'tessera_sdk' has no attribute %r" % name)
    import importlib
    value = getattr(importlib.import_module("." + module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_MODULE_OF))


__version__ = "0.1.0"

__all__ = [name for names in _EXPORTS.values() for name in names]
