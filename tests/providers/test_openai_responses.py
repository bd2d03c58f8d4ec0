"""OpenAI Responses adapter: every recorded /responses exchange replayed over several chunkings."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx
from tests import wire

from treadle.cancellation import CancellationToken
from treadle.providers.base import (
    ModelRequest,
    ProviderError,
    StreamEvent,
    StreamStart,
)
from treadle.providers.openai_responses import OpenAIResponses
from treadle.types import (
    AssistantMessage,
    ExtensionMessage,
    ImageContent,
    TextContent,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)

URL = "https://api.openai.com/v1/responses"
KEY = "sk-test-key-never-shown"
RESPONSES_FIXTURES = wire.names("openai", "responses")


def request(**kwargs: Any) -> ModelRequest:
    kwargs.setdefault("messages", [UserMessage.of("hi")])
    return ModelRequest(**kwargs)


async def collect(
    provider: OpenAIResponses,
    req: ModelRequest | None = None,
    cancel: CancellationToken | None = None,
) -> list[StreamEvent]:
    return [event async for event in provider.stream(req or request(), cancel=cancel)]


def sse_payloads(fixture: dict[str, Any]) -> list[dict[str, Any]]:
    """The fixture's ``data:`` payloads, for reading expected values."""
    return [
        json.loads(line[6:])
        for line in fixture["response"]["body"].splitlines()
        if line.startswith("data: ")
    ]


def replace_event(fixture: dict[str, Any], kind: str, new: str) -> None:
    """Swap the SSE event of type ``kind`` for the raw text ``new``."""
    blocks = fixture["response"]["body"].split("\n\n")
    at = next(i for i, block in enumerate(blocks) if block.startswith(f"event: {kind}\n"))
    blocks[at] = new
    fixture["response"]["body"] = "\n\n".join(blocks)


def check_consistency(events: list[StreamEvent]) -> AssistantMessage:
    return wire.check_consistency(events, "openai")


# Concrete values read from each fixture: model, response id, stop reason,
# usage (input, output, reasoning, cache_read, cache_write, total), content.
EXPECTED: dict[str, dict[str, Any]] = {
    "openai/responses-function-call": {
        "model": "gpt-4o-2024-08-06",
        "id": "resp_04907f5d3de791830068fbaa19bb908195a91378279dba0f14",
        "stop": "tool_use",
        "usage": (40, 18, 0, 0, 0, 58),
        "content": [
            ("tool", "call_YfwRsW8sUxDKipwyhWTzOXCA", "get_capital", {"country": "PotatoLand"})
        ],
    },
    "openai/responses-stream-function-call": {
        "model": "gpt-4o-2024-08-06",
        "id": "resp_67e554a155508191900ee113293c4c830794405d35281ae2",
        "stop": "tool_use",
        "usage": (255, 16, 0, 0, 0, 271),
        "content": [
            ("tool", "call_kL0PCQV7M2WMoVX8V8OtYSAL", "get_capital", {"country": "France"})
        ],
    },
    "openai/responses-stream-function-call-store-false": {
        "model": "gpt-5.5-2026-04-23",
        "id": "resp_00d64fa806f333310169fab1be69d081a08f8285661855594c",
        "stop": "tool_use",
        "usage": (58, 23, 0, 0, 0, 81),
        "content": [("tool", "call_sVidsfFJ6zlzRpelrPkTPlpd", "multiply", {"a": 1231, "b": 2331})],
    },
    "openai/responses-stream-reasoning-function-call": {
        "model": "gpt-5-2025-08-07",
        "id": "resp_0050471a34b36ae60068c97b94a480819587a9d70cf2979b33",
        "stop": "tool_use",
        "usage": (53, 469, 448, 0, 0, 522),
        "content": [
            ("reasoning", "rs_0050471a34b36ae60068c97bac4dcc819595fd0f80d6b3c405"),
            ("tool", "call_CWXgs68YprAjp6t0371hiPOI", "final_result", {"result": 6666}),
        ],
    },
    "openai/responses-stream-reasoning-summary": {
        "model": "o3-mini-2025-01-31",
        "id": "resp_68c42d0fb418819dbfa579f69406b49508fbf9b1584184ff",
        "stop": "stop",
        "usage": (13, 1680, 1408, 0, 0, 1693),
        "content": [
            ("reasoning", "rs_68c42d1d0878819d8266007cd3d1402c08fbf9b1584184ff"),
            ("text", "I'm not a road safety professional, but here are", "Stay safe!"),
        ],
    },
    "openai/responses-stream-text-after-tool": {
        "model": "gpt-4o-2024-08-06",
        "id": "resp_67e554a21aa88191b65876ac5e5bbe0406c52f0e511c76ed",
        "stop": "stop",
        "usage": (278, 9, 0, 0, 0, 287),
        "content": [("text", "The capital of France is Paris.")],
    },
}
SUCCESS = sorted(EXPECTED)
ERRORS = {
    "openai/responses-error-400": (
        "bad_request",
        400,
        "Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got -1 "
        "instead.",
        None,
    ),
    # The Chat Completions 429 body: the same error shape the /responses endpoint returns.
    "openai/quoted-error-429-rate-limit": ("rate_limit", 429, None, 0.125),
}


