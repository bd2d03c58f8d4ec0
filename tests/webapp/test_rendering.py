"""How the page shows things: a long tool result collapsed with "Show all", GFM tables and
code blocks (with a copy button) built from text, plain-text session titles, a drawn branch
mark and a favicon, a 420 px window without sideways scrolling, and branching from a
question answering it in a new, differently titled conversation."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from tests.browser import needs_chromium

from .page import WebPage, open_tab

pytestmark = needs_chromium
# no test here acts while an answer streams: the model answers at a quick pace (conftest.py)
STREAM_DELAY = "0.005"


@pytest.fixture
def page(web_server: str, chromium: str) -> Iterator[WebPage]:
    with open_tab(chromium, web_server + "/") as tab:
        tab.size(1400, 800)
        yield tab


def test_a_long_tool_result_is_collapsed_with_show_all(page: WebPage) -> None:
    page.send("biglog please")
    page.wait(lambda: page.last_text().endswith("Done: read the log."), "the answer")
    page.idle()
    card = "document.querySelector('[data-tool=read_log]')"
    height = page.js(f"{card}.getBoundingClientRect().height")
    assert height < 1000, height  # not 71,000 px
    result = f"{card}.querySelector('pre.result').textContent"
    assert "log line 1:" in page.js(result) and "log line 5000:" not in page.js(result)
    assert "5,000 lines" in page.js(f"{card}.querySelector('[data-testid=show-all]').textContent")
    page.js(f"{card}.querySelector('[data-testid=show-all]').click()")
    assert page.js(result).endswith("log line 5000: all quiet")
    page.js(f"{card}.querySelector('[data-testid=show-all]').click()")  # and back
    assert "log line 5000:" not in page.js(result)


def test_an_answers_sources_are_links_under_it_and_after_a_reload(page: WebPage) -> None:
    page.send("your sources please")
    page.wait(
        lambda: page.js("document.querySelector('[data-testid=sources]') !== null"), "sources"
    )
    page.idle()
    shown = (
        "[...document.querySelectorAll('[data-role=assistant] [data-testid=source]')]"
        ".map(s => [s.tagName, s.textContent, s.getAttribute('href')])"
    )
    expected = [
        ["A", "Early flush", "https://news.example.org/first-flush"],
        ["A", "tea.example.com", "https://tea.example.com/harvest"],
    ]  # a javascript: address is not sent: never a link
    assert page.js(shown) == expected
    kinds = page.js("[...document.querySelector('[data-role=assistant] .body').children]"
                    ".map(c => c.dataset.testid || c.className)")  # fmt: skip
    assert kinds[-1] == "sources" and "md" in kinds  # under the text
    page.reload()  # from the stored session
    page.wait(lambda: page.js(shown) == expected, "the sources after the reload")
    assert page.js("window.pwned === undefined")


def test_tables_and_code_blocks_are_rendered_as_text(page: WebPage) -> None:
    page.send("markdown please")
    page.wait(lambda: page.js("document.querySelector('.md table') !== null"), "the table")
    page.idle()
    rows = page.js(
        "[...document.querySelectorAll('.md table tr')].map(r =>"
        " [...r.children].map(c => [c.tagName, c.textContent, c.style.textAlign]))"
    )
    assert rows == [
        [["TH", "tool", ""], ["TH", "calls", "right"], ["TH", "share", "center"]],
        [["TD", "weather", ""], ["TD", "12", "right"], ["TD", "60%", "center"]],
        [["TD", "read|log", ""], ["TD", "8", "right"], ["TD", "40%", "center"]],
    ]
    assert page.js("document.querySelector('.md table code').textContent") == "40%"
    code = "document.querySelector('.md pre.code code')"
    assert page.js(f"{code}.textContent") == "print('<b>hi</b>')"  # text, never HTML
    assert page.js(f"{code}.querySelector('b')") is None
    assert page.js(f"{code}.dataset.lang") == "python"
    page.call("Emulation.setFocusEmulationEnabled", enabled=True)  # a tab the user looks at
    page.call(
        "Browser.grantPermissions",
        permissions=["clipboardReadWrite", "clipboardSanitizedWrite"],
    )
    page.js("document.querySelector('[data-testid=copy-code]').click()")
    page.wait(
        lambda: (
            page.js("document.querySelector('[data-testid=copy-code]').textContent") == "Copied"
        ),
        "the copy",
    )
    assert page.js("navigator.clipboard.readText()") == "print('<b>hi</b>')"


def test_session_titles_are_plain_text(web_server: str) -> None:
    body = {
        "id": "titled",
        "messages": [
            {
                "id": "u1",
                "role": "user",
                "parts": [{"type": "text", "text": "## **Short** `code` and [a link](http://x.y)"}],
            }
        ],
    }
    httpx.post(web_server + "/api/chat", json=body, timeout=30).read()
    sessions = httpx.get(web_server + "/api/sessions", timeout=10).json()["sessions"]
    (titled,) = [s for s in sessions if s["id"] == "titled"]
    assert titled["title"] == "Short code and a link"


def test_the_branch_mark_is_drawn_and_the_page_has_a_favicon(page: WebPage) -> None:
    page.send("short hello")
    page.wait(lambda: page.last_text() == "Short answer to: short hello", "the answer")
    page.idle()
    page.wait(lambda: page.js("document.querySelector('[data-testid=branch] svg') !== null"), "⑂")
    assert "\u2442" not in page.js("document.body.innerText")  # no glyph fonts lack
    icon = page.js("document.querySelector('link[rel=icon]')?.href || ''")
    assert icon.startswith("data:image/svg+xml,")
    loaded = page.js(
        "new Promise((ok) => { const i = new Image(); i.onload = () => ok(i.width > 0);"
        f" i.onerror = () => ok(false); i.src = {json.dumps(icon)}; }})"
    )
    assert loaded


def test_a_420_px_window_keeps_the_page_within_it(page: WebPage) -> None:
    page.size(420, 800)
    page.send("markdown please")
    page.wait(lambda: "print(" in page.last_text(), "the table and the code")
    page.idle()
    page.send("biglog please")
    page.wait(lambda: page.last_text().endswith("Done: read the log."), "the log")
    page.idle()
    assert page.js("document.documentElement.scrollWidth") <= 420
    for testid in ("message-input", "send", "stop", "new-chat"):
        right = page.js(
            f"document.querySelector('[data-testid={testid}]').getBoundingClientRect().right"
        )
        assert right <= 420, (testid, right)
    wide = page.js(
        "[...document.querySelectorAll('.msg')].filter(m => m.getBoundingClientRect().right > 420)"
        ".length"
    )
    assert wide == 0


def test_branching_from_a_question_answers_it_in_a_new_conversation(page: WebPage) -> None:
    page.send("short first question")
    page.wait(lambda: page.last_text() == "Short answer to: short first question", "answer 1")
    page.idle()
    page.send("short second question")
    page.wait(lambda: page.last_text() == "Short answer to: short second question", "answer 2")
    page.idle()
    original = page.js("location.hash")
    page.wait(
        lambda: page.js("document.querySelectorAll('[data-testid=branch]').length") == 4,
        "the branch points",
    )
    # branch from the second question
    page.js(
        "[...document.querySelectorAll('[data-testid=message][data-role=user]')].at(-1)"
        ".querySelector('[data-testid=branch]').click()"
    )
    page.wait(lambda: page.js("location.hash") != original, "the new conversation")
    page.wait(lambda: page.last_text() == "Short answer to: short second question", "its answer")
    page.idle()
    roles = [m["role"] for m in page.messages()]
    assert roles == ["user", "assistant", "user", "assistant"], page.messages()
    branch_id = page.js("location.hash").removeprefix("#s=")
    titles = page.js(
        "[...document.querySelectorAll('button.session')].map(b =>"
        " [b.dataset.id, b.querySelector('.session-title').textContent])"
    )
    by_id = dict(titles)
    assert by_id[branch_id] != by_id[original.removeprefix("#s=")]
    assert by_id[branch_id] == "short first question (branch)"
