"""The incremental request view equals a full filter + repair of the history, always."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from treadle import (
    AssistantMessage,
    ExtensionMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    repair_transcript,
)
from treadle.loop.state import _RequestView
from treadle.types import AgentMessage


def make(kind: int, i: int) -> AgentMessage:
    call_id = f"c{i % 3}"  # ids repeat, as servers that number calls per response do
    if kind == 0:
        return UserMessage.of(f"u{i}")
    if kind == 1:
        return AssistantMessage(content=[ToolCall(id=call_id, name="t")])
    if kind == 2:
        return ToolResultMessage(tool_call_id=call_id, tool_name="t", content=f"r{i}")
    if kind == 3:
        return ExtensionMessage(kind="note", data=i)
    return AssistantMessage(content=f"a{i}")


def shape(messages: list[AgentMessage]) -> list[tuple[str, str, str]]:
    """What a request carries (synthetic results get their own timestamps)."""
    return [(m.role, getattr(m, "text", ""), getattr(m, "tool_call_id", "")) for m in messages]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 4), max_size=6), max_size=8))
def test_view_matches_a_full_repair_after_every_growth(batches: list[list[int]]) -> None:
    history: list[AgentMessage] = []
    view = _RequestView()
    i = 0
    for batch in batches:
        for kind in batch:
            history.append(make(kind, i))
            i += 1
        expected = repair_transcript([m for m in history if not isinstance(m, ExtensionMessage)])
        assert shape(view.update(history)) == shape(expected)


def test_a_replaced_history_is_seen() -> None:
    history: list[AgentMessage] = [UserMessage.of("a"), AssistantMessage(content="b")]
    view = _RequestView()
    view.update(history)
    history[:] = [UserMessage.of("summary")]  # compaction replaces the content in place
    assert view.update(history) == history
