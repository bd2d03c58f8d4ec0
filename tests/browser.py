"""A headless chromium for the page tests, driven over the DevTools protocol (no browser
download: Debian's chromium, which scripts/install-system-deps.sh installs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not installed (scripts/install-system-deps.sh installs it)",
)


def wait_until(check: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Page:
    """One chromium tab, driven over the DevTools protocol."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.next_id = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=30))
            if message.get("id") == self.next_id:
                return dict(message.get("result", {}))

    def eval(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")


@pytest.fixture
def browser(chromium: str) -> str:
    """A headless chromium's DevTools HTTP endpoint: the worker's (tests/conftest.py; the
    test opens a tab of its own)."""
    return chromium


@contextmanager
def launch_chromium() -> Iterator[str]:
    """Start a headless chromium; yield its DevTools HTTP endpoint; stop it, leaving nothing
    behind: its profile and its temporary folder are in one folder removed afterwards
    (chromium makes its single-instance socket's folder, ``org.chromium.Chromium.*``, in
    ``TMPDIR`` and does not remove it when it is stopped)."""
    root = tempfile.mkdtemp(prefix="treadle-chromium-")
    profile, temp = os.path.join(root, "profile"), os.path.join(root, "tmp")
    os.mkdir(profile)
    os.mkdir(temp)
    assert CHROMIUM is not None
    process = subprocess.Popen(
        [
            CHROMIUM,
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--no-first-run",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile}",
            "about:blank",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TMPDIR": temp},
    )
    port_file = Path(profile) / "DevToolsActivePort"
    try:
        # the file appears before its content: wait for the port in it
        wait_until(lambda: port_file.exists() and port_file.read_text().split(), 30, "chromium")
        port = port_file.read_text().split()[0]
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(10)
        # its helper processes may still write in the profile a moment after it has ended:
        # removed until it stays removed (a guard for a hang, not the thing tested)
        deadline = time.monotonic() + 30
        while os.path.exists(root) and time.monotonic() < deadline:
            shutil.rmtree(root, ignore_errors=True)
            if os.path.exists(root):
                time.sleep(0.05)
