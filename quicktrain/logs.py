"""Console logging for quicktrain's commands and worker processes, and the one-line form of
an error."""

from __future__ import annotations

import logging
import sys
import typing


class _Stdout(logging.StreamHandler):
    """Writes to whatever ``sys.stdout`` is now (tests and notebooks replace it)."""

    @property
    def stream(self) -> typing.TextIO:
        return sys.stdout

    @stream.setter
    def stream(self, _: object) -> None:
        pass


def setup_logging() -> None:
    logger = logging.getLogger("quicktrain")
    if not logger.handlers:
        handler = _Stdout()
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    # Ignite logs every exception it re-raises; the run record and our message cover it
    logging.getLogger("ignite").setLevel(logging.CRITICAL)


def one_line(err: BaseException) -> str:
    """The error's message on one line (wrapped third-party messages included)."""
    return " ".join(str(err).split())