def test_every_fixture_is_covered() -> None:
    assert set(EXPECTED) | {"openai/responses-error-400"} == set(RESPONSES_FIXTURES)


def final_output(fixture: dict[str, Any]) -> list[dict[str, Any]]:
    """The output items of the fixture's completed response (stream or JSON)."""
    if fixture["response"]["headers"]["content-type"].startswith("application/json"):
        output: list[dict[str, Any]] = json.loads(fixture["response"]["body"])["output"]
        return output
    done = [p for p in sse_payloads(fixture) if p["type"] == "response.completed"]
    return list(done[0]["response"]["output"])


def item_done(fixture: dict[str, Any], item_id: str) -> dict[str, Any]:
    if fixture["response"]["headers"]["content-type"].startswith("application/json"):
        return next(i for i in final_output(fixture) if i["id"] == item_id)
    return next(
        p["item"]
        for p in sse_payloads(fixture)
        if p["type"] == "response.output_item.done" and p["item"]["id"] == item_id
    )


def check_content(
    message: AssistantMessage, expected: list[tuple[Any, ...]], fixture: dict[str, Any]
) -> None:
    assert len(message.content) == len(expected)
    for block, spec in zip(message.content, expected, strict=True):
        kind = spec[0]
        if kind == "text":
            assert isinstance(block, TextContent)
            if len(spec) == 2:
                assert block.text == spec[1]
            else:
                assert block.text.startswith(spec[1]) and block.text.endswith(spec[2])
        elif kind == "reasoning":
            assert isinstance(block, ThinkingContent) and not block.redacted
            item = item_done(fixture, spec[1])
            summary = [part["text"] for part in item["summary"]]
            assert block.thinking == "\n\n".join(summary)
            assert block.signature is not None
            assert json.loads(block.signature) == {
                "type": "reasoning",
                "id": spec[1],
                "encrypted_content": item["encrypted_content"],
            }
        else:
            assert isinstance(block, ToolCall)
            assert (block.id, block.name, block.arguments) == spec[1:]
            assert block.raw_arguments is None


@pytest.mark.anyio
@pytest.mark.parametrize("how", wire.CHUNKINGS)
@pytest.mark.parametrize("name", SUCCESS)
@pytest.mark.one_backend  # parsing recorded bytes: the backend cannot matter
async def test_replay(name: str, how: str | int) -> None:
    fixture = wire.load(name)
    expected = EXPECTED[name]
    streaming = bool(fixture["request"]["body"].get("stream"))
    provider = OpenAIResponses("gpt-test", api_key=KEY, stream=streaming)
    with respx.mock:
        route = respx.post(URL).mock(return_value=wire.response(fixture, how))
        events = await collect(provider)
    message = check_consistency(events)
    assert message.model == expected["model"]
    assert message.response_id == expected["id"]
    assert events[0] == StreamStart(model=expected["model"], response_id=expected["id"])
    assert message.stop_reason == expected["stop"]
    u = message.usage
    assert (u.input, u.output, u.reasoning, u.cache_read, u.cache_write, u.total_tokens) == (
        expected["usage"]
    )
    check_content(message, expected["content"], fixture)
    sent = route.calls.last.request
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    body = json.loads(sent.content)
    assert body["stream"] is streaming and body["store"] is False


