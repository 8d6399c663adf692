"""Every registry model builds, runs forward at 32 px, and round-trips its weights."""

import pytest
import torch

from quicktrain.errors import ConfigError
from quicktrain.models import create_model, list_models, load_weights

ALL = [e.name for e in list_models()]
TINY = [e.name for e in list_models() if e.test]


@pytest.mark.parametrize("name", TINY)
def test_tiny_models_forward_and_backward(name):
    torch.manual_seed(0)
    model = create_model(name, num_classes=7, image_size=32)
    x = torch.randn(4, 3, 32, 32)
    out = model(x)
    assert out.shape == (4, 7)
    out.logsumexp(1).mean().backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert sum(p.numel() for p in model.parameters()) < 500_000


@pytest.mark.parametrize("name", [n for n in ALL if n not in TINY])
def test_real_models_forward_at_32px(name):
    model = create_model(name, num_classes=10, image_size=32).eval()
    with torch.no_grad():
        out = model(torch.randn(2, 3, 32, 32))
    assert out.shape == (2, 10) and torch.isfinite(out).all()


@pytest.mark.parametrize("name", ["resnet18", "test_resnet"])
def test_resnets_use_the_cifar_stem_below_64px(name):
    small = create_model(name, num_classes=10, image_size=32)
    large = create_model(name, num_classes=10, image_size=224)
    first = next(m for m in small.modules() if isinstance(m, torch.nn.Conv2d))
    assert first.kernel_size == (3, 3) and first.stride == (1, 1)
    assert isinstance(small.maxpool, torch.nn.Identity)
    assert not isinstance(large.maxpool, torch.nn.Identity)
    with torch.no_grad():  # no downsampling before the first block: 32 px -> 4 px at the end
        assert small.forward_features(torch.zeros(1, 3, 32, 32)).shape[-1] == 4


def test_vit_uses_patch_4_at_32px():
    model = create_model("vit_tiny", num_classes=10, image_size=32)
    assert model.patch_embed.patch_size == (4, 4)
    assert model.patch_embed.num_patches == 64


def test_local_weights_load_safely_and_skip_mismatched_head(tmp_path):
    torch.manual_seed(0)
    source = create_model("test_resnet", num_classes=100)
    path = tmp_path / "weights.pt"
    torch.save(source.state_dict(), path)
    target = create_model("test_resnet", num_classes=10)
    skipped = load_weights(target, path)
    assert skipped == ["fc.bias", "fc.weight"]
    torch.testing.assert_close(target.layer1[0].conv1.weight, source.layer1[0].conv1.weight)
    loaded = create_model("test_resnet", num_classes=100, pretrained=str(path))
    torch.testing.assert_close(loaded.fc.weight, source.fc.weight)


def test_bad_weights_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="is not a file"):
        create_model("test_resnet", num_classes=10, pretrained=str(tmp_path / "missing.pt"))
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(ConfigError, match="is not a quicktrain checkpoint"):
        create_model("test_resnet", num_classes=10, pretrained=str(bad))
    other = tmp_path / "other.pt"
    torch.save({"something.else": torch.zeros(3)}, other)
    with pytest.raises(ConfigError, match="no tensor"):
        create_model("test_resnet", num_classes=10, pretrained=str(other))


def test_unknown_model_lists_the_accepted_names():
    with pytest.raises(ConfigError, match="unknown model 'resnet9000'; accepted: resnet18"):
        create_model("resnet9000", num_classes=10)


def test_hub_download_failure_is_a_clear_error(monkeypatch):
    """No network in tests: simulate what timm raises offline."""
    import timm

    def offline(*args, pretrained=False, **kwargs):
        if pretrained:
            raise OSError("We couldn't connect to 'https://huggingface.co'\nto load this file")
        return real(*args, **kwargs)

    real = timm.create_model
    monkeypatch.setattr(timm, "create_model", offline)
    with pytest.raises(ConfigError, match="fetching ImageNet weights for 'efficientnet_b0' failed.*are you online"):
        create_model("efficientnet_b0", num_classes=10, pretrained="hub")


def test_drop_path_and_model_kwargs_reach_the_timm_constructor(tmp_path):
    from timm.layers import DropPath

    from quicktrain.config import ModelConfig, model_keywords

    keywords = model_keywords(ModelConfig(drop_path=0.2, model_kwargs=["drop_rate=0.1", "qkv_bias=false"]))
    assert keywords == {"drop_rate": 0.1, "qkv_bias": False, "drop_path_rate": 0.2}
    model = create_model("vit_tiny", 10, 32, kwargs=keywords)
    rates = [m.drop_prob for m in model.modules() if isinstance(m, DropPath)]
    assert rates and max(rates) == pytest.approx(0.2)  # timm's linear rule: the last block drops at the rate
    assert model.blocks[0].attn.qkv.bias is None and model.head_drop.p == 0.1
    plain = create_model("vit_tiny", 10, 32)
    assert not any(isinstance(m, DropPath) for m in plain.modules())


def test_keywords_a_model_does_not_take_are_a_clear_error():
    with pytest.raises(ConfigError, match="speedrun_net' does not take the keywords drop_path_rate=0.1"):
        create_model("speedrun_net", 10, 32, kwargs={"drop_path_rate": 0.1})


def test_speedrun_net_takes_silu_in_its_groups_and_names_the_accepted_activations():
    silu = create_model("speedrun_net", 10, 32, kwargs={"activation": "silu"})
    kinds = {type(m).__name__ for m in silu.body[1:].modules()}
    assert "SiLU" in kinds and "GELU" not in kinds
    assert isinstance(silu.body[0], torch.nn.GELU)  # the whitening layer's activation stays
    plain = create_model("speedrun_net", 10, 32)
    assert "SiLU" not in {type(m).__name__ for m in plain.modules()}
    assert silu(torch.randn(2, 3, 32, 32)).shape == (2, 10)
    with pytest.raises(ConfigError, match="activation='relu' is not one of gelu, silu"):
        create_model("speedrun_net", 10, 32, kwargs={"activation": "relu"})


def test_a_run_records_its_model_keywords_and_evaluate_rebuilds_with_them(tmp_path):
    from conftest import tiny_config

    from quicktrain import train
    from quicktrain.inference import load_run

    cfg = tiny_config(tmp_path, **{"model.name": "test_vit", "model.model_kwargs": ["mlp_ratio=1.0"]})
    result = train(cfg)
    assert result.summary["model_kwargs"] == {"mlp_ratio": 1.0}
    loaded = load_run(tmp_path)  # an mlp_ratio-2 model would not take these weights
    assert loaded.model.blocks[0].mlp.fc1.out_features == 32


def test_grad_checkpointing_gives_the_same_gradients_and_is_refused_where_missing(tmp_path):
    from conftest import tiny_config

    from quicktrain import train
    from quicktrain.techniques.checkpointing import GradCheckpointing

    grads = []
    for on in (False, True):
        torch.manual_seed(0)
        model = GradCheckpointing(on).prepare_model(create_model("test_vit", 10, 32)).train()
        model(torch.randn(4, 3, 32, 32)).square().sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    assert model.grad_checkpointing  # timm's flag, set by the technique
    for a, b in zip(*grads, strict=True):
        torch.testing.assert_close(a, b)
    assert train(tiny_config(tmp_path / "a", **{"model.grad_checkpointing": True})).summary["grad_checkpointing"]
    with pytest.raises(ConfigError, match="has no set_grad_checkpointing"):
        train(tiny_config(tmp_path / "b", **{"model.name": "speedrun_net", "model.grad_checkpointing": True}))
