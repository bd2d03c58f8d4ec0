"""OpenAIChat against every recorded Chat Completions exchange, plus its request building."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import respx
from pydantic_core import from_json
from tests import wire

from treadle.cancellation import CancellationToken
from treadle.providers import (
    ModelRequest,
    ProviderError,
    StreamDone,
    StreamEvent,
    StreamStart,
    TextEnd,
    TextStart,
    ThinkingEnd,
    ThinkingStart,
)
from treadle.providers.openai_chat import OpenAIChat
from treadle.types import (
    AssistantMessage,
    ExtensionMessage,
    ImageContent,
    TextContent,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolResultMessage,
    ToolSpec,
    Usage,
    UserMessage,
)

KEY = "sk-test-secret-key-0123456789"
REQUEST = ModelRequest(messages=[UserMessage.of("hi")])

# ---- what each recording must turn into ----


@dataclass
class Text:
    text: str
    ends: str | None = None
    """When given, ``text`` is only how the block starts (for long blocks)."""


@dataclass
class Thinking:
    text: str
    ends: str | None = None


@dataclass
class Call:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class Ok:
    stop: str
    model: str
    response_id: str
    usage: Usage
    content: list[Text | Thinking | Call] = field(default_factory=list)


@dataclass
class Err:
    kind: str
    status: int | None
    says: str
    retry_after: float | None = None


def usage(inp: int, out: int, total: int, *, reasoning: int = 0, **more: Any) -> Usage:
    return Usage(input=inp, output=out, total_tokens=total, reasoning=reasoning, **more)


EXPECT: dict[str, Ok | Err] = {
    "openai/chat-text": Ok(
        "stop",
        "gpt-4o-2024-08-06",
        "chatcmpl-BJjf61mLb9z5H45ClJzbx0UWKwjo1",
        usage(24, 8, 32),
        [Text("The capital of France is Paris.")],
    ),
    "openai/chat-tool-call": Ok(
        "tool_use",
        "gpt-4.1-mini-2025-04-14",
        "chatcmpl-BMxEwRA0p0gJ52oKS7806KAlfMhqq",
        usage(50, 15, 65),
        [Call("call_bhZkmIKKItNGJ41whHUHB7p9", "get_temperature", {"city": "Tokyo"})],
    ),
    "openai/chat-stream-text-usage": Ok(
        "stop",
        "gpt-3.5-turbo-0125",
        "chatcmpl-C6bjxzOr3Oz1rTiafksd6himIit3q",
        usage(14, 13, 27),
        [Text("1, 2, 3, 4, 5")],
    ),
    "openai/chat-stream-tool-call": Ok(
        "tool_use",
        "gpt-4o-mini-2024-07-18",
        "chatcmpl-BWlJBDk2xe66hjff60joVYpXi1hh4",
        usage(54, 20, 74),
        [Call("call_1EYWDzueHEp8OsB8jJSEp7WB", "multiply", {"a": 1231, "b": 2331})],
    ),
    "openai/chat-stream-tool-result-text": Ok(
        "stop",
        "gpt-4o-mini-2024-07-18",
        "chatcmpl-BWlJCN7VZTtSHROczp0AbrjFGhRMA",
        usage(87, 26, 113),
        [Text("The result of \\( 1231 \\times 2331 \\) is \\( 2,869,461 \\).")],
    ),
    "openai/chat-stream-parallel-tool-calls": Ok(
        "tool_use",
        "gpt-4o-2024-08-06",
        "chatcmpl-ABfwAwrNePHUgBBezonVC6MX3zd63",
        usage(149, 60, 209),
        [
            Call(
                "call_JMW1whyEaYG438VE1OIflxA2",
                "GetWeatherArgs",
                {"city": "Edinburgh", "country": "GB", "units": "c"},
            ),
            Call(
                "call_DNYTawLBoN8fj3KN6qU9N1Ou",
                "get_stock_price",
                {"ticker": "AAPL", "exchange": "NASDAQ"},
            ),
        ],
    ),
    "openai/chat-stream-parallel-tool-calls-usage": Ok(
        "tool_use",
        "gpt-4o-2024-08-06",
        "chatcmpl-C2QD1kGWsTW5OWiqAtOSFEAOfPfQH",
        usage(364, 40, 404),
        [
            Call("call_q2UyBRP7eXNTzAoR8lEhjc9Z", "get_country", {}),
            Call("call_b51ijcpFkDiTQG1bQzsrmtW5", "get_product_name", {}),
        ],
    ),
    "openai/chat-stream-finish-length": Ok(
        "length",
        "gpt-4o-2024-08-06",
        "chatcmpl-ABfw3Oqj8RD0z6aJiiX37oTjV2HFh",
        usage(79, 1, 80),
        [Text('{"')],
    ),
    "openai/chat-stream-refusal": Ok(
        "stop",
        "gpt-4o-2024-08-06",
        "chatcmpl-ABfw4IfQfCCrcuybFm41wJyxjbkz7",
        usage(79, 11, 90),
        [Text("I'm sorry, I can't assist with that request.")],
    ),
    "deepseek/chat-stream-reasoning-content": Ok(
        "stop",
        "deepseek-reasoner",
        "33be18fc-3842-486c-8c29-dd8e578f7f20",
        usage(6, 212, 218, reasoning=198),
        [
            Thinking('Hmm, the user just said "Hello".', "and that's okay too."),
            Text("Hello there! 😊 How can I help you today?"),
        ],
    ),
    "groq/chat-stream-tool-call-single-chunk": Ok(
        "tool_use",
        "openai/gpt-oss-120b",
        "chatcmpl-e35442a8-12c0-4fb4-8be4-0e51727ce7b7",
        usage(304, 49, 353, reasoning=23),
        [
            Thinking(
                'We need to call the function with correct parameter "name". '
                'Provide a name, e.g., "example".'
            ),
            Call(
                "fc_bfb39741-3748-4def-9886-a93fc9c64a90",
                "get_something_by_name",
                {"name": "example"},
            ),
        ],
    ),
    "mistral/chat-stream-thinking-content-array": Ok(
        "stop",
        "magistral-medium-latest",
        "9f9d90210f194076abeee223863eaaf0",
        usage(10, 232, 242),
        [
            Thinking(
                "Okay, the user is asking how to cross the street.",
                "Let me compile this information into a clear and concise response.",
            ),
            # The answer itself is plain string content; only the reasoning comes in parts.
            Text(
                "To cross the street safely, follow these steps:\n\n1. Look both ways",
                "By following these steps, you can ensure a safe crossing.",
            ),
        ],
    ),
    "openrouter/chat-stream-reasoning-comments": Ok(
        "stop",
        "anthropic/claude-sonnet-4.5",
        "gen-1765226419-AGrwjunAftQIAgweibL8",
        usage(43, 36, 79, reasoning=13, cost_usd=0.000669),
        [Thinking("This is a simple arithmetic question. 2+2 equals 4."), Text("2 + 2 = 4")],
    ),
    "vllm/chat-stream-usage": Ok(
        "stop",
        "meta-llama/Llama-3.3-70B-Instruct",
        "chatcmpl-bcfbe349402eb3d2",
        usage(46, 14, 60),
        [Text("1, 2, 3, 4, 5")],
    ),
    "ollama/openai-compat-chat-reasoning": Ok(
        "stop",
        "qwen3:0.6b",
        "chatcmpl-150",
        usage(136, 15, 151),
        [
            Thinking(
                "Okay, the user is asking for the capital of France.", "the answer is Paris.\n"
            ),
            Text('{ "city": "Paris", "country": "France" }'),
        ],
    ),
    "ollama/openai-compat-chat-tools-cloud": Ok(
        "stop",
        "gpt-oss:20b",
        "chatcmpl-395",
        usage(134, 122, 256),
        [
            Thinking(
                'We need to answer question: "What is the capital of France?"', "Just plain text."
            ),
            Text("Paris."),
        ],
    ),
    "openai/chat-error-400-unsupported-value": Err(
        "bad_request", 400, "'messages[0].role' does not support 'system' with this model"
    ),
    "openai/chat-error-404-model-not-found": Err(
        "bad_request", 404, "The model `gpt-5.2-proo` does not exist"
    ),
    "openai/quoted-error-429-rate-limit": Err(
        "rate_limit", 429, "Rate limit reached for gpt-4o", retry_after=0.125
    ),
    "groq/chat-error-400-tool-use-failed": Err(
        "bad_request", 400, "additionalProperties 'foo' not allowed"
    ),
    "openrouter/chat-error-429": Err("rate_limit", 429, "temporarily rate-limited upstream"),
    "groq/chat-stream-midstream-error-event": Err(
        "bad_request", 400, "additionalProperties 'invalid_param' not allowed"
    ),
}


def chat_fixtures() -> list[str]:
    return sorted(
        e["name"]
        for e in wire.index()
        if e.get("api") in ("chat.completions", "ollama /v1/chat/completions")
    )


def test_every_chat_fixture_has_an_expectation() -> None:
    assert set(chat_fixtures()) == set(EXPECT)


# ---- replay helpers ----


def base_url(fixture: dict[str, Any]) -> str:
    url = (fixture.get("request") or {}).get("url") or "https://api.openai.com/v1/chat/completions"
    return str(url).removesuffix("/chat/completions")


def is_sse(fixture: dict[str, Any]) -> bool:
    return "event-stream" in fixture["response"]["headers"].get("content-type", "")


async def replay(
    fixture: dict[str, Any],
    how: str | int = "whole",
    *,
    stream: bool | None = None,
    request: ModelRequest = REQUEST,
    **options: Any,
) -> tuple[list[StreamEvent], respx.Route]:
    """Run the adapter against the recorded response; return its events and the route."""
    url = base_url(fixture)
    adapter = OpenAIChat(
        "test-model",
        api_key=KEY,
        base_url=url,
        stream=is_sse(fixture) if stream is None else stream,
        **options,
    )
    events: list[StreamEvent] = []
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(f"{url}/chat/completions").mock(return_value=wire.response(fixture, how))
        try:
            async for event in adapter.stream(request):
                events.append(event)
        finally:
            await adapter.aclose()
    return events, route


async def replay_body(body: str, how: str | int = "whole", **options: Any) -> list[StreamEvent]:
    return (await replay(sse_fixture(body), how, **options))[0]


def sse_fixture(body: str) -> dict[str, Any]:
    return {
        "request": {"url": "https://api.example.test/v1/chat/completions"},
        "response": {"status": 200, "headers": {"content-type": "text/event-stream"}, "body": body},
    }


def sse(*chunks: dict[str, Any], done: bool = True) -> str:
    lines = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks]
    return "".join(lines) + ("data: [DONE]\n\n" if done else "")


def delta(finish: str | None = None, **fields: Any) -> dict[str, Any]:
    return {
        "id": "chatcmpl-x",
        "model": "m-1",
        "choices": [{"index": 0, "delta": fields, "finish_reason": finish}],
    }


def comparable(events: list[StreamEvent]) -> list[dict[str, Any]]:
    out = []
    for event in events:
        dumped = event.model_dump()
        if isinstance(event, StreamDone):
            dumped["message"].pop("timestamp")
        out.append(dumped)
    return out


def check_stream(events: list[StreamEvent]) -> AssistantMessage:
    """The contract every successful stream keeps; returns the final message."""
    assert isinstance(events[0], StreamStart)
    assert isinstance(events[-1], StreamDone)
    assert sum(isinstance(e, StreamDone) for e in events) == 1
    message = events[-1].message
    content = message.content
    texts: dict[int, str] = {}
    starts: dict[int, ToolCallStart] = {}
    ends: dict[int, ToolCallEnd] = {}
    args: dict[int, str] = {}
    for event in events[1:-1]:
        if isinstance(event, (TextDelta, TextStart, TextEnd)):
            assert isinstance(content[event.index], TextContent)
        if isinstance(event, (ThinkingDelta, ThinkingStart, ThinkingEnd)):
            assert isinstance(content[event.index], ThinkingContent)
        if isinstance(event, (TextDelta, ThinkingDelta)):
            texts[event.index] = texts.get(event.index, "") + event.text
        elif isinstance(event, ToolCallStart):
            assert event.index not in starts
            starts[event.index] = event
        elif isinstance(event, ToolCallDelta):
            assert event.index in starts, "argument fragment before its call started"
            assert event.index not in ends
            args[event.index] = args.get(event.index, "") + event.arguments
        elif isinstance(event, ToolCallEnd):
            assert event.index in starts and event.index not in ends
            ends[event.index] = event
    for index, block in enumerate(content):
        if isinstance(block, TextContent):
            assert texts.get(index) == block.text
        elif isinstance(block, ThinkingContent):
            assert texts.get(index) == block.thinking
        else:
            assert isinstance(block, ToolCall)
            assert (starts[index].id, starts[index].name) == (block.id, block.name)
            assert ends[index].tool_call == block
            raw = args.get(index, "")
            assert (from_json(raw) if raw.strip() else {}) == block.arguments
    assert set(starts) == set(ends) == {i for i, b in enumerate(content) if isinstance(b, ToolCall)}
    return message


def check_content(message: AssistantMessage, expected: list[Text | Thinking | Call]) -> None:
    assert len(message.content) == len(expected)
    for block, want in zip(message.content, expected, strict=True):
        if isinstance(want, (Text, Thinking)):
            if isinstance(want, Text):
                assert isinstance(block, TextContent)
                text = block.text
            else:
                assert isinstance(block, ThinkingContent)
                assert block.signature is None and not block.redacted
                text = block.thinking
            if want.ends is None:
                assert text == want.text
            else:
                assert text.startswith(want.text) and text.endswith(want.ends)
        else:
            assert isinstance(block, ToolCall)
            assert (block.id, block.name, block.arguments) == (want.id, want.name, want.arguments)
            assert block.raw_arguments is None


# ---- every recording, every chunking ----

OK_NAMES = [name for name, want in EXPECT.items() if isinstance(want, Ok)]
ERR_NAMES = [name for name, want in EXPECT.items() if isinstance(want, Err)]


@pytest.mark.anyio
@pytest.mark.parametrize("how", wire.CHUNKINGS)
@pytest.mark.parametrize("name", OK_NAMES)
@pytest.mark.one_backend  # parsing recorded bytes: the backend cannot matter
async def test_replay(name: str, how: str | int) -> None:
    fixture = wire.load(name)
    want = EXPECT[name]
    assert isinstance(want, Ok)
    events, route = await replay(fixture, how)
    message = check_stream(events)
    assert isinstance(events[0], StreamStart)
    assert (events[0].model, events[0].response_id) == (want.model, want.response_id)
    assert message.stop_reason == want.stop
    assert (message.model, message.response_id) == (want.model, want.response_id)
    assert message.provider == "openai"
    assert message.usage == want.usage
    assert message.error is None
    check_content(message, want.content)
    # The request went out with auth and the right streaming flags, and no tools key.
    sent = route.calls.last.request
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    body = json.loads(sent.content)
    assert body["stream"] is is_sse(fixture)
    assert ("stream_options" in body) is is_sse(fixture)
    assert "tools" not in body and "tool_choice" not in body
    # Chunking never changes what comes out.
    if how != "whole":
        assert comparable(events) == comparable((await replay(fixture, "whole"))[0])


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "stream"),
    # HTTP errors through both endpoints; a mid-stream error only exists when streaming.
    [
        (name, stream)
        for name in ERR_NAMES
        for stream in (True, False)
        if "midstream" not in name or stream
    ],
)
@pytest.mark.one_backend  # parsing recorded bytes: the backend cannot matter
async def test_replay_errors(name: str, stream: bool) -> None:
    fixture = wire.load(name)
    want = EXPECT[name]
    assert isinstance(want, Err)
    with pytest.raises(ProviderError) as caught:
        await replay(fixture, 2, stream=stream)
    error = caught.value
    assert error.kind == want.kind
    assert error.status_code == want.status
    assert want.says in error.message
    assert error.retry_after == want.retry_after
    assert error.provider == "openai"
    assert KEY not in str(error) and KEY not in repr(error)


@pytest.mark.anyio
@pytest.mark.parametrize("how", wire.CHUNKINGS)
async def test_groq_midstream_error_comes_after_the_reasoning_it_streamed(how: str | int) -> None:
    events: list[StreamEvent] = []
    fixture = wire.load("groq/chat-stream-midstream-error-event")
    adapter = OpenAIChat("m", api_key=KEY, base_url="https://api.groq.com/openai/v1")
    with respx.mock() as mock:
        mock.post("https://api.groq.com/openai/v1/chat/completions").mock(
            return_value=wire.response(fixture, how)
        )
        with pytest.raises(ProviderError) as caught:
            async for event in adapter.stream(REQUEST):
                events.append(event)
    assert caught.value.kind == "bad_request"
    thinking = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
    assert thinking.startswith("We need to call the tool with invalid parameters first")
    assert thinking.endswith("Let's do that.")
    assert not any(isinstance(e, StreamDone) for e in events)


@pytest.mark.anyio
@pytest.mark.parametrize("how", wire.CHUNKINGS)
async def test_parallel_tool_calls_land_in_distinct_blocks(how: str | int) -> None:
    events, _ = await replay(wire.load("openai/chat-stream-parallel-tool-calls"), how)
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert [(s.index, s.id, s.name) for s in starts] == [
        (0, "call_JMW1whyEaYG438VE1OIflxA2", "GetWeatherArgs"),
        (1, "call_DNYTawLBoN8fj3KN6qU9N1Ou", "get_stock_price"),
    ]
    fragments = {0: "", 1: ""}
    for event in events:
        if isinstance(event, ToolCallDelta):
            fragments[event.index] += event.arguments
    assert fragments == {
        0: '{"city": "Edinburgh", "country": "GB", "units": "c"}',
        1: '{"ticker": "AAPL", "exchange": "NASDAQ"}',
    }


@pytest.mark.anyio
@pytest.mark.parametrize("how", wire.CHUNKINGS)
async def test_interleaved_tool_call_fragments_follow_their_index(how: str | int) -> None:
    def call(index: int, args: str, **head: str) -> dict[str, Any]:
        fragment: dict[str, Any] = {"index": index, "function": {"arguments": args}}
        if head:
            fragment["id"] = head["id"]
            fragment["type"] = "function"
            fragment["function"]["name"] = head["name"]
        return delta(tool_calls=[fragment])

    body = sse(
        delta(role="assistant", content="Checking both."),
        call(0, "", id="call_a", name="weather"),
        call(1, '{"ci', id="call_b", name="time"),
        call(0, '{"city"'),
        call(1, 'ty": "Oslo"}'),
        call(0, ': "Paris"}'),
        delta(finish="tool_calls"),
    )
    events = await replay_body(body, how)
    message = check_stream(events)
    assert message.stop_reason == "tool_use"
    assert message.content == [
        TextContent(text="Checking both."),
        ToolCall(id="call_a", name="weather", arguments={"city": "Paris"}),
        ToolCall(id="call_b", name="time", arguments={"city": "Oslo"}),
    ]


@pytest.mark.anyio
async def test_groq_single_chunk_tool_call_streams_start_then_whole_arguments() -> None:
    events, _ = await replay(wire.load("groq/chat-stream-tool-call-single-chunk"))
    calls = [e for e in events if isinstance(e, (ToolCallStart, ToolCallDelta, ToolCallEnd))]
    assert [type(e) for e in calls] == [ToolCallStart, ToolCallDelta, ToolCallEnd]
    assert isinstance(calls[1], ToolCallDelta)
    assert calls[1].arguments == '{"name":"example"}'
    assert {e.index for e in calls} == {1}  # after the thinking block


@pytest.mark.anyio
async def test_deltas_stream_live_in_order() -> None:
    events, _ = await replay(wire.load("openai/chat-stream-text-usage"), "lines")
    assert [type(e) for e in events[:3]] == [StreamStart, TextStart, TextDelta]
    pieces = [e.text for e in events if isinstance(e, TextDelta)]
    assert pieces == ["1", ",", " ", "2", ",", " ", "3", ",", " ", "4", ",", " ", "5"]
    assert isinstance(events[-2], TextEnd) and events[-2].index == 0


# ---- stream endings ----


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["whole", "lines", 1])
async def test_stream_cut_before_finish_is_truncated(how: str | int) -> None:
    body = wire.load("openai/chat-stream-tool-call")["response"]["body"]
    events_kept = body.split("\n\n")[:6]
    with pytest.raises(ProviderError) as caught:
        await replay_body("\n\n".join(events_kept) + "\n\n", how)
    assert caught.value.kind == "truncated_stream"
    assert caught.value.retryable


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["whole", 1])
async def test_stream_cut_inside_an_event_is_truncated(how: str | int) -> None:
    body = wire.load("openai/chat-stream-text-usage")["response"]["body"]
    with pytest.raises(ProviderError) as caught:
        await replay_body(body[: body.index('"content":"3"') + 5], how)
    assert caught.value.kind == "truncated_stream"


@pytest.mark.anyio
async def test_finish_reason_without_done_is_complete() -> None:
    body = wire.load("vllm/chat-stream-usage")["response"]["body"].replace("data: [DONE]", "")
    message = check_stream(await replay_body(body))
    assert message.text == "1, 2, 3, 4, 5"
    assert message.usage.total_tokens == 60


@pytest.mark.anyio
async def test_done_without_finish_reason_infers_the_stop_reason() -> None:
    fragment = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "f", "arguments": "{}"},
    }
    message = check_stream(await replay_body(sse(delta(tool_calls=[fragment]))))
    assert message.stop_reason == "tool_use"


@pytest.mark.anyio
async def test_midstream_error_payload_without_error_event() -> None:
    # OpenRouter's shape for an upstream failure after HTTP 200.
    body = sse(
        delta(content="Hel"),
        {"error": {"code": 502, "message": "Upstream provider crashed"}, "choices": []},
        done=False,
    )
    with pytest.raises(ProviderError) as caught:
        await replay_body(body)
    assert (caught.value.kind, caught.value.status_code) == ("server", 502)
    assert caught.value.message == "Upstream provider crashed"


@pytest.mark.anyio
async def test_content_filter_is_an_error_stop() -> None:
    body = wire.load("openai/chat-stream-text-usage")["response"]["body"]
    body = body.replace('"finish_reason":"stop"', '"finish_reason":"content_filter"')
    message = check_stream(await replay_body(body))
    assert message.stop_reason == "error"
    assert message.error is not None and message.error.kind == "content_filter"
    assert message.text == "1, 2, 3, 4, 5"


@pytest.mark.anyio
async def test_cached_and_reasoning_tokens() -> None:
    body = wire.load("vllm/chat-stream-usage")["response"]["body"].replace(
        '"prompt_tokens_details":{"cached_tokens":0}',
        '"prompt_tokens_details":{"cached_tokens":40},"completion_tokens_details":{"reasoning_tokens":9}',
    )
    message = check_stream(await replay_body(body))
    assert message.usage == Usage(input=6, cache_read=40, output=14, reasoning=9, total_tokens=60)


@pytest.mark.anyio
async def test_deepseek_cache_hit_tokens() -> None:
    body = wire.load("deepseek/chat-stream-reasoning-content")["response"]["body"].replace(
        '"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":6',
        '"prompt_cache_hit_tokens":4,"prompt_cache_miss_tokens":2',
    )
    message = check_stream(await replay_body(body))
    assert (message.usage.input, message.usage.cache_read) == (2, 4)


@pytest.mark.anyio
async def test_any_reasoning_like_field_is_thinking() -> None:
    body = sse(
        delta(role="assistant", thought="Let me see. "),
        delta(thinking_text="Two and two."),
        delta(thought_signature="opaque-not-text"),
        delta(content="4", reasoning_content=None),
        delta(finish="stop"),
    )
    message = check_stream(await replay_body(body))
    assert message.content == [
        ThinkingContent(thinking="Let me see. Two and two."),
        TextContent(text="4"),
    ]


@pytest.mark.anyio
async def test_invalid_tool_arguments_are_kept_raw() -> None:
    fixture = {
        "response": {
            "status": 200,
            "headers": {"content-type": "application/json"},
            "body": json.dumps(
                {
                    "id": "c1",
                    "model": "m",
                    "choices": [
                        {
                            "finish_reason": "tool_calls",
                            "message": {
                                "role": "assistant",
                                "content": None,
                                "tool_calls": [
                                    {
                                        "id": "a",
                                        "type": "function",
                                        "function": {"name": "f", "arguments": '{"x": 1'},
                                    },
                                    {
                                        "id": "b",
                                        "type": "function",
                                        "function": {"name": "g", "arguments": ""},
                                    },
                                    {
                                        "id": "c",
                                        "type": "function",
                                        "function": {"name": "h", "arguments": "[1]"},
                                    },
                                ],
                            },
                        }
                    ],
                }
            ),
        }
    }
    message = check_stream_lenient((await replay(fixture))[0])
    assert message.content == [
        ToolCall(id="a", name="f", arguments={}, raw_arguments='{"x": 1'),
        ToolCall(id="b", name="g", arguments={}),
        ToolCall(id="c", name="h", arguments={}, raw_arguments="[1]"),
    ]
    assert message.usage == Usage()


def check_stream_lenient(events: list[StreamEvent]) -> AssistantMessage:
    assert isinstance(events[0], StreamStart) and isinstance(events[-1], StreamDone)
    ends = [e.tool_call for e in events if isinstance(e, ToolCallEnd)]
    assert ends == events[-1].message.tool_calls
    return events[-1].message


# ---- cancellation, keys, headers ----


class CancelMidway(httpx.AsyncByteStream):
    """Cancels the token once three events (six lines) have been delivered."""

    def __init__(self, chunks: list[bytes], token: CancellationToken) -> None:
        self._chunks = chunks
        self._token = token

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for number, chunk in enumerate(self._chunks):
            if number == 6:
                self._token.cancel("immediate")
            yield chunk


@pytest.mark.anyio
async def test_immediate_cancel_stops_between_chunks() -> None:
    token = CancellationToken()
    body = wire.load("openai/chat-stream-text-usage")["response"]["body"].encode()
    chunks = wire.split(body, "lines")
    adapter = OpenAIChat("m", api_key=KEY)
    events: list[StreamEvent] = []
    with respx.mock() as mock:
        mock.post("https://api.openai.com/v1/chat/completions").mock(
            return_value=httpx.Response(200, stream=CancelMidway(chunks, token))
        )
        with pytest.raises(ProviderError) as caught:
            async for event in adapter.stream(REQUEST, cancel=token):
                events.append(event)
    assert caught.value.kind == "cancelled"
    assert isinstance(events[0], StreamStart)
    assert not any(isinstance(e, StreamDone) for e in events)


@pytest.mark.anyio
async def test_missing_key_fails_at_first_request_not_construction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    adapter = OpenAIChat("gpt-4o-mini")
    with pytest.raises(ProviderError) as caught:
        async for _ in adapter.stream(REQUEST):
            pass
    assert caught.value.kind == "auth"
    assert "OPENAI_API_KEY" in caught.value.message and "api_key=" in caught.value.message


@pytest.mark.anyio
async def test_provider_name_picks_its_key_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-leak")
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    adapter = OpenAIChat("llama", provider_name="groq", base_url="https://api.groq.com/openai/v1")
    with pytest.raises(ProviderError) as caught:
        async for _ in adapter.stream(REQUEST):
            pass
    assert "GROQ_API_KEY" in caught.value.message
    assert caught.value.provider == "groq"

    monkeypatch.setenv("GROQ_API_KEY", "gsk-groq")
    adapter = OpenAIChat("llama", provider_name="groq", base_url="https://api.groq.com/openai/v1")
    assert adapter._headers()["authorization"] == "Bearer gsk-groq"


@pytest.mark.anyio
@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:11434/v1",
        "http://127.0.0.1:8000/v1",
        "http://192.168.1.20:1234/v1",
        "http://vllm:8000/v1",
    ],
)
async def test_local_servers_need_no_key(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fixture = wire.load("vllm/chat-stream-usage")
    adapter = OpenAIChat("llama", base_url=url)
    with respx.mock() as mock:
        route = mock.post(f"{url}/chat/completions").mock(return_value=wire.response(fixture))
        events = [e async for e in adapter.stream(REQUEST)]
    assert check_stream(events).text == "1, 2, 3, 4, 5"
    assert "authorization" not in route.calls.last.request.headers


def test_key_stays_out_of_repr_and_headers_carry_org_and_project() -> None:
    adapter = OpenAIChat("gpt-4o", api_key=KEY, organization="org-1", project="proj-1")
    assert KEY not in repr(adapter)
    headers = adapter._headers()
    assert headers["authorization"] == f"Bearer {KEY}"
    assert (headers["openai-organization"], headers["openai-project"]) == ("org-1", "proj-1")
    assert adapter.name == "openai"
    named = OpenAIChat("m", api_key=KEY, provider_name="together", headers={"X-Extra": "1"})
    assert named.name == "together" and named._headers()["X-Extra"] == "1"


@pytest.mark.anyio
async def test_provider_name_is_stamped_on_the_message() -> None:
    fixture = wire.load("deepseek/chat-stream-reasoning-content")
    events, _ = await replay(fixture, provider_name="deepseek")
    assert check_stream(events).provider == "deepseek"


# ---- build_body ----


def adapter(**options: Any) -> OpenAIChat:
    return OpenAIChat("gpt-4o-mini", api_key=KEY, **options)


WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def test_body_has_no_tools_key_without_tools() -> None:
    body = adapter().build_body(ModelRequest(messages=[UserMessage.of("hi")], tool_choice="auto"))
    assert "tools" not in body and "tool_choice" not in body
    assert body == {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_body_matches_recorded_plain_request() -> None:
    recorded = wire.load("openai/chat-text")["request"]["body"]
    body = adapter(stream=False).build_body(
        ModelRequest(
            model="gpt-4o",
            system_prompt="You are a helpful assistant.",
            messages=[UserMessage.of("What is the capital of France?")],
        )
    )
    assert body["messages"] == recorded["messages"]
    assert body["model"] == recorded["model"] and body["stream"] is recorded["stream"] is False


def test_body_matches_recorded_tool_request() -> None:
    recorded = wire.load("openai/chat-stream-tool-call")["request"]["body"]
    spec = recorded["tools"][0]["function"]
    body = adapter().build_body(
        ModelRequest(
            messages=[UserMessage.of("What is 1231 * 2331?")],
            tools=[
                ToolSpec(
                    name=spec["name"],
                    description=spec["description"],
                    parameters=spec["parameters"],
                )
            ],
        )
    )
    assert body["tools"] == recorded["tools"]
    assert body["stream_options"] == recorded["stream_options"]
    assert body["messages"] == recorded["messages"]


def test_body_matches_recorded_tool_result_request() -> None:
    recorded = wire.load("openai/chat-stream-tool-result-text")["request"]["body"]
    call = ToolCall(
        id="call_1EYWDzueHEp8OsB8jJSEp7WB", name="multiply", arguments={"a": 1231, "b": 2331}
    )
    body = adapter().build_body(
        ModelRequest(
            messages=[
                UserMessage.of("What is 1231 * 2331?"),
                AssistantMessage(content=[call], stop_reason="tool_use"),
                ToolResultMessage(tool_call_id=call.id, tool_name="multiply", content="2869461"),
            ]
        )
    )
    user, assistant, tool = body["messages"]
    assert user == recorded["messages"][0]
    wanted_call = recorded["messages"][2]["tool_calls"][0]
    (sent_call,) = assistant["tool_calls"]
    assert (sent_call["id"], sent_call["type"], sent_call["function"]["name"]) == (
        wanted_call["id"],
        "function",
        "multiply",
    )
    assert json.loads(sent_call["function"]["arguments"]) == json.loads(
        wanted_call["function"]["arguments"]
    )
    assert assistant["content"] is None
    assert tool == recorded["messages"][3]


def test_body_matches_recorded_groq_retry_shape() -> None:
    recorded = wire.load("groq/chat-stream-tool-call-single-chunk")["request"]["body"]
    system, user, prior, result = recorded["messages"]
    wanted = prior["tool_calls"][0]
    call = ToolCall(
        id=wanted["id"], name=wanted["function"]["name"], arguments={"invalid_param": "value"}
    )
    body = OpenAIChat(
        "x", api_key=KEY, provider_name="groq", base_url="https://api.groq.com/openai/v1"
    ).build_body(
        ModelRequest(
            model=recorded["model"],
            system_prompt=system["content"],
            messages=[
                UserMessage.of(user["content"]),
                AssistantMessage(
                    content=[ThinkingContent(thinking="We need to call the tool."), call],
                    provider="groq",
                    model=recorded["model"],
                ),
                ToolResultMessage(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    content=result["content"],
                    is_error=True,
                ),
            ],
            tools=[
                ToolSpec(
                    name="get_something_by_name",
                    parameters=recorded["tools"][0]["function"]["parameters"],
                )
            ],
            tool_choice="auto",
        )
    )
    assert [m["role"] for m in body["messages"]] == [m["role"] for m in recorded["messages"]]
    assert body["messages"][0] == system and body["messages"][1] == user
    assert body["messages"][2]["tool_calls"][0]["id"] == wanted["id"]
    assert body["messages"][2]["content"] is None  # thinking is not replayed as text
    assert "reasoning" not in body["messages"][2] and "reasoning_content" not in body["messages"][2]
    assert body["messages"][3] == result
    assert body["tool_choice"] == recorded["tool_choice"]
    assert (
        body["tools"][0]["function"]["parameters"] == recorded["tools"][0]["function"]["parameters"]
    )


def test_body_matches_recorded_response_format() -> None:
    recorded = wire.load("ollama/openai-compat-chat-reasoning")["request"]["body"]
    schema = recorded["response_format"]["json_schema"]["schema"]
    wrapped = adapter().build_body(
        ModelRequest(
            messages=[UserMessage.of("q")],
            response_format={"name": "CityLocation", "schema": schema},
        )
    )["response_format"]
    bare = adapter().build_body(
        ModelRequest(messages=[UserMessage.of("q")], response_format=schema)
    )["response_format"]
    expected = {
        "type": "json_schema",
        "json_schema": {"name": "CityLocation", "schema": schema, "strict": False},
    }
    assert wrapped == bare == expected
    strict = adapter().build_body(
        ModelRequest(response_format={"name": "my schema!", "schema": schema, "strict": True})
    )["response_format"]
    assert strict["json_schema"]["strict"] is True
    assert strict["json_schema"]["name"] == "my_schema_"
    untitled = adapter().build_body(ModelRequest(response_format={"type": "object"}))[
        "response_format"
    ]
    assert untitled["json_schema"]["name"] == "response"
    native = {"type": "json_object"}
    assert adapter().build_body(ModelRequest(response_format=native))["response_format"] == native


def test_body_options() -> None:
    request = ModelRequest(
        model="o4-mini",
        system_prompt="Be brief.",
        messages=[UserMessage.of("hi")],
        tools=[WEATHER],
        tool_choice={"name": "get_weather"},
        max_tokens=256,
        temperature=0.2,
        thinking_level="high",
        extra_body={"temperature": 0.5, "seed": 7, "stream_options": {"include_usage": False}},
    )
    body = adapter(system_role="developer").build_body(request)
    assert body["model"] == "o4-mini"
    assert body["messages"][0] == {"role": "developer", "content": "Be brief."}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city.",
                "parameters": WEATHER.parameters,
            },
        }
    ]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["max_completion_tokens"] == 256 and "max_tokens" not in body
    assert body["reasoning_effort"] == "high"
    assert (body["temperature"], body["seed"]) == (0.5, 7)  # extra_body wins
    assert body["stream_options"] == {"include_usage": False}

    for choice in ("auto", "none", "required"):
        assert (
            adapter().build_body(request.model_copy(update={"tool_choice": choice}))["tool_choice"]
            == choice
        )
    off = adapter().build_body(
        request.model_copy(update={"thinking_level": "off", "extra_body": {}})
    )
    assert "reasoning_effort" not in off
    local = OpenAIChat("m", base_url="http://localhost:8000/v1", include_usage=False).build_body(
        request
    )
    assert local["max_tokens"] == 256 and "max_completion_tokens" not in local
    assert "stream_options" not in OpenAIChat("m", include_usage=False).build_body(ModelRequest())
    assert adapter().build_body(ModelRequest())["model"] == "gpt-4o-mini"


PNG = ImageContent(data="iVBORw0KGgo=", mime_type="image/png")


def test_body_images_and_tool_result_images() -> None:
    calls = [
        ToolCall(id="call_1", name="screenshot", arguments={}),
        ToolCall(id="call_2", name="read", arguments={"path": "a"}),
    ]
    body = adapter().build_body(
        ModelRequest(
            messages=[
                UserMessage.of("Look", PNG),
                AssistantMessage(content=[TextContent(text="Taking both."), *calls]),
                ToolResultMessage(tool_call_id="call_1", tool_name="screenshot", content=[PNG]),
                ToolResultMessage(tool_call_id="call_2", tool_name="read", content="file text"),
                UserMessage.of("And now?"),
            ]
        )
    )
    user, assistant, tool_1, tool_2, images, last = body["messages"]
    assert user["content"] == [
        {"type": "text", "text": "Look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ]
    assert assistant["content"] == "Taking both."
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_1", "call_2"]
    assert tool_1["role"] == "tool" and tool_1["tool_call_id"] == "call_1"
    assert isinstance(tool_1["content"], str) and "image" in tool_1["content"]
    assert tool_2 == {"role": "tool", "tool_call_id": "call_2", "content": "file text"}
    # Images wait until the run of tool messages ends, then come as one user message.
    assert images["role"] == "user"
    assert images["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
    }
    assert "screenshot" in images["content"][0]["text"]
    assert last == {"role": "user", "content": "And now?"}


def test_body_images_at_the_end_of_history() -> None:
    body = adapter().build_body(
        ModelRequest(
            messages=[
                AssistantMessage(content=[ToolCall(id="c", name="shot")]),
                ToolResultMessage(
                    tool_call_id="c", tool_name="shot", content=[TextContent(text="done"), PNG]
                ),
            ]
        )
    )
    assert [m["role"] for m in body["messages"]] == ["assistant", "tool", "user"]
    assert body["messages"][1]["content"].startswith("done\n")


def test_body_ids_are_normalised_for_call_and_result_alike() -> None:
    odd = "toolu_01.ABC/def:" + "x" * 60
    history = [
        AssistantMessage(
            content=[ToolCall(id=odd, name="f", arguments={"a": 1})], provider="anthropic"
        ),
        ToolResultMessage(tool_call_id=odd, tool_name="f", content="ok"),
    ]
    body = adapter().build_body(ModelRequest(messages=history))
    sent = body["messages"][0]["tool_calls"][0]["id"]
    assert sent == body["messages"][1]["tool_call_id"]
    assert len(sent) <= 40 and sent.replace("_", "").replace("-", "").isalnum()
    mistral = OpenAIChat("m", api_key=KEY, provider_name="mistral").build_body(
        ModelRequest(messages=history)
    )
    short = mistral["messages"][0]["tool_calls"][0]["id"]
    assert short == mistral["messages"][1]["tool_call_id"]
    assert len(short) == 9 and short.isalnum()
    kept = OpenAIChat("m", api_key=KEY, provider_name="mistral").build_body(
        ModelRequest(messages=[AssistantMessage(content=[ToolCall(id="D681PevKs", name="f")])])
    )
    assert kept["messages"][0]["tool_calls"][0]["id"] == "D681PevKs"


def test_body_skips_what_a_model_must_not_see() -> None:
    history = [
        UserMessage.of("hi"),
        ExtensionMessage(kind="note", data={"x": 1}),
        AssistantMessage(content=[]),
        AssistantMessage(
            content=[ThinkingContent(thinking="only thoughts", signature="sig")], provider="openai"
        ),
        AssistantMessage(
            content=[
                ThinkingContent(thinking="foreign thoughts", signature="sig"),
                TextContent(text="Hello"),
                ToolCall(id="c1", name="f", arguments={}, raw_arguments="{broken"),
            ],
            provider="anthropic",
        ),
    ]
    body = adapter().build_body(ModelRequest(messages=history))
    assert body["messages"] == [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": "Hello",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
    ]


def test_body_deepseek_sends_its_own_reasoning_back() -> None:
    own = AssistantMessage(
        content=[ThinkingContent(thinking="I should call f."), ToolCall(id="c1", name="f")],
        provider="deepseek",
        model="deepseek-chat",
    )
    foreign = own.model_copy(update={"provider": "anthropic"})
    deepseek = OpenAIChat(
        "deepseek-chat", api_key=KEY, provider_name="deepseek", base_url="https://api.deepseek.com"
    )
    assert (
        deepseek.build_body(ModelRequest(messages=[own]))["messages"][0]["reasoning_content"]
        == "I should call f."
    )
    assert (
        "reasoning_content"
        not in deepseek.build_body(ModelRequest(messages=[foreign]))["messages"][0]
    )
    vllm = OpenAIChat(
        "m", provider_name="vllm", base_url="http://localhost:8000/v1", reasoning_field="reasoning"
    )
    own_vllm = own.model_copy(update={"provider": "vllm"})
    assert (
        vllm.build_body(ModelRequest(messages=[own_vllm]))["messages"][0]["reasoning"]
        == "I should call f."
    )
    assert (
        "reasoning_content" not in adapter().build_body(ModelRequest(messages=[own]))["messages"][0]
    )