@pytest.mark.anyio
async def test_reasoning_summary_parts_stream_as_paragraphs() -> None:
    fixture = wire.load("openai/responses-stream-reasoning-summary")
    with respx.mock:
        respx.post(URL).mock(return_value=wire.response(fixture, "lines"))
        events = await collect(OpenAIResponses("o3-mini", api_key=KEY))
    message = check_consistency(events)
    deltas = [e.text for e in events if isinstance(e, ThinkingDelta)]
    recorded = [
        p["delta"]
        for p in sse_payloads(fixture)
        if p["type"] == "response.reasoning_summary_text.delta"
    ]
    assert len(recorded) == 383
    assert deltas.count("\n\n") == 3  # between the four summary parts
    assert [d for d in deltas if d != "\n\n"] == recorded
    assert message.thinking.startswith("**Providing street crossing instructions**\n\n")
    assert "\n\n**Explaining street crossing safety**" in message.thinking
    text_deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(text_deltas) == 271 and all(e.index == 1 for e in text_deltas)


@pytest.mark.anyio
@pytest.mark.parametrize("how", wire.CHUNKINGS)
@pytest.mark.parametrize("name", sorted(ERRORS))
@pytest.mark.one_backend  # parsing recorded bytes: the backend cannot matter
async def test_http_errors(name: str, how: str | int) -> None:
    kind, status, message, retry_after = ERRORS[name]
    fixture = wire.load(name)
    for streaming in (True, False):
        provider = OpenAIResponses("gpt-test", api_key=KEY, stream=streaming)
        with respx.mock:
            respx.post(URL).mock(return_value=wire.response(fixture, how))
            with pytest.raises(ProviderError) as caught:
                await collect(provider)
        error = caught.value
        assert (error.kind, error.status_code, error.retry_after) == (kind, status, retry_after)
        expected_message = message or json.loads(fixture["response"]["body"])["error"]["message"]
        assert error.message == expected_message
        assert error.provider == "openai"
        assert KEY not in str(error) and KEY not in repr(error)


def cut_before(fixture: dict[str, Any], marker: str) -> str:
    body: str = fixture["response"]["body"]
    return body[: body.index(marker)]


@pytest.mark.anyio
@pytest.mark.parametrize("how", wire.CHUNKINGS)
async def test_mid_stream_error_event(how: str | int) -> None:
    fixture = wire.load("openai/responses-stream-text-after-tool")
    error = {
        "type": "error",
        "code": "server_error",
        "message": "The server had an error while processing your request.",
        "param": None,
        "sequence_number": 12,
    }
    body = cut_before(fixture, "event: response.output_text.done")
    fixture["response"]["body"] = f"{body}event: error\ndata: {json.dumps(error)}\n\n"
    seen: list[StreamEvent] = []
    with respx.mock:
        respx.post(URL).mock(return_value=wire.response(fixture, how))
        with pytest.raises(ProviderError) as caught:
            async for event in OpenAIResponses("gpt-4o", api_key=KEY).stream(request()):
                seen.append(event)
    assert caught.value.kind == "server"
    assert caught.value.message == error["message"]
    assert caught.value.retryable
    assert (
        "".join(e.text for e in seen if isinstance(e, TextDelta))
        == "The capital of France is Paris."
    )


@pytest.mark.anyio
async def test_response_failed_event() -> None:
    fixture = wire.load("openai/responses-stream-text-after-tool")
    final = next(p for p in sse_payloads(fixture) if p["type"] == "response.completed")
    final["type"] = "response.failed"
    final["response"]["status"] = "failed"
    final["response"]["error"] = {
        "code": "rate_limit_exceeded",
        "message": "Rate limit reached for gpt-4o. Please try again in 2s.",
    }
    replace_event(
        fixture, "response.completed", f"event: response.failed\ndata: {json.dumps(final)}"
    )
    with respx.mock:
        respx.post(URL).mock(return_value=wire.response(fixture, 2))
        with pytest.raises(ProviderError) as caught:
            await collect(OpenAIResponses("gpt-4o", api_key=KEY))
    assert caught.value.kind == "rate_limit"
    assert caught.value.retry_after == 2.0


