"""Fixtures of the MCP tests: the test server (mcp_server.py, on the official SDK's server
side) over stdio, and over streamable HTTP and SSE on 127.0.0.1.

Most of them start from the worker's preloader (tests/preloaded.py): each process importing
the MCP SDK spends about 1.5 s of CPU on it, and these tests start about a hundred. The tests
of the stdio process itself (its pid, its exit status, a server killed and restarted, an
HTTP server killed mid-session) start it the plain way, ``python mcp_server.py``."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.preloaded import Preloader, preloading

SERVER = str(Path(__file__).with_name("mcp_server.py"))
# what mcp_server.py and conformance/client.py import that takes long
PRELOADED = ("mcp.server.mcpserver", "mcp.client.auth", "treadle.mcp", "httpx2", "pydantic")
PLAIN = [sys.executable, SERVER]


@pytest.fixture(scope="session")
def preloader() -> Iterator[Preloader]:
    """The worker's preloader of the MCP SDK (started when first used)."""
    yield from preloading(*PRELOADED)


@pytest.fixture
def stdio(preloader: Preloader) -> Callable[..., Any]:
    """``stdio(name="demo", **options)``: an ``MCPStdioClient`` of the test server over stdio,
    forked from the preloader."""
    from treadle.mcp import MCPStdioClient

    command, *args = preloader.command(SERVER, "stdio")

    def make(name: str = "demo", **options: Any) -> MCPStdioClient:
        return MCPStdioClient(
            name, command=command, args=args, errlog=subprocess.DEVNULL, **options
        )

    return make


def start_server(
    transport: str, *extra: str, preloader: Preloader | None = None
) -> tuple[subprocess.Popen[bytes], int]:
    """The test server on a free port (forked from ``preloader`` when given); (the process,
    its port) once it accepts connections."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = preloader.command(SERVER) if preloader is not None else PLAIN
    process = subprocess.Popen(
        [*server, transport, str(port), *extra],
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
def http_url(preloader: Preloader) -> Iterator[str]:
    process, port = start_server("http", preloader=preloader)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def sse_url(preloader: Preloader) -> Iterator[str]:
    process, port = start_server("sse", preloader=preloader)
    try:
        yield f"http://127.0.0.1:{port}/sse"
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def start_mcp_server(preloader: Preloader) -> Iterator[Callable[..., str]]:
    """``start(transport, *args) -> url``: a test server, stopped after the module."""
    started: list[subprocess.Popen[bytes]] = []

    def start(transport: str, *extra: str) -> str:
        process, port = start_server(transport, *extra, preloader=preloader)
        started.append(process)
        return f"http://127.0.0.1:{port}/{'sse' if transport == 'sse' else 'mcp'}"

    yield start
    for process in started:
        process.terminate()
        process.wait(10)


@pytest.fixture
def mcp_http_process() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A streamable HTTP test server of the test's own (it may kill it: started the plain
    way, so that the kill is the server's own end), and its URL."""
    process, port = start_server("http")
    yield process, f"http://127.0.0.1:{port}/mcp"
    process.kill()
    process.wait(10)
