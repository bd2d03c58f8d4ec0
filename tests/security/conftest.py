"""Real servers for the attack tests: uvicorn on 127.0.0.1 (port 0), in a thread of the test
process, serving a treadle app; and the agent the attacks aim at (a ``delete_file`` tool a
``before_tool_call`` hook denies for anything outside ``notes/``)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from treadle import Agent, Deny, Hooks, RunHandle, ToolCall, tool
from treadle.testing import ScriptedProvider

pytest.importorskip("starlette", reason="the web extra is not installed: pip install -e '.[web]'")
uvicorn = pytest.importorskip("uvicorn", reason="the web extra is not installed")


class DenyOutsideNotes(Hooks):
    async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Deny | None:
        path = str(call.arguments.get("path", ""))
        return None if path.startswith("notes/") else Deny("only files under notes/")


def target_agent(deleted: list[str], answers: int = 4) -> Agent[None]:
    """The agent under attack: every path its ``delete_file`` ran on lands in ``deleted``."""

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return f"Deleted {path}."

    return Agent(
        ScriptedProvider(["ok"] * answers), tools=[delete_file], hooks=[DenyOutsideNotes()]
    )


@contextmanager
def running(app: Any, *, host: str = "127.0.0.1", **config: Any) -> Iterator[str]:
    """``app`` served by uvicorn on ``host`` (a free port); yields its base URL."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    options = {"log_config": None, "log_level": "warning", "timeout_keep_alive": 5, **config}
    server = uvicorn.Server(uvicorn.Config(app, **options))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    shown = f"[{host}]" if ":" in host else host
    try:
        yield f"http://{shown}:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


def lan_address() -> str | None:
    """An address of this machine that is not loopback (the one its default route uses),
    or ``None`` on a machine without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            address = str(probe.getsockname()[0])
        except OSError:
            return None
    return None if address.startswith("127.") or address == "0.0.0.0" else address
