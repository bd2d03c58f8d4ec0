"""One rule for a tool call's arguments on every adapter, from each API's own wire format:
``null`` and empty arguments are no arguments (``{}``, the tool runs); invalid JSON (or JSON
that is not an object) keeps the text in ``raw_arguments`` with ``{}`` (the loop answers the
call with an error the model can act on)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from treadle import AgentContext, AgentLoopConfig, ToolResultMessage, agent_loop, tool
from treadle.providers import ModelRequest, StreamDone
from treadle.testing import Raw, WireFake
from treadle.types import ToolCall, UserMessage

pytestmark = pytest.mark.anyio

NDJSON = {"content-type": "application/x-ndjson"}


def sse(*events: dict[str, Any], done: bool = False) -> str:
    lines = [f"data: {json.dumps(event)}\n\n" for event in events]
    return "".join(lines) + ("data: [DONE]\n\n" if done else "")


def anthropic_sse(*events: dict[str, Any]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def openai_body(args: Any) -> Raw:
    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "f"}}
    if args is not None:
        call["function"]["arguments"] = args
    return Raw(
        sse(
            {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"tool_calls": [call]}}]},
            {"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            done=True,
        )
    )


def anthropic_body(args: Any) -> Raw:
    deltas = []
    if args:
        delta = {"type": "input_json_delta", "partial_json": args}
        deltas.append({"type": "content_block_delta", "index": 0, "delta": delta})
    return Raw(
        anthropic_sse(
            {"type": "message_start", "message": {"id": "m1", "model": "claude", "usage": {}}},
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
            },
            *deltas,
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
            {"type": "message_stop"},
        )
    )


def responses_body(args: Any) -> Raw:
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "f"}
    done_item = {**item, "arguments": args} if args is not None else item
    deltas = []
    if args:
        deltas.append(
            {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": args}
        )
    return Raw(
        sse(
            {"type": "response.created", "response": {"id": "r1", "model": "gpt"}},
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**item, "arguments": ""},
            },
            *deltas,
            {"type": "response.output_item.done", "output_index": 0, "item": done_item},
            {"type": "response.completed", "response": {"id": "r1", "model": "gpt"}},
        )
    )


def gemini_body(args: Any) -> Raw:
    call: dict[str, Any] = {"name": "f"}
    if args is not None:
        call["args"] = args
    chunk = {
        "candidates": [
            {"index": 0, "content": {"parts": [{"functionCall": call}]}, "finishReason": "STOP"}
        ],
        "responseId": "g1",
    }
    return Raw(sse(chunk))


def ollama_body(args: Any) -> Raw:
    function: dict[str, Any] = {"name": "f"}
    if args is not None:
        function["arguments"] = args
    lines = [
        {"model": "q", "message": {"role": "assistant", "tool_calls": [{"function": function}]}},
        {"model": "q", "message": {"role": "assistant", "content": ""}, "done": True},
    ]
    return Raw("".join(json.dumps(line) + "\n" for line in lines), headers=NDJSON)


BODIES = {
    "openai": openai_body,
    "anthropic": anthropic_body,
    "responses": responses_body,
    "gemini": gemini_body,
    "ollama": ollama_body,
}

# (wire arguments per format, expected arguments, expected raw_arguments)
NULL = {f: "null" for f in BODIES} | {"gemini": None}  # Gemini: "args": null is the JSON null
ABSENT = dict.fromkeys(BODIES, None)
EMPTY = {f: "" for f in BODIES} | {"gemini": {}}
INVALID = {f: '{"city": "Par' for f in BODIES}
NOT_AN_OBJECT = {f: "[1, 2]" for f in BODIES} | {"gemini": [1, 2]}


async def call_of(fmt: str, args: Any) -> ToolCall:
    fake = WireFake(fmt, [BODIES[fmt](args)])
    provider = fake.provider(api_key="k")
    events = [e async for e in provider.stream(ModelRequest(messages=[UserMessage.of("go")]))]
    done = events[-1]
    assert isinstance(done, StreamDone)
    (call,) = done.message.tool_calls
    assert call.name == "f"
    return call


@pytest.mark.parametrize("fmt", list(BODIES))
@pytest.mark.parametrize("case", [NULL, ABSENT, EMPTY], ids=["null", "absent", "empty"])
@pytest.mark.one_backend  # parsing a call's arguments: the backend cannot matter
async def test_null_absent_and_empty_arguments_are_no_arguments(
    fmt: str, case: dict[str, Any]
) -> None:
    call = await call_of(fmt, case[fmt])
    assert (call.arguments, call.raw_arguments) == ({}, None)


@pytest.mark.parametrize("fmt", [f for f in BODIES if f != "gemini"])  # Gemini sends objects
@pytest.mark.one_backend  # parsing a call's arguments: the backend cannot matter
async def test_invalid_json_keeps_the_text(fmt: str) -> None:
    call = await call_of(fmt, INVALID[fmt])
    assert (call.arguments, call.raw_arguments) == ({}, '{"city": "Par')


@pytest.mark.parametrize("fmt", list(BODIES))
@pytest.mark.one_backend  # parsing a call's arguments: the backend cannot matter
async def test_json_that_is_not_an_object_keeps_the_text(fmt: str) -> None:
    call = await call_of(fmt, NOT_AN_OBJECT[fmt])
    assert call.arguments == {} and call.raw_arguments is not None
    assert json.loads(call.raw_arguments) == [1, 2]


@pytest.mark.parametrize("fmt", list(BODIES))
async def test_in_the_loop_null_runs_the_tool_and_invalid_json_is_an_error(fmt: str) -> None:
    ran: list[str] = []

    @tool
    def f() -> str:
        """Does nothing."""
        ran.append("f")
        return "done"

    bad = INVALID[fmt] if fmt != "gemini" else NOT_AN_OBJECT[fmt]
    script = [BODIES[fmt](NULL[fmt]), BODIES[fmt](bad)]
    fake = WireFake(fmt, script, default="ok")
    config = AgentLoopConfig(provider=fake.provider(api_key="k"))
    new = await agent_loop("go", AgentContext(tools=[f]), config)
    results = [m for m in new if isinstance(m, ToolResultMessage)]
    assert [r.is_error for r in results] == [False, True]
    assert ran == ["f"]