@pytest.mark.anyio
@pytest.mark.parametrize("how", wire.CHUNKINGS)
async def test_incomplete_max_output_tokens_is_length(how: str | int) -> None:
    fixture = wire.load("openai/responses-stream-text-after-tool")
    final = next(p for p in sse_payloads(fixture) if p["type"] == "response.completed")
    final["type"] = "response.incomplete"
    final["response"]["status"] = "incomplete"
    final["response"]["incomplete_details"] = {"reason": "max_output_tokens"}
    replace_event(
        fixture, "response.completed", f"event: response.incomplete\ndata: {json.dumps(final)}"
    )
    with respx.mock:
        respx.post(URL).mock(return_value=wire.response(fixture, how))
        events = await collect(OpenAIResponses("gpt-4o", api_key=KEY))
    message = check_consistency(events)
    assert message.stop_reason == "length"
    assert message.text == "The capital of France is Paris."
    assert message.usage.output == 9


@pytest.mark.anyio
@pytest.mark.parametrize(
    "marker", ["event: response.completed", "event: response.function_call_arguments.done"]
)
@pytest.mark.parametrize("how", wire.CHUNKINGS)
async def test_truncated_stream(marker: str, how: str | int) -> None:
    fixture = wire.load("openai/responses-stream-function-call-store-false")
    fixture["response"]["body"] = cut_before(fixture, marker)
    with respx.mock:
        respx.post(URL).mock(return_value=wire.response(fixture, how))
        with pytest.raises(ProviderError) as caught:
            await collect(OpenAIResponses("gpt-5.5", api_key=KEY))
    assert caught.value.kind == "truncated_stream"


@pytest.mark.anyio
async def test_cached_tokens_are_split_out() -> None:
    fixture = wire.load("openai/responses-stream-text-after-tool")
    body = fixture["response"]["body"].replace('"cached_tokens":0', '"cached_tokens":200')
    assert body != fixture["response"]["body"]
    fixture["response"]["body"] = body
    with respx.mock:
        respx.post(URL).mock(return_value=wire.response(fixture))
        events = await collect(OpenAIResponses("gpt-4o", api_key=KEY))
    usage = check_consistency(events).usage
    assert (usage.input, usage.cache_read, usage.output, usage.total_tokens) == (78, 200, 9, 287)


@pytest.mark.anyio
async def test_invalid_arguments_are_kept_raw() -> None:
    fixture = wire.load("openai/responses-function-call")
    payload = json.loads(fixture["response"]["body"])
    payload["output"][0]["arguments"] = '{"country": "Potato'
    fixture["response"]["body"] = json.dumps(payload)
    with respx.mock:
        respx.post(URL).mock(return_value=wire.response(fixture))
        events = await collect(OpenAIResponses("gpt-4o", api_key=KEY, stream=False))
    call = check_consistency(events).tool_calls[0]
    assert (call.arguments, call.raw_arguments) == ({}, '{"country": "Potato')


@pytest.mark.anyio
async def test_cancel_between_chunks() -> None:
    fixture = wire.load("openai/responses-stream-reasoning-summary")
    token = CancellationToken()
    seen: list[StreamEvent] = []
    with respx.mock:
        respx.post(URL).mock(return_value=wire.response(fixture, "lines"))
        with pytest.raises(ProviderError) as caught:
            async for event in OpenAIResponses("o3-mini", api_key=KEY).stream(
                request(), cancel=token
            ):
                seen.append(event)
                if isinstance(event, ThinkingDelta):
                    token.cancel()
    assert caught.value.kind == "cancelled"
    assert sum(isinstance(e, ThinkingDelta) for e in seen) == 1


@pytest.mark.anyio
async def test_missing_key_fails_at_first_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    provider = OpenAIResponses("gpt-test")
    with respx.mock:
        route = respx.post(URL).mock(return_value=httpx.Response(500))
        with pytest.raises(ProviderError) as caught:
            await collect(provider)
    assert caught.value.kind == "auth"
    assert "OPENAI_API_KEY" in caught.value.message
    assert not route.called


