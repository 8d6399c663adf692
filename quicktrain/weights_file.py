"""Reading a weights or checkpoint file that may come from someone else: torch's weights-only
loader (tensors, numbers, strings and containers of them; no code runs), and one short line when
a file is not one quicktrain can read. torch's own message for a refused object is long, holds
terminal escape codes and advises turning the safety off; it is never shown.

Example:
    >>> import io, torch
    >>> buffer = io.BytesIO(); torch.save({"w": torch.ones(2)}, buffer); _ = buffer.seek(0)
    >>> read_weights(buffer, "weights.pt")["w"].tolist()
    [1.0, 1.0]
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

from quicktrain.errors import ConfigError


def read_weights(source: str | Path | IO[bytes], name: str | Path, what: str = "") -> Any:
    """``torch.load(source, weights_only=True)`` on the CPU; a :class:`ConfigError` naming ``name``
    (prefixed by ``what``, e.g. ``run.resume: ``) when it fails."""
    import torch

    try:
        return torch.load(source, map_location="cpu", weights_only=True)
    except Exception:  # refused objects, truncated or foreign files: torch raises several types
        pass
    raise ConfigError(f"{what}'{name}' is not a quicktrain checkpoint or holds objects quicktrain does not load")
