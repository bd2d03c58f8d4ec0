"""``treadle serve`` as a separate process on 127.0.0.1 (one per test module; ``python -m
treadle serve``, forked from the worker's preloader of the CLI and the web stack,
tests/conftest.py), and what it writes about its runs (``SERVE_TEST_LOG``, see
served_agent.py)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.preloaded import Preloader

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "serve-test-token-0123456789"
TRUSTED = "agents.example"
TARGETS = ["tests.serve.served_agent:agent", "tests.serve.served_agent:helper"]


def environment(log: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "SERVE_TEST_LOG": str(log), **extra}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("TREADLE_MODEL", None)
    return env


@dataclass
class Served:
    url: str
    log: Path
    process: subprocess.Popen[bytes]

    def entries(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        lines = self.log.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def wait_for(self, found: Callable[[list[dict[str, Any]]], bool], what: str) -> None:
        """Wait (at most 30 s: a deadline for a hang, never the thing tested) until the
        server's log shows ``found``."""
        deadline = time.monotonic() + 30
        while not found(self.entries()):
            if time.monotonic() > deadline:
                raise AssertionError(f"the server never logged {what}: {self.entries()}")
            time.sleep(0.05)

    def mark(self) -> int:
        return len(self.entries())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(
    *flags: str, log: Path, preloader: Preloader, targets: list[str] = TARGETS, **env: str
) -> tuple[subprocess.Popen[bytes], str]:
    """``treadle serve TARGETS FLAGS`` on a free port (from ``preloader``); (the process, its
    base URL) once it answers."""
    port = free_port()
    process = subprocess.Popen(
        preloader.command("-m", "treadle", "serve", *targets, "--port", str(port), *flags),
        env=environment(log, **env),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    # a loaded machine takes long to import (6 s when quiet, over 60 s at a load of 14 on two
    # cores): a deadline for a hang, never the thing tested
    deadline = time.monotonic() + 180
    while True:
        try:
            httpx.get(url + "/", timeout=1)
            return process, url
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                err = process.stderr.read() if process.stderr else b""
                said = f"exit {process.poll()}: {err.decode()}"
                raise RuntimeError(f"treadle serve did not start ({said})") from None
            time.sleep(0.1)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, server_preloader: Preloader
) -> Iterator[Served]:
    """One ``treadle serve --openai --mcp`` for the module: a token, and a trusted host (so
    the Host check holds with the token too)."""
    log = tmp_path_factory.mktemp("serve") / "runs.jsonl"
    process, url = start(
        "--openai",
        "--mcp",
        "--token",
        TOKEN,
        "--trusted-host",
        TRUSTED,
        "--request-timeout",
        "2",
        log=log,
        preloader=server_preloader,
    )
    try:
        yield Served(url, log, process)
    finally:
        stop(process)
