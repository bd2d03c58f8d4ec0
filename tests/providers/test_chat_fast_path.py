"""The Chat adapter reads the commonest chunk (more text for the open text block) on a fast
path. Whatever the chunks, it must give the events the general path gives: the same stream
with each chunk carrying an empty ``x_groq`` (Groq's usage envelope, ignored when it holds
no usage), which keeps every chunk off the fast path, is the oracle."""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
from hypothesis import example, given, settings
from hypothesis import strategies as st

from treadle.providers import ModelRequest
from treadle.testing import Raw, WireFake
from treadle.types import UserMessage

ARGS = st.sampled_from(['{"a', '": 2', ', "b"', ": ", "3}", "", "{}", '"x"'])
TEXT = st.sampled_from(["Hello", " there", "", "é", "\n"])
INDEX = st.sampled_from([0, 0, 1, None])


@st.composite
def fragments(draw: st.DrawFn) -> dict[str, Any]:
    """One tool-call fragment: mostly bare arguments, sometimes an id, a name or odd shapes."""
    fragment: dict[str, Any] = {}
    index = draw(INDEX)
    if index is not None:
        fragment["index"] = index
    if draw(st.integers(0, 2)) == 0:
        fragment["id"] = draw(st.sampled_from(["call_a", "call_b", "call_b", "", None]))
    function: dict[str, Any] = {"arguments": draw(ARGS)}
    if draw(st.integers(0, 4)) == 0:
        function["name"] = draw(st.sampled_from(["add", "", None]))
    if draw(st.integers(0, 9)) == 0:
        function = {"arguments": {"a": 1}}  # parsed arguments (a few servers)
    fragment["function"] = function
    if draw(st.booleans()):
        fragment["type"] = "function"
    return fragment


@st.composite
def deltas(draw: st.DrawFn) -> dict[str, Any]:
    kinds = ["text", "head", "call", "call", "call", "calls", "mixed", "reasoning", "empty", "end"]
    kind = draw(st.sampled_from(kinds))
    delta: dict[str, Any]
    if kind == "text":
        delta = {"content": draw(TEXT)}
    elif kind == "head":  # a call's first fragment: its id and name
        index = draw(INDEX)
        call_id = draw(st.sampled_from(["call_a", "call_b"]))
        head = {"id": call_id, "function": {"name": "add", "arguments": draw(ARGS)}}
        delta = {"tool_calls": [head if index is None else {"index": index, **head}]}
    elif kind == "call":
        delta = {"tool_calls": [draw(fragments())]}
    elif kind == "mixed":
        delta = {"content": draw(TEXT), "tool_calls": [draw(fragments())]}
    elif kind == "calls":
        delta = {"tool_calls": [draw(fragments()), draw(fragments())]}
    elif kind == "reasoning":
        delta = {"reasoning_content": draw(TEXT)}
    elif kind == "end":  # a finish reason mid-stream: every block ends (some servers go on)
        delta = {"finish": draw(st.sampled_from(["tool_calls", "stop"]))}
        if draw(st.booleans()):
            delta["content"] = draw(TEXT)  # the last text and the finish in one chunk
        return delta
    else:
        delta = {}
    if draw(st.booleans()):
        delta["role"] = "assistant"
    if draw(st.integers(0, 3)) == 0:
        delta[draw(st.sampled_from(["content", "refusal", "reasoning"]))] = None
    if draw(st.integers(0, 5)) == 0:  # usage on a chunk with a delta (some servers do)
        delta["__usage"] = draw(st.integers(1, 50))
    return delta


def body(items: list[dict[str, Any]], finish: str, decorated: bool) -> list[bytes]:
    reads = []
    for delta in items:
        stop = delta.get("finish")
        tokens = delta.get("__usage")
        delta = {k: v for k, v in delta.items() if k not in ("__usage", "finish")}
        choice = {"index": 0, "delta": delta, "finish_reason": stop}
        chunk: dict[str, Any] = {"id": "c1", "model": "m", "choices": [choice]}
        if tokens is not None:
            chunk["usage"] = {"prompt_tokens": tokens, "completion_tokens": tokens}
        if decorated:
            chunk["x_groq"] = {}
        reads.append(f"data: {json.dumps(chunk)}\n\n".encode())
    end = {
        "id": "c1",
        "model": "m",
        "choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
    }
    reads.append(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())
    return reads


def _untimed(value: Any) -> Any:
    """``value`` without timestamps, and with the ids made up for calls sent without one
    the same (they are random)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    if isinstance(value, str) and re.fullmatch("call_[0-9a-f]{24}", value):
        return "call_(made up)"
    return value


async def events_of(reads: list[bytes]) -> list[Any]:
    provider = WireFake.openai([Raw(reads)]).provider()
    request = ModelRequest(model="m", messages=[UserMessage.of("hi")])
    try:
        return [_untimed(event.model_dump()) async for event in provider.stream(request)]
    except Exception as exc:  # the same failure either way
        return [f"{type(exc).__name__}: {exc}"]


@settings(max_examples=200, deadline=None)
@example(items=[{"content": "a"}, {"content": "b", "__usage": 5}], finish="stop")
@example(items=[{"content": "a"}, {"content": "b", "finish": "stop"}], finish="stop")
@example(items=[{"content": "a"}, {"content": "b", "refusal": "no"}], finish="stop")
@example(items=[{"reasoning_content": "hm"}, {"content": "b"}], finish="stop")
@given(
    items=st.lists(deltas(), max_size=12),
    finish=st.sampled_from(["stop", "tool_calls", "length"]),
)
def test_the_fast_path_gives_the_general_path_s_events(
    items: list[dict[str, Any]], finish: str
) -> None:
    fast = anyio.run(events_of, body(items, finish, decorated=False))
    general = anyio.run(events_of, body(items, finish, decorated=True))
    assert fast == general


def test_a_streamed_call_s_arguments_come_one_delta_per_chunk() -> None:
    """A named call, then bare argument fragments: one delta each, parsed at the end."""
    head = {"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "add"}}]}
    pieces = ['{"a', '": 2', ', "b": 3}']
    rest = [{"tool_calls": [{"index": 0, "function": {"arguments": p}}]} for p in pieces]
    events = anyio.run(events_of, body([head, *rest], "tool_calls", decorated=False))
    arguments = [e["arguments"] for e in events if e["type"] == "tool_call_delta"]
    assert arguments == pieces
    (end,) = [e for e in events if e["type"] == "tool_call_end"]
    assert end["tool_call"]["arguments"] == {"a": 2, "b": 3}
