"""A resumed session whose last tool calls never got a result (the process died while they
ran): by default they are answered ``Cancelled``; with ``resume_tool_calls="rerun_idempotent"``
the idempotent ones run again on ``continue_()`` and the others are still ``Cancelled``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from treadle import (
    Agent,
    AssistantMessage,
    Deny,
    Hooks,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    tool,
)
from treadle.agent import AgentOptions
from treadle.sessions import CANCELLED_TEXT, JsonlStore, SqliteStore
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio

RUNS: list[str] = []


@tool(idempotent=True)
def read_file(path: str) -> str:
    """Read a file."""
    RUNS.append(f"read {path}")
    return f"contents of {path}"


@tool
def send_email(to: str) -> str:
    """Send an email."""
    RUNS.append(f"email {to}")
    return "sent"


def crashed_session(store: JsonlStore | SqliteStore) -> str:
    """A session as a crash leaves it: two calls made, neither answered."""
    sid = store.create("crashed")
    store.append(sid, UserMessage.of("Read a.txt and email bob"))
    store.append(
        sid,
        AssistantMessage(
            content=[
                ToolCall(id="r1", name="read_file", arguments={"path": "a.txt"}),
                ToolCall(id="e1", name="send_email", arguments={"to": "bob"}),
            ]
        ),
    )
    return sid


@pytest.fixture(params=["jsonl", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> JsonlStore | SqliteStore:
    return (
        JsonlStore(tmp_path / "s") if request.param == "jsonl" else SqliteStore(tmp_path / "s.db")
    )


def results(agent: Agent[None]) -> dict[str, str]:
    return {m.tool_call_id: m.text for m in agent.messages if isinstance(m, ToolResultMessage)}


async def test_by_default_unanswered_calls_are_cancelled(store: JsonlStore | SqliteStore) -> None:
    RUNS.clear()
    sid = crashed_session(store)
    agent = Agent(
        ScriptedProvider(["ok"]), tools=[read_file, send_email], store=store, session_id=sid
    )
    assert results(agent) == {"r1": CANCELLED_TEXT, "e1": CANCELLED_TEXT}
    agent.close()


async def test_opt_in_reruns_only_idempotent_calls(store: JsonlStore | SqliteStore) -> None:
    RUNS.clear()
    sid = crashed_session(store)
    model = ScriptedProvider(["I read a.txt; the email may not have gone out."])
    agent = Agent(
        model,
        tools=[read_file, send_email],
        store=store,
        session_id=sid,
        options=AgentOptions(resume_tool_calls="rerun_idempotent"),
    )
    assert results(agent) == {"e1": CANCELLED_TEXT}  # r1 waits to run again
    result = await agent.continue_()
    assert result.reason == "completed"
    assert RUNS == ["read a.txt"]  # the email was not sent twice
    assert results(agent) == {"e1": CANCELLED_TEXT, "r1": "contents of a.txt"}
    sent = model.requests[0].messages
    assert {m.tool_call_id for m in sent if isinstance(m, ToolResultMessage)} == {"r1", "e1"}
    agent.close()
    stored = store.load(sid).messages
    assert {m.tool_call_id for m in stored if isinstance(m, ToolResultMessage)} == {"r1", "e1"}


async def test_a_rerun_passes_the_hooks(store: JsonlStore | SqliteStore) -> None:
    # "through the usual hooks": a before_tool_call hook that denies the call answers it
    # with its reason; the tool does not run again behind the server's policy.
    class NoReading(Hooks):
        def __init__(self) -> None:
            self.judged: list[str] = []

        async def before_tool_call(self, run: Any, call: ToolCall) -> Any:
            self.judged.append(call.id)
            return Deny("reading is off today")

    RUNS.clear()
    sid = crashed_session(store)
    hook = NoReading()
    agent = Agent(
        ScriptedProvider(["understood"]),
        tools=[read_file, send_email],
        hooks=[hook],
        store=store,
        session_id=sid,
        options=AgentOptions(resume_tool_calls="rerun_idempotent"),
    )
    assert agent.context.approvals == {} and agent.context.waiting_tool_calls == []
    result = await agent.continue_()
    assert result.reason == "completed"
    assert RUNS == [], "the denied call was not run again"
    assert hook.judged == ["r1"]
    assert results(agent) == {"e1": CANCELLED_TEXT, "r1": "reading is off today"}
    agent.close()
