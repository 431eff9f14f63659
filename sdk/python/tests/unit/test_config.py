"""Settings come from where mcli reads them, in its order; a bad setting is one clear error."""

import pytest

from tessera_sdk import ConfigError
from tessera_sdk.config import read_config_file, resolve_settings
from tessera_sdk.connection import make_channel


def write(tmp_path, text):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return str(path)


def test_arguments_then_environment_then_file_then_default(tmp_path):
    path = write(tmp_path, "endpoint: file:1\napi_key: tsk_file\nca: /file/ca.pem\n")
    env = {"TESSERA_CONFIG": path, "TESSERA_API_KEY": "tsk_env"}
    s = resolve_settings(endpoint="arg:2", env=env)
    assert (s.endpoint, s.api_key, s.ca) == ("arg:2", "tsk_env", "/file/ca.pem")
    assert s.sources["endpoint"] == "argument"
    assert s.sources["api_key"] == "TESSERA_API_KEY"
    assert s.sources["ca"].startswith("config file")
    assert "tsk_env" not in repr(s)  # the key is never printed whole

    empty = resolve_settings(env={"TESSERA_CONFIG": str(tmp_path / "missing.yaml")})
    assert (empty.endpoint, empty.api_key, empty.ca) == ("127.0.0.1:50051", "", "")


def test_the_file_mcli_writes_reads_without_pyyaml(tmp_path, monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_yaml(name, *args, **kwargs):
        if name == "yaml":
            raise ImportError("no yaml here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_yaml)
    path = write(tmp_path, "# mcli's settings\nendpoint: \"127.0.0.1:7000\"\n"
                           "api_key: 'tsk_it''s'\nca: /x/ca.pem  # the cluster CA\n")
    assert read_config_file(path) == {"endpoint": "127.0.0.1:7000", "api_key": "tsk_it's",
                                      "ca": "/x/ca.pem"}
    with pytest.raises(ConfigError, match="line 1"):
        read_config_file(write(tmp_path, "endpoint: [a, b]\n"))


def test_a_malformed_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="config.yaml"):
        read_config_file(write(tmp_path, "- just\n- a list\n"))


def test_a_pasted_key_with_a_label_is_refused_without_repeating_it():
    with pytest.raises(ConfigError) as e:
        resolve_settings(api_key="Secret: tsk_abc", env={"TESSERA_CONFIG": "/nonexistent"})
    assert "tsk_abc" not in str(e.value)
    assert "argument" in str(e.value)


def test_plain_text_only_to_loopback():
    def channel(endpoint, ca=""):
        return make_channel(resolve_settings(endpoint=endpoint, ca=ca,
                                             env={"TESSERA_CONFIG": "/nonexistent"}))

    channel("127.0.0.1:50051").close()
    channel("http://localhost:50051").close()
    channel("127.0.0.1:1,127.0.0.1:2").close()  # replicas
    with pytest.raises(ConfigError, match="in clear"):
        channel("10.0.0.5:50051")
    with pytest.raises(ConfigError, match="IP addresses"):
        channel("a.example:1,b.example:2")
    with pytest.raises(ConfigError, match="cannot read the cluster CA"):
        channel("10.0.0.5:50051", ca="/nonexistent/ca.pem")
    with pytest.raises(ConfigError, match="HOST:PORT"):
        channel("no-port")
    # TLS to a remote host with the system's roots: made, not connected.
    channel("https://tessera.example:443").close()
