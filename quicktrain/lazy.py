"""Module attributes imported on first use, so that importing a package stays free of torch."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_attributes(package: str, where: dict[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` that imports ``where[name]`` when ``name`` is first asked for.

    >>> getattr_ = lazy_attributes("demo", {"sqrt": "math"})
    >>> getattr_("sqrt")(4.0)
    2.0
    """

    def __getattr__(name: str) -> object:
        if name in where:
            return getattr(importlib.import_module(where[name]), name)
        raise AttributeError(f"module '{package}' has no attribute '{name}'")

    return __getattr__
