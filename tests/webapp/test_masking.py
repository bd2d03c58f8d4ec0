"""Secrets of the server's environment never reach the page, on a real server (``treadle ui``
on 127.0.0.1) whose scripted model leaks ``OPENAI_API_KEY`` the ways a hostile model would:
cut between streamed deltas (of an answer, of a call's arguments), with ``"``, ``\\`` and
non-ASCII characters in it (which JSON writes escaped). The page's own script is served as
it is, even when a secret's text happens to be in it. The inspector's stream stays valid
JSON with a lone surrogate in an event, and a hostile cursor is no 500."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.preloaded import Preloader

from treadle.ui.web._requests import REQUEST_EVENT

from .conftest import serve_ui

STATIC = Path(__file__).resolve().parents[2] / "src" / "treadle" / "ui" / "web" / "static"
# a quote, a backslash, a slash, non-ASCII (two and three UTF-8 bytes, and one outside the
# BMP, which JSON writes as a surrogate pair)
WEIRD = 'sk-"quo\\te/é€😀-tail-1234-XYZ'


@pytest.fixture(scope="module")
def served(server_preloader: Preloader) -> Iterator[str]:
    env = {"OPENAI_API_KEY": WEIRD, "AUTH_MODE": "disabled"}
    with serve_ui("tests.webapp.secret_agent:agent", preloader=server_preloader, env=env) as url:
        yield url


def data_frames(body: str) -> list[Any]:
    out = []
    for line in body.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            out.append(json.loads(line[6:]))
    return out


def chat(url: str, chat_id: str, prompt: str) -> tuple[str, str]:
    """Send ``prompt``; the chat's SSE body and the run's id."""
    body = {
        "id": chat_id,
        "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": prompt}]}],
    }
    with httpx.Client(base_url=url, timeout=30) as c:
        with c.stream("POST", "/api/chat", json=body, headers={"origin": url}) as r:
            assert r.status_code == 200
            return r.read().decode(), r.headers["x-treadle-run-id"]


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def spellings(value: str) -> list[bytes]:
    """``value`` as it can appear in the bytes of a response."""
    return [
        value.encode(),
        json.dumps(value)[1:-1].encode(),
        json.dumps(value, ensure_ascii=False)[1:-1].encode(),
        b'sk-\\"quo',  # the start, escaped as any JSON writer does
    ]


def assert_no_secret(raw: bytes, decoded: list[Any]) -> None:
    for spelled in spellings(WEIRD):
        assert spelled not in raw
    for text in (s for value in decoded for s in strings(value)):
        assert WEIRD not in text and "quo\\te" not in text


def test_a_secret_cut_between_deltas_does_not_reach_the_page_whole(served: str) -> None:
    stream, run_id = chat(served, "split-chat", "split")
    deltas = [f["delta"] for f in data_frames(stream) if f.get("type") == "text-delta"]
    assert len(deltas) > 3  # it did come in pieces
    shown = "".join(deltas)  # what the page puts together
    assert shown == f"The key is {'*' * len(WEIRD)}.", shown
    events = data_frames(httpx.get(f"{served}/api/runs/{run_id}/events", timeout=30).text)
    updates = [e["delta"]["text"] for e in events if e.get("type") == "message_update"]
    assert len(updates) > 3 and WEIRD not in "".join(updates)
    assert "*" * len(WEIRD) in "".join(updates)


def test_a_secret_cut_between_argument_deltas_is_masked(served: str) -> None:
    stream, run_id = chat(served, "args-chat", "args")
    frames = data_frames(stream)
    pieces = [f["inputTextDelta"] for f in frames if f.get("type") == "tool-input-delta"]
    assert len(pieces) > 1  # (fewer than the model's 9: the mask held the key's pieces back)
    arguments = json.loads("".join(pieces))  # still JSON: stars replace the escaped value
    assert set(arguments["note"]) == {"*"}
    available = next(f for f in frames if f.get("type") == "tool-input-available")
    assert set(available["input"]["note"]) == {"*"}
    events = data_frames(httpx.get(f"{served}/api/runs/{run_id}/events", timeout=30).text)
    args = "".join(
        e["delta"]["arguments"]
        for e in events
        if e.get("type") == "message_update" and e["delta"]["type"] == "tool_call_delta"
    )
    assert set(json.loads(args)["note"]) == {"*"}
    assert_no_secret(stream.encode(), frames)


def test_a_secret_with_quotes_backslashes_and_non_ascii_is_masked_in_json_and_sse(
    served: str,
) -> None:
    stream, run_id = chat(served, "weird-chat", "split")
    with httpx.Client(base_url=served, timeout=30) as c:
        inspector = c.get(f"/api/runs/{run_id}/events").content
        session = c.get("/api/sessions/weird-chat").content
        listing = c.get("/api/sessions").content
    assert_no_secret(stream.encode(), data_frames(stream))
    assert_no_secret(inspector, data_frames(inspector.decode()))
    assert_no_secret(session, [json.loads(session)])
    assert_no_secret(listing, [json.loads(listing)])
    text = json.loads(session)["messages"][-1]["parts"][-1]["text"]
    assert text.startswith("The key is ***") and WEIRD not in text


def test_the_page_is_served_byte_for_byte_even_holding_a_secrets_text(served: str) -> None:
    # AUTH_MODE=disabled is a "secret" by its name; "disabled" is in app.js
    script = (STATIC / "app.js").read_bytes()
    assert b"disabled" in script
    with httpx.Client(base_url=served, timeout=30) as c:
        assert c.get("/static/app.js").content == script
        assert c.get("/static/inspector.js").content == (STATIC / "inspector.js").read_bytes()
        assert c.get("/static/app.css").content == (STATIC / "app.css").read_bytes()
        assert c.get("/").content == (STATIC / "index.html").read_bytes()
        # a data response is still masked for it
        stream, _ = chat(served, "say-disabled", "say disabled")
    said = "".join(f["delta"] for f in data_frames(stream) if f.get("type") == "text-delta")
    assert said == "You said: say ********"


def test_a_lone_surrogate_in_an_event_keeps_the_inspector_stream_valid(served: str) -> None:
    _, run_id = chat(served, "odd-chat", "surrogate")
    url = f"{served}/api/runs/{run_id}/events"
    first = httpx.get(url, timeout=30)
    events = data_frames(first.content.decode("utf-8"))  # valid UTF-8, valid JSON
    odd = next(e for e in events if e.get("type") == "custom" and e["name"] != REQUEST_EVENT)
    assert odd["value"] == {"text": "bad \ufffd byte"}
    assert first.text.endswith("event: end\ndata: {}\n\n")
    for cursor in ("1", str(odd["seq"] - 1)):  # a browser's reconnects
        again = httpx.get(url, headers={"last-event-id": cursor}, timeout=30)
        resumed = data_frames(again.content.decode("utf-8"))
        assert resumed[0]["seq"] == int(cursor) + 1
        assert any(e.get("type") == "custom" for e in resumed)
        assert again.text.endswith("event: end\ndata: {}\n\n")


@pytest.mark.parametrize("cursor", ["²", "9" * 5000, "-1", "1.5", "abc", "1" * 19])
def test_a_hostile_cursor_starts_from_the_beginning_and_is_no_500(served: str, cursor: str) -> None:
    _, run_id = chat(served, "cursor-chat", "hello")
    header = {"last-event-id": cursor.encode("latin-1")}  # (how a server reads a header)
    with httpx.Client(base_url=served, timeout=30) as c:
        url = f"/api/runs/{run_id}/events"
        for response in (
            c.get(url, headers=header),
            c.get(url, params={"after": cursor}),
        ):
            assert response.status_code == 200
            events = data_frames(response.text)
            assert events[0]["type"] == "agent_start" and events[-2]["type"] == "agent_end"
        resumed = c.get("/api/chat/cursor-chat/stream", params={"after": cursor})
        assert resumed.status_code in (200, 204)
        resumed = c.get("/api/chat/cursor-chat/stream", headers=header)
        assert resumed.status_code in (200, 204)
