"""Invariant 12: every content block, message and event round-trips through JSON unchanged."""

from __future__ import annotations

from typing import Any, get_args

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from treadle import (
    AgentEvent,
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResult,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from treadle.types import (
    AgentEnd,
    AgentStart,
    CompactionEnd,
    CompactionStart,
    ContentBlock,
    ContinuationKind,
    CustomEvent,
    ErrorInfo,
    ExtensionMessage,
    ImageContent,
    InputRejected,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    PlanCreated,
    ProviderFallback,
    ProviderRetry,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolExecutionEnd,
    ToolExecutionStart,
    ToolExecutionUpdate,
    TurnEnd,
    TurnStart,
    TurnTrigger,
    event_from_json,
    message_from_json,
    messages_from_json,
    messages_to_json,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=24)
ident = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12)
nonneg = st.integers(min_value=0, max_value=2**53)
timestamps = st.integers(min_value=0, max_value=2**45)
finite = st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | finite | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
json_objects = st.dictionaries(text, json_values, max_size=4)

# ---- content

text_blocks = st.builds(TextContent, text=text)
image_blocks = st.builds(
    ImageContent,
    data=st.text(
        alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", max_size=40
    ),
    mime_type=st.sampled_from(["image/png", "image/jpeg", "image/webp", "image/gif"]),
)
thinking_blocks = st.builds(
    ThinkingContent, thinking=text, signature=st.none() | text, redacted=st.booleans()
)
tool_calls = st.builds(
    ToolCall,
    id=ident,
    name=ident,
    arguments=json_objects,
    raw_arguments=st.none() | text,
)
content_blocks = st.one_of(text_blocks, image_blocks, thinking_blocks, tool_calls)
user_content = st.lists(st.one_of(text_blocks, image_blocks), max_size=3)
assistant_content = st.lists(st.one_of(text_blocks, thinking_blocks, tool_calls), max_size=4)

# ---- messages

usages = st.builds(
    Usage,
    input=nonneg,
    output=nonneg,
    reasoning=nonneg,
    cache_read=nonneg,
    cache_write=nonneg,
    total_tokens=nonneg,
    cost_usd=st.none() | st.floats(min_value=0, max_value=1e6, allow_nan=False),
)
errors = st.builds(
    ErrorInfo, kind=ident, message=text, status_code=st.none() | st.integers(100, 599)
)
user_messages = st.builds(UserMessage, content=user_content, timestamp=timestamps)
assistant_messages = st.builds(
    AssistantMessage,
    content=assistant_content,
    stop_reason=st.sampled_from(["stop", "length", "tool_use", "error", "aborted"]),
    model=text,
    provider=text,
    usage=usages,
    timestamp=timestamps,
    response_id=st.none() | text,
    error=st.none() | errors,
)
tool_result_messages = st.builds(
    ToolResultMessage,
    tool_call_id=ident,
    tool_name=ident,
    content=user_content,
    details=json_values,
    is_error=st.booleans(),
    timestamp=timestamps,
)
extension_messages = st.builds(ExtensionMessage, kind=text, data=json_values, timestamp=timestamps)
messages = st.one_of(user_messages, assistant_messages, tool_result_messages, extension_messages)

# ---- events

tool_results = st.builds(
    ToolResult,
    content=user_content,
    details=json_values,
    is_error=st.booleans(),
    terminate=st.booleans(),
)
deltas = st.one_of(
    st.builds(TextDelta, index=nonneg, text=text),
    st.builds(ThinkingDelta, index=nonneg, text=text),
    st.builds(ToolCallStart, index=nonneg, id=ident, name=ident),
    st.builds(ToolCallDelta, index=nonneg, arguments=text),
    st.builds(ToolCallEnd, index=nonneg, tool_call=tool_calls),
)
base = {"seq": nonneg, "loop_id": text, "depth": st.integers(0, 8), "timestamp": timestamps}


def event(cls: type[Any], **fields: Any) -> Any:
    return st.builds(cls, **base, **fields)


