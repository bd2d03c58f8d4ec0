"""Start a fake model server for a benchmark: on a free loopback port, waited for until
``GET /health`` answers, stopped when the block ends. Shared by the benchmark scripts
(each runs as ``python benchmarks/<script>.py``, so this folder is on ``sys.path``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

KIT_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kit", "fake_llm.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def fake_server(script: str = KIT_SERVER, *args: str, seconds: float = 15.0) -> Iterator[str]:
    """Run ``python script [args] --port N`` (the benchmark kit's fake OpenAI server by
    default); yield its root URL (``http://127.0.0.1:N``)."""
    port = free_port()
    cmd = [sys.executable, script, *args, "--port", str(port)]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + seconds
        while True:
            try:
                with urllib.request.urlopen(root + "/health", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise SystemExit(f"the fake server at {root} did not start") from None
                time.sleep(0.05)
        yield root
    finally:
        server.terminate()
        server.wait(timeout=10)
