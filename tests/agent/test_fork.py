"""``Agent.fork``: a new conversation with the same model, tools and settings — in the
agent's store (a session created, or resumed when it exists) or in memory."""

from __future__ import annotations

import pytest

from treadle import Agent, tool
from treadle.sessions import MemoryStore, SessionLocked
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


@tool
def ping() -> str:
    """Ping."""
    return "pong"


async def test_a_fork_shares_settings_not_the_conversation() -> None:
    agent = Agent(ScriptedProvider(["one", "two"]), tools=[ping], system_prompt="Be brief.")
    await agent.run("first")
    fork = agent.fork()
    assert fork.messages == [] and fork.session_id != agent.session_id
    assert fork.provider is agent.provider and [t.name for t in fork.context.tools] == ["ping"]
    assert fork.context.resolve_system_prompt() == "Be brief."
    result = await fork.run("second")
    assert result.text == "two"
    assert [m.text for m in agent.messages] == ["first", "one"]  # untouched
    assert fork.usage == result.usage  # its own count, from zero


async def test_a_fork_opens_a_stored_session_or_creates_it() -> None:
    store = MemoryStore()
    template = Agent(ScriptedProvider(["a", "b", "c"]), store=store)
    first = template.fork("chat-1")
    await first.run("hello")
    first.close()
    again = template.fork("chat-1")  # resumed from the store
    assert [m.text for m in again.messages] == ["hello", "a"]
    with pytest.raises(SessionLocked):
        template.fork("chat-1")  # one writer per session
    elsewhere = MemoryStore()
    other = template.fork("chat-2", store=elsewhere)
    await other.run("there")
    assert elsewhere.exists("chat-2") and not store.exists("chat-2")
