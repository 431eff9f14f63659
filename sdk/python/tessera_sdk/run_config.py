"""A run's configuration, with the run YAML's fields (as mcli's RunConfig): read from a file or a
dict, changed in code, and sent as written. The server reads it as mcli reads a file (its older
field names and value forms: ``priority: low``, ``env_variables`` as a mapping, ``gpu_num``),
so what it accepts and the errors it gives are the same as `mcli run -f`'s."""

import copy
import dataclasses
import json
from typing import Any, Dict, List, Optional, Union

from .errors import InvalidArgumentError

__all__ = ["RunConfig"]

_FIELDS = ("name", "image", "command", "compute", "scheduling", "env_variables", "parameters",
           "metadata", "integrations", "launch", "secrets")


@dataclasses.dataclass
class RunConfig:
    name: Optional[str] = None
    image: Optional[str] = None
    command: Optional[str] = None
    compute: Dict[str, Any] = dataclasses.field(default_factory=dict)
    scheduling: Dict[str, Any] = dataclasses.field(default_factory=dict)
    # A mapping (NAME: value) or mcli's list of {key, value}.
    env_variables: Union[Dict[str, str], List[Dict[str, str]], None] = None
    parameters: Dict[str, Any] = dataclasses.field(default_factory=dict)
    metadata: Dict[str, str] = dataclasses.field(default_factory=dict)
    integrations: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    launch: Optional[str] = None  # "node" (mcli's default) or "rank"
    secrets: Union[List[str], str, None] = None  # names, or "all"
    # Fields this class does not name (an older mcli field, a newer one): sent as they are, for
    # the server to read or to refuse by name.
    extra: Dict[str, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_dict(cls, document: Dict[str, Any]) -> "RunConfig":
        """From a run YAML's fields, as a dict."""
        if not isinstance(document, dict):
            raise InvalidArgumentError(
                f"a run config is a mapping of fields, not {type(document).__name__}")
        known = {k: copy.deepcopy(v) for k, v in document.items() if k in _FIELDS}
        extra = {k: copy.deepcopy(v) for k, v in document.items() if k not in _FIELDS}
        for key in ("compute", "scheduling", "parameters", "metadata"):
            if known.get(key) is None:
                known.pop(key, None)
        if known.get("integrations") is None:
            known.pop("integrations", None)
        return cls(**known, extra=extra)

    @classmethod
    def from_file(cls, path: str) -> "RunConfig":
        """From a run YAML (or JSON) file. YAML needs PyYAML (Debian: python3-yaml); a JSON
        file needs nothing more."""
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if text.lstrip().startswith("{"):
            try:
                return cls.from_dict(json.loads(text))
            except ValueError as e:
                raise InvalidArgumentError(f"{path}: not valid JSON: {e}") from None
        try:
            import yaml  # type: ignore
        except ImportError:
            raise ImportError(f"reading the run YAML {path} needs PyYAML (Debian: python3-yaml; "
                              "pip install tessera-sdk[yaml])") from None
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise InvalidArgumentError(f"{path}: not valid YAML: {e}") from None
        return cls.from_dict(document or {})

    def to_dict(self) -> Dict[str, Any]:
        """The fields that are set, as the run YAML has them."""
        out: Dict[str, Any] = {}
        for key in _FIELDS:
            value = getattr(self, key)
            if value is None or (isinstance(value, (dict, list)) and not value):
                continue
            out[key] = copy.deepcopy(value)
        for key, value in self.extra.items():
            out.setdefault(key, copy.deepcopy(value))
        return out

    def to_json(self) -> str:
        """What the SDK sends: the fields as a JSON object (SubmitRunRequest.spec_text)."""
        try:
            return json.dumps(self.to_dict(), allow_nan=False, default=_not_json)
        except ValueError as e:
            raise InvalidArgumentError(f"a run config must be JSON data: {e}") from None

    def to_yaml(self) -> str:
        """The fields as a run YAML `mcli run -f` takes (needs PyYAML)."""
        import yaml  # type: ignore
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


def _not_json(value):
    raise ValueError(f"{type(value).__name__} {value!r} is not JSON data")
