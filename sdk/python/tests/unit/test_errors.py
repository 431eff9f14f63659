"""Each status code is its own exception, carrying the message and the field it names."""

import grpc
import pytest

import tessera_sdk
from tessera_sdk.errors import field_of, from_rpc_error


class FakeRpcError(grpc.RpcError):
    def __init__(self, code, details):
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


@pytest.mark.parametrize("message, field", [
    ("compute.gpus: must be a non-negative integer, got -2", "compute.gpus"),
    ("spec_text: line 4, column 9: compute.gpus: must be ...", "compute.gpus"),
    ("spec_text: compute.gpus: must be ...", "compute.gpus"),
    ("filter.metadata.team: a value has at most 4096 bytes", "filter.metadata.team"),
    ("env_variables[2].key: must not be empty", "env_variables[2].key"),
    ("max_retries: must be between 0 and 1000, got -1", "max_retries"),
    ("spec_text: line 2, column 1: YAML syntax error: bad", None),
    ("run sdk-x not found", None),
    ("nothing to update: set max_duration_hours, priority", None),
])
def test_the_field_a_message_names(message, field):
    assert field_of(message) == field


def test_codes_map_to_exceptions_a_caller_can_catch_by_kind():
    e = from_rpc_error(FakeRpcError(grpc.StatusCode.INVALID_ARGUMENT, "compute.gpus: bad"))
    assert isinstance(e, tessera_sdk.InvalidArgumentError) and isinstance(e, ValueError)
    assert e.field == "compute.gpus" and e.message == "compute.gpus: bad"
    assert "INVALID_ARGUMENT" in str(e)
    assert isinstance(from_rpc_error(FakeRpcError(grpc.StatusCode.NOT_FOUND, "x")), LookupError)
    assert isinstance(from_rpc_error(FakeRpcError(grpc.StatusCode.UNAUTHENTICATED, "x")),
                      tessera_sdk.AuthenticationError)
    assert isinstance(from_rpc_error(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "x")),
                      ConnectionError)
    assert isinstance(from_rpc_error(FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "x")),
                      TimeoutError)
    other = from_rpc_error(FakeRpcError(grpc.StatusCode.INTERNAL, "internal error (ref 1-2)"))
    assert type(other) is tessera_sdk.TesseraError
