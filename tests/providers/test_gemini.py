"""The Gemini adapter against every recorded Google exchange, over every chunking."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
import respx
from pydantic_core import from_json
from tests import wire

from treadle.cancellation import CancellationToken
from treadle.providers.base import (
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
from treadle.providers.gemini import SKIP_SIGNATURE, Gemini, sanitize_schema, thinking_config
from treadle.types import (
    AssistantMessage,
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
    messages_from_json,
    messages_to_json,
)

pytestmark = pytest.mark.anyio

KEY = "gm-test-key-0123456789"
OK = [n for n in wire.names("google") if wire.load(n)["response"]["status"] == 200]
ERRORS = [n for n in wire.names("google") if wire.load(n)["response"]["status"] >= 400]


def fixture_model(fixture: dict[str, Any]) -> str:
    found = re.search(r"models/([^:/]+):", fixture["request"]["url"])
    assert found
    return found.group(1)


def is_streaming(fixture: dict[str, Any]) -> bool:
    return ":streamGenerateContent" in fixture["request"]["url"]


async def run(
    fixture: dict[str, Any],
    how: str | int = "whole",
    request: ModelRequest | None = None,
    **options: Any,
) -> tuple[list[StreamEvent], httpx.Request]:
    options.setdefault("stream", is_streaming(fixture))
    adapter = Gemini(fixture_model(fixture), api_key=KEY, **options)
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(url__startswith="https://generativelanguage.googleapis.com/").mock(
            return_value=wire.response(fixture, how)
        )
        try:
            events = [e async for e in adapter.stream(request or ModelRequest())]
        finally:
            await adapter.aclose()
        return events, route.calls.last.request


def rebuild(events: list[StreamEvent]) -> list[Any]:
    """The content a consumer builds from the deltas alone."""
    blocks: dict[int, dict[str, Any]] = {}
    for event in events:
        if isinstance(event, (TextStart, TextDelta)):
            block = blocks.setdefault(event.index, {"type": "text", "text": ""})
            assert block["type"] == "text"
            if isinstance(event, TextDelta):
                block["text"] += event.text
        elif isinstance(event, (ThinkingStart, ThinkingDelta)):
            block = blocks.setdefault(event.index, {"type": "thinking", "text": ""})
            assert block["type"] == "thinking"
            if isinstance(event, ThinkingDelta):
                block["text"] += event.text
        elif isinstance(event, ThinkingEnd):
            assert blocks[event.index]["type"] == "thinking"
            blocks[event.index]["signature"] = event.signature
        elif isinstance(event, TextEnd):
            assert blocks[event.index]["type"] == "text"
        elif isinstance(event, ToolCallStart):
            assert event.index not in blocks
            blocks[event.index] = {"type": "tool_call", "id": event.id, "name": event.name}
            blocks[event.index]["args"] = ""
        elif isinstance(event, ToolCallDelta):
            blocks[event.index]["args"] += event.arguments
        elif isinstance(event, ToolCallEnd):
            blocks[event.index]["call"] = event.tool_call
    assert sorted(blocks) == list(range(len(blocks)))
    return [blocks[i] for i in range(len(blocks))]


def check_shape(events: list[StreamEvent]) -> AssistantMessage:
    """The contract every stream keeps: start first, one done last, deltas match the message."""
    assert isinstance(events[0], StreamStart)
    assert isinstance(events[-1], StreamDone)
    assert sum(isinstance(e, StreamDone) for e in events) == 1
    message = events[-1].message
    assert message.provider == "gemini"
    rebuilt = rebuild(events)
    assert len(rebuilt) == len(message.content)
    for block, final in zip(rebuilt, message.content, strict=True):
        if isinstance(final, TextContent):
            assert block == {"type": "text", "text": final.text}
        elif isinstance(final, ThinkingContent):
            assert block["type"] == "thinking"
            assert block["text"] == final.thinking
            assert block.get("signature") == final.signature
        else:
            assert isinstance(final, ToolCall)
            assert block["id"] == final.id and block["name"] == final.name
            assert from_json(block["args"]) == final.arguments
            assert block["call"] == final
    assert events[0].model == message.model
    assert events[0].response_id == message.response_id
    return message


# ---- every successful fixture, over every chunking ----

EXPECTED: dict[str, dict[str, Any]] = {
    "google/stream-text": {
        "kinds": ["text"],
        "text": "The capital of France is Paris.\n",
        "stop": "stop",
        "usage": Usage(input=13, output=8, total_tokens=21),
        "response_id": "w1peaMz6INOvnvgPgYfPiQY",
        "model": "gemini-2.0-flash-exp",
    },
    "google/stream-function-call": {
        "kinds": ["tool_call"],
        "calls": [("get_capital", {"country": "France"})],
        "stop": "tool_use",
        "usage": Usage(input=52, output=5, total_tokens=57),
        "response_id": "1lpeaMTxIpW1nvgP-O3vwQY",
        "model": "gemini-2.0-flash",
    },
    "google/stream-function-call-2": {
        "kinds": ["tool_call"],
        "calls": [("get_temperature", {"city": "Paris"})],
        "stop": "tool_use",
        "usage": Usage(input=64, output=5, total_tokens=69),
        "response_id": "11peaOXwBPH_2PgPh_z--AY",
        "model": "gemini-2.0-flash",
    },
    "google/stream-function-call-3-text": {
        "kinds": ["text"],
        "text": "The temperature in Paris is 30°C.\n",
        "stop": "stop",
        "usage": Usage(input=79, output=12, total_tokens=91),
        "response_id": "11peaI_ZJLq3nvgP0vasuQk",
        "model": "gemini-2.0-flash",
    },
    "google/stream-function-call-thought-signature": {
        # The signature rides on an empty thinking block right before its call; the final
        # chunk's empty text part makes no block.
        "kinds": ["signature", "tool_call"],
        "calls": [("get_country", {})],
        "signature_prefix": "EpwICpkIAXLI2nxl",
        "stop": "tool_use",
        "usage": Usage(input=29, output=212, reasoning=202, total_tokens=241),
        "response_id": "QUVVadTSNJ6_qtsPvN7J8Q0",
        "model": "gemini-3-pro-preview",
    },
    "google/stream-thinking": {
        "kinds": ["thinking", "signature", "text"],
        "thinking_starts": "**Clarifying User Goals**",
        "thinking_contains": "**Crafting Safe Instructions**",
        "text_starts": "This is a great question! Safely crossing the street",
        "signature_prefix": "CiIB0e2Kb6Syj1a961Ef",
        "stop": "stop",
        "usage": Usage(input=34, output=469 + 787, reasoning=787, total_tokens=1290),
        "response_id": "beHBaJfEMIi-qtsP3769-Q8",
        "model": "gemini-2.5-pro",
    },
    "google/stream-json-array-function-call": {
        "kinds": ["thinking", "signature", "tool_call"],
        "thinking_starts": "**Generating Pelican Names**",
        "calls": [("pelican_name_generator", {})],
        "signature_prefix": "ClgBEU0yD8z3tYzb",
        "stop": "tool_use",
        "usage": Usage(input=32, output=54, reasoning=42, total_tokens=86),
        "response_id": "OYpyaqycKd2V_uMP65TsgA0",
        "model": "gemini-2.5-flash",
    },
    "google/generate-content-function-call": {
        "kinds": ["tool_call"],
        "calls": [("get_capital", {"country": "France"})],
        "stop": "tool_use",
        "usage": Usage(input=23, output=5, total_tokens=28),
        "response_id": None,
        "model": "gemini-2.0-flash-exp",
    },
    "google/generate-content-parallel-function-calls": {
        # Only the first of three calls carries a signature.
        "kinds": ["signature", "tool_call", "tool_call", "tool_call"],
        "calls": [("generate_topic", {})] * 3,
        "signature_prefix": "Es8FCswFAXLI2nxF",
        "stop": "tool_use",
        "usage": Usage(input=83, output=220, reasoning=190, total_tokens=303),
        "response_id": "wOd8abGuO5rgz7IP5tLEGA",
        "model": "gemini-3-flash-preview",
    },
    "google/generate-content-function-call-enum-ints": {
        # finishReason is the integer 1 (STOP) here.
        "kinds": ["tool_call"],
        "calls": [("calculate", {"expression": "15 * 7"})],
        "stop": "tool_use",
        "usage": Usage(input=21, output=7, total_tokens=28),
        "response_id": "aB-jaLOqDrDi7M8PhcnpkQU",
        "model": "gemini-2.0-flash",
    },
}


def test_every_success_fixture_has_expectations() -> None:
    assert sorted(EXPECTED) == OK


def kind_of(block: Any) -> str:
    if isinstance(block, ThinkingContent):
        return "signature" if not block.thinking and block.signature else "thinking"
    return str(block.type)


@pytest.mark.parametrize("how", wire.CHUNKINGS)
@pytest.mark.parametrize("name", OK)
@pytest.mark.one_backend  # parsing recorded bytes: the backend cannot matter
async def test_replay(name: str, how: str | int) -> None:
    fixture = wire.load(name)
    expected = EXPECTED[name]
    events, sent = await run(fixture, how)
    message = check_shape(events)

    assert [kind_of(b) for b in message.content] == expected["kinds"]
    assert message.stop_reason == expected["stop"]
    assert message.error is None
    assert message.usage == expected["usage"]
    assert message.response_id == expected["response_id"]
    assert message.model == expected["model"]
    if "text" in expected:
        assert message.text == expected["text"]
    if "text_starts" in expected:
        assert message.text.startswith(expected["text_starts"])
    if "thinking_starts" in expected:
        assert message.thinking.startswith(expected["thinking_starts"])
    if "thinking_contains" in expected:
        assert expected["thinking_contains"] in message.thinking
    calls = message.tool_calls
    assert [(c.name, c.arguments) for c in calls] == expected.get("calls", [])
    assert len({c.id for c in calls}) == len(calls)
    for call in calls:
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", call.id)
        if message.response_id:
            assert message.response_id in call.id
    if "signature_prefix" in expected:
        carriers = [b for b in message.content if kind_of(b) == "signature"]
        assert len(carriers) == 1
        assert carriers[0].signature.startswith(expected["signature_prefix"])  # type: ignore[union-attr]

    # The wire: the key only in its header, the right endpoint for the mode.
    assert sent.headers["x-goog-api-key"] == KEY
    assert KEY not in str(sent.url)
    model = fixture_model(fixture)
    if is_streaming(fixture):
        assert str(sent.url).endswith(f"/v1beta/models/{model}:streamGenerateContent?alt=sse")
    else:
        assert str(sent.url).endswith(f"/v1beta/models/{model}:generateContent")


async def test_thinking_text_is_split_into_live_deltas() -> None:
    events, _ = await run(wire.load("google/stream-thinking"), "lines")
    thinking = [e for e in events if isinstance(e, ThinkingDelta)]
    text = [e for e in events if isinstance(e, TextDelta)]
    assert len(thinking) == 4 and {e.index for e in thinking} == {0}
    assert len(text) == 19 and {e.index for e in text} == {2}
    # Thinking ends before the signature carrier and the text begin.
    order = [type(e).__name__ for e in events]
    assert order.index("ThinkingEnd") < order.index("TextStart")


@pytest.mark.parametrize("how", wire.CHUNKINGS)
async def test_non_streaming_fixture_through_the_streaming_path(how: str | int) -> None:
    """A proxy that ignores alt=sse answers with plain JSON; the adapter still copes."""
    events, _ = await run(
        wire.load("google/generate-content-parallel-function-calls"), how, stream=True
    )
    message = check_shape(events)
    assert [c.name for c in message.tool_calls] == ["generate_topic"] * 3


async def test_json_array_stream_via_non_streaming_mode() -> None:
    events, sent = await run(wire.load("google/stream-json-array-function-call"), stream=False)
    message = check_shape(events)
    assert [c.name for c in message.tool_calls] == ["pelican_name_generator"]
    assert str(sent.url).endswith(":generateContent")


# ---- errors ----

ERROR_EXPECTED = {
    "google/error-403": ("auth", 403, "unregistered callers"),
    "google/error-404": ("bad_request", 404, "gemini-3.6-flahs is not found"),
    "google/error-400-vertex": ("bad_request", 400, "Cannot fetch content"),
}


def test_every_error_fixture_has_expectations() -> None:
    assert sorted(ERROR_EXPECTED) == ERRORS


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("how", wire.CHUNKINGS)
@pytest.mark.parametrize("name", ERRORS)
@pytest.mark.one_backend  # parsing recorded bytes: the backend cannot matter
async def test_error_fixtures(name: str, how: str | int, stream: bool) -> None:
    kind, status, text = ERROR_EXPECTED[name]
    with pytest.raises(ProviderError) as caught:
        await run(wire.load(name), how, stream=stream)
    error = caught.value
    assert (error.kind, error.status_code, error.provider) == (kind, status, "gemini")
    assert text in error.message
    assert not error.retryable
    assert KEY not in str(error) and KEY not in repr(error)


def synthetic(status: int, body: Any, content_type: str = "application/json") -> dict[str, Any]:
    text = body if isinstance(body, str) else json.dumps(body)
    return {
        "request": {
            "url": "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        },
        "response": {"status": status, "headers": {"content-type": content_type}, "body": text},
    }


async def test_resource_exhausted_is_rate_limit_with_retry_delay() -> None:
    body = {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "17s"},
            ],
        }
    }
    with pytest.raises(ProviderError) as caught:
        await run(synthetic(429, body))
    assert caught.value.kind == "rate_limit"
    assert caught.value.retry_after == 17.0
    assert caught.value.retryable


async def test_invalid_key_is_auth() -> None:
    body = {
        "error": {
            "code": 400,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}
            ],
        }
    }
    with pytest.raises(ProviderError) as caught:
        await run(synthetic(400, body))
    assert caught.value.kind == "auth"


async def test_error_inside_the_stream() -> None:
    body = (
        'data: {"candidates": [{"content": {"parts": [{"text": "Hel"}], "role": "model"}}]}\r\n\r\n'
        'data: {"error": {"code": 503, "message": "The model is overloaded.", '
        '"status": "UNAVAILABLE"}}\r\n\r\n'
    )
    with pytest.raises(ProviderError) as caught:
        await run(synthetic(200, body, "text/event-stream"))
    assert caught.value.kind == "overloaded"
    assert caught.value.status_code == 503


@pytest.mark.parametrize("how", wire.CHUNKINGS)
async def test_stream_without_finish_reason_is_truncated(how: str | int) -> None:
    fixture = wire.load("google/stream-text")
    body = fixture["response"]["body"]
    fixture["response"]["body"] = body[: body.rindex("data:")]
    with pytest.raises(ProviderError) as caught:
        await run(fixture, how)
    assert caught.value.kind == "truncated_stream"
    assert caught.value.retryable


async def test_json_array_cut_short_is_truncated() -> None:
    fixture = wire.load("google/stream-json-array-function-call")
    body = fixture["response"]["body"]
    fixture["response"]["body"] = body[: body.index('"functionCall"')]
    with pytest.raises(ProviderError) as caught:
        await run(fixture, 2)
    assert caught.value.kind == "truncated_stream"


async def test_safety_stop_is_an_error_message() -> None:
    body = (
        'data: {"candidates": [{"content": {"parts": [{"text": "I"}], "role": "model"}, '
        '"finishReason": "SAFETY"}], "responseId": "r1"}\r\n\r\n'
    )
    events, _ = await run(synthetic(200, body, "text/event-stream"))
    message = check_shape(events)
    assert message.stop_reason == "error"
    assert message.error is not None and message.error.kind == "content_filter"
    assert message.text == "I"


async def test_blocked_prompt_is_an_error_message() -> None:
    body = (
        'data: {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, '
        '"responseId": "r2"}\r\n\r\n'
    )
    events, _ = await run(synthetic(200, body, "text/event-stream"))
    message = check_shape(events)
    assert message.stop_reason == "error" and message.content == []
    assert message.error is not None and "PROHIBITED_CONTENT" in message.error.message


async def test_max_tokens_and_cached_tokens() -> None:
    body = (
        'data: {"candidates": [{"content": {"parts": [{"text": "Long"}], "role": "model"}, '
        '"finishReason": "MAX_TOKENS"}], "usageMetadata": {"promptTokenCount": 100, '
        '"cachedContentTokenCount": 60, "candidatesTokenCount": 5, "thoughtsTokenCount": 7, '
        '"totalTokenCount": 112}}\r\n\r\n'
    )
    events, _ = await run(synthetic(200, body, "text/event-stream"))
    message = check_shape(events)
    assert message.stop_reason == "length"
    assert message.usage == Usage(input=40, cache_read=60, output=12, reasoning=7, total_tokens=112)


async def test_cancel_between_chunks() -> None:
    token = CancellationToken()
    adapter = Gemini("gemini-2.0-flash", api_key=KEY)
    seen: list[StreamEvent] = []
    with respx.mock:
        respx.post(url__startswith="https://generativelanguage").mock(
            return_value=wire.response(wire.load("google/stream-text"), "lines")
        )
        with pytest.raises(ProviderError) as caught:
            async for event in adapter.stream(ModelRequest(), cancel=token):
                seen.append(event)
                token.cancel("immediate")
    assert caught.value.kind == "cancelled"
    assert len(seen) <= 3  # stopped at the next chunk, long before the end
    assert not any(isinstance(e, StreamDone) for e in seen)


async def test_cancelled_before_the_request_sends_nothing() -> None:
    token = CancellationToken()
    token.cancel("immediate")
    adapter = Gemini("gemini-2.0-flash", api_key=KEY)
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post(url__startswith="https://generativelanguage")
        with pytest.raises(ProviderError) as caught:
            async for _ in adapter.stream(ModelRequest(), cancel=token):
                pass
    assert caught.value.kind == "cancelled"
    assert not route.called


# ---- keys ----


async def test_missing_key_fails_at_first_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    adapter = Gemini("gemini-2.5-flash")  # constructing without a key is fine
    with pytest.raises(ProviderError) as caught:
        async for _ in adapter.stream(ModelRequest()):
            pass
    assert caught.value.kind == "auth"
    assert "GEMINI_API_KEY" in caught.value.message


def test_key_from_environment_and_never_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "from-google-var")
    adapter = Gemini("gemini-2.5-flash")
    assert adapter._headers()["x-goog-api-key"] == "from-google-var"
    monkeypatch.setenv("GEMINI_API_KEY", "from-gemini-var")
    adapter = Gemini("gemini-2.5-flash")
    assert adapter._headers()["x-goog-api-key"] == "from-gemini-var"
    assert "from-gemini-var" not in repr(adapter)
    assert "from-gemini-var" not in str(vars(adapter).get("base_url"))


def test_urls() -> None:
    adapter = Gemini("models/gemini-2.5-flash", api_key=KEY)
    assert adapter.url("models/gemini-2.5-flash", stream=False) == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    )
    proxy = Gemini("m", base_url="http://proxy.local/gemini/v1alpha/", api_key=KEY)
    assert proxy.url("m", stream=True) == (
        "http://proxy.local/gemini/v1alpha/models/m:streamGenerateContent?alt=sse"
    )


# ---- request body ----


def tool(name: str, parameters: dict[str, Any] | None = None) -> ToolSpec:
    if parameters is None:
        return ToolSpec(name=name, description=f"The {name} tool.")
    return ToolSpec(name=name, description=f"The {name} tool.", parameters=parameters)


def test_body_matches_recorded_multi_step_request() -> None:
    """The second step of the recorded loop, rebuilt from treadle messages."""
    recorded = wire.load("google/stream-function-call-2")["request"]["body"]
    country = {
        "type": "object",
        "properties": {"country": {"type": "string", "description": "The country name."}},
        "required": ["country"],
    }
    city = {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "The city name."}},
        "required": ["city"],
    }
    request = ModelRequest(
        system_prompt="You are a helpful chatbot.",
        messages=[
            UserMessage.of("What is the temperature of the capital of France?"),
            AssistantMessage(
                content=[
                    ToolCall(
                        id="pyd_ai_0e1a07b3c2b64d2ab3ad2efbe18e1b97",
                        name="get_capital",
                        arguments={"country": "France"},
                    )
                ],
                stop_reason="tool_use",
                provider="gemini",
                model="gemini-2.0-flash",
            ),
            ToolResultMessage(
                tool_call_id="pyd_ai_0e1a07b3c2b64d2ab3ad2efbe18e1b97",
                tool_name="get_capital",
                content="Paris",
            ),
        ],
        tools=[tool("get_capital", country), tool("get_temperature", city)],
    )
    body = Gemini("gemini-2.0-flash").build_body(request)
    assert [c["role"] for c in body["contents"]] == [c["role"] for c in recorded["contents"]]
    assert body["contents"][0] == recorded["contents"][0]
    sent_call = body["contents"][1]["parts"][0]["functionCall"]
    recorded_call = recorded["contents"][1]["parts"][0]["functionCall"]
    assert sent_call == recorded_call
    sent_response = body["contents"][2]["parts"][0]["functionResponse"]
    recorded_response = recorded["contents"][2]["parts"][0]["functionResponse"]
    assert (sent_response["id"], sent_response["name"]) == (
        recorded_response["id"],
        recorded_response["name"],
    )
    assert sent_response["response"] == {"result": "Paris"}
    assert body["systemInstruction"]["parts"] == recorded["systemInstruction"]["parts"]
    declarations = body["tools"][0]["functionDeclarations"]
    assert [d["name"] for d in declarations] == ["get_capital", "get_temperature"]
    assert (
        declarations[0]["parameters"]["properties"]["country"]["description"] == "The country name."
    )
    assert "generationConfig" not in body  # gemini-2.0 does not think: nothing to say
    assert "toolConfig" not in body


def test_no_tools_key_without_tools() -> None:
    body = Gemini("gemini-2.0-flash").build_body(ModelRequest(messages=[UserMessage.of("hi")]))
    assert "tools" not in body and "systemInstruction" not in body
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]


def test_generation_config() -> None:
    request = ModelRequest(
        model="gemini-2.5-flash",
        messages=[UserMessage.of("hi")],
        max_tokens=321,
        temperature=0.2,
        thinking_level="medium",
        response_format={
            "type": "object",
            "title": "Answer",
            "properties": {"n": {"type": "integer", "default": 1}},
            "additionalProperties": False,
        },
        extra_body={"generationConfig": {"topK": 3}, "safetySettings": []},
    )
    body = Gemini("ignored").build_body(request)
    assert body["generationConfig"] == {
        "maxOutputTokens": 321,
        "temperature": 0.2,
        "thinkingConfig": {"thinkingBudget": 8192, "includeThoughts": True},
        "responseMimeType": "application/json",
        "responseSchema": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "topK": 3,
    }
    assert body["safetySettings"] == []


def test_response_format_accepts_openai_wrapper() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    wrapped = {
        "type": "json_schema",
        "json_schema": {"name": "x", "schema": schema, "strict": True},
    }
    body = Gemini("gemini-2.0-flash").build_body(ModelRequest(response_format=wrapped))
    assert body["generationConfig"]["responseSchema"] == schema


@pytest.mark.parametrize(
    ("model", "level", "expected"),
    [
        ("gemini-2.0-flash", "off", None),
        ("gemini-2.5-flash", "off", {"thinkingBudget": 0}),
        ("gemini-2.5-flash-lite", "off", {"thinkingBudget": 0}),
        ("gemini-2.5-pro", "off", None),
        ("gemini-2.5-pro", "high", {"thinkingBudget": 24576, "includeThoughts": True}),
        ("gemini-2.5-flash", "minimal", {"thinkingBudget": 512, "includeThoughts": True}),
        ("gemini-3-flash-preview", "off", {"thinkingLevel": "minimal"}),
        ("gemini-3-pro-preview", "off", {"thinkingLevel": "low"}),
        ("gemini-3-pro-preview", "medium", {"thinkingLevel": "high", "includeThoughts": True}),
        ("gemini-3-flash-preview", "medium", {"thinkingLevel": "medium", "includeThoughts": True}),
        ("gemini-3.1-pro-preview", "low", {"thinkingLevel": "low", "includeThoughts": True}),
    ],
)
def test_thinking_config(model: str, level: Any, expected: dict[str, Any] | None) -> None:
    assert thinking_config(model, level) == expected


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
        ({"name": "final_result"}, {"mode": "ANY", "allowedFunctionNames": ["final_result"]}),
    ],
)
def test_tool_choice(choice: Any, expected: dict[str, Any]) -> None:
    request = ModelRequest(tools=[tool("final_result")], tool_choice=choice)
    body = Gemini("gemini-2.0-flash").build_body(request)
    assert body["toolConfig"] == {"functionCallingConfig": expected}
    # A tool without arguments is declared without parameters.
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {"name": "final_result", "description": "The final_result tool."}
            ]
        }
    ]


def test_bad_tool_choice() -> None:
    with pytest.raises(ValueError, match="tool_choice"):
        Gemini("m").build_body(ModelRequest(tool_choice="sometimes"))


def test_sanitize_schema() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Args",
        "type": "object",
        "additionalProperties": False,
        "$defs": {
            "Point": {
                "type": "object",
                "title": "Point",
                "properties": {
                    "x": {"type": "number", "format": "double"},
                    "y": {"type": "number"},
                },
                "required": ["x", "y"],
            },
            "Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}},
        },
        "properties": {
            "where": {"$ref": "#/$defs/Point", "description": "The point."},
            "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "union": {"type": ["integer", "null"]},
            "kind": {"const": "circle"},
            "level": {"enum": [1, 2, 3], "type": "integer"},
            "url": {"type": "string", "format": "uri", "examples": ["x"]},
            "tags": {
                "type": "array",
                "items": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            },
            "tree": {"$ref": "#/$defs/Node"},
        },
        "required": ["where", "gone"],
    }
    assert sanitize_schema(schema) == {
        "type": "object",
        "properties": {
            "where": {
                "type": "object",
                "properties": {
                    "x": {"type": "number", "format": "double"},
                    "y": {"type": "number"},
                },
                "required": ["x", "y"],
                "description": "The point.",
            },
            "maybe": {"type": "string", "nullable": True},
            "union": {"type": "integer", "nullable": True},
            "kind": {"type": "string", "enum": ["circle"]},
            "level": {"type": "integer"},
            "url": {"type": "string"},
            "tags": {
                "type": "array",
                "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            },
            "tree": {"type": "object", "properties": {"child": {"type": "object"}}},
        },
        "required": ["where"],
    }


def test_images_and_tool_results() -> None:
    png = ImageContent(data="iVBORw0KGgo=", mime_type="image/png")
    request = ModelRequest(
        messages=[
            UserMessage.of("Look", png),
            AssistantMessage(
                content=[ToolCall(id="call:1/x", name="shot", arguments={})],
                provider="gemini",
                stop_reason="tool_use",
            ),
            ToolResultMessage(tool_call_id="call:1/x", tool_name="shot", content=[png]),
            UserMessage.of("and?"),
        ]
    )
    contents = Gemini("gemini-2.0-flash").build_body(request)["contents"]
    assert contents[0]["parts"][1] == {
        "inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}
    }
    call_id = contents[1]["parts"][0]["functionCall"]["id"]
    assert re.fullmatch(r"[A-Za-z0-9_-]+", call_id)
    user = contents[2]
    assert user["role"] == "user" and len(contents) == 3  # results, images and text merged
    response = user["parts"][0]["functionResponse"]
    assert response["id"] == call_id and response["name"] == "shot"
    assert user["parts"][1] == {"text": "Images returned by the shot tool:"}
    assert user["parts"][2]["inlineData"]["mimeType"] == "image/png"
    assert user["parts"][3] == {"text": "and?"}


def test_error_results_and_skipped_messages() -> None:
    from treadle.types import ExtensionMessage

    request = ModelRequest(
        messages=[
            UserMessage.of("go"),
            AssistantMessage(content=[], stop_reason="error", provider="openai"),
            ExtensionMessage(kind="note", data={"x": 1}),
            AssistantMessage(
                content=[ToolCall(id="a", name="t", arguments={"q": 1})], provider="openai"
            ),
            ToolResultMessage(tool_call_id="a", tool_name="t", content="boom", is_error=True),
        ]
    )
    contents = Gemini("gemini-2.0-flash").build_body(request)["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert contents[2]["parts"][0]["functionResponse"]["response"] == {"error": "boom"}


@pytest.mark.parametrize(
    ("name", "target"),
    [
        ("google/stream-function-call-thought-signature", "gemini-3-pro-preview"),
        ("google/generate-content-parallel-function-calls", "gemini-3-flash-preview"),
        ("google/stream-thinking", "gemini-2.5-pro"),
        ("google/stream-json-array-function-call", "gemini-2.5-flash"),
    ],
)
async def test_signatures_return_on_their_part_after_a_json_round_trip(
    name: str, target: str
) -> None:
    fixture = wire.load(name)
    events, _ = await run(fixture)
    message = check_shape(events)
    history = messages_from_json(messages_to_json([UserMessage.of("q"), message]))
    parts = Gemini(target).build_body(ModelRequest(messages=history))["contents"][1]["parts"]

    # The signed part of the response, and its part when sent back.
    original = [
        p
        for c in (from_json(e[e.index("{") :]) for e in _chunks(fixture))
        for p in c["candidates"][0]["content"]["parts"]
    ]
    signed = next(p for p in original if "thoughtSignature" in p)
    sent = next(p for p in parts if "thoughtSignature" in p)
    assert sent["thoughtSignature"] == signed["thoughtSignature"]
    if "functionCall" in signed:
        assert sent["functionCall"]["name"] == signed["functionCall"]["name"]
        assert sent["functionCall"]["args"] == signed["functionCall"]["args"]
    else:
        assert sent["text"] == message.text and "thought" not in sent
    assert sum("thoughtSignature" in p for p in parts) == 1
    # Thought summaries go back as thought parts; no empty carrier parts are sent.
    for part in parts:
        assert part.get("text") != "" or "thoughtSignature" in part
        if part.get("thought"):
            # (message.thinking would add a newline for the empty carrier block)
            thoughts = [b for b in message.content if isinstance(b, ThinkingContent)]
            assert part["text"] == thoughts[0].thinking


def _chunks(fixture: dict[str, Any]) -> list[str]:
    body = fixture["response"]["body"]
    if body.lstrip().startswith("["):
        return [json.dumps(item) for item in json.loads(body)]
    if body.lstrip().startswith("{"):
        return [body]
    return [e for e in body.split("\r\n\r\n") if e.strip()]


def test_trailing_signature_goes_back_on_an_empty_text_part() -> None:
    message = AssistantMessage(
        content=[TextContent(text="Done."), ThinkingContent(thinking="", signature="SIG")],
        provider="gemini",
    )
    parts = Gemini("gemini-2.5-flash").build_body(ModelRequest(messages=[message]))["contents"][0][
        "parts"
    ]
    assert parts == [{"text": "Done."}, {"text": "", "thoughtSignature": "SIG"}]


def test_foreign_history_drops_signatures_and_gets_the_placeholder_on_gemini_3() -> None:
    foreign = AssistantMessage(
        content=[
            ThinkingContent(thinking="Let me add.", signature="anthropic-signature"),
            ThinkingContent(thinking="", signature="x", redacted=True),
            TextContent(text="Adding."),
            ToolCall(id="toolu_01", name="add", arguments={"a": 1}),
            ToolCall(id="toolu_02", name="add", arguments={"a": 2}),
        ],
        provider="anthropic",
        model="claude-sonnet-4",
        stop_reason="tool_use",
    )
    for model, placeholder in [("gemini-3-pro-preview", True), ("gemini-2.5-flash", False)]:
        parts = Gemini(model).build_body(ModelRequest(messages=[UserMessage.of("q"), foreign]))[
            "contents"
        ][1]["parts"]
        assert parts[0] == {"text": "<thinking>\nLet me add.\n</thinking>"}
        assert parts[1] == {"text": "Adding."}
        assert "anthropic-signature" not in json.dumps(parts)
        first, second = parts[2], parts[3]
        assert first["functionCall"]["id"] == "toolu_01"
        assert ("thoughtSignature" in first) is placeholder
        if placeholder:
            assert first["thoughtSignature"] == SKIP_SIGNATURE
        assert "thoughtSignature" not in second


def test_request_model_wins() -> None:
    adapter = Gemini("gemini-2.0-flash")
    body = adapter.build_body(ModelRequest(model="gemini-2.5-flash"))
    assert body["generationConfig"]["thinkingConfig"] == {"thinkingBudget": 0}


async def test_chunk_that_is_not_json_is_a_server_error() -> None:
    body = (
        'data: {"candidates": [{"content": {"parts": [{"text": "a"}]}}]}\r\n\r\ndata: {oops\r\n\r\n'
    )
    with pytest.raises(ProviderError) as caught:
        await run(synthetic(200, body, "text/event-stream"))
    assert caught.value.kind == "server"
    assert "not JSON" in caught.value.message


@pytest.mark.parametrize("how", ["bytes", *wire.CHUNKINGS])
def test_json_array_decoder_with_tricky_strings(how: str | int) -> None:
    from treadle.providers.gemini_stream import _JSONArrayDecoder

    items = [
        {"text": 'a "quoted" {brace} [bracket] \\ back\\slash', "n": [1, {"x": []}]},
        {"text": "ünïcödé ☃ 𝄞", "more": {"deep": {"deeper": "}]"}}},
        {"text": "\\"},
        {"text": '"{"', "after": 1},
    ]
    body = "[" + ",\r\n".join(json.dumps(i, ensure_ascii=False, indent=1) for i in items) + "]"
    decoder = _JSONArrayDecoder()
    found: list[Any] = []
    for piece in wire.split(body.encode(), how):
        found.extend(decoder.feed(piece))
    assert found == items
