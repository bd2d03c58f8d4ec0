"""FallbackModel in the loop, on the wire (docs/providers.md#fallback): a named failure of
one model moves the request on to the next, reported by one ``provider_fallback`` event;
what the failed model streamed is void; usage and cost stay with the model that answered;
and no fallback after a tool call of the turn already ran unless the caller allows it.
Every run is checked against the contract's invariants. On asyncio and trio."""

from __future__ import annotations

from typing import Any

import pytest
from harness import Recorded, check, run_recorded

from treadle import (
    Agent,
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    ToolCall,
    UsageError,
    tool,
)
from treadle.context import lookup_model
from treadle.loop import RetryPolicy
from treadle.providers import (
    FallbackModel,
    ModelRequest,
    Provider,
    ProviderError,
    StreamDone,
    StreamFallback,
)
from treadle.testing import Fail, ScriptedProvider, StreamError, Truncate, WireFake
from treadle.types import (
    MessageStart,
    ProviderFallback,
    ProviderRetry,
    ToolExecutionEnd,
    ToolExecutionStart,
    UserMessage,
)

pytestmark = pytest.mark.anyio

NO_RETRY = RetryPolicy(max_retries=0)


def openai(script: list[Any]) -> tuple[WireFake, Any]:
    fake = WireFake.openai(script)
    return fake, fake.provider("gpt-4o-mini")


def anthropic(script: list[Any]) -> tuple[WireFake, Any]:
    fake = WireFake.anthropic(script)
    return fake, fake.provider("claude-sonnet-4-5")


async def run(
    model: Any, *, tools: list[Any] | None = None, retry: RetryPolicy = NO_RETRY
) -> Recorded:
    config = AgentLoopConfig(provider=model, retry=retry)
    rec = await run_recorded(["hi"], AgentContext(tools=tools or []), config)
    check(rec)
    return rec


async def test_a_rate_limit_moves_the_request_to_the_next_model_at_once() -> None:
    primary_fake, primary = openai([Fail(429, retry_after=30)])
    backup_fake, backup = anthropic(["From the backup."])
    rec = await run(FallbackModel(primary, backup), retry=RetryPolicy())

    (moved,) = rec.of_type(ProviderFallback)
    assert (moved.from_provider, moved.from_model) == ("openai", "gpt-4o-mini")
    assert (moved.to_provider, moved.to_model) == ("anthropic", "claude-sonnet-4-5")
    assert (moved.error_kind, moved.status_code, moved.discard_partial) == (
        "rate_limit",
        429,
        False,
    )
    assert rec.of_type(ProviderRetry) == []  # no thirty-second wait: the backup answers now
    starts = [e for e in rec.of_type(MessageStart) if e.message.role == "assistant"]
    assert len(starts) == 1 and rec.events.index(moved) < rec.events.index(starts[0])
    answer = rec.returned[-1]
    assert answer.text == "From the backup."
    assert (answer.provider, answer.model) == ("anthropic", "claude-sonnet-4-5")
    # The backup gets the request under its own model name, not the primary's.
    assert backup_fake.requests[0].json["model"] == "claude-sonnet-4-5"
    assert len(primary_fake.requests) == 1


async def test_a_failure_mid_answer_discards_what_streamed_and_the_backup_answers_whole() -> None:
    _, primary = anthropic([StreamError("Half an answer that will be", after=4, kind="overloaded")])
    _, backup = openai(["The whole answer."])
    rec = await run(FallbackModel(primary, backup))

    (moved,) = rec.of_type(ProviderFallback)
    assert moved.error_kind == "overloaded" and moved.discard_partial
    types = rec.types()
    at = types.index("provider_fallback")
    assert "message_update" in types[:at]  # the primary had streamed part of its answer
    assert types[at + 1] == "message_start"  # a fresh one, as after a provider_retry
    assert rec.returned[-1].text == "The whole answer."
    assert "Half" not in rec.returned[-1].text


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        (Fail(401), "auth"),  # this account's key is wrong: another account may do
        (Fail(500), "server"),
        (Fail(529), "overloaded"),
        (Truncate("cut", after=2), "truncated_stream"),
    ],
)
async def test_each_default_kind_moves_on(failure: Any, kind: str) -> None:
    _, primary = anthropic([failure])
    _, backup = openai(["Backup."])
    rec = await run(FallbackModel(primary, backup))
    assert [e.error_kind for e in rec.of_type(ProviderFallback)] == [kind]
    assert rec.returned[-1].text == "Backup."


