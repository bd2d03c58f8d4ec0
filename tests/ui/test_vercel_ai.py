"""The Vercel AI SDK UI message stream over HTTP: the header, the chunk sequence, approvals,
client-side tools, history conversion, and resuming (replay, or exactly after a cursor)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from treadle import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from treadle.loop import Allow, Deny
from treadle.types import ThinkingContent
from treadle.ui.vercel_ai import messages_from_ui

from .conftest import sse_frames

CHUNK_TYPES = {
    "start",
    "finish",
    "start-step",
    "finish-step",
    "text-start",
    "text-delta",
    "text-end",
    "reasoning-start",
    "reasoning-delta",
    "reasoning-end",
    "tool-input-start",
    "tool-input-delta",
    "tool-input-available",
    "tool-output-available",
    "tool-output-error",
    "tool-output-denied",
    "tool-approval-request",
    "error",
    "abort",
}


def chat(
    url: str, messages: list[dict[str, Any]], chat_id: str | None = None
) -> list[tuple[str | None, Any]]:
    request = {"id": chat_id or uuid.uuid4().hex, "messages": messages, "trigger": "submit-message"}
    with httpx.stream("POST", url + "/api/chat", json=request, timeout=30) as response:
        assert response.status_code == 200
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        return [(i, d if d == "[DONE]" else json.loads(d)) for i, d in sse_frames(response)]


def user(text: str) -> dict[str, Any]:
    return {"id": uuid.uuid4().hex, "role": "user", "parts": [{"type": "text", "text": text}]}


def chunks(frames: list[tuple[str | None, Any]]) -> list[dict[str, Any]]:
    assert frames[-1][1] == "[DONE]"
    out = [d for _, d in frames[:-1]]
    assert {c["type"] for c in out} <= CHUNK_TYPES
    return out


def test_text_answer_chunks(ui_server: str) -> None:
    out = chunks(chat(ui_server, [user("hello")]))
    kinds = [c["type"] for c in out]
    assert kinds[:3] == ["start", "start-step", "text-start"]
    assert kinds[-3:] == ["text-end", "finish-step", "finish"]
    text = "".join(c["delta"] for c in out if c["type"] == "text-delta")
    assert text.startswith("You said: hello.")
    assert out[-1]["finishReason"] == "stop"


def test_tool_round_trip_chunks(ui_server: str) -> None:
    out = chunks(chat(ui_server, [user("weather?")]))
    available = next(c for c in out if c["type"] == "tool-input-available")
    assert available == {
        "type": "tool-input-available",
        "toolCallId": "call-weather",
        "toolName": "weather",
        "input": {"city": "Porto"},
    }
    result = next(c for c in out if c["type"] == "tool-output-available")
    assert result["output"].startswith("Sunny")
    assert [c["type"] for c in out].count("start-step") == 2


def test_approval_request_then_denied_answer(ui_server: str) -> None:
    first_user = user("delete it")
    out = chunks(chat(ui_server, [first_user], "c-deny"))
    request = next(c for c in out if c["type"] == "tool-approval-request")
    assert request["toolCallId"] == "call-delete_file"
    assert out[-1]["finishReason"] == "tool-calls"
    assistant = {
        "id": out[0]["messageId"],
        "role": "assistant",
        "parts": [
            {"type": "step-start"},
            {
                "type": "tool-delete_file",
                "toolCallId": "call-delete_file",
                "state": "approval-responded",
                "input": {"path": "notes.txt"},
                "approval": {"id": request["approvalId"], "approved": False, "reason": "keep it"},
            },
        ],
    }
    again = chunks(chat(ui_server, [first_user, assistant], "c-deny"))
    assert again[0] == {"type": "start", "messageId": assistant["id"]}  # the same message goes on
    assert {"type": "tool-output-denied", "toolCallId": "call-delete_file"} in again
    text = "".join(c["delta"] for c in again if c["type"] == "text-delta")
    assert text.startswith("Done: keep it")


def test_resume_replays_the_active_run_or_continues_after_a_cursor(ui_server: str) -> None:
    chat_id = uuid.uuid4().hex
    request = {"id": chat_id, "messages": [user("tell me a story")], "trigger": "submit-message"}
    with httpx.stream("POST", ui_server + "/api/chat", json=request, timeout=30) as response:
        seen = []
        for frame in sse_frames(response):
            seen.append(frame)
            if len(seen) == 6:
                break
    stream_url = f"{ui_server}/api/chat/{chat_id}/stream"
    with httpx.stream(
        "GET", stream_url, headers={"Last-Event-ID": seen[-1][0] or ""}, timeout=30
    ) as r:
        rest = list(sse_frames(r))
    with httpx.stream("GET", stream_url, headers={"Last-Event-ID": "0"}, timeout=30) as r:
        replay_after_start = list(sse_frames(r))
    whole = seen + rest
    assert [i for i, _ in whole] == [i for i, _ in [seen[0], *replay_after_start]]
    assert whole[-1][1] == "[DONE]"
    # Once the run is over, useChat's resume without a cursor finds nothing to resume.
    assert httpx.get(stream_url, timeout=10).status_code == 204


def test_bad_body_is_422_with_what_was_expected(ui_server: str) -> None:
    response = httpx.post(ui_server + "/api/chat", json={"prompt": "hi"}, timeout=10)
    assert response.status_code == 422
    assert "messages" in response.json()["error"]


def test_ui_messages_become_treadle_history_with_decisions() -> None:
    history, decisions = messages_from_ui(
        [
            {"role": "user", "parts": [{"type": "text", "text": "hi"}]},
            {
                "role": "assistant",
                "parts": [
                    {"type": "step-start"},
                    {"type": "reasoning", "text": "hmm"},
                    {
                        "type": "tool-weather",
                        "toolCallId": "w1",
                        "state": "output-available",
                        "input": {"city": "Porto"},
                        "output": {"sky": "clear"},
                    },
                    {"type": "step-start"},
                    {"type": "text", "text": "Clear."},
                    {
                        "type": "dynamic-tool",
                        "toolName": "rm",
                        "toolCallId": "r1",
                        "state": "approval-responded",
                        "input": {},
                        "approval": {"id": "r1", "approved": True},
                    },
                    {
                        "type": "tool-ask",
                        "toolCallId": "a1",
                        "state": "approval-responded",
                        "input": {},
                        "approval": {"id": "a1", "approved": False, "reason": "no"},
                    },
                ],
            },
        ]
    )
    assert isinstance(history[0], UserMessage) and history[0].text == "hi"
    first = history[1]
    assert isinstance(first, AssistantMessage)
    assert isinstance(first.content[0], ThinkingContent)
    assert first.tool_calls == [ToolCall(id="w1", name="weather", arguments={"city": "Porto"})]
    result = history[2]
    assert isinstance(result, ToolResultMessage) and json.loads(result.text) == {"sky": "clear"}
    second = history[3]
    assert isinstance(second, AssistantMessage) and second.text == "Clear."
    assert [c.name for c in second.tool_calls] == ["rm", "ask"]
    assert decisions == {"r1": Allow(), "a1": Deny("no")}
    assert len(history) == 4


@pytest.mark.parametrize("bad", [[{"role": "assistant", "parts": "oops"}]])
def test_unreadable_messages_are_rejected(bad: list[Any]) -> None:
    with pytest.raises((ValueError, TypeError, AttributeError)):
        messages_from_ui(bad)
