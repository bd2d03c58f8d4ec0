"""The model catalog: lookups by provider spelling, overrides, prices and cost."""

from __future__ import annotations

import pytest

from treadle import AgentContext, AgentLoopConfig, AssistantMessage, Usage, agent_loop
from treadle.context import (
    DEFAULT_CONTEXT_WINDOW,
    CompactionPolicy,
    ModelCatalog,
    ModelInfo,
    context_window_for,
    cost_usd,
    default_catalog,
    lookup_model,
    with_cost,
)
from treadle.testing import ScriptedProvider


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o", "gpt-4o"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("openai:gpt-4o", "gpt-4o"),
        ("chatgpt-4o-latest", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
        ("gpt-4-0613", "gpt-4"),
        ("o1", "o1"),
        ("o3-mini-2025-01-31", "o3-mini"),
        ("o4-mini-2025-04-16", "o4-mini"),
        ("gpt-5", "gpt-5"),
        ("gpt-5-mini-2025-08-07", "gpt-5-mini"),
        ("gpt-5-codex", "gpt-5"),
        ("gpt-5.1-codex", "gpt-5.1"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("us.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5"),
        ("claude-3-5-sonnet@20240620", "claude-3-5-sonnet"),
        ("claude-3-5-haiku-latest", "claude-3-5-haiku"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-opus-4-5", "claude-opus-4-5"),
        ("models/gemini-2.5-pro", "gemini-2.5-pro"),
        ("gemini-2.5-flash-preview-05-20", "gemini-2.5-flash"),
        ("gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
        ("gemini-2.0-flash-001", "gemini-2.0-flash"),
        ("gemini-3-pro-preview", "gemini-3-pro"),
        ("llama3.1:8b", "llama-3.1"),
        ("llama3:8b", "llama-3"),
        ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.3"),
        ("llama-3.1-8b-instant", "llama-3.1"),
        ("qwen2.5-coder:32b", "qwen2.5-coder"),
        ("Qwen/Qwen2.5-72B-Instruct", "qwen2.5"),
        ("qwen3:8b", "qwen3"),
        ("mistral-large-latest", "mistral-large"),
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral"),
        ("deepseek-chat", "deepseek-chat"),
        ("deepseek-r1:14b", "deepseek-r1"),
        ("gpt-oss:20b", "gpt-oss-20b"),
    ],
)
def test_lookup_by_provider_spellings(model: str, expected: str) -> None:
    info = lookup_model(model)
    assert info is not None, model
    assert info.name == expected


def test_unknown_model_falls_back() -> None:
    assert lookup_model("scripted-model") is None
    assert lookup_model("") is None
    assert context_window_for("my-own-model") == DEFAULT_CONTEXT_WINDOW == 8192


def test_known_windows_and_limits() -> None:
    assert context_window_for("gpt-4o-mini") == 128_000
    assert context_window_for("claude-sonnet-4-5-20250929") == 200_000
    assert context_window_for("gemini-2.5-pro") == 1_048_576
    info = lookup_model("claude-haiku-4-5")
    assert info is not None and info.max_output_tokens == 64_000


def test_every_entry_is_consistent() -> None:
    catalog = default_catalog()
    assert len(catalog) > 50
    for info in catalog:
        assert info.context_window >= 8192, info.name
        assert (info.input_per_mtok is None) == (info.output_per_mtok is None), info.name
        if info.priced:
            assert info.output_per_mtok >= info.input_per_mtok, info.name  # type: ignore[operator]
        if info.cache_read_per_mtok is not None:
            assert info.cache_read_per_mtok < info.input_per_mtok, info.name  # type: ignore[operator]
        assert catalog.find(info.name) is info, info.name
        assert ModelInfo.model_validate(info.model_dump()) == info  # built without validation


def test_cost_of_plain_and_cached_usage() -> None:
    info = lookup_model("gpt-4o-mini")
    usage = Usage(input=1_000_000, output=1_000_000, total_tokens=2_000_000)
    assert cost_usd(usage, info) == pytest.approx(0.15 + 0.60)
    cached = Usage(input=200_000, cache_read=800_000, output=10_000)
    assert cost_usd(cached, info) == pytest.approx(0.2 * 0.15 + 0.8 * 0.075 + 0.01 * 0.60)


def test_cost_with_anthropic_cache_writes() -> None:
    info = lookup_model("claude-sonnet-4-5")
    usage = Usage(input=1000, cache_write=10_000, cache_read=50_000, output=2000)
    expected = (1000 * 3 + 10_000 * 3.75 + 50_000 * 0.30 + 2000 * 15) / 1e6
    assert cost_usd(usage, info) == pytest.approx(expected)


def test_cost_long_context_tier() -> None:
    info = lookup_model("gemini-2.5-pro")
    short = Usage(input=100_000, output=1000)
    long = Usage(input=300_000, output=1000)
    assert cost_usd(short, info) == pytest.approx((100_000 * 1.25 + 1000 * 10) / 1e6)
    assert cost_usd(long, info) == pytest.approx((300_000 * 2.50 + 1000 * 15) / 1e6)


def test_cost_unknown_is_none() -> None:
    usage = Usage(input=10, output=10)
    assert cost_usd(usage, None) is None
    assert cost_usd(usage, lookup_model("llama3.1")) is None  # open weights: hosts set prices
    assert with_cost(usage, None) is usage


def test_with_cost_fills_only_when_missing() -> None:
    info = lookup_model("gpt-4o")
    reported = Usage(input=10, output=10, cost_usd=0.5)
    assert with_cost(reported, info) is reported
    filled = with_cost(Usage(input=1000, output=100), info)
    assert filled.cost_usd == pytest.approx((1000 * 2.5 + 100 * 10) / 1e6)


def test_local_provider_costs_nothing() -> None:
    info = lookup_model("llama3.2", "ollama")
    assert info is not None and info.context_window == 131_072
    assert cost_usd(Usage(input=1000, output=1000), info) == 0.0
    assert cost_usd(Usage(input=1000, output=1000), lookup_model("gpt-oss:20b", "ollama")) == 0.0


def test_overrides() -> None:
    # a dict lays fields over the catalog's entry
    info = lookup_model("gpt-4o-2024-08-06", override={"context_window": 16_000})
    assert info is not None and info.context_window == 16_000 and info.input_per_mtok == 2.5
    # a ModelInfo replaces it
    mine = ModelInfo(name="mine", context_window=4096, input_per_mtok=1, output_per_mtok=2)
    assert lookup_model("gpt-4o", override=mine) is mine
    # an unknown model described by a dict
    custom = lookup_model("acme-7b", override={"context_window": 32_000})
    assert custom is not None and custom.name == "acme-7b" and custom.context_window == 32_000
    # overrides by name, matched like the catalog
    table = {"claude-sonnet-4-5": {"input_per_mtok": 1.0}}
    found = lookup_model("claude-sonnet-4-5-20250929", overrides=table)
    assert found is not None and found.input_per_mtok == 1.0 and found.output_per_mtok == 15.0


def test_own_catalog_without_global_state() -> None:
    extra = ModelInfo(name="acme-large", context_window=64_000, input_per_mtok=1, output_per_mtok=1)
    mine = default_catalog().with_models(extra)
    assert lookup_model("acme-large-2025", catalog=mine) is extra
    assert lookup_model("acme-large-2025") is None  # the default catalog is unchanged
    assert isinstance(mine, ModelCatalog) and len(mine) == len(default_catalog()) + 1


def test_policy_resolves_window() -> None:
    assert CompactionPolicy().window_for("gpt-4o-mini") == 128_000
    assert CompactionPolicy().window_for("scripted-model") == 8192
    assert CompactionPolicy(context_window=16_000).window_for("gpt-4o") == 16_000
    policy = CompactionPolicy(model_info={"context_window": 32_000})
    assert policy.window_for("gpt-4o") == 32_000
    info = policy.model_for("gpt-4o")
    assert info is not None and info.output_per_mtok == 10.0


@pytest.mark.anyio
async def test_loop_fills_cost_when_the_provider_did_not() -> None:
    reported = AssistantMessage(content="priced", usage=Usage(input=5, output=5, cost_usd=0.25))
    unpriced = AssistantMessage(content="hi", usage=Usage(input=1000, output=100))
    provider = ScriptedProvider([unpriced, reported], name="openai", model="gpt-4o-mini")
    config = AgentLoopConfig(provider=provider)
    context = AgentContext()
    first = await agent_loop(["hello"], context, config)
    answer = first[-1]
    assert isinstance(answer, AssistantMessage)
    assert answer.usage.cost_usd == pytest.approx((1000 * 0.15 + 100 * 0.6) / 1e6)
    second = await agent_loop(["again"], context, config)
    assert isinstance(second[-1], AssistantMessage)
    assert second[-1].usage.cost_usd == 0.25  # the provider's own figure wins


@pytest.mark.anyio
async def test_loop_leaves_unknown_models_unpriced() -> None:
    provider = ScriptedProvider(["hi"])
    new = await agent_loop(["hello"], AgentContext(), AgentLoopConfig(provider=provider))
    assert isinstance(new[-1], AssistantMessage) and new[-1].usage.cost_usd is None


@pytest.mark.anyio
async def test_policy_model_info_prices_the_loop() -> None:
    provider = ScriptedProvider(
        [AssistantMessage(content="hi", usage=Usage(input=1_000_000, output=0))]
    )
    policy = CompactionPolicy(model_info={"input_per_mtok": 2.0, "output_per_mtok": 4.0})
    config = AgentLoopConfig(provider=provider, compaction=policy)
    new = await agent_loop(["hello"], AgentContext(), config)
    assert isinstance(new[-1], AssistantMessage) and new[-1].usage.cost_usd == pytest.approx(2.0)
