"""The UI example app (examples/ui/app.py) served by uvicorn on 127.0.0.1 for the tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("starlette", reason="the web extra is not installed: pip install -e '.[web]'")
pytest.importorskip("uvicorn", reason="the web extra is not installed: pip install -e '.[web]'")

APP = Path(__file__).resolve().parents[2] / "examples" / "ui" / "app.py"


@pytest.fixture(scope="session")
def ui_server() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "UI_EXAMPLE_DELAY": "0.005"}
    env.pop("TREADLE_MODEL", None)
    process = subprocess.Popen(
        [sys.executable, str(APP), str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/agui/runs/none", timeout=1)
            break
        except httpx.TransportError:
            if process.poll() is not None:
                break
            time.sleep(0.1)
    else:
        process.kill()
    if process.poll() is not None:
        raise RuntimeError(f"the UI example did not start: {process.stderr.read()!r}")
    try:
        yield url
    finally:
        process.terminate()
        process.wait(10)


def sse_frames(response: httpx.Response) -> Iterator[tuple[str | None, str]]:
    """(id, data) of each SSE frame of a streaming response."""
    frame_id: str | None = None
    data: list[str] = []
    for line in response.iter_lines():
        if line.startswith("id: "):
            frame_id = line[4:]
        elif line.startswith("data: "):
            data.append(line[6:])
        elif line == "" and data:
            yield frame_id, "\n".join(data)
            frame_id, data = None, []