async def test_a_failure_of_the_request_itself_does_not_move_on() -> None:
    _, primary = openai([Fail(400, message="messages: bad shape")])
    backup_fake, backup = anthropic(["never"])
    rec = await run(FallbackModel(primary, backup))
    assert rec.of_type(ProviderFallback) == []
    assert rec.returned[-1].error.kind == "bad_request"
    assert backup_fake.requests == []


async def test_on_names_the_kinds_or_decides_by_a_predicate() -> None:
    _, primary = openai([Fail(429)])
    backup_fake, backup = anthropic(["never"])
    rec = await run(FallbackModel(primary, backup, on=("server", "overloaded")))
    assert rec.of_type(ProviderFallback) == [] and backup_fake.requests == []
    assert rec.returned[-1].error.kind == "rate_limit"

    _, primary = openai([Fail(503), Fail(500)])
    _, backup = anthropic(["Only after a 503."])
    by_status = FallbackModel(primary, backup, on=lambda error: error.status_code == 503)
    rec = await run(by_status)
    assert rec.returned[-1].text == "Only after a 503."
    rec = await run(by_status)
    assert rec.returned[-1].error.kind == "server"  # a 500 is not what it names


async def test_when_every_model_fails_the_last_error_stands_and_the_loop_retries_the_chain() -> (
    None
):
    primary_fake, primary = openai([Fail(503), Fail(503)])
    backup_fake, backup = anthropic([Fail(529), "Second time lucky."])
    retry = RetryPolicy(max_retries=1, initial_delay_s=0.0, jitter=0.0)
    rec = await run(FallbackModel(primary, backup), retry=retry)
    assert [e.type for e in rec.events if e.type in ("provider_fallback", "provider_retry")] == [
        "provider_fallback",
        "provider_retry",
        "provider_fallback",
    ]
    (retry_event,) = rec.of_type(ProviderRetry)
    assert retry_event.error_kind == "overloaded"  # the last model's error
    assert rec.returned[-1].text == "Second time lucky."
    assert len(primary_fake.requests) == len(backup_fake.requests) == 2


# ---------------------------------------------------------------- no fallback after a tool ran


@tool(eager=True)
def lookup(q: str) -> str:
    """Look something up (safe to start early)."""
    return f"found {q}"


@tool
def book(q: str) -> str:
    """Book something (runs after the message)."""
    return f"booked {q}"


def cut_after_call(name: str) -> Truncate:
    """The call's block completes, then the stream breaks before the answer's end."""
    message = AssistantMessage(
        content=[
            ToolCall(id="call_1", name=name, arguments={"q": "Oslo"}),
            ToolCall(id="call_2", name=name, arguments={"q": "Bergen"}),
        ],
        stop_reason="tool_use",
    )
    return Truncate(message, after=11)  # Anthropic: call_1 complete, call_2 begun


async def test_no_fallback_after_an_eager_tool_ran_in_the_turn() -> None:
    _, primary = anthropic([cut_after_call("lookup")])
    backup_fake, backup = openai(["never"])
    rec = await run(FallbackModel(primary, backup), tools=[lookup])

    (started,) = rec.of_type(ToolExecutionStart)  # it started while the model streamed
    assert started.tool_name == "lookup" and started.args == {"q": "Oslo"}
    assert rec.of_type(ProviderFallback) == [] and backup_fake.requests == []
    error = rec.returned[-1].error
    assert error.kind == "truncated_stream"
    assert "no fallback to openai:gpt-4o-mini" in error.message
    assert "after_tool_call=True" in error.message
    (ended,) = rec.of_type(ToolExecutionEnd)
    assert ended.result.text.startswith("Discarded")  # the answer it came from was not kept


async def test_a_later_attempt_of_the_same_turn_does_not_fall_back_either() -> None:
    """The loop retries the turn; the eager call of the first attempt ran in this turn."""
    _, primary = anthropic([cut_after_call("lookup"), Fail(429)])
    backup_fake, backup = openai(["never"])
    retry = RetryPolicy(max_retries=1, initial_delay_s=0.0, jitter=0.0)
    rec = await run(FallbackModel(primary, backup), tools=[lookup], retry=retry)
    assert rec.of_type(ProviderFallback) == [] and backup_fake.requests == []
    assert rec.returned[-1].error.kind == "rate_limit"
    assert "a tool call of this turn already ran" in rec.returned[-1].error.message


