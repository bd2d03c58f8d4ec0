"""The incremental request view equals a full filter + repair of the history, always."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from treadle import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from treadle.context import repair_transcript
from treadle.context.transcript import MISSING_RESULT_TEXT
from treadle.loop.context import RequestView as _RequestView
from treadle.types import AgentMessage, ExtensionMessage


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


@contextmanager
def incremental(short: int = 0) -> Iterator[None]:
    """Histories from ``short`` messages kept (the view repairs shorter ones afresh, which
    would leave the incremental path untested here)."""
    before = _RequestView.short
    _RequestView.short = short
    try:
        yield
    finally:
        _RequestView.short = before


@pytest.fixture(autouse=True)
def _keep_short_histories() -> Iterator[None]:
    with incremental():
        yield


def shape(messages: list[AgentMessage]) -> list[tuple[str, str, str]]:
    """What a request carries (synthetic results get their own timestamps)."""
    return [(m.role, getattr(m, "text", ""), getattr(m, "tool_call_id", "")) for m in messages]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.integers(0, 4), max_size=6), max_size=8), st.sampled_from([0, 8]))
def test_view_matches_a_full_repair_after_every_growth(
    batches: list[list[int]], short: int
) -> None:
    history: list[AgentMessage] = []
    with incremental(short):  # kept from the first message, or only from the eighth
        view = _RequestView()
        i = 0
        for batch in batches:
            for kind in batch:
                history.append(make(kind, i))
                i += 1
            expected = repair_transcript(
                [m for m in history if not isinstance(m, ExtensionMessage)]
            )
            assert shape(view.update(history)) == shape(expected)


def test_a_short_history_is_repaired_afresh_and_kept_from_the_eighth_message() -> None:
    with incremental(8):
        view = _RequestView()
        history: list[AgentMessage] = [make(0, i) for i in range(7)]
        assert view.update(history) == history
        assert view._items == []  # nothing kept: keeping costs more than repairing again
        history.append(make(4, 7))
        assert view.update(history) == history
        assert view._items == history  # kept: the next call checks only what is new
        history[:] = [make(0, 8)]  # compacted below the threshold, in place
        assert view.update(history) == history
        assert view._items == [] and view._out == []  # the old messages are not held


def test_a_replaced_history_is_seen() -> None:
    history: list[AgentMessage] = [UserMessage.of("a"), AssistantMessage(content="b")]
    view = _RequestView()
    view.update(history)
    history[:] = [UserMessage.of("summary")]  # compaction replaces the content in place
    assert view.update(history) == history


def test_the_context_keeps_its_view_and_sees_edits_made_between_calls() -> None:
    from treadle import AgentContext

    context = AgentContext(
        messages=[
            UserMessage.of("q"),
            AssistantMessage(content=[ToolCall(id="c1", name="t")]),
            ToolResultMessage(tool_call_id="c1", tool_name="t", content="r"),
            AssistantMessage(content="a"),
        ]
    )
    assert context.request_history() == context.messages
    result = context.messages[2]
    assert isinstance(result, ToolResultMessage)
    result.tool_call_id = "c2"  # an assignment: the call is now unanswered
    expected = repair_transcript(context.messages)
    assert shape(context.request_history()) == shape(expected)
    assert shape(expected)[2] == ("tool_result", MISSING_RESULT_TEXT, "c1")
    result.tool_call_id = "c1"
    context.messages[3] = UserMessage.of("replaced")  # a replaced message
    assert context.request_history() == context.messages
    context.messages.append(AssistantMessage(content="b"))
    assert context.request_history() == context.messages


def test_a_tool_call_removed_or_replaced_in_place_between_calls_is_repaired() -> None:
    from treadle import AgentContext

    call = ToolCall(id="c1", name="t")
    reply = AssistantMessage(content=[call])
    context = AgentContext(
        messages=[
            UserMessage.of("q"),
            reply,
            ToolResultMessage(tool_call_id="c1", tool_name="t", content="r"),
            AssistantMessage(content="a"),
        ]
    )
    assert context.request_history() == context.messages
    reply.content.pop()  # in place: the result is now a stray
    assert shape(context.request_history()) == shape(repair_transcript(context.messages))
    assert [m.role for m in context.request_history()] == ["user", "assistant", "assistant"]
    reply.content.append(call)
    assert context.request_history() == context.messages
    reply.content[0] = ToolCall(id="c9", name="t")  # replaced in place: c9 unanswered, c1 stray
    expected = repair_transcript(context.messages)
    assert shape(context.request_history()) == shape(expected)
    assert shape(expected)[2] == ("tool_result", MISSING_RESULT_TEXT, "c9")


def test_a_call_open_when_the_view_was_last_built_meets_its_result_later() -> None:
    view = _RequestView()
    call = ToolCall(id="c1", name="t")
    history: list[AgentMessage] = [UserMessage.of("q"), AssistantMessage(content=[call])]
    assert shape(view.update(history))[2] == ("tool_result", MISSING_RESULT_TEXT, "c1")
    history.append(ToolResultMessage(tool_call_id="c1", tool_name="t", content="r"))
    # the placeholder result the first view needed is not kept beside the real one
    assert shape(view.update(history)) == shape(history)
