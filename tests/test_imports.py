"""Leaf modules stay light: `quicktrain --help` and `quicktrain report` load no torch or timm."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import json, sys
{body}
print(json.dumps({{m: m in sys.modules for m in ("torch", "timm", "ignite", "optuna")}}))
"""


def _loaded(body: str) -> dict[str, bool]:
    out = subprocess.run([sys.executable, "-c", PROBE.format(body=body)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "body",
    [
        "import quicktrain, quicktrain.reporting, quicktrain.reporting.report, quicktrain.records",
        "from quicktrain.cli import build_parser\n"
        "for argv in (['--help'], ['train', '--help'], ['ablate', '--help'], ['report', '--help']):\n"
        "    try:\n"
        "        build_parser().parse_args(argv)\n"
        "    except SystemExit:\n"
        "        pass",
    ],
    ids=["reporting", "cli-help"],
)
def test_help_and_reporting_import_neither_torch_nor_timm(body: str) -> None:
    loaded = _loaded(body)
    assert loaded == {"torch": False, "timm": False, "ignite": False, "optuna": False}


def test_the_package_root_still_offers_train_lazily() -> None:
    assert _loaded("import quicktrain\nquicktrain.train")["torch"] is True
