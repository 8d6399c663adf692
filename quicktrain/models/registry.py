"""Model registry: a name -> factory table, with tiny ``test_*`` models beside real ones.

Example:
    >>> from quicktrain.models import create_model
    >>> model = create_model("test_resnet", num_classes=10, image_size=32)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from quicktrain.errors import ConfigError
from quicktrain.models.entry import _REGISTRY, ModelEntry
from quicktrain.models.external import is_external, resolve_external
from quicktrain.weights_file import read_weights


def list_models(include_test: bool = True) -> list[ModelEntry]:
    return [e for e in _REGISTRY.values() if include_test or not e.test]


def check_model(name: str) -> ModelEntry:
    """The entry for ``name``: a registered model, ``timm:NAME`` or a factory reference
    (``file.py:make``, ``package.module:make``); else a ConfigError listing what is accepted."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    if is_external(name):
        return resolve_external(name)
    raise ConfigError(
        f"unknown model '{name}'; accepted: {', '.join(_REGISTRY)}, timm:NAME (any timm architecture, see "
        "'quicktrain models --timm PATTERN'), or your factory as path/to/file.py:make or package.module:make"
    )


def create_model(
    name: str,
    num_classes: int,
    image_size: int = 32,
    pretrained: str | None = None,
    kwargs: dict[str, Any] | None = None,
) -> nn.Module:
    """Build a registered model; ``pretrained`` is a local state-dict path or ``"hub"``; ``kwargs``
    go to its constructor (timm's, e.g. ``drop_path_rate``)."""
    entry = check_model(name)
    kwargs = kwargs or {}
    if pretrained != "hub":
        model = _call(entry, name, num_classes, image_size, False, kwargs)
    else:
        try:
            model = _call(entry, name, num_classes, image_size, True, kwargs)
        except ConfigError:
            raise
        except Exception as err:  # hub and network errors come in many types
            raise ConfigError(
                f"model.pretrained=hub: fetching ImageNet weights for '{name}' failed "
                f"({type(err).__name__}: {' '.join(str(err).split())}); "
                "are you online? Or pass a local state-dict file"
            ) from None
    if pretrained not in (None, "hub"):
        load_weights(model, pretrained)
    return model


def _call(entry: ModelEntry, name: str, num_classes: int, image_size: int, hub: bool, kwargs: dict) -> nn.Module:
    if not kwargs:
        return entry.factory(num_classes, image_size, hub)
    try:
        return entry.factory(num_classes, image_size, hub, **kwargs)
    except TypeError as err:  # a keyword the constructor does not take
        if "keyword" not in str(err) and "argument" not in str(err):
            raise
        raise ConfigError(
            f"model '{name}' does not take the keywords {', '.join(f'{k}={v!r}' for k, v in kwargs.items())} "
            f"({' '.join(str(err).split())}); --drop-path and --model-kwargs go to timm models and to factories "
            "that accept them"
        ) from None


def load_weights(model: nn.Module, path: str | Path) -> list[str]:
    """Load a local state dict safely (weights only); skip tensors whose shape differs.

    Returns the names that were not loaded (e.g. a 1000-class head into a 10-class model).
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"model.pretrained='{path}' is not a file; give a state-dict path or 'hub'")
    state = read_weights(path, path, "model.pretrained: ")
    if not isinstance(state, dict):
        raise ConfigError(f"model.pretrained: '{path}' holds a {type(state).__name__}, not a state dict")
    if "model" in state and isinstance(state["model"], dict):
        state = state["model"]  # a quicktrain checkpoint
    own = model.state_dict()
    usable = {k: v for k, v in state.items() if k in own and own[k].shape == v.shape}
    if not usable:
        raise ConfigError(f"no tensor in '{path}' matches the model's parameters by name and shape")
    model.load_state_dict(usable, strict=False)
    return sorted(set(own) - set(usable))
