"""Plain-text tables for the terminal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """Numbers right-aligned, text left-aligned; floats to 4 decimals.

    >>> print(format_table([{"a": 1, "b": 0.5}], ["a", "b"]))
    a       b
    -  ------
    1  0.5000
    """
    cells = [[_fmt(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    text = [any(isinstance(row.get(c), str) for row in rows) for c in columns]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) if t else v.rjust(w) for v, w, t in zip(values, widths, text)).rstrip()

    return "\n".join([line(columns), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 100 else f"{value:.1f}"
    return str(value)
