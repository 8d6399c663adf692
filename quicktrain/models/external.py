"""Models from outside the registry, resolved through the same :func:`create_model`:

- ``timm:NAME``: any of timm's architectures (``timm:convnext_atto``); ``--pretrained hub`` works
  as for the built-ins. Below 64 px the families quicktrain knows take their small-input form
  (ResNets: 3x3 stride-1 stem without max-pool; ViTs: 4x4 patches); any other net is used
  unchanged, and the banner says so.
- ``path/to/file.py:make`` or ``package.module:make``: the user's factory,
  ``make(num_classes, image_size, **keywords) -> nn.Module`` (keywords only with ``--drop-path`` /
  ``--model-kwargs``). Named by path, it is found again in every
  subprocess and rank (``ablate``, ``tune``, ``autotune``, torchrun), which an object registered
  in the user's own process would not be.

Example:
    >>> entry = resolve_external("timm:resnet10t")
    >>> entry.note(32)
    'timm ResNet: CIFAR stem (3x3 stride 1, no max-pool) below 64 px'
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from torch import nn

from quicktrain.errors import ConfigError
from quicktrain.models.entry import ModelEntry
from quicktrain.models.nets import SMALL_INPUT, cifar_stem

TIMM_PREFIX = "timm:"
_VIT_MODULES = ["vision_transformer", "deit"]


def is_external(name: str) -> bool:
    return name.startswith(TIMM_PREFIX) or ":" in name


def resolve_external(name: str) -> ModelEntry:
    """A registry entry for ``timm:NAME`` or a factory reference; ConfigError if it cannot be found."""
    if name.startswith(TIMM_PREFIX):
        return _timm_entry(name, name[len(TIMM_PREFIX) :])
    return _factory_entry(name)


# ---- timm ------------------------------------------------------------------------------------
def _timm_entry(name: str, arch: str) -> ModelEntry:
    import timm

    if not timm.is_model(arch):
        raise ConfigError(
            f"unknown timm model '{arch}' in model.name={name!r}; list names with: quicktrain models --timm "
            f"'*{arch[:8]}*'"
        )
    vit = timm.models.is_model_in_modules(arch, _VIT_MODULES)

    def factory(num_classes: int, image_size: int, hub: bool, **extra) -> nn.Module:
        from timm.models.resnet import ResNet

        kwargs: dict[str, int] = {}
        if vit:  # position embeddings for this size; timm resamples pretrained ones
            kwargs = {"img_size": image_size, **({"patch_size": 4} if image_size < SMALL_INPUT else {})}
        model = timm.create_model(arch, pretrained=hub, num_classes=num_classes, **{**kwargs, **extra})
        if isinstance(model, ResNet) and image_size < SMALL_INPUT:
            model = cifar_stem(model)
        return model

    def note(image_size: int) -> str:
        if image_size >= SMALL_INPUT:
            return f"timm {arch}" + (f" at img_size {image_size}" if vit else ", used unchanged")
        if vit:
            return f"timm ViT: 4x4 patches and img_size {image_size} below {SMALL_INPUT} px"
        if timm.models.is_model_in_modules(arch, ["resnet"]):
            return f"timm ResNet: CIFAR stem (3x3 stride 1, no max-pool) below {SMALL_INPUT} px"
        return (
            f"used unchanged: timm {arch} keeps its ImageNet stem at {image_size} px (it may downsample early; "
            "--image-size 224 upsamples on the device)"
        )

    return ModelEntry(name, factory, f"timm architecture {arch}", note=note)


# ---- the user's factory ----------------------------------------------------------------------
def _factory_entry(spec: str) -> ModelEntry:
    target, _, function = spec.rpartition(":")
    if not target or not function.isidentifier():
        raise ConfigError(
            f"model.name={spec!r} is neither a registered model, timm:NAME, nor a factory "
            "'path/to/file.py:make' or 'package.module:make'"
        )
    module = _load_module(spec, target)
    make = getattr(module, function, None)
    if not callable(make):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise ConfigError(
            f"model factory {spec!r}: '{target}' has no function '{function}'; functions there: "
            f"{', '.join(found) or 'none'}"
        )

    def factory(num_classes: int, image_size: int, hub: bool, **extra) -> nn.Module:
        if hub:
            raise ConfigError(
                f"model.pretrained=hub needs a registered or timm: model; {spec!r} is your own factory: load "
                "weights inside it, or pass --pretrained PATH to a state dict"
            )
        try:
            model = make(num_classes, image_size, **extra)
        except Exception as err:
            if extra and isinstance(err, TypeError) and ("keyword" in str(err) or "argument" in str(err)):
                raise  # create_model names the keywords it was given
            raise ConfigError(
                f"model factory {spec!r} failed: {type(err).__name__}: {err} (it is called as "
                f"{function}(num_classes={num_classes}, image_size={image_size}))"
            ) from None
        if not isinstance(model, nn.Module):
            raise ConfigError(f"model factory {spec!r} returned {type(model).__name__}, not a torch.nn.Module")
        return model

    return ModelEntry(spec, factory, f"your factory {function}() in {target}", note=_unchanged)


# ---- code named by a run record ---------------------------------------------------------------
def factory_file(name: str) -> Path | None:
    """The file a ``path/to/file.py:make`` model name imports (resolved); None for other names."""
    if name.startswith(TIMM_PREFIX) or ":" not in name:
        return None
    target = name.rpartition(":")[0]
    if not (target.endswith(".py") or "/" in target or "\\" in target):
        return None  # package.module:make imports installed code, not a file
    return Path(target).expanduser().resolve()


def code_record(name: str) -> dict[str, str] | None:
    """What a run records of its factory file (the record's ``model_code``): path and sha256."""
    path = factory_file(name)
    if path is None or not path.is_file():
        return None
    return {"file": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}


def check_recorded_code(name: str, run_folder: Path, recorded: dict[str, str] | None, trust: bool) -> str | None:
    """Whether a run record's factory file may be imported (transformers' ``trust_remote_code``).

    Without ``trust`` it is imported only when it lies outside the run folder, where the record
    says, with the sha256 the record holds: code that travelled with a folder from someone else
    never runs uninvited. Returns a line for the banner when a file will be imported."""
    path = factory_file(name)
    if path is None:
        return None
    inside = run_folder.resolve() in path.parents
    if not path.is_file():
        problem = "does not exist"
    elif inside:
        problem = "lies inside the run folder"
    elif not recorded or recorded.get("file") != str(path):
        problem = "is not the file the run's record says it trained with"
    elif hashlib.sha256(path.read_bytes()).hexdigest() != recorded.get("sha256"):
        problem = "has changed since the run was trained: its sha256 differs"
    else:
        return f"model code '{path}' imported (the file the run was trained with, sha256 as recorded)"
    if not trust:
        raise ConfigError(
            f"the run's model.name imports code '{path}', which {problem}; quicktrain runs it only with --trust-code"
        )
    where = "from the run folder " if inside else ""
    return f"model code '{path}' imported {where}with --trust-code ({problem})"


def _unchanged(image_size: int) -> str:
    return "your factory's model, used as it returns it"


def _load_module(spec: str, target: str) -> ModuleType:
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target).expanduser().resolve()
        if not path.is_file():
            raise ConfigError(f"model factory {spec!r}: file '{target}' does not exist")
        # one module per file, under a name that cannot clash with the user's packages
        # (and content: a file edited since it was imported in this process is imported anew)
        name = f"quicktrain_user_model_{hashlib.sha1(str(path).encode() + path.read_bytes()).hexdigest()[:12]}"
        if name in sys.modules:
            return sys.modules[name]
        loader_spec = importlib.util.spec_from_file_location(name, path)
        assert loader_spec is not None and loader_spec.loader is not None
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module  # dataclasses and pickling look modules up by name
        try:
            loader_spec.loader.exec_module(module)
        except Exception as err:
            del sys.modules[name]
            raise ConfigError(
                f"model factory {spec!r}: importing '{target}' failed: {type(err).__name__}: {err}"
            ) from None
        return module
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as err:
        raise ConfigError(f"model factory {spec!r}: cannot import module '{target}' ({err})") from None
