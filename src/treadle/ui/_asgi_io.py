"""Small pure-ASGI pieces the agent-serving surfaces share: a request body read as JSON, a JSON
answer, and a run whose answer is streamed (or sent whole) for exactly as long as the client
stays — a client that goes away cancels the work (ui/_drive.py aborts the run cleanly)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from ._drive import until_disconnected
from ._guard import Receive, Send, load_json

Emit = Callable[[bytes], Awaitable[None]]


async def read_json(receive: Receive) -> Any:
    """The request body (the guard has read it, within its limits) as JSON;
    ``ValueError`` (with what is wrong) for one that is not."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise ConnectionError("the client went away")
        chunks.append(bytes(message.get("body", b"")))
        if not message.get("more_body", False):
            return load_json(b"".join(chunks))


async def send_json(send: Send, status: int, value: Any) -> None:
    body = json.dumps(value, ensure_ascii=False).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def while_connected(receive: Receive, work: Callable[[], Awaitable[None]]) -> bool:
    """Run ``work`` until it ends or the client disconnects (then it is cancelled); whether
    it ran to its end."""
    finished = False
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            await until_disconnected(receive)
            tg.cancel_scope.cancel()

        tg.start_soon(watch)
        await work()
        finished = True
        tg.cancel_scope.cancel()
    return finished


async def stream_sse(receive: Receive, send: Send, work: Callable[[Emit], Awaitable[None]]) -> None:
    """Answer with Server-Sent Events written by ``work`` through ``emit``; a client that
    goes away cancels ``work``."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"text/event-stream; charset=utf-8"),
                (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no"),
            ],
        }
    )

    async def emit(chunk: bytes) -> None:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})

    try:
        if await while_connected(receive, lambda: work(emit)):
            await send({"type": "http.response.body", "body": b"", "more_body": False})
    except OSError:
        pass  # the connection broke while writing: the run was aborted on the way out