@pytest.mark.anyio
async def test_key_from_environment_and_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    provider = OpenAIResponses("gpt-test", base_url="http://localhost:8000/v1/")
    assert KEY not in repr(provider)
    fixture = wire.load("openai/responses-stream-text-after-tool")
    with respx.mock:
        route = respx.post("http://localhost:8000/v1/responses").mock(
            return_value=wire.response(fixture)
        )
        events = await collect(provider)
    assert check_consistency(events).text == "The capital of France is Paris."
    assert route.calls.last.request.headers["authorization"] == f"Bearer {KEY}"


# ---- request bodies ----

CAPITAL = ToolSpec(
    name="get_capital",
    parameters={
        "additionalProperties": False,
        "properties": {"country": {"type": "string"}},
        "required": ["country"],
        "type": "object",
    },
)


def test_body_matches_recorded_tool_result_request() -> None:
    recorded = wire.load("openai/responses-stream-text-after-tool")["request"]["body"]
    call_id = "fc_67e554a1de488191af0831d35cbe082e0794405d35281ae2"
    history = [
        UserMessage.of("What is the capital of France?"),
        AssistantMessage(
            provider="openai",
            content=[ToolCall(id=call_id, name="get_capital", arguments={"country": "France"})],
        ),
        ToolResultMessage(
            tool_call_id=call_id, tool_name="get_capital", content=[TextContent(text="Paris")]
        ),
    ]
    body = OpenAIResponses("gpt-4o").build_body(
        request(messages=history, tools=[CAPITAL], tool_choice="auto")
    )
    assert body["model"] == recorded["model"]
    assert body["tool_choice"] == recorded["tool_choice"]
    user, call, output = body["input"]
    assert user == {
        "role": "user",
        "content": [{"type": "input_text", "text": recorded["input"][0]["content"]}],
    }
    assert {**call, "arguments": json.loads(call["arguments"])} == {
        **recorded["input"][1],
        "arguments": json.loads(recorded["input"][1]["arguments"]),
    }
    assert output == recorded["input"][2]
    tool = body["tools"][0]
    assert {k: tool[k] for k in ("type", "name", "parameters")} == {
        k: recorded["tools"][0][k] for k in ("type", "name", "parameters")
    }
    assert tool["strict"] is False
    assert "instructions" not in body and "reasoning" not in body and "include" not in body


def test_body_reasoning_matches_recorded_store_false_request() -> None:
    recorded = wire.load("openai/responses-stream-function-call-store-false")["request"]["body"]
    spec = recorded["tools"][0]
    body = OpenAIResponses("gpt-5.5", reasoning_summary=None).build_body(
        request(
            messages=[UserMessage.of(recorded["input"][0]["content"])],
            tools=[
                ToolSpec(
                    name=spec["name"],
                    description=spec["description"],
                    parameters=spec["parameters"],
                )
            ],
            thinking_level="low",
        )
    )
    for key in ("include", "reasoning", "store", "stream", "model"):
        assert body[key] == recorded[key], key
    body = OpenAIResponses("gpt-5.5").build_body(request(thinking_level="high"))
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}


@pytest.mark.parametrize(
    ("choice", "wire_choice"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ({"name": "get_capital"}, {"type": "function", "name": "get_capital"}),
    ],
)
def test_tool_choice_mapping(choice: Any, wire_choice: Any) -> None:
    provider = OpenAIResponses("gpt")
    assert provider.build_body(request(tools=[CAPITAL], tool_choice=choice))["tool_choice"] == (
        wire_choice
    )
    body = provider.build_body(request(tool_choice=choice))
    assert "tools" not in body and "tool_choice" not in body


def test_body_options() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    provider = OpenAIResponses("gpt-default", stream=False, store=True)
    body = provider.build_body(
        request(
            model="gpt-override",
            system_prompt="Be brief.",
            max_tokens=300,
            temperature=0.5,
            response_format={"name": "answer", "schema": schema, "strict": True},
            extra_body={"service_tier": "flex", "temperature": 0.1},
        )
    )
    assert body["model"] == "gpt-override"
    assert body["instructions"] == "Be brief."
    assert body["max_output_tokens"] == 300
    assert body["temperature"] == 0.1  # extra_body wins
    assert body["service_tier"] == "flex"
    assert body["text"] == {
        "format": {"type": "json_schema", "name": "answer", "schema": schema, "strict": True}
    }
    assert body["store"] is True and body["stream"] is False
    bare = provider.build_body(request(response_format=schema))["text"]["format"]
    assert bare == {"type": "json_schema", "name": "response", "schema": schema}
    assert provider.build_body(request())["model"] == "gpt-default"


