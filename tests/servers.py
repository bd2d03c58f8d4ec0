"""Servers for tests on 127.0.0.1: an example app (an ASGI server script taking its port as
argument) in a process of its own (forked from the worker's preloader of the web stack,
tests/conftest.py), or an ASGI app on uvicorn in a thread; each waited for until it answers
and stopped afterwards."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from tests.preloaded import Preloader


@contextmanager
def example_server(
    app: Path, *, preloader: Preloader, env: dict[str, str], probe: str = "/", timeout: float = 60
) -> Iterator[str]:
    """Run ``python app PORT`` (from ``preloader``) offline (no TREADLE_MODEL) with ``env``
    added; yield its base URL once ``GET probe`` gets any answer."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    full = {**os.environ, **env}
    full.pop("TREADLE_MODEL", None)
    process = subprocess.Popen(
        preloader.command(app, str(port)),
        env=full,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                httpx.get(url + probe, timeout=1)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    process.kill()
                    err = process.stderr.read() if process.stderr else b""
                    raise RuntimeError(f"{app.name} did not start: {err!r}") from None
                time.sleep(0.1)
        yield url
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(10)


@contextmanager
def served(app: Any) -> Iterator[str]:
    """``app`` on uvicorn in a thread of this process, on a free port; yields its base URL."""
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
