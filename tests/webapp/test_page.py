"""The web app (``treadle ui``) in a real headless chromium, driven through its
``data-testid`` elements, against a scripted model served on 127.0.0.1 by the CLI."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tests.browser import needs_chromium

from .page import WebPage, open_tab
from .proxy import cutting_proxy
from .scripted_agent import LONG

# one browser and one server for the module: a long unit, so scheduled first
pytestmark = [needs_chromium, pytest.mark.slow]


@pytest.fixture
def page(web_server: str, chromium: str) -> Iterator[WebPage]:
    with open_tab(chromium, web_server + "/") as tab:
        yield tab


def full_answer(prompt: str) -> str:
    return f"You said: {prompt}. {LONG}"


def test_a_sent_message_streams_its_answer(page: WebPage) -> None:
    page.send("hello there")
    expected = full_answer("hello there")
    seen: set[int] = set()

    def grows() -> bool:
        text = page.last_text()
        if text and expected.startswith(text):
            seen.add(len(text))
        return text == expected

    page.wait(grows, "the whole answer")
    assert len(seen) >= 3, f"the answer did not arrive in pieces: lengths seen {sorted(seen)}"
    assert [m["role"] for m in page.messages()] == ["user", "assistant"]
    assert page.messages()[0]["text"] == "hello there"
    page.idle()
    kinds = page.js(
        "[...document.querySelectorAll('[data-testid=timeline-item]')].map(i => i.dataset.kind)"
    )
    assert kinds[:3] == ["run", "turn", "model"]
    model_item = "document.querySelector('[data-kind=model]')?.innerText || ''"
    page.wait(lambda: "out " in page.js(model_item), "the model request's usage")
    model = page.js(model_item)
    assert "model request" in model and "ttft" in model and "in " in model and "out " in model


def test_a_tool_call_shows_as_a_card_with_its_result(page: WebPage) -> None:
    page.send("what is the weather")
    page.wait(lambda: page.last_text().endswith("Done: Sunny and 21 °C in Porto."), "the answer")
    (card,) = page.tools()
    assert card["tool"] == "weather" and card["state"] == "output-available"
    assert '{"city":"Porto"}' in card["text"] and "Sunny and 21 °C in Porto." in card["text"]
    assert " ms" in card["text"]  # its duration
    # the inspector has the tool's execution; a click shows its raw events
    page.wait(
        lambda: page.js("document.querySelector('[data-kind=tool]') !== null"), "the tool item"
    )
    assert "tool weather" in page.js("document.querySelector('[data-kind=tool]').innerText")
    page.js("document.querySelector('[data-kind=tool]').click()")
    raw = page.js("JSON.parse(document.querySelector('[data-testid=raw-events]').textContent)")
    assert [e["type"] for e in raw] == ["tool_execution_start", "tool_execution_end"]
    assert raw[1]["tool_name"] == "weather" and raw[1]["duration_ms"] >= 0


def test_approve_and_deny_buttons_answer_a_call_that_asks(page: WebPage) -> None:
    page.send("delete my notes")
    page.wait(
        lambda: page.js("document.querySelector('[data-testid=approve]') !== null"), "Approve"
    )
    assert page.tools()[-1]["state"] == "approval-requested"
    # the run suspends on the call: the page stops running (its end may come just after the
    # card: asserting at once failed under load)
    page.wait(lambda: not page.running(), "the run to suspend on the call")
    page.click("approve")
    page.wait(lambda: page.last_text().endswith("Done: Deleted notes.txt."), "the approved call")
    assert page.tools()[-1]["state"] == "output-available"
    assert page.js("document.querySelector('[data-testid=approve]')") is None
    page.idle()

    page.send("delete it again")
    page.wait(lambda: page.js("document.querySelector('[data-testid=deny]') !== null"), "Deny")
    page.click("deny")
    page.wait(lambda: page.tools()[-1]["state"] == "output-denied", "the denied call")
    page.idle()


def test_stop_ends_the_answer_and_says_so(page: WebPage) -> None:
    page.send("tell me a long story")
    page.wait(lambda: len(page.last_text()) > 40, "the answer to start")
    page.click("stop")
    page.wait(lambda: not page.running(), "the run to stop")
    last = page.messages()[-1]
    assert last["role"] == "assistant" and last["stopped"]
    assert "Stopped." in last["text"]
    body = last["text"].replace("Stopped.", "").strip()
    assert full_answer("tell me a long story").startswith(body)
    assert len(body) < len(full_answer("tell me a long story"))
    assert page.js("document.querySelector('[data-testid=stop]').disabled") is True


def test_a_reload_mid_answer_reopens_the_chat_and_keeps_streaming(page: WebPage) -> None:
    page.send("keep going after a reload")
    page.wait(lambda: len(page.last_text()) > 30, "the answer to start")
    page.reload()
    assert page.js("location.hash").startswith("#s=")
    page.wait(page.running, "the run to be followed again")
    expected = full_answer("keep going after a reload")
    page.idle()
    roles = [m["role"] for m in page.messages()]
    assert roles == ["user", "assistant"], roles
    assert page.last_text() == expected  # no gap, no duplicate
    assert page.last_text("user") == "keep going after a reload"


def test_hostile_model_output_is_shown_as_text(page: WebPage) -> None:
    page.send("say something hostile <img src=y onerror=window.pwned=4>")
    page.wait(lambda: page.last_text().endswith("[link](javascript:window.pwned=3)."), "the answer")
    text = page.last_text()
    assert '<img src=x onerror="window.pwned=1">' in text
    assert "<script>window.pwned=2</script>" in text
    assert "<img src=y onerror=window.pwned=4>" in page.last_text("user")
    chat = "document.querySelector('#messages')"
    assert page.js(f"{chat}.querySelectorAll('img, script, iframe').length") == 0
    assert page.js(f"{chat}.querySelector('strong')?.textContent") == "bold"
    assert page.js(f"{chat}.querySelector('.md code')?.textContent") == "<b>code</b>"
    assert page.js(f"{chat}.querySelectorAll('a').length") == 0  # javascript: is no link
    assert page.js("window.pwned") is None


def test_the_page_works_from_the_keyboard(page: WebPage) -> None:
    page.type("first line")
    page.key("Enter", "Enter", 13, modifiers=8)  # Shift+Enter: a new line
    page.type("second line")
    assert page.js("document.querySelector('[data-testid=message-input]').value") == (
        "first line\nsecond line"
    )
    page.key("Enter", "Enter", 13)
    page.wait(lambda: page.last_text("user") == "first line\nsecond line", "the message sent")
    page.wait(lambda: len(page.last_text()) > 30, "the answer to start")
    page.key("Escape", "Escape", 27)
    page.wait(lambda: not page.running(), "Esc to stop the run")
    assert page.messages()[-1]["stopped"]
    assert page.js("document.querySelector('[data-testid=message-input]').value") == ""


def test_typing_while_it_runs_steers_the_answer(page: WebPage) -> None:
    page.send("a long one please")
    page.wait(lambda: len(page.last_text()) > 30, "the answer to start")
    page.send("short, please")
    page.wait(lambda: page.last_text() == "Short answer to: short, please", "the steered answer")
    roles = [m["role"] for m in page.messages()]
    assert roles == ["user", "assistant", "user", "assistant"], roles
    assert page.messages()[1]["text"] == full_answer("a long one please")


def test_thinking_is_collapsed_and_parallel_tools_overlap(page: WebPage) -> None:
    page.send("think first")
    page.wait(lambda: "Thought." in page.last_text(), "the answer")
    page.idle()
    assert page.js("document.querySelector('details.thinking').open") is False
    assert page.js("document.querySelector('details.thinking').textContent").endswith(
        "Let me think it over."
    )
    page.send("two lookups in parallel")
    page.wait(lambda: page.last_text().endswith("alpha: found / beta: found"), "the answer")
    page.wait(lambda: page.js("document.querySelectorAll('[data-kind=tool]').length") == 2, "bars")
    spans = page.js(
        "[...document.querySelectorAll('[data-kind=tool] .bar')].map(b => "
        "[parseFloat(b.style.left), parseFloat(b.style.left) + parseFloat(b.style.width)])"
    )
    (a0, a1), (b0, b1) = spans
    assert max(a0, b0) < min(a1, b1), f"the two tools' bars do not overlap: {spans}"


def test_a_sub_agent_is_nested_in_the_timeline(page: WebPage) -> None:
    page.send("delegate this")
    page.wait(lambda: page.last_text().endswith("Done: Helper says hi."), "the answer")
    page.idle()
    script = (
        "[...document.querySelectorAll('[data-testid=timeline-item]')].map(i => "
        "({kind: i.dataset.kind, label: i.querySelector('.label').textContent,"
        " indent: parseFloat(i.style.paddingLeft)}))"
    )
    page.wait(lambda: any(i["label"].startswith("sub-agent") for i in page.js(script)), "it")
    items = page.js(script)
    tool = next(i for i in items if i["label"] == "tool helper")
    sub = next(i for i in items if i["label"].startswith("sub-agent"))
    top = next(i for i in items if i["kind"] == "run")
    assert top["indent"] < tool["indent"] < sub["indent"]
    assert "helper" in sub["label"]
    after = items[items.index(sub) + 1 :]
    assert any(i["kind"] == "model" and i["indent"] > sub["indent"] for i in after)


def test_a_retried_model_request_shows_in_the_timeline(page: WebPage) -> None:
    page.send("flaky but short")
    page.wait(lambda: page.last_text() == "Short answer to: flaky but short", "the answer")
    page.idle()
    labels = "[...document.querySelectorAll('[data-kind=retry]')].map(i => i.innerText)"
    page.wait(lambda: page.js(labels), "the retry item")
    (retry,) = page.js(labels)
    assert "retry 1/3" in retry and "rate_limit" in retry
    page.js("document.querySelector('[data-kind=retry]').click()")
    raw = page.js("JSON.parse(document.querySelector('[data-testid=raw-events]').textContent)")
    assert raw[0]["type"] == "provider_retry" and raw[0]["status_code"] == 429


def test_a_dropped_connection_resumes_with_no_gap_and_no_duplicate(
    web_server: str, chromium: str
) -> None:
    with cutting_proxy(web_server) as proxy:
        with open_tab(chromium, f"http://127.0.0.1:{proxy.port}/") as page:
            page.send("a connection that drops")
            page.wait(lambda: len(page.last_text()) > 30, "the answer to start")
            proxy.cut()  # the stream's connection is gone mid-answer
            page.wait(lambda: page.js("state.reconnects") > 0, "the page to notice the drop")
            page.idle()
            assert page.last_text() == full_answer("a connection that drops")
            assert [m["role"] for m in page.messages()] == ["user", "assistant"]
            # the inspector's event stream (an EventSource) came back after its last seq too
            seqs = "[...inspector.runs.values()][0].events.map(e => e.seq)"
            page.wait(lambda: page.js("[...inspector.runs.values()][0].done"), "the events' end")
            got = page.js(seqs)
            assert got == sorted(set(got)) and got[0] == 0


def test_a_tool_cards_arguments_stream_in(page: WebPage) -> None:
    page.js(
        "window.argsSeen = []; new MutationObserver(() => {"
        " const card = document.querySelector('[data-testid=tool-call]');"
        " if (card && card.dataset.state === 'input-streaming')"
        "   window.argsSeen.push(card.querySelector('.args').textContent);"
        "}).observe(document.getElementById('messages'),"
        " {subtree: true, childList: true, characterData: true, attributes: true})"
    )
    page.send("the weather, please")
    page.wait(lambda: page.last_text().endswith("Done: Sunny and 21 °C in Porto."), "the answer")
    partial = [a for a in dict.fromkeys(page.js("window.argsSeen")) if a]
    assert len(partial) >= 2, partial  # the arguments grew while the model wrote them
    assert all('{"city": "Porto"}'.startswith(a) for a in partial), partial
