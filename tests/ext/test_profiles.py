"""Profiles: Agent.run_ephemeral(prompt, profile=...) (core) and treadle.ext.profiles, which
switches the system prompt and tools mid-run; the memory extension's user message."""

from __future__ import annotations

from pathlib import Path

import pytest

from treadle import Agent, AssistantMessage, ModelRequest, ToolCall, UserMessage, tool
from treadle.agent import Profile
from treadle.ext.memory import USER_MEMORY_HEADER, MemoryStore, UserMemory
from treadle.ext.profiles import PERSONA_SEPARATOR, Profiles
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


@tool
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: the file
    """
    return f"contents of {path}"


@tool
def run_tests() -> str:
    """Run the tests."""
    return "3 passed"


def calls(tool_name: str, cid: str = "1", **arguments: object) -> AssistantMessage:
    return AssistantMessage(content=[ToolCall(id=cid, name=tool_name, arguments=arguments)])


async def test_run_ephemeral_with_a_profile() -> None:
    model = ScriptedProvider(
        [
            "1. read\n2. answer",  # the planning call the profile turns on
            calls("run_tests"),
            calls("run_tests", "2"),
        ]
    )
    agent = Agent(model, tools=[read_file], system_prompt="You chat.")
    agent.messages.append(UserMessage.of("earlier"))
    coder = Profile(
        "coder", system_prompt="You code.", tools=[run_tests], planning=True, max_turns=1
    )
    result = await agent.run_ephemeral("fix it", profile=coder)
    assert result.reason == "limit"  # one turn only
    planning, turn = model.requests
    assert planning.tools == [] and "You code." in (planning.system_prompt or "")
    assert turn.system_prompt == "You code." and [t.name for t in turn.tools] == ["run_tests"]
    assert next(m.text for m in turn.messages if isinstance(m, UserMessage)) == "earlier"
    # the agent itself is untouched
    assert len(agent.messages) == 1 and agent.usage.total_tokens == 0
    assert agent.context.system_prompt == "You chat." and not agent.planning
    assert [t.name for t in agent.context.tools] == ["read_file"]
    # without a profile: the agent's own settings
    model2 = ScriptedProvider(["ok"])
    plain = Agent(model2, tools=[read_file], system_prompt="You chat.")
    assert (await plain.run_ephemeral("hi")).text == "ok"
    assert model2.requests[0].system_prompt == "You chat."


async def test_a_tool_switches_the_profile_mid_run() -> None:
    profiles = Profiles(
        [
            Profile("chat", system_prompt="Chat briefly.", tools=[read_file]),
            Profile(
                "coder",
                system_prompt=lambda: "Write code.",
                tools=[run_tests],
                description="coding",
            ),
        ],
        persona="You are Navi.",
    )
    model = ScriptedProvider(
        [calls("switch_profile", name="coder"), calls("run_tests", "2"), "Done."]
    )
    agent = profiles.agent(model)
    result = await agent.run("please fix the build")
    assert result.reason == "completed"
    first, second, third = model.requests
    assert first.system_prompt == f"You are Navi.{PERSONA_SEPARATOR}Chat briefly."
    assert [t.name for t in first.tools] == ["read_file", "switch_profile"]
    assert "coder: coding" in first.tools[1].description
    assert second.system_prompt == f"You are Navi.{PERSONA_SEPARATOR}Write code."
    assert [t.name for t in second.tools] == ["run_tests", "switch_profile"]
    assert third.system_prompt == second.system_prompt
    assert profiles.switches == [("chat", "coder")] and profiles.active.name == "coder"
    # the prompt is never in the history
    assert not any("Navi" in getattr(m, "text", "") for m in agent.messages)
    # an unknown profile is an error result the model reads
    model.add(calls("switch_profile", "3", name="nope"), "ok")
    await agent.run("switch to nope")
    assert "choose one of: chat, coder" in agent.messages[-2].text  # type: ignore[union-attr]


async def test_profiles_agent_takes_planning_and_turn_cap_from_the_active_profile() -> None:
    profiles = Profiles(
        [Profile("a", "A."), Profile("b", "B.", planning=True, max_turns=2)], active="b"
    )
    agent = profiles.agent(ScriptedProvider(["x"]))
    assert agent.planning is True
    with pytest.raises(ValueError):
        Profiles([])
    with pytest.raises(ValueError):
        Profile("x", max_turns=-1)
    single = Profiles([Profile("only", "Only.", tools=[read_file])])
    assert [t.name for t in await single.toolset.get_tools()] == ["read_file"]


async def test_user_memory_message_is_fresh_every_call_and_never_stored(tmp_path: Path) -> None:
    store = MemoryStore(tmp_path / "m.db")
    store.remember("The user is called Ada")
    store.remember("The deploy target is a Pi")
    seen: list[str] = []

    def answer(request: ModelRequest) -> AssistantMessage:
        seen.append(request.messages[0].text)  # type: ignore[union-attr]
        if len(seen) == 1:
            return calls("remember", fact="The user likes tea")
        return AssistantMessage(content=[])

    agent = Agent(
        ScriptedProvider([answer, answer]), tools=[store.remember_tool()], hooks=[UserMemory(store)]
    )
    await agent.run("hi")
    assert seen[0] == f"{USER_MEMORY_HEADER}\n\n- The user is called Ada"
    assert "The user likes tea" in seen[1] and "Ada" in seen[1]
    assert not any(USER_MEMORY_HEADER in getattr(m, "text", "") for m in agent.messages)
    empty = ScriptedProvider(["ok"])
    await Agent(empty, hooks=[UserMemory(MemoryStore())]).run("hi")
    assert [m.text for m in empty.requests[0].messages] == ["hi"]  # type: ignore[union-attr]
