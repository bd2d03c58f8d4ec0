"""``treadle ui tests.webapp.scripted_agent:agent`` started on 127.0.0.1 (through the CLI, from
the repository root, as a user would: ``python -m treadle ui``, forked from the worker's
preloader of the CLI and the web stack, tests/conftest.py) for the web-app tests, and a
chromium tab on it."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from tests.preloaded import Preloader

pytest.importorskip("starlette", reason="the web extra is not installed: pip install -e '.[web]'")
pytest.importorskip("uvicorn", reason="the web extra is not installed: pip install -e '.[web]'")

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-test-THIS-MUST-NEVER-REACH-THE-PAGE-42"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve_ui(
    *args: str, preloader: Preloader, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> Iterator[str]:
    """Run ``treadle ui ARGS --port P`` from the repository root (``python -m treadle``, from
    ``preloader``); yield its base URL."""
    port = free_port()
    full = {**os.environ, "WEB_TEST_DELAY": "0.04", "OPENAI_API_KEY": SECRET, **(env or {})}
    full.pop("TREADLE_MODEL", None)
    process = subprocess.Popen(
        preloader.command("-m", "treadle", "ui", *args, "--port", str(port)),
        cwd=cwd,
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                httpx.get(url + "/static/app.css", timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    process.kill()
                    out, err = process.communicate()
                    raise RuntimeError(f"treadle ui did not start:\n{out}\n{err}") from None
                time.sleep(0.1)
        yield url
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(10)


def stream_delay(module: object) -> dict[str, str]:
    """The pace of the scripted model's answers for a test module (``WEB_TEST_DELAY``): 0.04 s
    between pieces, long enough to stop, reload or steer mid-answer; a module whose tests
    never act while an answer streams says ``STREAM_DELAY = "0.005"`` (the page renders as
    pieces come: at the slow pace, most of chromium's CPU was spent waiting out answers)."""
    delay = getattr(module, "STREAM_DELAY", None)
    return {"WEB_TEST_DELAY": delay} if delay else {}


@pytest.fixture(scope="module")
def web_server(server_preloader: Preloader, request: pytest.FixtureRequest) -> Iterator[str]:
    env = stream_delay(request.module)
    agent = "tests.webapp.scripted_agent:agent"
    with serve_ui(agent, preloader=server_preloader, env=env) as url:
        yield url