EVENT_STRATEGIES: dict[type[Any], Any] = {
    AgentStart: event(
        AgentStart,
        agent_id=text,
        session_id=text,
        parent_loop_id=st.none() | text,
        continuation_kind=st.sampled_from(list(ContinuationKind)),
        config=json_objects,
    ),
    AgentEnd: event(
        AgentEnd,
        messages=st.lists(messages, max_size=3),
        usage=usages,
        reason=st.sampled_from(
            ["completed", "rejected", "vetoed", "cancelled", "error", "limit", "suspended"]
        ),
        error=st.none() | errors,
        pending_tool_calls=st.lists(ident, max_size=3),
    ),
    TurnStart: event(TurnStart, turn_index=nonneg, trigger=st.sampled_from(list(TurnTrigger))),
    TurnEnd: event(
        TurnEnd,
        turn_index=nonneg,
        message=assistant_messages,
        tool_results=st.lists(tool_result_messages, max_size=2),
        usage=usages,
    ),
    MessageStart: event(MessageStart, message=messages),
    MessageUpdate: event(MessageUpdate, message=assistant_messages, delta=deltas),
    MessageEnd: event(MessageEnd, message=messages),
    ToolExecutionStart: event(
        ToolExecutionStart, tool_call_id=ident, tool_name=ident, args=json_objects
    ),
    ToolExecutionUpdate: event(
        ToolExecutionUpdate, tool_call_id=ident, tool_name=ident, partial=tool_results
    ),
    ToolExecutionEnd: event(
        ToolExecutionEnd,
        tool_call_id=ident,
        tool_name=ident,
        result=tool_results,
        is_error=st.booleans(),
        duration_ms=st.floats(min_value=0, max_value=1e9, allow_nan=False),
        child_loop_id=st.none() | text,
    ),
    InputRejected: event(InputRejected, reason=text),
    CompactionStart: event(
        CompactionStart,
        tokens_before=nonneg,
        messages_before=nonneg,
        reason=text,
    ),
    CompactionEnd: event(
        CompactionEnd,
        tokens_before=nonneg,
        tokens_after=nonneg,
        messages_before=nonneg,
        messages_after=nonneg,
        strategy=text,
    ),
    ProviderRetry: event(
        ProviderRetry,
        attempt=nonneg,
        max_retries=nonneg,
        delay_s=st.floats(min_value=0, max_value=1e6, allow_nan=False),
        error_kind=ident,
        status_code=st.none() | st.integers(100, 599),
        message=text,
        discard_partial=st.booleans(),
    ),
    ProviderFallback: event(
        ProviderFallback,
        from_provider=ident,
        from_model=text,
        to_provider=ident,
        to_model=text,
        error_kind=ident,
        status_code=st.none() | st.integers(100, 599),
        message=text,
        discard_partial=st.booleans(),
    ),
    PlanCreated: event(PlanCreated, plan=text, steps=st.lists(text, max_size=3)),
    CustomEvent: event(CustomEvent, name=text, value=st.none() | json_objects),
}
events = st.one_of(*EVENT_STRATEGIES.values())

CONTENT = TypeAdapter(ContentBlock)


@SETTINGS
@given(block=content_blocks)
def test_content_blocks_round_trip(block: Any) -> None:
    data = block.model_dump_json()
    assert type(block).model_validate_json(data) == block
    assert CONTENT.validate_json(data) == block
    assert CONTENT.validate_json(CONTENT.dump_json(block)) == block


@SETTINGS
@given(message=messages)
def test_messages_round_trip(message: Any) -> None:
    data = message.model_dump_json()
    assert type(message).model_validate_json(data) == message
    assert message_from_json(data) == message
    assert type(message).model_validate(message.model_dump()) == message


@SETTINGS
@given(history=st.lists(messages, max_size=5))
def test_histories_round_trip(history: list[Any]) -> None:
    assert messages_from_json(messages_to_json(history)) == history


@SETTINGS
@given(e=events)
def test_events_round_trip(e: Any) -> None:
    data = e.model_dump_json()
    assert type(e).model_validate_json(data) == e
    parsed = event_from_json(data)
    assert type(parsed) is type(e) and parsed == e


@SETTINGS
@given(result=tool_results, u=usages, info=errors)
def test_small_models_round_trip(result: ToolResult, u: Usage, info: ErrorInfo) -> None:
    for model in (result, u, info):
        assert type(model).model_validate_json(model.model_dump_json()) == model


@pytest.mark.parametrize("cls", list(EVENT_STRATEGIES), ids=lambda c: c.__name__)
def test_each_event_type_round_trips(cls: type[Any]) -> None:
    @SETTINGS
    @given(e=EVENT_STRATEGIES[cls])
    def round_trip(e: Any) -> None:
        data = e.model_dump_json()
        assert cls.model_validate_json(data) == e
        assert event_from_json(data) == e

    round_trip()


def test_every_event_type_has_a_strategy() -> None:
    """Guards the suite: a new event type must get a strategy here."""
    union = get_args(get_args(AgentEvent)[0])
    assert set(union) == set(EVENT_STRATEGIES)
    spec = {
        "agent_start",
        "agent_end",
        "turn_start",
        "turn_end",
        "message_start",
        "message_update",
        "message_end",
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
        "input_rejected",
        "compaction_start",
        "compaction_end",
        "provider_retry",
    }
    assert spec <= {c.model_fields["type"].default for c in union}


@pytest.mark.anyio
async def test_recorded_events_are_ordinary_pydantic_models() -> None:
    """Events and messages from a real run (not just hand-built ones) round-trip and support
    the usual pydantic operations: copy with changes, deep copy, dump and validate."""
    from harness import call, calls_message, check, run_recorded

    from treadle import AgentContext, AgentLoopConfig, tool
    from treadle.testing import ScriptedProvider

    @tool
    async def look(q: str) -> str:
        return q

    provider = ScriptedProvider([calls_message(call("c1", "look", q="x"), text="Hm."), "Done."])
    rec = await run_recorded(["go"], AgentContext(tools=[look]), AgentLoopConfig(provider=provider))
    check(rec)
    for e in rec.events:
        assert event_from_json(e.model_dump_json()) == e
        assert type(e).model_validate(e.model_dump()) == e
        assert e.model_copy(deep=True) == e
        changed = e.model_copy(update={"seq": e.seq + 1000})
        assert changed.seq == e.seq + 1000 and "seq" in changed.model_fields_set
        message = getattr(e, "message", None)
        if message is not None and not isinstance(message, str):
            assert message.model_copy(update={"timestamp": 1}).timestamp == 1
