"""The Agent's constructor and run arguments: keys, URLs, model settings, clear mistakes."""

from __future__ import annotations

import pytest

from treadle import Agent, AgentContext, AgentLoopConfig, RunHandle, UserMessage, agent_loop
from treadle.providers import ProviderError
from treadle.testing import ScriptedProvider, WireFake, serve

pytestmark = pytest.mark.anyio


async def test_api_key_and_base_url_reach_the_provider() -> None:
    fake = WireFake.openai("Hello!")
    async with serve(fake) as url:
        agent = Agent("openai:gpt-4o-mini", api_key="sk-test-given", base_url=f"{url}/v1")
        result = await agent.run("hi")
        await agent.aclose()
    assert result.text == "Hello!"
    assert fake.requests[0].headers["authorization"] == "Bearer sk-test-given"
    assert "sk-test-given" not in repr(agent)


def test_the_missing_key_error_advice_works(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="api_key=") as missing:
        Agent("openai:gpt-4o-mini")
    assert missing.value.kind == "auth"
    Agent("openai:gpt-4o-mini", api_key="sk-test-given")  # what the message says to do


@pytest.mark.parametrize("model", [None, 123, ["openai:gpt-4o-mini"]])
def test_a_model_that_is_neither_string_nor_provider_fails_at_once(model: object) -> None:
    with pytest.raises(TypeError, match=r"Agent\(model=...\) takes a model string"):
        Agent(model)  # type: ignore[arg-type]


def test_api_key_with_a_built_provider_is_refused() -> None:
    with pytest.raises(TypeError, match="already built"):
        Agent(ScriptedProvider("x"), api_key="k")


async def test_model_settings_reach_the_wire_on_the_agent_and_per_run() -> None:
    fake = WireFake.openai(["one", "two"])
    agent = Agent(
        fake.provider("gpt-4o-mini", api_key="k"),
        model_settings={
            "seed": 7,
            "top_p": 0.5,
            "stop": ["END"],
            "presence_penalty": 0.1,
            "frequency_penalty": 0.2,
            "extra_body": {"user": "u-1"},
        },
    )
    await agent.run("first")
    await agent.run("second", model_settings={"seed": 8, "extra_body": {"user": "u-2"}})
    first, second = (r.json for r in fake.requests)
    assert (first["seed"], first["top_p"], first["stop"], first["user"]) == (7, 0.5, ["END"], "u-1")
    assert (first["presence_penalty"], first["frequency_penalty"]) == (0.1, 0.2)
    assert (second["seed"], second["top_p"], second["user"]) == (8, 0.5, "u-2")


async def test_unknown_model_settings_are_named() -> None:
    agent = Agent(ScriptedProvider("x"))
    with pytest.raises(TypeError, match=r"unknown model setting.*sead"):
        await agent.run("hi", model_settings={"sead": 1})  # type: ignore[typeddict-unknown-key]


@pytest.mark.parametrize("fmt", ["anthropic", "gemini", "ollama"])
async def test_settings_map_to_each_providers_fields(fmt: str) -> None:
    fake = WireFake(fmt, "ok")
    config = AgentLoopConfig(
        provider=fake.provider(api_key="k"), model_settings={"top_p": 0.5, "seed": 3, "stop": ["X"]}
    )
    await agent_loop("hi", AgentContext(), config)
    body = fake.requests[0].json
    if fmt == "anthropic":
        assert (body["top_p"], body["stop_sequences"]) == (0.5, ["X"])
    elif fmt == "gemini":
        generation = body["generationConfig"]
        assert (generation["topP"], generation["seed"], generation["stopSequences"]) == (
            0.5,
            3,
            ["X"],
        )
    else:
        assert (body["options"]["top_p"], body["options"]["seed"], body["options"]["stop"]) == (
            0.5,
            3,
            ["X"],
        )


async def test_a_string_prompt_is_one_message() -> None:
    provider = ScriptedProvider("ok")
    context = AgentContext()
    new = await agent_loop("hello", context, AgentLoopConfig(provider=provider))
    assert [m.role for m in new] == ["user", "assistant"]
    assert isinstance(new[0], UserMessage) and new[0].text == "hello"


async def test_swapped_arguments_are_named() -> None:
    context, config = AgentContext(), AgentLoopConfig(provider=ScriptedProvider("ok"))
    with pytest.raises(TypeError, match="context and config are swapped"):
        await agent_loop("hi", config, context)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="the order is agent_loop"):
        await agent_loop(context, config, None)  # type: ignore[arg-type]
    assert not context.messages  # nothing ran


def test_a_model_string_for_a_config_provider_says_get_provider() -> None:
    with pytest.raises(TypeError, match=r"get_provider\('openai:gpt-4o-mini'\)"):
        AgentLoopConfig(provider="openai:gpt-4o-mini")  # type: ignore[arg-type]


class NotAnIterator:
    name = "broken"

    async def stream(self, request: object, *, cancel: object = None) -> list[object]:
        return []


async def test_a_provider_whose_stream_is_not_an_async_iterator_is_explained() -> None:
    config = AgentLoopConfig(provider=NotAnIterator())  # type: ignore[arg-type]
    new = await agent_loop("hi", AgentContext(), config)
    error = new[-1].error  # type: ignore[union-attr]
    assert error is not None and "not an async iterator" in error.message
    assert "async generator" in error.message


async def test_a_stop_string_is_one_sequence_everywhere() -> None:
    """A string is one stop sequence on the Agent, the loop config, per-run settings and a
    hook's request: never split into its characters (``["t", "a", "o"]``)."""
    from treadle import Hooks
    from treadle.providers import ModelRequest

    fake = WireFake.openai(["a", "b", "c", "d"])
    agent = Agent(fake.provider("gpt-4o-mini", api_key="k"), model_settings={"stop": "tao"})
    await agent.run("first")
    await agent.run("second", model_settings={"stop": "END"})
    config = AgentLoopConfig(
        provider=fake.provider("gpt-4o-mini", api_key="k"), model_settings={"stop": "tao"}
    )
    await agent_loop("third", AgentContext(), config)

    class Edit(Hooks):
        async def before_model_request(self, run: RunHandle, request: ModelRequest) -> ModelRequest:
            return request.model_copy(update={"stop": "hook"})  # model_copy: not validated

    hooked = AgentLoopConfig(provider=fake.provider("gpt-4o-mini", api_key="k"), hooks=[Edit()])
    await agent_loop("fourth", AgentContext(), hooked)
    stops = [r.json["stop"] for r in fake.requests]
    assert stops == [["tao"], ["END"], ["tao"], ["hook"]]


def test_bad_agent_settings_fail_at_construction() -> None:
    with pytest.raises(ValueError, match=r"top_p=2.*less than or equal to 1"):
        Agent(ScriptedProvider("x"), model_settings={"top_p": 2})
    with pytest.raises(ValueError, match=r"max_tokens=0.*greater than 0"):
        Agent(ScriptedProvider("x"), model_settings={"max_tokens": 0})
    with pytest.raises(ValueError, match=r"stop=3"):
        Agent(ScriptedProvider("x"), model_settings={"stop": 3})  # type: ignore[arg-type]


async def test_bad_per_run_settings_fail_at_the_run_call() -> None:
    provider = ScriptedProvider("x")
    agent = Agent(provider)
    with pytest.raises(ValueError, match=r"invalid model_settings: max_tokens=0.*top_p=2.0"):
        await agent.run("hi", model_settings={"max_tokens": 0, "top_p": 2.0})
    assert provider.requests == [] and agent.messages == []  # nothing ran
