"""The surface 0.1.0 freezes: at most 40 top-level names, ``Agent()`` with at most 20
parameters, every name moved off the top level saying where it lives now, and the keywords
``Agent()`` no longer takes saying where they went."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import pytest

import treadle
from treadle import (
    Agent,
    AgentLoopConfig,
    AssistantMessage,
    ModelRequest,
    TextContent,
    UsageError,
)
from treadle.agent import AgentOptions
from treadle.testing import ScriptedProvider

MOVED: dict[str, str] = dict(treadle._MOVED)


def test_the_top_level_has_at_most_40_names() -> None:
    assert len(treadle.__all__) <= 40, sorted(treadle.__all__)
    for name in treadle.__all__:
        assert getattr(treadle, name) is not None


def test_the_core_of_the_design_stays_at_the_top() -> None:
    core = {"run_loop", "agent_loop", "agent_loop_continue", "AgentContext", "AgentLoopConfig"}
    assert core <= set(treadle.__all__)


def test_agent_takes_at_most_20_parameters() -> None:
    parameters = inspect.signature(Agent).parameters
    assert len(parameters) <= 20, list(parameters)


@pytest.mark.parametrize("name", sorted(MOVED))
def test_a_moved_name_says_where_it_lives(name: str) -> None:
    home = MOVED[name]
    with pytest.raises(AttributeError) as caught:
        getattr(treadle, name)
    assert f"treadle.{name} moved to {home}.{name}" in str(caught.value)
    assert name not in treadle.__all__
    assert hasattr(importlib.import_module(home), name), f"{home} does not have {name}"
    assert name in importlib.import_module(home).__all__


def test_an_unknown_name_is_a_plain_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'Nonesuch'"):
        treadle.Nonesuch  # noqa: B018
    assert not hasattr(treadle, "Nonesuch")
    assert not hasattr(treadle, "AgentEnd")  # moved names are not attributes either


@pytest.mark.parametrize(
    ("keyword", "value", "says"),
    [
        ("temperature", 0.2, "model_settings={'temperature': ...}"),
        ("max_tokens", 100, "model_settings={'max_tokens': ...}"),
        ("thinking_level", "high", "model_settings={'thinking_level': ...}"),
        ("extra_body", {"a": 1}, "model_settings={'extra_body': ...}"),
        ("event_buffer", 8, "options=AgentOptions(event_buffer=...)"),
        ("coalesce_deltas", False, "options=AgentOptions(coalesce_deltas=...)"),
        ("tool_execution", "sequential", "options=AgentOptions(tool_execution=...)"),
        ("resume_tool_calls", "cancel", "options=AgentOptions(resume_tool_calls=...)"),
        ("description", "helps", "agent.as_tool(description=...)"),
    ],
)
def test_a_keyword_agent_no_longer_takes_says_where_it_went(
    keyword: str, value: Any, says: str
) -> None:
    with pytest.raises(UsageError) as caught:
        Agent(ScriptedProvider("hi"), **{keyword: value})
    assert says in str(caught.value)


def test_the_loop_config_refuses_flat_settings_too() -> None:
    with pytest.raises(UsageError, match=r"model_settings=\{'temperature': \.\.\.\}"):
        AgentLoopConfig(provider=ScriptedProvider("hi"), temperature=0.2)  # type: ignore[call-arg]


@pytest.mark.anyio
async def test_model_settings_and_options_reach_the_run() -> None:
    seen: list[ModelRequest] = []

    def reply(request: ModelRequest) -> AssistantMessage:
        seen.append(request)
        return AssistantMessage(content=[TextContent(text="ok")])

    agent = Agent(
        ScriptedProvider([reply, reply]),
        model_settings={"temperature": 0.2, "stop": "END"},
        options=AgentOptions(event_buffer=3),
    )
    assert agent.event_buffer == 3
    await agent.run("one")
    await agent.run("two", model_settings={"max_tokens": 9})
    first, second = seen
    assert (first.temperature, first.stop, first.max_tokens) == (0.2, ["END"], None)
    assert (second.temperature, second.stop, second.max_tokens) == (0.2, ["END"], 9)


def test_agent_config_is_not_public() -> None:
    assert not hasattr(Agent, "config")
    assert not hasattr(Agent, "to_web")  # the web UI takes an agent: web_app(agent)
