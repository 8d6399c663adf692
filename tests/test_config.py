from pathlib import Path

import pytest

from quicktrain.config import Config, known_keys, load_yaml, parse_override
from quicktrain.errors import ConfigError
from quicktrain.techniques.accumulation import resolve as resolve_accumulation

REPO = Path(__file__).resolve().parents[1]


def test_defaults_are_the_offline_quickstart():
    cfg = Config()
    assert cfg.data.dataset == "sample"
    assert split(cfg) == (cfg.run.batch_size, 1)


def test_quickstart_preset_equals_the_defaults():
    assert Config.load(REPO / "configs" / "quickstart.yaml") == Config()


@pytest.mark.parametrize("preset", sorted((REPO / "configs").glob("*.yaml")))
def test_every_preset_loads(preset):
    Config.load(preset)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"run.batch_size": 128, "techniques.micro_batch_size": 32}, (32, 4)),
        ({"run.batch_size": 128, "techniques.accum_steps": 8}, (16, 8)),
        ({"run.batch_size": 96, "techniques.micro_batch_size": 24, "techniques.accum_steps": 4}, (24, 4)),
    ],
)
def test_accumulation_is_derived_from_the_effective_batch(overrides, expected):
    assert split(Config.from_overrides(overrides)) == expected


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"run.batch_size": 100, "techniques.micro_batch_size": 32}, "not divisible"),
        ({"run.batch_size": 100, "techniques.accum_steps": 3}, "not divisible"),
        ({"run.batch_size": 64, "techniques.micro_batch_size": 16, "techniques.accum_steps": 2}, "set one"),
        ({"optim.lr": 0.0}, "optim.lr=0.0 must be positive"),
        ({"run.epochs": -1}, "run.epochs=-1 must be positive"),
        ({"run.batch_size": 0}, "run.batch_size=0 must be positive"),
        ({"optim.lrr": 0.1}, "unknown config key 'optim.lrr'"),
        ({"nosection.lr": 0.1}, "unknown config key 'nosection.lr'"),
        ({"optim.lr": "fast"}, "optim.lr='fast' has the wrong type; expected float"),
        ({"run.epochs": 1.5}, "expected int"),
        ({"techniques.amp": "fp8"}, "choose one of: off, bf16, fp16, auto"),
        ({"techniques.pin_memory": "yes"}, "expected bool"),
        ({"run.target_accuracy": 90}, "fraction"),
        ({"run.device": "tpu"}, "run.device='tpu'"),
        ({"optim.muon_ns_steps": 0}, "optim.muon_ns_steps=0 must be >= 1"),
    ],
)
def test_bad_values_name_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Config.from_overrides(overrides)


def test_config_is_frozen():
    with pytest.raises(AttributeError):
        Config().optim.lr = 1.0  # type: ignore[misc]


def test_yaml_round_trip_and_overrides_on_top(tmp_path):
    cfg = Config.from_overrides({"optim.lr": 0.05, "techniques.amp": "off", "model.name": "vit_tiny"})
    path = tmp_path / "c.yaml"
    path.write_text(cfg.to_yaml())
    assert Config.load(path) == cfg
    assert Config.load(path, {"run.epochs": 7}).run.epochs == 7
    assert Config.load(path, {"run.epochs": 7}).optim.lr == 0.05


def test_yaml_off_is_a_string_not_false(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("techniques:\n  amp: off\n  pin_memory: true\n")
    cfg = Config.load(path)
    assert cfg.techniques.amp == "off" and cfg.techniques.pin_memory is True
    assert load_yaml("off") == "off"


def test_preset_with_unknown_key_fails(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("optim:\n  learning_rate: 0.1\n")
    with pytest.raises(ConfigError, match="unknown config key 'optim.learning_rate'"):
        Config.load(path)


def test_parse_override_reads_yaml_values():
    assert parse_override("optim.lr=0.05") == ("optim.lr", 0.05)
    assert parse_override("model.pretrained=null") == ("model.pretrained", None)
    with pytest.raises(ConfigError, match="section.key=value"):
        parse_override("lr")


def test_known_keys_cover_every_section():
    keys = known_keys()
    assert {"optim.lr", "techniques.amp", "run.batch_size", "data.dataset", "model.name"} <= set(keys)


def test_every_key_has_one_help_text_that_the_cli_shows(capsys):
    from quicktrain.cli import main
    from quicktrain.config import known_keys, option_help

    for key in known_keys():
        assert len(option_help(key)) > 10, key
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    shown = " ".join(capsys.readouterr().out.split())  # argparse re-wraps lines
    for key in ("run.max_time", "optim.schedule", "data.loader"):
        assert " ".join(option_help(key).split()) in shown, key


def split(cfg) -> tuple[int, int]:
    """(micro-batch size, accumulation steps) the accumulation technique derives from ``cfg``."""
    return resolve_accumulation(cfg).split
