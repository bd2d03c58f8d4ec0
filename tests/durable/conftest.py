"""The fake model server for the durable tests, in its own process (its counts survive the
workers the tests kill)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("dbos", reason="the dbos extra is not installed: pip install -e '.[dbos]'")

HERE = Path(__file__).resolve().parent


@pytest.fixture
def model_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    log, port_file = tmp_path / "server.log", tmp_path / "server.json"
    log.touch()
    process = subprocess.Popen(
        [sys.executable, str(HERE / "fake_model.py"), str(log), str(port_file)]
    )
    deadline = time.monotonic() + 30
    while not port_file.exists() or not port_file.read_text():
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            raise RuntimeError("the fake model server did not start")
        time.sleep(0.05)
    try:
        yield json.loads(port_file.read_text())["url"], log
    finally:
        process.kill()
        process.wait(10)
