"""Where the SDK's settings come from, as mcli reads them, highest first: the arguments given to
`connect`, the TESSERA_ENDPOINT / TESSERA_API_KEY / TESSERA_CA environment variables, the config
file ($TESSERA_CONFIG or ~/.tessera/config.yaml: keys ``endpoint``, ``api_key``, ``ca``, which
``mcli set`` writes), then the default endpoint 127.0.0.1:50051."""

import dataclasses
import json
import os
from typing import Callable, Dict, Mapping, Optional

from .errors import ConfigError

__all__ = ["Settings", "resolve_settings", "config_path", "read_config_file"]

DEFAULT_ENDPOINT = "127.0.0.1:50051"


@dataclasses.dataclass(frozen=True)
class Settings:
    endpoint: str
    api_key: str
    ca: str  # the cluster CA's PEM file ("" for none)
    # Where each came from ("argument", "TESSERA_ENDPOINT", "config file", "default").
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __repr__(self) -> str:  # never the key itself
        key = "(not set)" if not self.api_key else f"{self.api_key[:4]}…"
        return f"Settings(endpoint={self.endpoint!r}, api_key={key!r}, ca={self.ca!r})"


def config_path(env: Mapping[str, str] = os.environ) -> str:
    """$TESSERA_CONFIG, else ~/.tessera/config.yaml."""
    if env.get("TESSERA_CONFIG"):
        return env["TESSERA_CONFIG"]
    return os.path.join(os.path.expanduser("~"), ".tessera", "config.yaml")


def _unquote(value: str, path: str, line_number: int) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            return json.loads(value)
        except ValueError:
            pass
    elif len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    elif value[:1] in ("'", '"', "[", "{", "|", ">", "&", "*", "!"):
        raise ConfigError(f"{path}: line {line_number}: cannot read {value!r} as a string "
                          "(install PyYAML to read any YAML)")
    return value


def _parse_flat_yaml(text: str, path: str) -> Dict[str, str]:
    """The "key: value" lines mcli writes, for when PyYAML is not installed."""
    values: Dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#") or line == "---":
            continue
        key, sep, value = line.partition(":")
        if not sep or raw[:1].isspace():
            raise ConfigError(f"{path}: line {number}: expected a mapping of strings "
                              "(key: value)")
        value = value.strip()
        if " #" in value and not value.startswith(("'", '"')):
            value = value.split(" #", 1)[0].rstrip()
        values[key.strip()] = _unquote(value, path, number)
    return values


def read_config_file(path: str) -> Dict[str, str]:
    """The config file's values ({} when it does not exist); ConfigError naming the file when
    it cannot be read or is not a mapping of strings."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read {path}: {e}") from None
    try:
        import yaml  # type: ignore
    except ImportError:
        return _parse_flat_yaml(text, path)
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if document is None:
        return {}
    if not isinstance(document, dict) or not all(
            isinstance(k, str) and isinstance(v, (str, int, float)) for k, v in document.items()):
        raise ConfigError(f"{path}: expected a mapping of strings (endpoint, api_key, ca)")
    return {k: str(v) for k, v in document.items()}


def resolve_settings(endpoint: Optional[str] = None, api_key: Optional[str] = None,
                     ca: Optional[str] = None,
                     env: Optional[Mapping[str, str]] = None,
                     read_file: Callable[[str], Dict[str, str]] = read_config_file) -> Settings:
    """Every setting from the first place that gives it (see the module's docstring)."""
    env = os.environ if env is None else env
    path = config_path(env)
    from_file = read_file(path)
    chosen = {}
    sources = {}
    for key, given, variable, default in (("endpoint", endpoint, "TESSERA_ENDPOINT",
                                           DEFAULT_ENDPOINT),
                                          ("api_key", api_key, "TESSERA_API_KEY", ""),
                                          ("ca", ca, "TESSERA_CA", "")):
        for value, source in ((given, "argument"), (env.get(variable), variable),
                              (from_file.get(key), f"config file {path}"), (default, "default")):
            if value:
                chosen[key], sources[key] = value, source
                break
        else:
            chosen[key], sources[key] = default, "default"
    key = chosen["api_key"]
    if key and (any(c.isspace() for c in key) or not key.isprintable() or not key.isascii()):
        # gRPC refuses metadata with such bytes; a pasted "Secret: tsk_..." would get here.
        raise ConfigError(f"the API key from {sources['api_key']} is not one word of visible "
                          "ASCII (a pasted line break or label?)")
    return Settings(chosen["endpoint"], key, chosen["ca"], sources)
