"""The one gate (contract §7.16): no tool runs unless the server's own ``before_tool_call``
hooks let it, or it is exactly a call the run suspended on and a decision names it.

Attacks on the approvals: an approval given before its call exists, an approval replayed,
an approval carrying replacement arguments, an approval written straight into
``context.approvals``, a suspension restored from a store after a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from harness import call, calls_message, check, results_of, run_recorded

from treadle import (
    Agent,
    AgentContext,
    AgentLoopConfig,
    Allow,
    Ask,
    Deny,
    Hooks,
    ToolCall,
    UsageError,
    tool,
)
from treadle.sessions import JsonlStore
from treadle.testing import ScriptedProvider
from treadle.types import ToolExecutionStart

pytestmark = pytest.mark.anyio


class Policy(Hooks):
    """Asks for every deletion, denies any path under /etc."""

    def __init__(self) -> None:
        self.judged: list[tuple[str, Any]] = []

    async def before_tool_call(self, run: Any, call: ToolCall) -> Any:
        target = str(call.arguments.get("path", ""))
        self.judged.append((call.id, target))
        if target.startswith("/etc"):
            return Deny("not under /etc")
        return Ask("Delete it?")


class World:
    def __init__(self) -> None:
        self.deleted: list[str] = []

        @tool
        async def delete_file(path: str) -> str:
            """Delete a file."""
            self.deleted.append(path)
            return f"deleted {path}"

        self.tools = [delete_file]


def setup(*replies: Any) -> tuple[World, Policy, AgentContext, AgentLoopConfig, ScriptedProvider]:
    world, policy = World(), Policy()
    provider = ScriptedProvider(list(replies))
    context = AgentContext(tools=world.tools)
    config = AgentLoopConfig(provider=provider, hooks=[policy])
    return world, policy, context, config, provider


async def test_an_approval_for_a_call_that_does_not_exist_yet_is_refused() -> None:
    world, policy, context, config, provider = setup(
        calls_message(call("c9", "delete_file", path="/etc/passwd")), "ok"
    )
    with pytest.raises(UsageError, match=r"'c9'.*waiting: none"):
        context.approve("c9")
    with pytest.raises(UsageError, match="'c9'"):
        context.deny("c9")
    assert context.approvals == {}, "a refused decision changes nothing"
    # Planted behind approve()'s back: the model's call with that id still meets the hooks.
    context.approvals["c9"] = Allow()
    rec = await run_recorded(["tidy up"], context, config)
    check(rec, requests=provider.requests)
    assert policy.judged == [("c9", "/etc/passwd")]
    assert world.deleted == []
    assert results_of(context.messages)["c9"].text == "not under /etc"


async def test_a_replayed_approval_leaves_nothing_behind() -> None:
    first = calls_message(call("c1", "delete_file", path="notes/a.txt"))
    again = calls_message(call("c1", "delete_file", path="/etc/passwd"))  # the same id later
    world, policy, context, config, provider = setup(first, "done", again, "ok")
    rec = await run_recorded(["tidy up"], context, config)
    assert rec.end.pending_tool_calls == ["c1"]
    assert context.waiting_tool_calls == ["c1"]
    context.approve("c1")
    rec = await run_recorded(None, context, config)
    check(rec, requests=provider.requests)
    assert world.deleted == ["notes/a.txt"]
    with pytest.raises(UsageError, match="'c1'"):
        context.approve("c1")  # the replay: the call was answered
    assert context.approvals == {} and context.suspended == {}
    rec = await run_recorded(["and the rest"], context, config)  # (ids repeat: no check)
    assert rec.end.reason == "completed"
    assert world.deleted == ["notes/a.txt"], "the second c1 was judged, and denied"
    assert policy.judged[-1] == ("c1", "/etc/passwd")


async def test_replacement_arguments_are_judged_again() -> None:
    world, policy, context, config, provider = setup(
        calls_message(call("c1", "delete_file", path="notes/a.txt")), "done"
    )
    await run_recorded(["tidy up"], context, config)
    context.approve("c1", {"path": "/etc/passwd"})
    rec = await run_recorded(None, context, config)
    check(rec, requests=provider.requests)
    assert policy.judged == [("c1", "notes/a.txt"), ("c1", "/etc/passwd")]
    assert world.deleted == []
    assert results_of(context.messages)["c1"].text == "not under /etc"


async def test_replacement_arguments_the_hooks_ask_about_wait_again() -> None:
    world, policy, context, config, provider = setup(
        calls_message(call("c1", "delete_file", path="notes/a.txt")), "done"
    )
    await run_recorded(["tidy up"], context, config)
    context.approve("c1", {"path": "notes/b.txt"})
    rec = await run_recorded(None, context, config)
    assert rec.end.reason == "suspended" and world.deleted == []
    context.approve("c1")  # exactly what the hooks judged last: runs without asking again
    rec = await run_recorded(None, context, config)
    check(rec, requests=provider.requests)
    assert world.deleted == ["notes/b.txt"]
    assert policy.judged == [("c1", "notes/a.txt"), ("c1", "notes/b.txt")]
    assert [e.args for e in rec.of_type(ToolExecutionStart)] == [{"path": "notes/b.txt"}]


async def test_the_judged_arguments_run_when_a_hook_replaced_them_before_asking() -> None:
    class Sanitise(Hooks):
        async def before_tool_call(self, run: Any, call: ToolCall) -> Any:
            return Allow(arguments={"path": "sandbox/" + str(call.arguments["path"])})

    world, policy, context, config, _provider = setup(
        calls_message(call("c1", "delete_file", path="a.txt")), "done"
    )
    config = config.model_copy(update={"hooks": [Sanitise(), policy]})
    await run_recorded(["tidy up"], context, config)
    assert context.suspended["c1"].arguments == {"path": "sandbox/a.txt"}
    context.approve("c1")
    await run_recorded(None, context, config)
    assert world.deleted == ["sandbox/a.txt"], "what the hooks judged, not the model's"


async def test_a_decision_for_a_call_no_longer_waiting_is_dropped() -> None:
    world, _policy, context, config, _provider = setup(
        calls_message(call("c1", "delete_file", path="notes/a.txt")), "ok", "ok"
    )
    await run_recorded(["tidy up"], context, config)
    context.approve("c1")
    context.messages.pop()  # the history changed: c1 is not open any more
    await run_recorded(["something else"], context, config)
    assert context.approvals == {} and context.suspended == {}
    assert world.deleted == []


async def test_a_restored_suspension_is_judged_again_when_approved(tmp_path: Path) -> None:
    @tool
    async def delete_file(path: str) -> str:
        """Delete a file."""
        deleted.append(path)
        return "deleted"

    class DenyAfterRestart(Hooks):
        async def before_tool_call(self, run: Any, call: ToolCall) -> Any:
            return Deny("policy changed")

    deleted: list[str] = []
    store = JsonlStore(tmp_path)
    first: Agent[Any] = Agent(
        ScriptedProvider([calls_message(call("x", "delete_file", path="a"))]),
        tools=[delete_file],
        hooks=[Policy()],
        store=store,
    )
    assert (await first.run("go")).pending_tool_calls == ["x"]
    first.close()
    again: Agent[Any] = Agent(
        ScriptedProvider(["fine"]),
        tools=[delete_file],
        hooks=[DenyAfterRestart()],
        store=JsonlStore(tmp_path),
        session_id=first.session_id,
    )
    assert again.context.waiting_tool_calls == ["x"]
    again.context.approve("x")
    await again.continue_()
    assert deleted == []
    assert results_of(again.messages)["x"].text == "policy changed"
    again.close()
    # the Ask that suspended it is answered by the approval: it runs once approved
    third: Agent[Any] = Agent(
        ScriptedProvider([calls_message(call("y", "delete_file", path="b")), "done"]),
        tools=[delete_file],
        hooks=[Policy()],
        store=JsonlStore(tmp_path),
    )
    await third.run("go")
    third.close()
    fourth: Agent[Any] = Agent(
        ScriptedProvider(["done"]),
        tools=[delete_file],
        hooks=[Policy()],
        store=JsonlStore(tmp_path),
        session_id=third.session_id,
    )
    fourth.context.approve("y")
    assert (await fourth.continue_()).reason == "completed"
    assert deleted == ["b"]
    fourth.close()
