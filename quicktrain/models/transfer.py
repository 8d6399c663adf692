"""Starting from another run (``--pretrained RUN_OR_WEIGHTS``): its weights into this model, a
new head where the classes differ, and the origin said in the banner and the record.

``RUN_OR_WEIGHTS`` is a quicktrain run folder (its ``best.pt`` when it has one, else its
``model.pt``), one of those files, a checkpoint, or any state-dict file. Tensors load by name
where the shapes agree. The classifier head (the model's last ``nn.Linear``) is re-initialised
when its shape differs (another number of classes) and also when the source run's class names
differ from this dataset's (CIFAR-10's ten classes are not MNIST's ten digits): a head trained
on other classes is no head start. ``--freeze-epochs N`` then trains the new head alone for N
epochs (see :class:`quicktrain.techniques.early_params.EarlyParams`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from quicktrain.errors import ConfigError
from quicktrain.models.registry import load_weights


@dataclass(frozen=True)
class Origin:
    """Where a run's initial weights came from (the record's ``origin``)."""

    weights: str  # the file loaded
    source_run: str | None = None  # its run folder, when it is one
    source_model: str | None = None
    source_dataset: str | None = None
    source_classes: list[str] | None = None
    reinitialised: list[str] = field(default_factory=list)  # parameters not taken from it
    why: str = ""  # why the head is new

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def banner(self) -> str:
        source = f"run {self.source_run} ({self.source_model} on {self.source_dataset})" if self.source_run else ""
        fresh = f"; new head {', '.join(self.reinitialised)} ({self.why})" if self.reinitialised else "; head kept"
        return f"{source or self.weights}: {Path(self.weights).name}{fresh}"


def weights_file(path: str | Path) -> Path:
    """The file to load for ``--pretrained PATH``: a run folder's best.pt, else its model.pt."""
    path = Path(path)
    if path.is_dir():
        for name in ("best.pt", "model.pt"):
            if (path / name).is_file():
                return path / name
        raise ConfigError(
            f"model.pretrained='{path}' is a folder without best.pt or model.pt; give a finished quicktrain run "
            "folder or a state-dict file"
        )
    if not path.is_file():
        raise ConfigError(f"model.pretrained='{path}' does not exist; give a run folder, a state-dict file or 'hub'")
    return path


def head(model: nn.Module) -> tuple[str, nn.Linear]:
    """The classifier head: the last ``nn.Linear`` of the model, and its name."""
    linears = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise ConfigError("the model has no nn.Linear layer to use as the classifier head")
    return linears[-1]


def head_names(model: nn.Module) -> list[str]:
    """The head's parameter names (``head.weight``, ``head.bias``)."""
    name, layer = head(model)
    return [f"{name}.{p}" for p, _ in layer.named_parameters()]


def load_pretrained(model: nn.Module, path: str | Path, classes: list[str]) -> Origin:
    """Load ``path`` into ``model`` (trained for ``classes``); re-initialise the head where needed."""
    file = weights_file(path)
    folder = file.parent if (file.parent / "summary.json").is_file() else None
    summary = json.loads((folder / "summary.json").read_text()) if folder else {}
    missing = load_weights(model, file)
    _, layer = head(model)
    names = head_names(model)
    source_classes = summary.get("classes")
    why = ""
    if any(n in missing for n in names):
        why = f"{len(source_classes) if source_classes else 'other'} -> {len(classes)} classes"
    elif source_classes is not None and list(source_classes) != list(classes):
        why = "the source run's classes differ from this dataset's"
    if why:
        layer.reset_parameters()  # drawn from the run's seeded generator
    return Origin(
        weights=str(file),
        source_run=str(folder) if folder else None,
        source_model=summary.get("model"),
        source_dataset=summary.get("dataset"),
        source_classes=source_classes,
        reinitialised=sorted(set(missing) | (set(names) if why else set())),
        why=why,
    )