async def test_after_tool_call_true_lets_it_fall_back_and_the_backups_calls_run() -> None:
    _, primary = anthropic([cut_after_call("lookup"), "Oslo it is."])  # each turn: primary first
    again = AssistantMessage(
        content=[ToolCall(id="call_9", name="lookup", arguments={"q": "Oslo"})],
        stop_reason="tool_use",
    )
    _, backup = openai([again])
    rec = await run(FallbackModel(primary, backup, after_tool_call=True), tools=[lookup])

    (moved,) = rec.of_type(ProviderFallback)
    assert moved.discard_partial
    discarded = rec.of_type(ToolExecutionEnd)[0]
    assert rec.events.index(discarded) < rec.events.index(moved)  # ended before the move
    starts = [e.tool_call_id for e in rec.of_type(ToolExecutionStart)]
    assert starts == ["call_1", "call_9"]  # eager tools are idempotent: it runs again
    assert rec.returned[-1].text == "Oslo it is."


async def test_a_streamed_call_of_a_tool_that_waits_for_the_message_does_not_block_fallback() -> (
    None
):
    _, primary = anthropic([cut_after_call("book")])
    _, backup = openai(["Booked nothing yet."])
    rec = await run(FallbackModel(primary, backup), tools=[book])
    assert len(rec.of_type(ProviderFallback)) == 1  # nothing ran: book waits for the message
    assert rec.returned[-1].text == "Booked nothing yet."


# ---------------------------------------------------------------- usage, cost, the protocol


@tool
def weather(city: str) -> str:
    """Weather."""
    return "rain"


async def test_usage_and_cost_stay_with_the_model_that_answered() -> None:
    call = AssistantMessage(
        content=[ToolCall(id="call_w", name="weather", arguments={"city": "Oslo"})],
        stop_reason="tool_use",
    )
    _, primary = openai([Fail(429), "Rain in Oslo."])
    _, backup = anthropic([call])
    agent = Agent(FallbackModel(primary, backup), tools=[weather], retry=NO_RETRY)
    result = await agent.run("Weather in Oslo?")

    assert result.text == "Rain in Oslo."
    first, last = (m for m in result.messages if isinstance(m, AssistantMessage))
    assert (first.provider, first.model) == ("anthropic", "claude-sonnet-4-5")
    assert (last.provider, last.model) == ("openai", "gpt-4o-mini")
    assert set(result.usage_by_model) == {"claude-sonnet-4-5", "gpt-4o-mini"}
    for message in (first, last):
        kept = result.usage_by_model[message.model]
        assert kept == message.usage
        info = lookup_model(message.model)
        assert info is not None
        price = (kept.input * info.input_per_mtok + kept.output * info.output_per_mtok) / 1e6
        assert kept.cost_usd == pytest.approx(price)
    assert result.usage == first.usage + last.usage


async def test_it_is_a_provider_taking_model_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-fallback-0001")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-fallback-0001")
    model = FallbackModel("anthropic:claude-sonnet-4-5", "openai:gpt-4o-mini")
    assert isinstance(model, Provider)
    assert (model.name, model.model) == ("anthropic", "claude-sonnet-4-5")
    assert repr(model) == "FallbackModel(anthropic:claude-sonnet-4-5, openai:gpt-4o-mini)"
    assert "sk-" not in repr(model)
    await model.aclose()


async def test_used_on_its_own_the_stream_says_where_it_moved() -> None:
    failing = ScriptedProvider([ProviderError("overloaded", "busy", status_code=529)])
    backup = ScriptedProvider(["Hi."], model="backup-model")
    model = FallbackModel(failing, backup)
    events = [e async for e in model.stream(ModelRequest(messages=[UserMessage.of("hi")]))]
    moved = next(e for e in events if isinstance(e, StreamFallback))
    assert (moved.error_kind, moved.status_code, moved.to_model) == (
        "overloaded",
        529,
        "backup-model",
    )
    assert isinstance(events[-1], StreamDone) and events[-1].message.text == "Hi."
    assert model.last_provider is backup


async def test_a_cancellation_never_moves_on() -> None:
    from treadle import CancellationToken

    token = CancellationToken()
    token.cancel("immediate")
    backup = ScriptedProvider(["never"])
    model = FallbackModel(ScriptedProvider(["slow"]), backup)
    with pytest.raises(ProviderError) as caught:
        async for _ in model.stream(ModelRequest(messages=[UserMessage.of("hi")]), cancel=token):
            pass
    assert caught.value.kind == "cancelled" and backup.requests == []


def test_mistakes_say_what_to_do() -> None:
    one = ScriptedProvider(["x"])
    with pytest.raises(UsageError, match="needs a model to fall back to"):
        FallbackModel(one)
    with pytest.raises(UsageError, match="unknown error kinds"):
        FallbackModel(one, one, on=("rate_limits",))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="never moves on"):
        FallbackModel(one, one, on=("cancelled",))
    with pytest.raises(UsageError, match="not a str"):
        FallbackModel(one, one, on="rate_limit")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="providers or model strings"):
        FallbackModel(one, object())  # type: ignore[arg-type]
