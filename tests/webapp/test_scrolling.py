"""Where the page looks: an opened (or reloaded) conversation at its newest message, and an
inspector whose events pane is in view and follows the live run while the user is at its
bottom."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.browser import needs_chromium

from .page import WebPage, open_tab

pytestmark = needs_chromium

AT_BOTTOM = (
    "((b) => b.scrollHeight > b.clientHeight && b.scrollHeight - b.scrollTop - b.clientHeight < 30)"
)


@pytest.fixture
def page(web_server: str, chromium: str) -> Iterator[WebPage]:
    with open_tab(chromium, web_server + "/") as tab:
        tab.size(1400, 560)
        yield tab


def test_a_reloaded_conversation_opens_at_its_newest_message(page: WebPage) -> None:
    for n in range(3):
        page.send(f"tell me story {n}")
        page.wait(lambda n=n: page.last_text().endswith("word119."), f"answer {n}")
        page.idle()
    page.js("document.getElementById('messages').scrollTop = 0")  # read from the top
    page.reload()
    page.wait(lambda: len(page.messages()) == 6, "the conversation")
    assert page.js(f"{AT_BOTTOM}(document.getElementById('messages'))")
    last = "document.querySelectorAll('[data-testid=message]')"
    bottom = page.js(f"[...{last}].at(-1).getBoundingClientRect().bottom")
    assert bottom <= page.js("document.getElementById('messages').getBoundingClientRect().bottom")


def test_the_events_pane_is_in_view_and_follows_the_live_run(page: WebPage) -> None:
    for n in range(3):  # enough timeline items to overflow their pane
        page.send(f"parallel run {n}")
        page.idle()
    page.wait(lambda: page.js(f"{AT_BOTTOM}(document.getElementById('timeline'))"), "the tail")
    raw = "document.querySelector('[data-testid=raw-events]')"
    rect = page.js(
        f"(() => {{ const r = {raw}.getBoundingClientRect(); return [r.top, r.bottom]; }})()"
    )
    height = page.js("innerHeight")
    assert rect[0] < height - 100 and rect[1] <= height, (rect, height)  # above the fold

    page.send("a long story to watch")
    page.wait(lambda: "live" in page.js("document.getElementById('raw-title').textContent"), "live")
    page.wait(
        lambda: page.js(f"JSON.parse({raw}.textContent).at(-1).type") == "message_update",
        "the run's deltas in the events pane",
    )
    assert page.js(f"{AT_BOTTOM}({raw})")  # at its tail
    page.idle()
    page.wait(
        lambda: page.js(f"JSON.parse({raw}.textContent).at(-1).type") == "agent_end",
        "the run's end in the events pane",
    )
    # scrolled up to read, the pane stays where the user put it
    page.js(f"{raw}.scrollTop = 0")
    page.send("another story")
    page.wait(lambda: "live" in page.js("document.getElementById('raw-title').textContent"), "live")
    page.wait(lambda: len(page.last_text()) > 60, "the answer to stream")
    assert page.js(f"{raw}.scrollTop") == 0
    page.idle()
