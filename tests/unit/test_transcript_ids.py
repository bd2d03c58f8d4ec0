"""Servers that number tool calls per response reuse ids across turns (call_0, call_0 …)."""

from __future__ import annotations

from treadle import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from treadle.context import repair_transcript, validate_transcript


def call(call_id: str) -> AssistantMessage:
    return AssistantMessage(content=[ToolCall(id=call_id, name="t")])


def result(call_id: str, text: str) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name="t", content=text)


def test_an_id_reused_by_a_later_turn_is_valid_and_survives_repair() -> None:
    history = [
        UserMessage.of("go"),
        call("call_0"),
        result("call_0", "one"),
        call("call_0"),
        result("call_0", "two"),
        AssistantMessage(content="done"),
    ]
    assert validate_transcript(history) == []
    assert repair_transcript(history) == history


def test_a_second_result_and_an_orphan_are_reported_and_dropped() -> None:
    history = [
        UserMessage.of("go"),
        call("c"),
        result("c", "one"),
        result("c", "again"),
        result("x", "orphan"),
    ]
    problems = [str(issue) for issue in validate_transcript(history)]
    assert problems == [
        "message 3: second result for tool call 'c'",
        "message 4: result for tool call 'x' without its call",
    ]
    assert repair_transcript(history) == history[:3]


def test_an_unanswered_call_before_a_reused_id_gets_a_synthetic_result() -> None:
    history = [UserMessage.of("go"), call("call_0"), call("call_0"), result("call_0", "two")]
    repaired = repair_transcript(history)
    assert validate_transcript(repaired) == []
    assert [m.role for m in repaired] == [
        "user",
        "assistant",
        "tool_result",
        "assistant",
        "tool_result",
    ]
    assert repaired[2].is_error and repaired[4].text == "two"  # type: ignore[union-attr]
