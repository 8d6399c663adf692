"""Fine-tuning from another run: weights by name and shape, a new head where the classes differ,
the head trained alone for --freeze-epochs, the origin recorded."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_config

from quicktrain import train
from quicktrain.errors import ConfigError

RESNET = {"model.name": "test_resnet", "run.keep_checkpoints": 3}


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A finished 10-class run to start from."""
    folder = tmp_path_factory.mktemp("source")
    train(tiny_config(folder, **RESNET))
    return folder


def _params(state: dict, names) -> dict:
    return {k: v for k, v in state.items() if k in names}


def test_fine_tuning_from_a_run_folder_with_a_new_head_trained_alone_first(tmp_path, source):
    cfg = tiny_config(
        tmp_path,
        **RESNET,
        **{"data.dataset": "synthetic:5", "model.pretrained": str(source), "optim.freeze_epochs": 1, "run.epochs": 2},
    )
    result = train(cfg)
    origin = result.summary["origin"]
    assert origin["source_run"] == str(source) and origin["weights"].endswith("model.pt")
    assert origin["reinitialised"] == ["fc.bias", "fc.weight"] and origin["why"] == "10 -> 5 classes"
    assert origin["source_model"] == "test_resnet" and result.summary["freeze_epochs"] == 1

    start = torch.load(source / "model.pt", weights_only=True)
    from quicktrain.models import create_model

    body = [n for n, _ in create_model("test_resnet", 5).named_parameters() if not n.startswith("fc.")]
    ckpts = sorted((tmp_path / "checkpoints").glob("checkpoint-epoch*.pt"))
    after_head_epoch = torch.load(ckpts[0], weights_only=True)["model"]
    after_all = torch.load(ckpts[-1], weights_only=True)["model"]
    for name in body:  # epoch 1: only the head moved
        torch.testing.assert_close(after_head_epoch[name], start[name], rtol=0, atol=0)
    assert any(not torch.equal(after_all[n], start[n]) for n in body)  # epoch 2: everything trains
    assert after_head_epoch["fc.weight"].shape == (5, 64)


def test_the_same_number_of_other_classes_gets_a_new_head_too(tmp_path, source):
    cfg = tiny_config(tmp_path, **RESNET, **{"data.dataset": "sample", "model.pretrained": str(source / "model.pt")})
    origin = train(cfg).summary["origin"]
    assert origin["reinitialised"] == ["fc.bias", "fc.weight"]
    assert origin["why"] == "the source run's classes differ from this dataset's"


def test_same_classes_keep_the_head_and_bad_paths_are_clear(tmp_path, source):
    origin = train(tiny_config(tmp_path / "a", **RESNET, **{"model.pretrained": str(source)})).summary["origin"]
    assert origin["reinitialised"] == [] and origin["why"] == ""
    with pytest.raises(ConfigError, match="is a folder without best.pt or model.pt"):
        train(tiny_config(tmp_path / "b", **RESNET, **{"model.pretrained": str(tmp_path)}))
    with pytest.raises(ConfigError, match="needs --pretrained"):
        tiny_config(tmp_path / "c", **{"optim.freeze_epochs": 1})
