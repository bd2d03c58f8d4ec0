"""The stdio transport: the server as a subprocess, newline-delimited JSON-RPC on its
stdin/stdout. Ours (not the SDK's ``stdio_client``) so that the process is known — its pid,
whether it is alive, its exit code — which the SDK keeps to itself. Shutdown follows the MCP
lifecycle: close stdin, give the server 2 s to exit, then SIGTERM its process group, then
SIGKILL; all of it shielded from cancellation, so a cancelled caller leaks no process. On
Windows the SDK's transport is used (and the pid is not known)."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

logger = logging.getLogger("treadle.mcp")

GRACE = 2.0
"""Seconds a server has to exit after its stdin closes, and again after SIGTERM."""


@contextlib.asynccontextmanager
async def stdio_transport(
    command: str,
    args: Sequence[str],
    env: Mapping[str, str] | None,
    cwd: str | Path | None,
    errlog: Any,
    started: Callable[[Process | None], None],
) -> AsyncIterator[tuple[Any, Any]]:
    """Start the server; yield the SDK's (read, write) streams; stop it at the end.
    ``started`` is told the process (``None`` on Windows)."""
    from mcp.client.stdio import get_default_environment

    if sys.platform == "win32":  # pragma: no cover - the SDK knows Windows' job objects
        from mcp.client.stdio import StdioServerParameters, stdio_client

        started(None)
        params = StdioServerParameters(
            command=command, args=list(args), env=dict(env or {}), cwd=cwd
        )
        async with stdio_client(params, errlog=errlog) as streams:
            yield streams
        return

    from mcp.shared.message import SessionMessage
    from mcp.types import jsonrpc_message_adapter

    process = await anyio.open_process(
        [command, *args],
        env=get_default_environment() | dict(env or {}),
        stderr=errlog,
        cwd=cwd,
        start_new_session=True,  # its own process group: stopped as a whole
    )
    started(process)
    to_session, read_stream = anyio.create_memory_object_stream[Any](0)
    write_stream, from_session = anyio.create_memory_object_stream[Any](0)
    assert process.stdout is not None and process.stdin is not None
    stdout, stdin = process.stdout, process.stdin

    async def read() -> None:
        async with to_session:
            buffer = ""
            try:
                async for chunk in TextReceiveStream(stdout, errors="replace"):
                    lines = (buffer + chunk).split("\n")
                    buffer = lines.pop()
                    for line in lines:
                        if not line.strip():
                            continue
                        try:
                            message: Any = SessionMessage(
                                jsonrpc_message_adapter.validate_json(line, by_name=False)
                            )
                        except ValueError as exc:
                            message = exc  # the session reports it
                        await to_session.send(message)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                pass  # the session or the pipe closed: the session sees the end

    async def write() -> None:
        try:
            async with from_session:
                async for message in from_session:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send((data + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await to_session.aclose()  # the server stopped reading: end the session

    async with anyio.create_task_group() as tg:
        tg.start_soon(read)
        tg.start_soon(write)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                await stop(process)
            tg.cancel_scope.cancel()


async def stop(process: Process) -> None:
    """Close stdin; if the server has not exited after GRACE s, SIGTERM its process group;
    after GRACE s more, SIGKILL it."""
    import os
    import signal

    assert process.stdin is not None and process.stdout is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if await _exited(process, GRACE):
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
    else:
        if not await _exited(process, GRACE):
            logger.warning("MCP server process %d survived SIGKILL; abandoned", process.pid)
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()
    with anyio.move_on_after(GRACE):
        with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.aclose()


async def _exited(process: Process, within: float) -> bool:
    """Whether the process exits within ``within`` seconds (polling ``returncode``, which
    does not wait for the pipes to close as ``wait()`` may)."""
    with anyio.move_on_after(within):
        while process.returncode is None:  # noqa: ASYNC110 (the OS changes it)
            await anyio.sleep(0.01)
    return process.returncode is not None
