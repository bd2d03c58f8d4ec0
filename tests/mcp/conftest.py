"""Fixtures of the MCP tests: the test server (mcp_server.py, on the official SDK's server
side) over streamable HTTP and SSE on 127.0.0.1."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

SERVER = str(Path(__file__).with_name("mcp_server.py"))


def start_server(transport: str, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, SERVER, transport, str(port), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.05)
    else:
        process.kill()
        raise RuntimeError("the MCP test server did not start")
    return process, port


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    process, port = start_server("http")
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def sse_url() -> Iterator[str]:
    process, port = start_server("sse")
    try:
        yield f"http://127.0.0.1:{port}/sse"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def start_mcp_server() -> Iterator[Callable[..., str]]:
    """``start(transport, *args) -> url``: a test server, stopped after the module."""
    started: list[subprocess.Popen[bytes]] = []

    def start(transport: str, *extra: str) -> str:
        process, port = start_server(transport, *extra)
        started.append(process)
        return f"http://127.0.0.1:{port}/{'sse' if transport == 'sse' else 'mcp'}"

    yield start
    for process in started:
        process.terminate()
        process.wait(10)


@pytest.fixture
def mcp_http_process() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A streamable HTTP test server of the test's own (it may kill it), and its URL."""
    process, port = start_server("http")
    yield process, f"http://127.0.0.1:{port}/mcp"
    process.kill()
    process.wait(10)
