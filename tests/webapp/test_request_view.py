"""The inspector shows what the model was sent: per model request, the system prompt, the
tool schemas and the messages as they left the hooks — recorded from the run through a
hook, masked like every other inspector event, and kept out of the chat's frames."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from tests.browser import needs_chromium

from .conftest import SECRET
from .page import WebPage, open_tab

pytestmark = needs_chromium
# no test here acts while an answer streams: the model answers at a quick pace (conftest.py)
STREAM_DELAY = "0.005"


@pytest.fixture
def page(web_server: str, chromium: str) -> Iterator[WebPage]:
    with open_tab(chromium, web_server + "/") as tab:
        tab.size(1400, 900)
        yield tab


def test_a_model_request_shows_what_was_sent(page: WebPage) -> None:
    page.send("what is the weather")
    page.wait(lambda: page.last_text().endswith("Done: Sunny and 21 °C in Porto."), "the answer")
    page.idle()
    items = "[...document.querySelectorAll('[data-kind=model]')]"
    page.wait(lambda: page.js(f"{items}.length") == 2, "two model requests")
    page.js(f"{items}[1].click()")  # the second: after the tool ran
    page.wait(lambda: page.js("!document.getElementById('view-request').hidden"), "the button")
    page.click("view-request")
    text = page.js("document.querySelector('[data-testid=raw-events]').textContent")
    assert text.startswith("turn · web-test")
    assert "── system prompt ──\n(none)" in text
    assert "── tools (6) ──" in text and "weather: The weather in a city." in text
    assert '"city"' in text  # the schema
    assert "── messages (3) ──" in text
    assert "[user]\nwhat is the weather" in text
    assert '→ weather({"city":"Porto"}) [call-weather]' in text
    assert "[tool_result weather (call-weather)]\nSunny and 21 °C in Porto." in text
    page.click("view-request")  # back to the events
    events = page.js("JSON.parse(document.querySelector('[data-testid=raw-events]').textContent)")
    assert events[0]["type"] == "turn_start"


def test_the_request_events_are_masked_and_not_in_the_chat(web_server: str) -> None:
    body = {
        "id": "asks-with-a-secret",
        "messages": [
            {"id": "u", "role": "user", "parts": [{"type": "text", "text": f"short {SECRET}"}]}
        ],
    }
    chat = httpx.post(web_server + "/api/chat", json=body, timeout=30)
    assert "model_request" not in chat.text  # a whole request is no chat frame
    run_id = chat.headers["x-treadle-run-id"]
    events = httpx.get(web_server + f"/api/runs/{run_id}/events", timeout=30).text
    assert SECRET not in events
    found = [
        json.loads(line[6:])
        for line in events.splitlines()
        if line.startswith("data: ") and "treadle.ui.model_request" in line
    ]
    assert len(found) == 1
    request = found[0]["value"]
    assert request["purpose"] == "turn" and "weather" in [t["name"] for t in request["tools"]]
    assert request["messages"][-1]["content"][0]["text"] == "short " + "*" * len(SECRET)
