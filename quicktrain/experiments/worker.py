"""One training run in a fresh process, started by the library, not by composing CLI flags:

    python -m quicktrain.experiments.worker CONFIG.yaml

trains ``Config.load(CONFIG.yaml)`` (a resumed run's config says ``run.resume: auto``) and
exits like ``quicktrain train``: 0 done (or stopped by SIGTERM after a checkpoint), 130
Ctrl-C, 2 bad input, 1 a failed run; errors as one line on stderr. Used by ``quicktrain
ablate`` so that every arm starts without warmed caches or allocator state.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from quicktrain.config import Config
from quicktrain.errors import QuicktrainError
from quicktrain.logs import one_line, setup_logging


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m quicktrain.experiments.worker CONFIG.yaml", file=sys.stderr)
        return 2
    setup_logging()
    try:
        from quicktrain.engine import train

        result = train(Config.load(args[0]))
    except KeyboardInterrupt:
        return 130
    except QuicktrainError as err:
        print(f"quicktrain worker: error: {one_line(err)}", file=sys.stderr)
        return err.exit_status
    summary = result.summary
    if summary["status"] == "interrupted" and not str(summary.get("error", "")).startswith("SIGTERM"):
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
