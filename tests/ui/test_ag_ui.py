"""AG-UI over HTTP: every frame is a valid AG-UI event (the ``ag-ui-protocol`` models), the
answer, tool calls, results, state, front-end tools and approvals come out right, and a
reconnect with ``Last-Event-ID`` continues with no gap and no duplicate."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from treadle import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from treadle.ui import format_cursor, parse_cursor
from treadle.ui.ag_ui import messages_from_ag_ui, messages_to_ag_ui

from .conftest import sse_frames

ag_ui_core = pytest.importorskip(
    "ag_ui.core", reason="install the ag-ui extra: pip install -e '.[ag-ui]'"
)
EVENT = __import__("pydantic").TypeAdapter(ag_ui_core.Event)


def run(
    url: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> list[tuple[str | None, dict[str, Any]]]:
    with httpx.stream("POST", url + "/agui", json=body, headers=headers, timeout=30) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return [(i, json.loads(d)) for i, d in sse_frames(response)]


def checked(frames: list[tuple[str | None, dict[str, Any]]]) -> list[dict[str, Any]]:
    events = []
    for _, data in frames:
        event = EVENT.validate_python(data)
        assert not event.model_extra, f"fields AG-UI does not define: {event.model_extra}"
        events.append(data)
    cursors = [parse_cursor(i) for i, _ in frames]
    assert all(c is not None for c in cursors)
    assert cursors == sorted(cursors) and len(set(cursors)) == len(cursors)
    return events


def body(text: str, **extra: Any) -> dict[str, Any]:
    thread = uuid.uuid4().hex
    return {
        "threadId": thread,
        "runId": f"{thread}-run",
        "messages": [{"id": "u1", "role": "user", "content": text}],
        **extra,
    }


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def test_a_text_answer_is_a_valid_ag_ui_run(ui_server: str) -> None:
    events = checked(run(ui_server, body("hello")))
    kinds = [e["type"] for e in events]
    assert kinds[0] == "RUN_STARTED" and kinds[-1] == "RUN_FINISHED"
    assert kinds.count("TEXT_MESSAGE_START") == kinds.count("TEXT_MESSAGE_END") == 1
    assert text_of(events).startswith("You said: hello. Here is a longer answer")
    assert events[-1]["outcome"] == {"type": "success"}
    assert events[-1]["usage"][0]["model"] == "offline-rules"


def test_a_server_tool_round_trip(ui_server: str) -> None:
    events = checked(run(ui_server, body("what is the weather")))
    start = next(e for e in events if e["type"] == "TOOL_CALL_START")
    assert start["toolCallName"] == "weather"
    args = "".join(e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS")
    assert json.loads(args) == {"city": "Porto"}
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert result["toolCallId"] == start["toolCallId"] and "Sunny" in result["content"]
    assert text_of(events).startswith("Done: Sunny and 21 °C in Porto.")
    steps = [e["stepName"] for e in events if e["type"] == "STEP_STARTED"]
    assert steps == ["turn 0", "turn 1"]


def test_one_message_id_for_the_text_and_tool_calls_of_an_assistant_message(
    ui_server: str,
) -> None:
    events = checked(run(ui_server, body("the forecast please")))
    starts = [e for e in events if e["type"] == "TEXT_MESSAGE_START"]
    calls = [e for e in events if e["type"] == "TOOL_CALL_START"]
    assert len(starts) == 2 and len(calls) == 1  # the sentence + call; the answer after it
    assert calls[0]["parentMessageId"] == starts[0]["messageId"]
    assert starts[1]["messageId"] != starts[0]["messageId"]  # a new assistant message
    results = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert results[0]["messageId"] not in {s["messageId"] for s in starts}


def test_front_end_tool_stops_the_run_and_its_result_continues_it(ui_server: str) -> None:
    tool = {
        "name": "pick_colour",
        "description": "Pick a colour.",
        "parameters": {"type": "object"},
    }
    first = body("pick a colour", tools=[tool])
    events = checked(run(ui_server, first))
    finished = events[-1]
    assert finished["outcome"] == {"type": "success", "pendingToolCallIds": ["call-pick_colour"]}
    assert not any(e["type"] == "TOOL_CALL_RESULT" for e in events)
    follow = {
        **first,
        "runId": uuid.uuid4().hex,
        "messages": [
            *first["messages"],
            {
                "id": "a1",
                "role": "assistant",
                "toolCalls": [
                    {
                        "id": "call-pick_colour",
                        "type": "function",
                        "function": {"name": "pick_colour", "arguments": '{"options": ["red"]}'},
                    }
                ],
            },
            {"id": "t1", "role": "tool", "toolCallId": "call-pick_colour", "content": "blue"},
        ],
    }
    again = checked(run(ui_server, follow))
    assert text_of(again).startswith("Done: blue")


def test_approval_is_an_interrupt_and_a_resume_entry_answers_it(ui_server: str) -> None:
    for approved, expected in ((True, "Done: Deleted notes.txt."), (False, "Done: no thanks")):
        first = body("delete my notes")  # a thread of its own: an interrupt is answered once
        events = checked(run(ui_server, first))
        outcome = events[-1]["outcome"]
        assert outcome["type"] == "interrupt"
        interrupt = outcome["interrupts"][0]
        assert interrupt["toolCallId"] == "call-delete_file"
        assert interrupt["reason"] == "tool_approval"
        history = [
            *first["messages"],
            {
                "id": "a1",
                "role": "assistant",
                "toolCalls": [
                    {
                        "id": "call-delete_file",
                        "type": "function",
                        "function": {"name": "delete_file", "arguments": '{"path": "notes.txt"}'},
                    }
                ],
            },
        ]
        resumed = {
            **first,
            "runId": uuid.uuid4().hex,
            "messages": history,
            "resume": [
                {
                    "interruptId": interrupt["id"],
                    "status": "resolved",
                    "payload": {"approved": approved, "reason": "no thanks"},
                }
            ],
        }
        after = checked(run(ui_server, resumed))
        result = next(e for e in after if e["type"] == "TOOL_CALL_RESULT")
        assert ("Deleted" in result["content"]) is approved
        assert text_of(after).startswith(expected)
        replayed = httpx.post(
            ui_server + "/agui", json={**resumed, "runId": uuid.uuid4().hex}, timeout=30
        )
        assert replayed.status_code == 409, "an interrupt already answered is not answered again"


def test_no_state_snapshot_for_an_empty_state(ui_server: str) -> None:
    events = checked(run(ui_server, body("add a todo", state={})))
    kinds = [e["type"] for e in events]
    assert "STATE_SNAPSHOT" not in kinds
    delta = next(e for e in events if e["type"] == "STATE_DELTA")  # changes still arrive
    assert delta["delta"] == [{"op": "add", "path": "/todos", "value": ["buy milk"]}]


def test_state_snapshot_then_json_patch_deltas(ui_server: str) -> None:
    events = checked(run(ui_server, body("add a todo", state={"todos": ["call mum"]})))
    snapshot = next(e for e in events if e["type"] == "STATE_SNAPSHOT")
    assert snapshot["snapshot"] == {"todos": ["call mum"]}
    delta = next(e for e in events if e["type"] == "STATE_DELTA")
    assert delta["delta"] == [
        {"op": "replace", "path": "/todos", "value": ["call mum", "buy milk"]}
    ]


@pytest.mark.parametrize("cut", [1, 3, 7, 20])
def test_reconnect_with_last_event_id_has_no_gap_and_no_duplicate(ui_server: str, cut: int) -> None:
    request = body("tell me a story")
    with httpx.stream("POST", ui_server + "/agui", json=request, timeout=30) as response:
        seen = []
        for frame in sse_frames(response):
            seen.append(frame)
            if len(seen) == cut:
                break  # the connection drops here
    last_id = seen[-1][0]
    assert last_id is not None
    rest = run(ui_server, request, headers={"Last-Event-ID": last_id})
    prelude = [(i, d) for i, d in rest if i is None]
    resumed = [(i, d) for i, d in rest if i is not None]
    assert prelude[0][1]["type"] == "RUN_STARTED"
    whole = [(i, json.loads(d)) for i, d in seen] + resumed
    checked(whole)
    full = checked(run(ui_server, {**request, "runId": request["runId"]}))  # the whole run again
    assert [d for _, d in whole] == full
    assert text_of(full).startswith("You said: tell me a story.")


def test_reconnect_by_get_with_an_unknown_run_is_204(ui_server: str) -> None:
    assert httpx.get(ui_server + "/agui/runs/nope", timeout=10).status_code == 204


@pytest.mark.parametrize(
    ("payload", "status", "words"),
    [
        ({"messages": []}, 422, "threadId"),
        (
            {
                "threadId": "t",
                "messages": [
                    {
                        "role": "assistant",
                        "toolCalls": [
                            {"id": "x", "function": {"name": "weather", "arguments": "{not json"}}
                        ],
                    }
                ],
            },
            422,
            "not JSON",
        ),
        (
            {
                "threadId": "t2",
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [{"name": "weather", "description": "clash"}],
            },
            422,
            "already has",
        ),
    ],
)
def test_bad_input_gets_a_clear_error(
    ui_server: str, payload: dict[str, Any], status: int, words: str
) -> None:
    response = httpx.post(ui_server + "/agui", json=payload, timeout=10)
    assert response.status_code == status
    assert words in response.json()["error"]


def test_messages_convert_both_ways() -> None:
    history = [
        UserMessage.of("hi"),
        AssistantMessage(content=[ToolCall(id="c1", name="weather", arguments={"city": "Porto"})]),
        ToolResultMessage(tool_call_id="c1", tool_name="weather", content="Sunny"),
        AssistantMessage(content="It is sunny."),
    ]
    wire = messages_to_ag_ui(history)
    message = __import__("pydantic").TypeAdapter(ag_ui_core.Message)
    for item in wire:
        assert not message.validate_python(item).model_extra
    back, system = messages_from_ag_ui([{"role": "system", "content": "Be brief."}, *wire])
    assert system == "Be brief."
    assert [m.model_dump(exclude={"timestamp"}) for m in back] == [
        m.model_dump(exclude={"timestamp"}) for m in history
    ]


@given(st.integers(min_value=0, max_value=10**9), st.integers(min_value=0, max_value=10**6))
def test_cursor_round_trips(seq: int, index: int) -> None:
    assert parse_cursor(format_cursor((seq, index))) == (seq, index)


@given(st.text(max_size=12))
@example("¹")  # a digit to str.isdigit, not to int()
@example("1.²")
def test_cursor_parser_never_raises(text: str) -> None:
    cursor = parse_cursor(text)
    assert cursor is None or (cursor[0] >= 0 and cursor[1] >= 0)
