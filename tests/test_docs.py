"""The documentation site builds offline with ``mkdocs build --strict`` (broken links, missing
pages or API objects fail), and the API pages carry the docstrings."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import REPO


@pytest.mark.slow
def test_the_docs_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")
    pytest.importorskip("mkdocstrings_handlers.python", reason="the docs extra: pip install -e '.[docs]'")
    out = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"), "-d", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    api = (out / "api" / "index.html").read_text()
    assert "Build a registered model" in api and "Technique" in api  # docstrings rendered
    for page in ("training", "data", "techniques", "measuring", "tuning", "scaling", "faults", "after-training"):
        assert (out / page / "index.html").is_file()
    shutil.rmtree(out)
