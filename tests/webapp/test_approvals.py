"""Approvals on the page: the hook's question on the card, a reason sent with Deny, a denied
call still denied after a reload, and a composer that never answers a waiting call."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from tests.browser import needs_chromium

from .page import WebPage, open_tab

pytestmark = needs_chromium
# no test here acts while an answer streams: the model answers at a quick pace (conftest.py)
STREAM_DELAY = "0.005"

HAS_APPROVE = "document.querySelector('[data-testid=approve]') !== null"


@pytest.fixture
def page(web_server: str, chromium: str) -> Iterator[WebPage]:
    with open_tab(chromium, web_server + "/") as tab:
        yield tab


def asked(page: WebPage, text: str) -> None:
    page.send(text)
    page.wait(lambda: page.js(HAS_APPROVE), "the approval card")
    page.idle()


def test_the_hooks_question_is_on_the_approval_card(page: WebPage) -> None:
    asked(page, "delete my notes")
    prompt = "document.querySelector('[data-testid=approval-prompt]')?.textContent"
    assert page.js(prompt) == "Delete this file?"  # ApproveDeletes: Ask("Delete this file?")
    page.reload()  # the same question after a reload
    page.wait(lambda: page.js(HAS_APPROVE), "the approval card again")
    assert page.js(prompt) == "Delete this file?"


def test_deny_sends_its_reason_and_a_reload_keeps_the_call_denied(page: WebPage) -> None:
    asked(page, "delete my notes")
    page.js(
        "(() => { const r = document.querySelector('[data-testid=deny-reason]');"
        " r.value = 'keep that file, it is the only copy'; })()"
    )
    page.click("deny")
    # the model got the reason as the call's result (the scripted model echoes results)
    page.wait(
        lambda: page.last_text().endswith("Done: keep that file, it is the only copy"),
        "the answer to the denial",
    )
    page.idle()
    card = page.tools()[-1]
    assert card["state"] == "output-denied"
    assert "keep that file, it is the only copy" in card["text"]
    page.reload()
    page.wait(lambda: page.tools(), "the card after the reload")
    card = page.tools()[-1]
    assert card["state"] == "output-denied", card  # not "error"
    assert "denied" in card["text"] and "keep that file, it is the only copy" in card["text"]


def test_the_composer_does_not_answer_a_waiting_call(page: WebPage) -> None:
    asked(page, "delete my notes")
    page.send("actually, tell me a joke")
    page.wait(lambda: "Approve or Deny" in page.status(), "the note")
    assert [m["role"] for m in page.messages()] == ["user", "assistant"]  # nothing sent
    assert page.tools()[-1]["state"] == "approval-requested"
    assert not page.running()
    # the text waits in the box; the call is still answerable
    assert page.js("document.querySelector('[data-testid=message-input]').value") == (
        "actually, tell me a joke"
    )
    page.click("approve")
    page.wait(lambda: page.last_text().endswith("Done: Deleted notes.txt."), "the approval")
    assert page.status() == "" or "Approve or Deny" not in page.status()
    page.idle()
    page.click("send")  # now it goes
    page.wait(lambda: page.last_text("user") == "actually, tell me a joke", "the message")


def test_an_approval_request_names_its_question_on_the_wire(web_server: str) -> None:
    """Over HTTP: the stream carries the question as a transient data part before the
    approval request (a useChat client may ignore it)."""
    import httpx

    body = {
        "id": "wire-ask",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete"}]}],
        "trigger": "submit-message",
    }
    response = httpx.post(web_server + "/api/chat", json=body, timeout=30)
    frames = [
        json.loads(line[6:])
        for line in response.text.splitlines()
        if line.startswith("data: ") and line != "data: [DONE]"
    ]
    kinds = [f["type"] for f in frames]
    at = kinds.index("tool-approval-request")
    assert frames[at - 1] == {
        "type": "data-approval-prompt",
        "id": "call-delete",
        "data": {"toolCallId": "call-delete", "prompt": "Delete this file?"},
        "transient": True,
    }
