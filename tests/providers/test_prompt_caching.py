"""Prompt caching across providers, read on the wire: retention, automatic and explicit cache
points, the cache key, and cache reads and writes in usage and cost (docs/providers.md)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from treadle import Agent, AssistantMessage, TextContent, ToolResultMessage, Usage, UserMessage
from treadle import tool as make_tool
from treadle.context import ModelInfo, cost_usd, lookup_model
from treadle.loop import AgentContext, AgentLoopConfig, agent_loop
from treadle.providers import ModelRequest, OpenAIChat, OpenAIResponses
from treadle.providers.anthropic import Anthropic
from treadle.testing import WireFake

pytestmark = pytest.mark.anyio

ONE_HOUR = {"type": "ephemeral", "ttl": "1h"}
FIVE_MINUTES = {"type": "ephemeral"}


def _tool(name: str, point: bool = False) -> Any:
    async def run(text: str) -> str:
        return text

    run.__name__ = name
    made = make_tool(run)
    if point:
        made.cache_point = True  # type: ignore[attr-defined]
    return made


def _marked(body: dict[str, Any]) -> list[str]:
    """Where the request put cache_control: ``system``, ``tool:NAME``, ``message:I.J``."""
    found = [f"system:{i}" for i, b in enumerate(body.get("system", [])) if "cache_control" in b]
    found += [f"tool:{t['name']}" for t in body.get("tools", []) if "cache_control" in t]
    for i, turn in enumerate(body["messages"]):
        found += [f"message:{i}.{j}" for j, b in enumerate(turn["content"]) if "cache_control" in b]
    return found


def _history() -> list[Any]:
    return [
        UserMessage(content="<a long contract>", cache_point=True),
        AssistantMessage(content=[TextContent(text="Read it.")], provider="anthropic"),
        UserMessage.of("Clause 3?"),
        AssistantMessage(content=[TextContent(text="Rent.")], provider="anthropic"),
        UserMessage(content="<an appendix>", cache_point=True),
        AssistantMessage(content=[TextContent(text="Read that too.")], cache_point=True),
        UserMessage.of("And clause 9?"),
    ]


async def test_explicit_points_reach_anthropic_with_the_long_retention() -> None:
    fake = WireFake.anthropic(["Deposit."])
    agent = Agent(
        fake.provider("claude-sonnet-4-5"),
        tools=[_tool("stable", point=True), _tool("changing")],
        model_settings={"prompt_cache": "long"},
    )
    await agent.run([UserMessage(content="<a long contract>", cache_point=True)])
    body = fake.requests[0].json
    # the stable tool (explicit), the last tool and the last user block (automatic)
    assert _marked(body) == ["tool:stable", "tool:changing", "message:0.0"]
    assert body["tools"][0]["cache_control"] == ONE_HOUR
    assert fake.requests[0].headers["anthropic-beta"] == "extended-cache-ttl-2025-04-11"


def test_at_most_four_points_keep_the_automatic_ones_and_the_latest_explicit() -> None:
    body = Anthropic("claude").build_body(
        ModelRequest(system_prompt="You read leases.", messages=_history())
    )
    # system, last user (automatic); the assistant's and the appendix's points are the
    # latest explicit ones; the contract's, the earliest, is left out (a fifth)
    assert _marked(body) == ["system:0", "message:4.0", "message:5.0", "message:6.0"]
    assert all(
        b["cache_control"] == FIVE_MINUTES
        for t in body["messages"]
        for b in t["content"][:1]
        if "cache_control" in b
    )


def test_off_sends_no_point_at_all() -> None:
    request = ModelRequest(system_prompt="s", messages=_history(), prompt_cache="off")
    assert _marked(Anthropic("claude").build_body(request)) == []


def test_a_point_on_a_tool_result_marks_its_block_not_a_later_one() -> None:
    history = [
        UserMessage.of("read it"),
        AssistantMessage(content=[], provider="anthropic"),
        ToolResultMessage(tool_call_id="c1", tool_name="read", content="<file>", cache_point=True),
        UserMessage.of("now summarise"),
    ]
    body = Anthropic("claude").build_body(ModelRequest(messages=history))
    turn = body["messages"][-1]["content"]  # the tool result comes first in the user turn
    assert turn[0]["type"] == "tool_result" and turn[0]["cache_control"] == FIVE_MINUTES


async def test_anthropic_long_writes_are_counted_and_priced_apart() -> None:
    usage = Usage(input=10, output=5, cache_read=1000, cache_write=400, cache_write_long=300)
    fake = WireFake.anthropic([AssistantMessage(content=[TextContent(text="ok")], usage=usage)])
    events = [e async for e in fake.provider("claude-sonnet-4-5").stream(ModelRequest())]
    got = events[-1].message.usage  # type: ignore[union-attr]
    assert (got.cache_write, got.cache_write_long, got.cache_read) == (400, 300, 1000)
    info = lookup_model("claude-sonnet-4-5")
    assert info is not None and info.cache_write_long_per_mtok == 6.0  # 2x the input price
    # 10 in at 3, 5 out at 15, 1000 read at 0.30, 100 written at 3.75, 300 at 6 (per million)
    expected = (10 * 3 + 5 * 15 + 1000 * 0.30 + 100 * 3.75 + 300 * 6.0) / 1_000_000
    assert cost_usd(got, info) == pytest.approx(expected)


def test_long_writes_cost_as_other_writes_when_the_model_has_no_long_price() -> None:
    info = ModelInfo(name="m", input_per_mtok=1, output_per_mtok=1, cache_write_per_mtok=2)
    usage = Usage(cache_write=100, cache_write_long=100)
    assert cost_usd(usage, info) == pytest.approx(200 / 1_000_000)


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_openai_gets_the_key_and_24_hours_for_long(api: str) -> None:
    fake = WireFake.openai(["a", "b", "c"]) if api == "chat" else WireFake.responses(["a"] * 3)
    adapter = OpenAIChat if api == "chat" else OpenAIResponses
    provider = adapter("gpt-5", api_key="k", client=fake.client())  # api.openai.com
    settings: list[dict[str, Any]] = [
        {"prompt_cache": "long", "prompt_cache_key": "conversation-7"},
        {"prompt_cache_key": "conversation-7"},
        {"prompt_cache": "off", "prompt_cache_key": "conversation-7"},
    ]
    for one in settings:
        await Agent(provider).run("hi", model_settings=one)  # type: ignore[arg-type]
    long, short, off = (r.json for r in fake.requests)
    assert (long["prompt_cache_key"], long["prompt_cache_retention"]) == ("conversation-7", "24h")
    assert short["prompt_cache_key"] == "conversation-7" and "prompt_cache_retention" not in short
    assert "prompt_cache_key" not in off and "prompt_cache_retention" not in off


async def test_other_openai_compatible_servers_get_the_fields_only_when_asked() -> None:
    fake = WireFake.openai(["a", "b"])
    settings: Any = {"prompt_cache": "long", "prompt_cache_key": "k1"}
    where: dict[str, Any] = {
        "base_url": "https://api.mistral.ai/v1",
        "api_key": "k",
        "client": fake.client(),
    }
    elsewhere = OpenAIChat("m", **where)
    await Agent(elsewhere, model_settings=settings).run("hi")
    asked = OpenAIChat("m", **where, prompt_cache_fields=True)
    await Agent(asked, model_settings=settings).run("hi")
    assert "prompt_cache_key" not in fake.requests[0].json
    assert fake.requests[1].json["prompt_cache_key"] == "k1"


async def test_the_deprecated_config_field_still_applies_and_settings_win() -> None:
    fake = WireFake.anthropic(["a", "b"])
    with pytest.warns(DeprecationWarning, match="model_settings"):
        config = AgentLoopConfig(provider=fake.provider(), prompt_cache="off")
    await agent_loop("hi", AgentContext(), config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        both = AgentLoopConfig(
            provider=fake.provider(), prompt_cache="off", model_settings={"prompt_cache": "long"}
        )
    await agent_loop("hi", AgentContext(), both)
    assert _marked(fake.requests[0].json) == []
    assert _marked(fake.requests[1].json) == ["message:0.0"]
    assert fake.requests[1].json["messages"][0]["content"][0]["cache_control"] == ONE_HOUR


def test_a_bad_retention_is_refused_with_the_choices() -> None:
    from treadle import ConfigurationError

    with pytest.raises(ConfigurationError, match="prompt_cache"):
        Agent(WireFake.anthropic().provider(), model_settings={"prompt_cache": "forever"})  # type: ignore[arg-type]


def test_a_thinking_block_is_never_marked() -> None:
    from treadle.types import ThinkingContent

    thinking = ThinkingContent(thinking="hm", signature="sig")
    history = [
        UserMessage.of("q"),
        AssistantMessage(
            content=[TextContent(text="a"), thinking], provider="anthropic", cache_point=True
        ),
        UserMessage.of("q2"),
    ]
    body = Anthropic("claude").build_body(ModelRequest(messages=history))
    assert _marked(body) == ["message:1.0", "message:2.0"]  # the text, not the thinking


def test_a_tool_marked_after_its_first_use_is_sent_marked() -> None:
    from treadle.tools.registry import tool_spec

    stable = _tool("stable")
    assert tool_spec(stable).cache_point is False
    stable.cache_point = True
    assert tool_spec(stable).cache_point is True
