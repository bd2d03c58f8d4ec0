"""Every HTTP surface of ``treadle serve`` carries the guard, attacked on a real socket: a
missing or wrong token, a foreign ``Host``, a hostile or ``null`` ``Origin``, a text/plain
cross-site POST, an oversized body, a body that never finishes. Each refusal happens before
the agent runs (its log stays empty)."""

from __future__ import annotations

import socket
import threading
from typing import Any

import httpx
import pytest

from .conftest import TOKEN, TRUSTED, Served

pytestmark = pytest.mark.slow

CHAT = {"model": "assistant", "messages": [{"role": "user", "content": "delete notes/x"}]}
RESPONSES = {"model": "assistant", "input": "delete notes/x"}
MCP_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "attacker", "version": "1"},
    },
}

# (method, path, body): every route of every surface
ROUTES = [
    ("POST", "/v1/chat/completions", CHAT),
    ("POST", "/v1/responses", RESPONSES),
    ("GET", "/v1/models", None),
    ("GET", "/v1/models/assistant", None),
    ("POST", "/mcp", MCP_INIT),
    ("GET", "/mcp", None),
    ("DELETE", "/mcp", None),
]
POSTS = [r for r in ROUTES if r[0] == "POST"]
MCP_ACCEPT = {"accept": "application/json, text/event-stream"}


def ask(served: Served, method: str, path: str, body: Any, **headers: str) -> httpx.Response:
    sent = {**MCP_ACCEPT, **headers}
    return httpx.request(method, served.url + path, json=body, headers=sent, timeout=30)


def bearer(token: str = TOKEN) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_a_missing_or_wrong_token_is_401(served: Served, method: str, path: str, body: Any) -> None:
    assert ask(served, method, path, body).status_code == 401
    assert ask(served, method, path, body, **bearer("wrong-token-0123")).status_code == 401
    assert ask(served, method, path, body, authorization=f"Basic {TOKEN}").status_code == 401
    assert served.entries() == []


@pytest.mark.parametrize(("method", "path", "body"), ROUTES)
def test_a_foreign_host_is_403_even_with_the_token(
    served: Served, method: str, path: str, body: Any
) -> None:
    """DNS rebinding: a page on evil.example pointed at 127.0.0.1."""
    refused = ask(served, method, path, body, host="evil.example", **bearer())
    assert refused.status_code == 403 and "does not answer to the name" in refused.text
    assert served.entries() == []


def test_the_trusted_host_is_served(served: Served) -> None:
    answer = ask(served, "GET", "/v1/models", None, host=TRUSTED, **bearer())
    assert answer.status_code == 200


@pytest.mark.parametrize(("method", "path", "body"), POSTS)
@pytest.mark.parametrize("origin", ["https://evil.example", "null"])
def test_a_hostile_origin_is_403(
    served: Served, method: str, path: str, body: Any, origin: str
) -> None:
    refused = ask(served, method, path, body, origin=origin, **bearer())
    assert refused.status_code == 403
    assert served.entries() == []


@pytest.mark.parametrize(("method", "path", "body"), POSTS)
def test_a_cross_site_simple_post_is_403(served: Served, method: str, path: str, body: Any) -> None:
    """What a hostile page can send without a preflight: text/plain with the browser's
    cookie (never the Bearer header), its Origin dropped by a privacy setting."""
    cookie = f"treadle_ui_token_{split(served.url)[1]}={TOKEN}"
    answer = httpx.post(
        served.url + path,
        content=b'{"model": "assistant", "input": "delete notes/x"}',
        headers={"content-type": "text/plain", "cookie": cookie, **MCP_ACCEPT},
        timeout=30,
    )
    assert answer.status_code == 403 and "without an Origin" in answer.text
    assert served.entries() == []


def split(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def raw(served: Served, head: bytes, body: bytes = b"") -> bytes:
    sock = socket.create_connection(split(served.url), timeout=30)
    try:
        sock.sendall(head + body)
        answer = b""
        while data := sock.recv(65536):
            answer += data
        return answer
    except ConnectionResetError:
        return answer
    finally:
        sock.close()


@pytest.mark.parametrize("path", [p for _, p, _ in POSTS])
def test_an_oversized_body_is_413_unread(served: Served, path: str) -> None:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {200_000_000}\r\n\r\n"
    ).encode()
    answer = raw(served, head, b"{" * 1000)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert served.entries() == []


def test_a_body_that_never_finishes_is_cut(served: Served) -> None:
    """The server was started with --request-timeout 2: on every surface at once, the request
    is answered 408 (or the connection closed) instead of holding a socket forever."""
    answers: dict[str, bytes] = {}

    def attack(path: str) -> None:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n"
            "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
        ).encode()
        answers[path] = raw(served, head, b'{"model": ')

    threads = [threading.Thread(target=attack, args=(p,)) for _, p, _ in POSTS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert set(answers) == {p for _, p, _ in POSTS}
    for path, answer in answers.items():
        assert answer == b"" or answer.startswith(b"HTTP/1.1 408"), (path, answer[:200])
    assert served.entries() == []


def test_with_the_token_every_surface_answers(served: Served) -> None:
    """The attacks above are refused by the guard, not by a broken surface."""
    assert ask(served, "GET", "/v1/models", None, **bearer()).status_code == 200
    hello = dict(CHAT, messages=[{"role": "user", "content": "hi"}])
    assert ask(served, "POST", "/v1/chat/completions", hello, **bearer()).status_code == 200
    assert ask(served, "POST", "/mcp", MCP_INIT, **bearer()).status_code == 200
    assert ask(served, "GET", "/nothing", None, **bearer()).status_code == 404
