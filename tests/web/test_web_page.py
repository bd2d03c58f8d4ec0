"""The web example's page in a real headless chromium (driven over the DevTools protocol):
it shows the streamed answer and the tool call, and when the server drops the connection
mid-answer the browser's EventSource resumes with Last-Event-ID — every event exactly once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.browser import (
    Page,
    browser,  # noqa: F401  (a fixture)
    needs_chromium,
    wait_until,
)
from tests.preloaded import Preloader
from tests.servers import example_server

pytest.importorskip("starlette", reason="the web extra is not installed: pip install -e '.[web]'")
websockets_sync = pytest.importorskip(
    "websockets.sync.client", reason="websockets is not installed"
)
pytestmark = needs_chromium
APP = Path(__file__).resolve().parents[2] / "examples" / "web" / "app.py"


@pytest.fixture
def app_url(server_preloader: Preloader) -> Iterator[str]:
    env = {"WEB_EXAMPLE_DELAY": "0.01", "WEB_EXAMPLE_DROP_AFTER": "15"}
    with example_server(APP, preloader=server_preloader, env=env) as url:
        yield url


def test_the_page_streams_the_answer_and_resumes_after_a_drop(app_url: str, browser: str) -> None:  # noqa: F811
    target = httpx.put(f"{browser}/json/new?{app_url}/", timeout=10).json()
    try:
        with websockets_sync.connect(target["webSocketDebuggerUrl"], max_size=None) as ws:
            check_page(Page(ws))
    finally:  # (the worker's chromium goes on to other tests)
        httpx.get(f"{browser}/json/close/{target['id']}", timeout=10)


def check_page(page: Page) -> None:
    # (the tab starts on about:blank, which is "complete" too: wait for the app's page)
    loaded = "document.readyState === 'complete' && document.querySelector('button') !== null"
    wait_until(lambda: page.eval(loaded), 60, "the page to load")
    assert page.eval("document.querySelector('button').click(), true")
    try:
        status = wait_until(
            lambda: page.eval("document.getElementById('status').textContent"), 90, "the run"
        )
    except AssertionError:
        state = page.eval("JSON.stringify([window.seen, document.body.innerText])")
        raise AssertionError(f"the run did not end in the page: {state}") from None
    assert status == "completed"
    seen = page.eval("JSON.stringify(window.seen)")
    answer = page.eval("document.getElementById('answer').textContent")
    tools = page.eval("document.getElementById('tools').textContent")
    seqs = json.loads(seen)
    assert len(seqs) > 15  # more than the first connection carried: it resumed
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # no gap, no duplicate
    assert answer.startswith("It is sunny and 21 °C in Porto today")
    assert answer.endswith("a fine day for a walk by the river. ")
    assert "weather" in tools and "Sunny and 21" in tools
