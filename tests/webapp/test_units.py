"""The pieces under the web app: ``web_app(agent)``, a stored history as UI messages, and
runs that keep their raw events for the inspector."""

from __future__ import annotations

import pytest

from treadle import Agent
from treadle.sessions import MemoryStore
from treadle.testing import ScriptedProvider
from treadle.types import (
    AssistantMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from treadle.ui import UIRuns
from treadle.ui.vercel_ai import start_run
from treadle.ui.web import web_app
from treadle.ui.web._history import event_json, messages_to_ui

pytest.importorskip("starlette", reason="the web extra is not installed")


def test_web_app_uses_the_agents_store_or_memory() -> None:
    plain = Agent(ScriptedProvider(["hi"]))
    assert isinstance(web_app(plain).state.web.store, MemoryStore)
    store = MemoryStore()
    stored = Agent(ScriptedProvider(["hi"]), store=store)
    app = web_app(stored, title="Mine")
    assert app.state.web.store is store and app.state.web.title == "Mine"
    # the agent's own session is served by the agent itself
    assert app.state.web.runs.agent_for(stored.session_id) is stored


def test_a_history_becomes_ui_messages() -> None:
    history = [
        UserMessage.of("weather and delete?"),
        AssistantMessage(
            content=[
                ThinkingContent(thinking="hmm"),
                TextContent(text="On it."),
                ToolCall(id="c1", name="weather", arguments={"city": "Porto"}),
                ToolCall(id="c2", name="boom", arguments={}),
                ToolCall(id="c3", name="delete_file", arguments={"path": "x"}),
            ],
            stop_reason="tool_use",
        ),
        ToolResultMessage(tool_call_id="c1", tool_name="weather", content="Sunny"),
        ToolResultMessage(tool_call_id="c2", tool_name="boom", content="failed", is_error=True),
        UserMessage.of("again"),
        AssistantMessage(content="Partly", stop_reason="aborted"),
    ]
    ui = messages_to_ui(history, pending=["c3"])
    assert [(m["role"], m["index"]) for m in ui] == [
        ("user", 1),
        ("assistant", 4),
        ("user", 5),
        ("assistant", 6),
    ]
    parts = ui[1]["parts"]
    assert [p["type"] for p in parts] == [
        "step-start",
        "reasoning",
        "text",
        "tool-weather",
        "tool-boom",
        "tool-delete_file",
    ]
    weather, boom, delete = parts[3:]
    assert weather["state"] == "output-available" and weather["output"] == "Sunny"
    assert weather["input"] == {"city": "Porto"}
    assert boom["state"] == "output-error" and boom["errorText"] == "failed"
    assert delete["state"] == "approval-requested" and delete["approval"] == {"id": "c3"}
    assert ui[3].get("stopped") is True and "stopped" not in ui[1]


@pytest.mark.anyio
async def test_runs_keep_their_raw_events_when_asked() -> None:
    agent = Agent(ScriptedProvider(["hello"] * 2))
    body = {
        "id": "t",
        "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
    }
    keeping = UIRuns(agent, keep_events=True)
    async with keeping.serving():
        live = start_run(keeping, body)
        await live.done.wait()
    assert live.events is not None and live.events.closed
    kinds = [e.type for e in live.events.items]
    assert kinds[0] == "agent_start" and kinds[-1] == "agent_end" and "message_update" in kinds
    update = next(e for e in live.events.items if e.type == "message_update")
    assert set(event_json(update)) == {"type", "seq", "loop_id", "depth", "timestamp", "delta"}
    plain = UIRuns(agent)
    async with plain.serving():
        other = start_run(plain, body)
        await other.done.wait()
    assert other.events is None
