"""Resource bounds on the guarded HTTP surfaces, attacked on real sockets: a 200 MB body
(declared, or chunked) gets 413 with the app having read no more than the limit; a
request whose headers or body stop halfway is closed; hostile JSON, cursors and AG-UI
tool calls get a 4xx, never a 500."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from tests.preloaded import Preloader

from treadle import Agent
from treadle.testing import ScriptedProvider
from treadle.ui.ag_ui import ag_ui_app
from treadle.ui.vercel_ai import vercel_ai_app
from treadle.ui.web import web_app

from .conftest import running, target_agent

LIMIT = 10_000_000  # the default body limit
CHUNK = 1 << 16


class Counting:
    """An ASGI app around ``app`` that counts the body bytes the app stack took from the
    server: what the guard read, and everything behind it."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.read = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        async def counted() -> Any:
            message = await receive()
            self.read += len(message.get("body", b""))
            return message

        await self.app(scope, counted if scope["type"] == "http" else receive, send)


def split(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def raw_exchange(url: str, head: bytes, body: Iterator[bytes]) -> tuple[bytes, int]:
    """Send ``head`` then ``body`` on a raw socket while reading the answer (the server may
    answer, and close, before the body is all sent); (the answer's bytes, bytes sent)."""
    sock = socket.create_connection(split(url), timeout=60)
    answer = bytearray()

    def read() -> None:
        try:
            while data := sock.recv(65536):
                answer.extend(data)
        except OSError:
            pass

    reader = threading.Thread(target=read)
    reader.start()
    sent = 0
    try:
        sock.sendall(head)
        for piece in body:
            sock.sendall(piece)
            sent += len(piece)
    except OSError:
        pass  # the server closed: what it answered is in `answer`
    reader.join(60)
    sock.close()
    return bytes(answer), sent


def attack_body(total: int) -> Iterator[bytes]:
    piece = b"[" * CHUNK
    for _ in range(total // CHUNK):
        yield piece


@pytest.mark.parametrize("kind", ["vercel", "ag-ui", "web"])
def test_a_declared_200_mb_body_gets_413_unread(kind: str) -> None:
    agent = target_agent([])
    apps = {
        "vercel": (vercel_ai_app, "/api/chat"),
        "ag-ui": (ag_ui_app, "/agui"),
        "web": (lambda a, **_: web_app(a), "/api/chat"),
    }
    make, path = apps[kind]
    app = Counting(make(agent, path=path))
    with running(app) as url:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {split(url)[0]}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {200_000_000}\r\n\r\n"
        ).encode()
        answer, _ = raw_exchange(url, head, attack_body(200_000_000))
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert app.read == 0


def test_a_chunked_200_mb_body_is_cut_at_the_limit() -> None:
    app = Counting(vercel_ai_app(target_agent([])))
    with running(app) as url:
        head = (
            f"POST /api/chat HTTP/1.1\r\nHost: {split(url)[0]}\r\n"
            "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        ).encode()
        chunks = (b"%x\r\n%s\r\n" % (len(p), p) for p in attack_body(200_000_000))
        answer, sent = raw_exchange(url, head, chunks)
    assert app.read <= LIMIT + 1_000_000  # never past the limit (one message of slack)
    assert sent < 100_000_000  # the connection was closed on the sender
    if answer:  # the 413 may be lost to the reset of a connection closed with data unread
        assert answer.startswith(b"HTTP/1.1 413"), answer[:200]


def test_a_smaller_limit_is_kept() -> None:
    app = vercel_ai_app(target_agent([]), max_body_bytes=1000)
    with running(app) as url:
        big = httpx.post(url + "/api/chat", json={"id": "c", "messages": [], "pad": "x" * 2000})
        assert big.status_code == 413 and "1000 bytes" in big.text


def test_a_body_that_stops_halfway_gets_408_and_the_connection_closes() -> None:
    app = vercel_ai_app(target_agent([]), body_timeout=0.5)
    with running(app) as url:
        sock = socket.create_connection(split(url), timeout=60)
        sock.sendall(
            b"POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"id": '
        )
        answer = b""
        while data := sock.recv(65536):
            answer += data
        sock.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer


def test_half_sent_headers_are_closed_by_treadle_ui(server_preloader: Preloader) -> None:
    from tests.webapp.conftest import serve_ui

    timeout = ("--request-timeout", "0.5")
    with serve_ui("tests.webapp.scripted_agent:agent", *timeout, preloader=server_preloader) as url:
        for partial in (b"", b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\n"):
            sock = socket.create_connection(split(url), timeout=60)
            sock.sendall(partial)
            assert sock.recv(65536) == b""  # closed by the server, unanswered
            sock.close()
        # a whole request on a connection is answered, then a half-sent second one closed
        sock = socket.create_connection(split(url), timeout=60)
        sock.sendall(b"GET /api/info HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /api/info HT")
        answer = b""
        while data := sock.recv(65536):
            answer += data
        sock.close()
        assert answer.startswith(b"HTTP/1.1 200") and answer.count(b"HTTP/1.1") == 1


def test_a_long_answer_outlives_the_request_deadline() -> None:
    """The deadline is for the request arriving, not for the answer streaming."""
    from treadle.ui._serve import deadline_protocol

    agent = Agent(ScriptedProvider(["a long answer " * 20], chunks=20, delay=0.1))
    app = vercel_ai_app(agent)
    body = {
        "id": "c",
        "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
    }
    with running(app, http=deadline_protocol(0.5)) as url:
        answer = httpx.post(url + "/api/chat", json=body, timeout=60)
    assert answer.status_code == 200 and answer.text.endswith("data: [DONE]\n\n")
    assert answer.text.count('"text-delta"') == 20


@pytest.mark.anyio
async def test_hostile_input_is_a_4xx_not_a_500() -> None:
    deleted: list[str] = []
    deep = ("[" * 100_000 + "]" * 100_000).encode()
    deep_valid = (
        json.dumps({"id": "c", "messages": []})[:-1] + ', "x": ' + "[" * 500 + "]" * 500 + "}"
    )
    long_cursor = "9" * 5000
    web = web_app(target_agent(deleted))
    agui = ag_ui_app(target_agent(deleted), path="/agui")
    vercel = vercel_ai_app(target_agent(deleted), path="/api/chat")
    json_headers = {"content-type": "application/json"}
    statuses: dict[str, int] = {}

    async def client(app: Any) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app, raise_app_exceptions=False)
        origin = {"origin": "http://127.0.0.1:8000"}  # the page's own
        return httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1:8000", headers=origin
        )

    async with await client(web) as c, web.state.web.runs.serving():
        for name, data in (("web deep", deep), ("web deep valid", deep_valid.encode())):
            statuses[name] = (
                await c.post("/api/chat", content=data, headers=json_headers)
            ).status_code
        first = await c.post(
            "/api/chat",
            json={
                "id": "s1",
                "messages": [
                    {"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
                ],
            },
        )
        run_id = first.headers["x-treadle-run-id"]
        for at in (True, -1, "1", 10**30):
            response = await c.post("/api/sessions/s1/branch", json={"at": at})
            statuses[f"web branch at={at!r}"[:40]] = response.status_code
        events = await c.get(f"/api/runs/{run_id}/events", headers={"last-event-id": long_cursor})
        statuses["web events long cursor"] = events.status_code
        resume = await c.get("/api/chat/s1/stream", headers={"last-event-id": long_cursor})
        statuses["web resume long cursor"] = resume.status_code
    async with await client(vercel) as c, vercel.state.runs.serving():
        statuses["vercel deep"] = (
            await c.post("/api/chat", content=deep, headers=json_headers)
        ).status_code
        again = await c.get("/api/chat/x/stream", headers={"last-event-id": long_cursor})
        statuses["vercel resume long cursor"] = again.status_code
    malformed_calls: list[Any] = [
        "not a list",
        ["not an object"],
        [{"id": "c1"}],
        [{"id": 7, "function": {"name": "delete_file", "arguments": "{}"}}],
        [{"id": "c1", "function": {"name": ["x"], "arguments": "{}"}}],
        [{"id": "c1", "function": {"name": "delete_file", "arguments": {"path": "a"}}}],
        [{"id": "c1", "function": {"name": "delete_file", "arguments": "[1, 2]"}}],
        [{"id": "c1", "function": {"name": "delete_file", "arguments": "{" * 5000}}],
    ]
    async with await client(agui) as c, agui.state.runs.serving():
        statuses["ag-ui deep"] = (
            await c.post("/agui", content=deep, headers=json_headers)
        ).status_code
        for n, calls in enumerate(malformed_calls):
            body = {
                "threadId": f"t{n}",
                "runId": f"r{n}",
                "messages": [{"id": "a", "role": "assistant", "toolCalls": calls}],
            }
            statuses[f"ag-ui toolCalls {n}"] = (await c.post("/agui", json=body)).status_code
        cursor = {"last-event-id": long_cursor}
        statuses["ag-ui long cursor"] = (
            await c.post(
                "/agui", json={"threadId": "t", "runId": "rr", "messages": []}, headers=cursor
            )
        ).status_code
    failures = {k: v for k, v in statuses.items() if v >= 500}
    assert failures == {}, statuses
    hostile = {k: v for k, v in statuses.items() if "cursor" not in k}
    assert all(400 <= v < 500 for v in hostile.values()), statuses
    assert deleted == []
