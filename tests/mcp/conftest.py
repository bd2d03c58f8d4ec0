"""Fixtures of the MCP tests: the test server (mcp_server.py, on the official SDK's server
side) over stdio, and over streamable HTTP and SSE on 127.0.0.1.

They start from the worker's preloader (tests/preloaded.py, the ``server_preloader`` of
tests/conftest.py): each process importing the MCP SDK spends about 1.5 s of CPU on it, and
these tests start about a hundred. An HTTP server a test kills mid-session is killed where it
stands, its own process (tests/launched.py). The test of the stdio process itself (the pid
the client knows is the server's own) starts it the plain way, ``python mcp_server.py``."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.launched import Launch
from tests.preloaded import Preloader

SERVER = str(Path(__file__).with_name("mcp_server.py"))


@pytest.fixture(scope="session")
def preloader(server_preloader: Preloader) -> Preloader:
    """The worker's preloader of the MCP SDK (and more: tests/conftest.py)."""
    return server_preloader


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
    transport: str, *extra: str, preloader: Preloader, folder: str | None = None
) -> tuple[subprocess.Popen[Any], int]:
    """The test server on a free port, forked from ``preloader``; (the process, its port)
    once it accepts connections. With ``folder``, a :class:`Launch` whose server a test can
    kill where it stands (``kill_script()``)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = (transport, str(port), *extra)
    quiet: dict[str, Any] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    process: subprocess.Popen[Any] = (
        subprocess.Popen([*preloader.command(SERVER), *args], **quiet)
        if folder is None
        else Launch(preloader, SERVER, *args, folder=folder, **quiet)
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
    started: list[subprocess.Popen[Any]] = []

    def start(transport: str, *extra: str) -> str:
        process, port = start_server(transport, *extra, preloader=preloader)
        started.append(process)
        return f"http://127.0.0.1:{port}/{'sse' if transport == 'sse' else 'mcp'}"

    yield start
    for process in started:
        process.terminate()
        process.wait(10)


@pytest.fixture
def mcp_http_process(preloader: Preloader, tmp_path: Path) -> Iterator[tuple[Launch, str]]:
    """A streamable HTTP test server of the test's own, and its URL: the test may kill it
    where it stands (``kill_script()``: a SIGKILL to the server's own process)."""
    process, port = start_server("http", preloader=preloader, folder=str(tmp_path))
    assert isinstance(process, Launch)
    yield process, f"http://127.0.0.1:{port}/mcp"
    process.kill_script()
