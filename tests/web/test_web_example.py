"""The web example, served by uvicorn on 127.0.0.1: its SSE endpoint streams a run with
``id: <seq>``, and a client that drops the connection mid-answer and reconnects with
``Last-Event-ID`` gets the rest with no gap and no duplicate."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.preloaded import Preloader
from tests.servers import example_server

pytest.importorskip("starlette", reason="the web extra is not installed: pip install -e '.[web]'")
pytest.importorskip("uvicorn", reason="the web extra is not installed: pip install -e '.[web]'")

APP = Path(__file__).resolve().parents[2] / "examples" / "web" / "app.py"


@pytest.fixture(scope="module")
def server(server_preloader: Preloader) -> Iterator[str]:
    env = {"WEB_EXAMPLE_DELAY": "0.01"}  # offline, paced
    with example_server(APP, preloader=server_preloader, env=env) as url:
        yield url


def frames(response: httpx.Response) -> Iterator[dict[str, str]]:
    frame: dict[str, str] = {}
    for line in response.iter_lines():
        if not line:
            if "event" in frame:  # (a "retry:" line alone is not an event)
                yield frame
            frame = {}
            continue
        key, _, value = line.partition(": ")
        frame[key] = value


def test_the_page_is_served(server: str) -> None:
    page = httpx.get(server + "/").text
    assert "EventSource" in page and "Last-Event-ID" in page


def test_a_dropped_stream_resumes_with_no_gap_and_no_duplicate(server: str) -> None:
    run_id = httpx.post(server + "/runs", json={"prompt": "weather?"}).json()["id"]
    received: list[dict[str, str]] = []
    with httpx.stream("GET", f"{server}/runs/{run_id}/events", timeout=30) as response:
        for frame in frames(response):
            received.append(frame)
            text_so_far = [f for f in received if f.get("event") == "message_update"]
            if len(text_so_far) >= 25:
                break  # the connection drops mid-answer
    last = received[-1]["id"]
    with httpx.stream(
        "GET", f"{server}/runs/{run_id}/events", headers={"Last-Event-ID": last}, timeout=30
    ) as response:
        for frame in frames(response):
            if frame.get("event") == "done":
                break
            received.append(frame)
    seqs = [int(f["id"]) for f in received]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # no gap, no duplicate
    events = [json.loads(f["data"]) for f in received]
    assert events[0]["type"] == "agent_start" and events[-1]["type"] == "agent_end"
    tools = [e for e in events if e["type"] == "tool_execution_end"]
    assert tools and "Sunny and 21" in tools[0]["result"]["content"][0]["text"]
    final = [
        e for e in events if e["type"] == "message_end" and e["message"]["role"] == "assistant"
    ][-1]
    streamed = "".join(
        e["delta"]["text"]
        for e in events
        if e["type"] == "message_update"
        and e["delta"]["type"] == "text"
        and e["seq"] > tools[0]["seq"]
    )
    assert streamed == final["message"]["content"][0]["text"]
