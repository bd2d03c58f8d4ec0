"""``treadle.__version__`` is the installed distribution's version, read on first use."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest

import treadle


def test_the_version_is_the_package_metadata() -> None:
    assert treadle.__version__ == importlib.metadata.version("treadle")
    assert "__version__" in treadle.__all__


def test_a_source_tree_not_installed_reports_an_unknown_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert treadle._version() == "0+unknown"


def test_import_treadle_does_not_read_the_metadata() -> None:
    code = (
        "import sys, treadle; print('importlib.metadata' in sys.modules); "
        "print(treadle.__version__ != '')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "True"]
