"""A RunConfig holds the run YAML's fields, round-trips through files and dicts, and is sent as
JSON for the server to read as mcli reads a file."""

import json

import pytest

from tessera_sdk import InvalidArgumentError, RunConfig
from tessera_sdk._proto import run_spec_pb2
from tessera_sdk.runs import config_of


def test_from_file_yaml_and_json(tmp_path):
    yaml_file = tmp_path / "run.yaml"
    yaml_file.write_text("name: train\nimage: host\ncommand: |\n  python train.py\n"
                         "compute:\n  gpus: 8\nscheduling:\n  priority: low\n"
                         "env_variables:\n  WANDB_MODE: offline\ngpu_num: 8\n")
    config = RunConfig.from_file(str(yaml_file))
    assert config.name == "train"
    assert config.command == "python train.py\n"
    assert config.compute == {"gpus": 8}
    assert config.env_variables == {"WANDB_MODE": "offline"}
    assert config.extra == {"gpu_num": 8}  # an older mcli field: sent for the server to read
    sent = json.loads(config.to_json())
    assert sent["scheduling"] == {"priority": "low"} and sent["gpu_num"] == 8
    assert "parameters" not in sent  # nothing empty is sent

    json_file = tmp_path / "run.json"
    json_file.write_text(json.dumps(config.to_dict()))
    assert RunConfig.from_file(str(json_file)) == config


def test_bad_documents_are_one_clear_error(tmp_path):
    with pytest.raises(InvalidArgumentError, match="mapping"):
        RunConfig.from_dict(["not", "a", "mapping"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(InvalidArgumentError, match="bad.yaml"):
        RunConfig.from_file(str(bad))
    with pytest.raises(InvalidArgumentError, match="JSON data"):
        RunConfig(name="x", parameters={"when": object()}).to_json()


def test_a_runs_spec_as_its_yaml_fields():
    spec = run_spec_pb2.RunSpec(name="train", image="host", command="true",
                                all_secrets=True, launch=run_spec_pb2.LAUNCH_MODE_RANK)
    spec.scheduling.priority = run_spec_pb2.PRIORITY_HIGH
    spec.scheduling.max_duration_hours = 1.5
    spec.env_variables.add(key="A", value="1")
    integration = spec.integrations.add(integration_type="git_repo")
    integration.fields.update({"git_repo": "org/repo"})
    config = config_of(spec)
    assert config.scheduling == {"priority": "high", "max_duration": 1.5}
    assert config.env_variables == {"A": "1"}
    assert config.secrets == "all"
    assert config.launch == "rank"
    assert config.integrations == [{"integration_type": "git_repo", "git_repo": "org/repo"}]
