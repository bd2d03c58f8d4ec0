"""The UI example's chat page (examples/ui/page.html: a chat speaking the Vercel AI SDK UI
message stream, as useChat does) in a real headless chromium: it shows a tool round trip and
the answer, and an approval asked in the page and given with its button."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from tests.browser import (
    Page,
    browser,  # noqa: F401  (a fixture)
    needs_chromium,
    wait_until,
)

from .expected import STORY

websockets_sync = pytest.importorskip(
    "websockets.sync.client", reason="websockets is not installed"
)
pytestmark = needs_chromium


def open_page(ws: Any) -> Page:
    page = Page(ws)
    loaded = "document.readyState === 'complete' && document.getElementById('send') !== null"
    wait_until(lambda: page.eval(loaded), 60, "the page to load")
    return page


def ask(page: Page, text: str) -> None:
    page.eval(f"document.getElementById('prompt').value = {text!r}")
    page.eval("document.getElementById('send').click()")


def answers(page: Page) -> list[str]:
    return page.eval("[...document.querySelectorAll('.answer')].map((d) => d.textContent)") or []


def tools(page: Page) -> list[dict[str, str]]:
    script = (
        "[...document.querySelectorAll('.tool')].map((d) => "
        "({tool: d.dataset.tool, state: d.dataset.state, text: d.textContent}))"
    )
    return page.eval(script) or []


def test_the_page_runs_a_tool_and_asks_for_an_approval(ui_server: str, browser: str) -> None:  # noqa: F811
    target = httpx.put(f"{browser}/json/new?{ui_server}/", timeout=10).json()
    try:
        with websockets_sync.connect(target["webSocketDebuggerUrl"], max_size=None) as ws:
            page = open_page(ws)
            ask(page, "what is the weather")
            wait_until(
                lambda: any(
                    a.startswith("Done: Sunny") and a.endswith("streamed in small")
                    for a in answers(page)
                ),
                60,
                "the answer",
            )
            (weather,) = tools(page)
            assert weather["tool"] == "weather" and weather["state"] == "output-available"
            assert "Sunny and 21 °C in Porto." in weather["text"]

            ask(page, "delete my notes")
            wait_until(
                lambda: page.eval("document.querySelector('button.approve') !== null"),
                60,
                "the approval buttons",
            )
            assert [t["state"] for t in tools(page)][-1] == "approval-requested"
            page.eval("document.querySelector('button.approve').click()")
            wait_until(
                lambda: any(a.startswith("Done: Deleted notes.txt.") for a in answers(page)),
                60,
                "the approved run",
            )
            deleted = tools(page)[-1]
            assert deleted["tool"] == "delete_file" and deleted["state"] == "output-available"
            chunks = page.eval("window.chunks")
            assert "tool-approval-request" in chunks and "tool-output-available" in chunks

            ask(page, "tell me a story")
            wait_until(
                lambda: any(a == "You said: tell me a story. " + STORY for a in answers(page)),
                60,
                "the story",
            )
    finally:  # (the worker's chromium goes on to other tests)
        httpx.get(f"{browser}/json/close/{target['id']}", timeout=10)
