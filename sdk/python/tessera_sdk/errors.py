"""Typed exceptions for what the API answers, each carrying the server's message and, where the
message names one, the field it is about (``InvalidArgumentError.field == "compute.gpus"``)."""

import re
from typing import Optional

import grpc

__all__ = [
    "TesseraError", "ConfigError", "InvalidArgumentError", "NotFoundError", "AlreadyExistsError",
    "PermissionDeniedError", "AuthenticationError", "FailedPreconditionError",
    "ResourceExhaustedError", "UnavailableError", "DeadlineExceededError", "RunEndedError",
    "field_of", "from_rpc_error",
]

# A field path as the server writes one at the start of a message: compute.gpus,
# filter.metadata.team, env_variables[2].key.
_FIELD = re.compile(r"^[a-z_][a-z0-9_]*(\.[A-Za-z0-9_\-]+|\[\d+\])*$")
# A position in a run YAML the server read ("line 4, column 9").
_POSITION = re.compile(r"^line \d+, column \d+$")
# What wraps the spec's own field: the request's field that carried it.
_WRAPPERS = {"spec", "spec_text", "request body"}


def field_of(message: str) -> Optional[str]:
    """The field a server message names: the most specific field path of its leading
    ``path: `` parts ("spec_text: line 4, column 9: compute.gpus: must be ..." names
    compute.gpus), or None when it names none."""
    field = None
    parts = message.split(": ")
    for part in parts[:-1]:
        if _POSITION.match(part):
            continue
        if _FIELD.match(part):
            field = part
            continue
        break
    if field in _WRAPPERS and len(parts) > 2:
        return None
    return field


class TesseraError(Exception):
    """A call that failed: `code` (a grpc.StatusCode, None for a local problem), `message` (the
    server's words) and `field` (the field it names, or None)."""

    def __init__(self, message: str, code: Optional[grpc.StatusCode] = None,
                 field: Optional[str] = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.field = field

    def __str__(self) -> str:
        if self.code is None:
            return self.message
        return f"{self.message} ({self.code.name})"


class ConfigError(TesseraError):
    """The SDK's settings are wrong (an endpoint it may not use in plain text, a CA it cannot
    read, a malformed config file): nothing was sent."""


class InvalidArgumentError(TesseraError, ValueError):
    """The request (a run config, a filter) is wrong; `field` says where."""


class NotFoundError(TesseraError, LookupError):
    """No such run (or not one you may see)."""


class AlreadyExistsError(TesseraError):
    pass


class PermissionDeniedError(TesseraError, PermissionError):
    """Your key's role may not do this."""


class AuthenticationError(TesseraError):
    """The API key is missing, wrong, expired or revoked."""


class FailedPreconditionError(TesseraError):
    """Not in the run's present state (restarting a run that has not ended ...)."""


class ResourceExhaustedError(TesseraError):
    """A limit was reached (submits per second, waiting runs, streams); the message names it."""


class UnavailableError(TesseraError, ConnectionError):
    """The server could not be reached, or is restarting."""


class DeadlineExceededError(TesseraError, TimeoutError):
    """The call, or a wait, took longer than its timeout."""


class RunEndedError(TesseraError):
    """A wait for a status the run can no longer reach: it ended otherwise. `run` is the run as
    it ended (its status and reason)."""

    def __init__(self, message: str, run):
        super().__init__(message, None, None)
        self.run = run


_BY_CODE = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.OUT_OF_RANGE: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.UNAUTHENTICATED: AuthenticationError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
}


def from_rpc_error(error: grpc.RpcError) -> TesseraError:
    """The typed exception for a failed call."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    message = (error.details() if hasattr(error, "details") else None) or str(code)
    return _BY_CODE.get(code, TesseraError)(message, code, field_of(message))