@pytest.mark.anyio
async def test_reasoning_items_are_replayed_without_ids() -> None:
    fixture = wire.load("openai/responses-stream-reasoning-function-call")
    with respx.mock:
        respx.post(URL).mock(return_value=wire.response(fixture, 1))
        events = await collect(OpenAIResponses("gpt-5", api_key=KEY))
    message = check_consistency(events)
    result = ToolResultMessage(
        tool_call_id="call_CWXgs68YprAjp6t0371hiPOI",
        tool_name="final_result",
        content=[TextContent(text="ok")],
        details={"app": "only"},
    )
    history = [UserMessage.of("Calculate 100 * 200 / 3"), message, result]
    body = OpenAIResponses("gpt-5").build_body(request(messages=history, thinking_level="low"))
    reasoning, call, output = body["input"][1:]
    encrypted = item_done(fixture, "rs_0050471a34b36ae60068c97bac4dcc819595fd0f80d6b3c405")[
        "encrypted_content"
    ]
    assert reasoning == {"type": "reasoning", "summary": [], "encrypted_content": encrypted}
    assert call == {
        "type": "function_call",
        "call_id": "call_CWXgs68YprAjp6t0371hiPOI",
        "name": "final_result",
        "arguments": '{"result":6666}',
    }
    assert output == {
        "type": "function_call_output",
        "call_id": "call_CWXgs68YprAjp6t0371hiPOI",
        "output": "ok",
    }
    assert "rs_" not in json.dumps(body) and "fc_" not in json.dumps(body)
    assert "app" not in json.dumps(body)


def test_foreign_thinking_is_text_or_dropped() -> None:
    signature = json.dumps({"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA"})
    own = ThinkingContent(thinking="Thought.", signature=signature)
    history = [
        UserMessage.of("q"),
        # Same block from another provider: its signature means nothing here.
        AssistantMessage(provider="anthropic", content=[own, TextContent(text="A1")]),
        # An "openai" message whose signature is not a Responses reasoning item (e.g. Chat).
        AssistantMessage(
            provider="openai",
            content=[ThinkingContent(thinking="", signature="opaque"), TextContent(text="A2")],
        ),
        ExtensionMessage(kind="note"),
        AssistantMessage(provider="openai", content=[]),
    ]
    body = OpenAIResponses("gpt").build_body(request(messages=history))
    assert body["input"][1:] == [
        {"role": "assistant", "content": "<thinking>\nThought.\n</thinking>"},
        {"role": "assistant", "content": "A1"},
        {"role": "assistant", "content": "A2"},
    ]
    own_message = AssistantMessage(provider="openai", content=[own])
    body = OpenAIResponses("gpt").build_body(request(messages=[own_message]))
    assert body["input"] == [
        {
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "Thought."}],
            "encrypted_content": "gAAA",
        }
    ]


def test_tool_result_images_and_id_normalisation() -> None:
    foreign = "toolu:01/abc.def"
    image = ImageContent(data="aGVsbG8=", mime_type="image/png")
    history = [
        UserMessage.of("look", image),
        AssistantMessage(
            provider="anthropic",
            content=[ToolCall(id=foreign, name="shot", raw_arguments="{bad", arguments={})],
        ),
        ToolResultMessage(
            tool_call_id=foreign, tool_name="shot", content=[TextContent(text="here"), image]
        ),
    ]
    body = OpenAIResponses("gpt").build_body(request(messages=history))
    user, call, output = body["input"]
    url = "data:image/png;base64,aGVsbG8="
    assert user["content"] == [
        {"type": "input_text", "text": "look"},
        {"type": "input_image", "image_url": url},
    ]
    assert call["call_id"] == output["call_id"] != foreign
    assert all(c.isalnum() or c in "_-" for c in call["call_id"])
    assert call["arguments"] == "{bad"  # the model's own text goes back as it was
    assert output["output"] == [
        {"type": "input_text", "text": "here"},
        {"type": "input_image", "image_url": url},
    ]
