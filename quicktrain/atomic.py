"""Writing files so that a crash never leaves half of one: temporary file beside the
target, flushed to disk, then renamed over it (a rename within a folder is atomic).

The file gets the permissions an ordinary ``open()`` would give it (0666 less the umask),
not the temporary file's private 0600: run records are shared on cluster filesystems. A
full disk (or quota) is an :class:`EnvironmentFault` naming the file; the temporary file is
removed and the previous version of the target, if any, is untouched."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from quicktrain.errors import EnvironmentFault

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def atomic_write(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Call ``write(f)`` on a temporary binary file, then move it to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, OSError) and err.errno in _NO_SPACE:
            raise EnvironmentFault(
                f"no space left on the device writing '{path}' ({err.strerror}); free space there or choose "
                "another folder, then continue with --resume auto"
            ) from None
        raise


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it: put it straight back
    os.umask(mask)
    return mask


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda f: f.write(text.encode()))
