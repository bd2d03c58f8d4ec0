"""tests/browser.py: a chromium started for the page tests leaves nothing behind in the
temporary folder (chromium makes its single-instance socket's folder there and keeps it
when stopped: hundreds were left in /tmp, one per launch)."""

from __future__ import annotations

import json
import shutil
import tempfile
import urllib.request
from pathlib import Path

import pytest
from tests.browser import launch_chromium, needs_chromium


@needs_chromium
def test_a_chromium_leaves_nothing_in_the_temporary_folder(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a short path: chromium's socket in it must fit a unix socket's 108 bytes
    temp = Path(tempfile.mkdtemp(prefix="chromium-test-"))
    try:
        monkeypatch.setenv("TMPDIR", str(temp))
        monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
        with launch_chromium() as endpoint:
            with urllib.request.urlopen(endpoint + "/json/version", timeout=30) as answer:
                assert "Browser" in json.load(answer)  # it runs
            assert list(temp.iterdir())  # (its folders are in this one while it runs)
        assert not list(temp.iterdir())
    finally:
        shutil.rmtree(temp, ignore_errors=True)
