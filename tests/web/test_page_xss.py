"""The web example's page (examples/web/page.html) in headless chromium against a hostile
model: HTML and script in a tool call's arguments, and so in the tool's result, are shown as
text and never run."""

from __future__ import annotations

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
from tests.web.hostile_app import PAYLOAD

pytest.importorskip("starlette", reason="the web extra is not installed: pip install -e '.[web]'")
websockets_sync = pytest.importorskip(
    "websockets.sync.client", reason="websockets is not installed"
)
pytestmark = needs_chromium
APP = Path(__file__).resolve().with_name("hostile_app.py")


@pytest.fixture
def hostile_url(server_preloader: Preloader) -> Iterator[str]:
    with example_server(APP, preloader=server_preloader, env={}) as url:
        yield url


def test_html_in_tool_arguments_is_shown_as_text(hostile_url: str, browser: str) -> None:  # noqa: F811
    target = httpx.put(f"{browser}/json/new?{hostile_url}/", timeout=10).json()
    try:
        with websockets_sync.connect(target["webSocketDebuggerUrl"], max_size=None) as ws:
            page = Page(ws)
            loaded = "document.readyState === 'complete' && document.querySelector('button')"
            wait_until(lambda: page.eval(f"!!({loaded})"), 60, "the page to load")
            page.eval("document.querySelector('button').click(), true")
            status = "document.getElementById('status').textContent"
            wait_until(lambda: page.eval(status) == "completed", 60, "the run")
            tools = page.eval("document.getElementById('tools').textContent")
            assert PAYLOAD in tools  # the call's arguments and the result, as text
            assert tools.count("<script>window.pwned=2</script>") == 2
            # no element but the lines themselves (an <img> would run its onerror)
            assert page.eval("document.querySelectorAll('#tools *:not(div.tool)').length") == 0
            assert page.eval("window.pwned === undefined")
    finally:
        httpx.get(f"{browser}/json/close/{target['id']}", timeout=10)
