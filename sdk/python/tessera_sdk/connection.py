"""The connection to a Tessera server: one gRPC channel (TLS as mcli chooses it), the API key on
every call, typed errors, and calls that change something retried with their idempotency key
while the server is unavailable."""

import ipaddress
import json
import random
import time
from typing import Callable, List, Optional, Sequence, Tuple, TypeVar

import grpc

from . import errors
from .config import Settings, resolve_settings

try:
    from ._proto import logs_pb2_grpc, run_metrics_pb2_grpc, runs_pb2_grpc
except ImportError as e:  # pragma: no cover - the source tree without a build
    raise ImportError(
        "tessera_sdk's gRPC stubs are generated when Tessera is built: run deploy/build.sh and "
        "use build/sdk/python (PYTHONPATH=build/sdk/python, or pip install build/sdk/python)"
    ) from e

__all__ = ["Client", "connect", "default_client"]

T = TypeVar("T")

# gRPC's own retries of calls that failed before the server saw them, as mcli's channel has.
_SERVICE_CONFIG = json.dumps({
    "methodConfig": [{
        "name": [{}],
        "retryPolicy": {
            "maxAttempts": 5, "initialBackoff": "0.1s", "maxBackoff": "2s",
            "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"],
        },
    }]
})
# The longest message the SDK takes (a run's whole spec, a page of a thousand runs).
_MAX_MESSAGE = 64 << 20


def _is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _split_host(endpoint: str) -> Tuple[str, str]:
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise errors.ConfigError(f"endpoint {endpoint!r}: expected HOST:PORT")
    return host, port


def _target(endpoints: Sequence[str]) -> str:
    """One HOST:PORT as it is; several (a:1,b:2, replicas) as gRPC's address list, which moves
    to the next when one goes away."""
    if len(endpoints) == 1:
        _split_host(endpoints[0])
        return endpoints[0]
    hosts = [_split_host(e) for e in endpoints]
    try:
        versions = {ipaddress.ip_address(h.strip("[]")).version for h, _ in hosts}
    except ValueError:
        raise errors.ConfigError(
            f"endpoint {','.join(endpoints)!r}: a list of servers must be IP addresses") from None
    if len(versions) != 1:
        raise errors.ConfigError("endpoint: a list of servers must be all IPv4 or all IPv6")
    return f"ipv{versions.pop()}:" + ",".join(endpoints)


def make_channel(settings: Settings) -> grpc.Channel:
    """https://HOST:PORT is TLS (the CA given, or the system's roots); http://HOST:PORT is plain
    text, to loopback only (the key would cross the network in clear); a bare HOST:PORT (or a
    list) is TLS when a CA is set, else plain text to loopback."""
    endpoint = settings.endpoint
    options = [("grpc.service_config", _SERVICE_CONFIG), ("grpc.enable_retries", 1),
               ("grpc.max_receive_message_length", _MAX_MESSAGE),
               ("grpc.keepalive_time_ms", 30_000), ("grpc.keepalive_timeout_ms", 10_000)]
    tls = endpoint.startswith("https://")
    plain = endpoint.startswith("http://")
    bare = endpoint.split("://", 1)[1] if tls or plain else endpoint
    endpoints = [e.strip() for e in bare.split(",") if e.strip()]
    if not endpoints:
        raise errors.ConfigError(f"endpoint {endpoint!r}: expected HOST:PORT")
    target = _target(endpoints)
    if tls or (not plain and settings.ca):
        root = None
        if settings.ca:
            try:
                with open(settings.ca, "rb") as f:
                    root = f.read()
            except OSError as e:
                raise errors.ConfigError(
                    f"cannot read the cluster CA {settings.ca} (from "
                    f"{settings.sources.get('ca', 'settings')}): {e}") from None
        return grpc.secure_channel(target, grpc.ssl_channel_credentials(root), options)
    if not all(_is_loopback(_split_host(e)[0]) for e in endpoints):
        raise errors.ConfigError(
            f"endpoint {endpoint}: plain text would send the API key across the network in "
            "clear; set the cluster CA (TESSERA_CA, ca= or `mcli set ca FILE`) to connect over "
            "TLS, or use https:// for a server with a public certificate")
    return grpc.insecure_channel(target, options)


class Client:
    """A connection to one Tessera cluster. The module's functions use `default_client()`;
    pass `client=` to use another (two clusters, or two keys, in one program)."""

    def __init__(self, settings: Settings, channel: Optional[grpc.Channel] = None):
        self.settings = settings
        self.channel = channel if channel is not None else make_channel(settings)
        self.runs = runs_pb2_grpc.RunServiceStub(self.channel)
        self.logs = logs_pb2_grpc.LogServiceStub(self.channel)
        self.metrics = run_metrics_pb2_grpc.RunMetricsServiceStub(self.channel)
        # How long changes are retried while the server is unavailable (a restart, a failover).
        self.retry_for = 60.0

    def metadata(self) -> List[Tuple[str, str]]:
        if not self.settings.api_key:
            return []
        return [("authorization", f"Bearer {self.settings.api_key}")]

    def call(self, method: Callable[..., T], request, timeout: Optional[float] = 30.0) -> T:
        """One unary call; a failure is its typed TesseraError."""
        try:
            return method(request, metadata=self.metadata(), timeout=timeout)
        except grpc.RpcError as e:
            raise errors.from_rpc_error(e) from None

    def change(self, method: Callable[..., T], request, timeout: Optional[float] = 30.0) -> T:
        """A call that changes something, with its idempotency key set: tried again with the same
        key while the server is unavailable (so it happens once), for up to `retry_for` s."""
        deadline = time.monotonic() + self.retry_for
        pause = 0.25
        while True:
            try:
                return self.call(method, request, timeout)
            except errors.UnavailableError:
                if time.monotonic() + pause > deadline:
                    raise
                time.sleep(pause * random.uniform(0.5, 1.0))
                pause = min(pause * 2, 5.0)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def connect(endpoint: Optional[str] = None, api_key: Optional[str] = None,
            ca: Optional[str] = None) -> Client:
    """A client from these settings, the environment and the config file, as mcli reads them."""
    return Client(resolve_settings(endpoint, api_key, ca))


_default: Optional[Client] = None


def default_client() -> Client:
    """The client the module's functions use: made on first use from the environment and the
    config file (or set by `set_default_client`)."""
    global _default
    if _default is None:
        _default = connect()
    return _default


def set_default_client(client: Optional[Client]) -> None:
    global _default
    _default = client
