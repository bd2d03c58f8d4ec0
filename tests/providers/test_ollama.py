"""The Ollama adapter against every recorded native /api/chat exchange, over every chunking."""

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
    StreamDone,
    StreamEvent,
    StreamStart,
    TextEnd,
    TextStart,
    ThinkingEnd,
    ThinkingStart,
)
from treadle.providers.ollama import Ollama, host_url, think_value
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

pytestmark = pytest.mark.anyio

KEY = "ollama-cloud-key-0123456789"
NATIVE = wire.names("ollama", "ollama /api/chat")


def base_of(fixture: dict[str, Any]) -> str:
    url = httpx.URL(fixture["request"]["url"])
    return f"{url.scheme}://{url.netloc.decode()}"


async def run(
    fixture: dict[str, Any],
    how: str | int = "whole",
    request: ModelRequest | None = None,
    **options: Any,
) -> tuple[list[StreamEvent], httpx.Request]:
    options.setdefault("stream", fixture["request"]["body"].get("stream", True))
    options.setdefault("base_url", base_of(fixture))
    options.setdefault("api_key", KEY if "ollama.com" in options["base_url"] else None)
    adapter = Ollama(fixture["request"]["body"]["model"], **options)
    with respx.mock(assert_all_called=True) as mock:
        route = mock.post(fixture["request"]["url"]).mock(return_value=wire.response(fixture, how))
        try:
            events = [e async for e in adapter.stream(request or ModelRequest())]
        finally:
            await adapter.aclose()
        return events, route.calls.last.request


def check_shape(events: list[StreamEvent]) -> AssistantMessage:
    """Start first, one done last, and the deltas rebuild the final message exactly."""
    assert isinstance(events[0], StreamStart)
    assert isinstance(events[-1], StreamDone)
    assert sum(isinstance(e, StreamDone) for e in events) == 1
    message = events[-1].message
    assert message.provider == "ollama"
    assert events[0].model == message.model
    blocks: dict[int, Any] = {}
    for event in events:
        if isinstance(event, (TextStart, ThinkingStart)):
            assert event.index == len(blocks)
            blocks[event.index] = ["text" if isinstance(event, TextStart) else "thinking", ""]
        elif isinstance(event, (TextDelta, ThinkingDelta)):
            kind = "text" if isinstance(event, TextDelta) else "thinking"
            assert blocks[event.index][0] == kind
            blocks[event.index][1] += event.text
        elif isinstance(event, (TextEnd, ThinkingEnd)):
            assert event.index == len(blocks) - 1
        elif isinstance(event, ToolCallStart):
            assert event.index == len(blocks)
            blocks[event.index] = ["call", "", event.id, event.name]
        elif isinstance(event, ToolCallDelta):
            blocks[event.index][1] += event.arguments
        elif isinstance(event, ToolCallEnd):
            blocks[event.index].append(event.tool_call)
    assert len(blocks) == len(message.content)
    for index, final in enumerate(message.content):
        block = blocks[index]
        if isinstance(final, TextContent):
            assert block == ["text", final.text]
        elif isinstance(final, ThinkingContent):
            assert block == ["thinking", final.thinking]
        else:
            assert isinstance(final, ToolCall)
            assert block[2:] == [final.id, final.name, final]
            if final.raw_arguments is None:
                assert json.loads(block[1]) == final.arguments
            else:
                assert block[1] == final.raw_arguments and final.arguments == {}
    return message


# ---- every native fixture, over every chunking ----

EXPECTED: dict[str, dict[str, Any]] = {
    "ollama/api-chat-stream-text": {
        "kinds": ["text"],
        "text": "Okay, here we go!\n\n1, 2, 3, 4, 5\n",
        "stop": "stop",
        "usage": Usage(input=16, output=22, total_tokens=38),
        "model": "gemma3:1b",
    },
    "ollama/api-chat-stream-thinking-cloud": {
        "kinds": ["thinking", "text"],
        "thinking_starts": 'User asks: "Count from 1 to 5"',
        "text": "1  \n2  \n3  \n4  \n5",
        "stop": "stop",
        "usage": Usage(input=74, output=57, total_tokens=131),
        "model": "gpt-oss:120b",
    },
    "ollama/api-chat-tool-call-cloud": {
        # done_reason is "stop" although the answer is a tool call.
        "kinds": ["thinking", "tool_call"],
        "thinking": "User asks about weather in San Francisco. Use function getWeather.",
        "calls": [("call_mo1wm122", "getWeather", {"location": "San Francisco, CA"})],
        "stop": "tool_use",
        "usage": Usage(input=145, output=44, total_tokens=189),
        "model": "gpt-oss:120b",
    },
}
ERROR_EXPECTED = {
    "ollama/api-chat-error-400-no-tools": (
        "bad_request",
        400,
        "registry.ollama.ai/library/gemma3:1b does not support tools",
    ),
}


def test_every_native_fixture_has_expectations() -> None:
    assert sorted([*EXPECTED, *ERROR_EXPECTED]) == NATIVE


@pytest.mark.parametrize("how", wire.CHUNKINGS)
@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.one_backend  # parsing recorded bytes: the backend cannot matter
async def test_replay(name: str, how: str | int) -> None:
    fixture = wire.load(name)
    expected = EXPECTED[name]
    events, sent = await run(fixture, how)
    message = check_shape(events)
    assert [b.type for b in message.content] == expected["kinds"]
    assert message.stop_reason == expected["stop"]
    assert message.usage == expected["usage"]
    assert message.model == expected["model"]
    assert message.response_id is None
    if "text" in expected:
        assert message.text == expected["text"]
    else:
        assert message.text == ""
    if "thinking" in expected:
        assert message.thinking == expected["thinking"]
    if "thinking_starts" in expected:
        assert message.thinking.startswith(expected["thinking_starts"])
    calls = [(c.id, c.name, c.arguments) for c in message.tool_calls]
    assert calls == expected.get("calls", [])

    assert str(sent.url) == fixture["request"]["url"]
    body = json.loads(sent.content)
    assert body["stream"] is fixture["request"]["body"]["stream"]
    if "ollama.com" in str(sent.url):
        assert sent.headers["authorization"] == f"Bearer {KEY}"
    else:
        assert "authorization" not in sent.headers


@pytest.mark.parametrize("how", wire.CHUNKINGS)
async def test_text_arrives_as_live_deltas(how: str | int) -> None:
    events, _ = await run(wire.load("ollama/api-chat-stream-text"), how)
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas[:3] == ["Okay", ",", " here"]
    assert len(deltas) == 21  # one per non-empty content line


@pytest.mark.parametrize("how", wire.CHUNKINGS)
async def test_non_streaming_body_through_the_streaming_path(how: str | int) -> None:
    """A single JSON object with done:true is also a valid one-line NDJSON stream."""
    events, _ = await run(wire.load("ollama/api-chat-tool-call-cloud"), how, stream=True)
    message = check_shape(events)
    assert message.tool_calls[0].arguments == {"location": "San Francisco, CA"}


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("how", wire.CHUNKINGS)
@pytest.mark.parametrize("name", sorted(ERROR_EXPECTED))
@pytest.mark.one_backend  # parsing recorded bytes: the backend cannot matter
async def test_error_fixtures(name: str, how: str | int, stream: bool) -> None:
    kind, status, text = ERROR_EXPECTED[name]
    with pytest.raises(ProviderError) as caught:
        await run(wire.load(name), how, stream=stream)
    error = caught.value
    assert (error.kind, error.status_code, error.provider) == (kind, status, "ollama")
    assert error.message == text


def synthetic(lines: list[dict[str, Any]], *, raw: str | None = None) -> dict[str, Any]:
    return {
        "request": {
            "url": "http://localhost:11434/api/chat",
            "body": {"model": "qwen3:8b", "stream": True},
        },
        "response": {
            "status": 200,
            "headers": {"content-type": "application/x-ndjson"},
            "body": raw if raw is not None else "".join(json.dumps(x) + "\n" for x in lines),
        },
    }


@pytest.mark.parametrize("how", wire.CHUNKINGS)
async def test_stream_without_done_line_is_truncated(how: str | int) -> None:
    fixture = wire.load("ollama/api-chat-stream-text")
    lines = fixture["response"]["body"].splitlines(keepends=True)
    fixture["response"]["body"] = "".join(lines[:-1])
    with pytest.raises(ProviderError) as caught:
        await run(fixture, how)
    assert caught.value.kind == "truncated_stream"
    assert caught.value.retryable


async def test_error_line_in_the_stream() -> None:
    line = {"model": "qwen3:8b", "message": {"role": "assistant", "content": "Hi"}, "done": False}
    fixture = synthetic([line, {"error": "an error was encountered while running the model"}])
    with pytest.raises(ProviderError) as caught:
        await run(fixture)
    assert caught.value.kind == "server"
    assert caught.value.message == "an error was encountered while running the model"


async def test_garbage_line_is_a_server_error() -> None:
    with pytest.raises(ProviderError) as caught:
        await run(synthetic([], raw='{"model": "x", "done": false}\n<html>oops</html>\n'))
    assert caught.value.kind == "server"


async def test_calls_without_ids_length_stop_and_string_arguments() -> None:
    call = {"function": {"name": "add", "arguments": {"a": 1}}}
    bad = {"function": {"name": "bad", "arguments": "{not json"}}

    def line(**fields: Any) -> dict[str, Any]:
        message = {"role": "assistant", "content": "", **fields.pop("message", {})}
        return {"model": "qwen3:8b", "message": message, "done": False, **fields}

    lines = [
        line(message={"tool_calls": [call, call]}),
        line(message={"tool_calls": [bad]}),
        line(done=True, done_reason="length", prompt_eval_count=3, eval_count=4),
    ]
    events, _ = await run(synthetic(lines), 2)
    message = check_shape(events)
    ids = [c.id for c in message.tool_calls]
    assert len(set(ids)) == 3 and all(i.startswith("call_") for i in ids)
    assert message.tool_calls[0].arguments == {"a": 1}
    assert message.tool_calls[2].arguments == {}
    assert message.tool_calls[2].raw_arguments == "{not json"
    assert message.stop_reason == "length"
    assert message.usage == Usage(input=3, output=4, total_tokens=7)


async def test_cancel_between_chunks() -> None:
    token = CancellationToken()
    adapter = Ollama("gemma3:1b", base_url="http://localhost:11434")
    seen: list[StreamEvent] = []
    with respx.mock:
        respx.post("http://localhost:11434/api/chat").mock(
            return_value=wire.response(wire.load("ollama/api-chat-stream-text"), "lines")
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
    adapter = Ollama("gemma3:1b", base_url="http://localhost:11434")
    with respx.mock(assert_all_called=False) as mock:
        route = mock.post("http://localhost:11434/api/chat")
        with pytest.raises(ProviderError) as caught:
            async for _ in adapter.stream(ModelRequest(), cancel=token):
                pass
    assert caught.value.kind == "cancelled"
    assert not route.called


# ---- host, keys ----


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0.0.0.0", "http://0.0.0.0:11434"),
        ("myhost:8080", "http://myhost:8080"),
        ("http://gpu-box", "http://gpu-box:11434"),
        ("https://ollama.example/", "https://ollama.example"),
        ("http://[::1]:9999", "http://[::1]:9999"),
        ("http://proxy.local:80/ollama", "http://proxy.local:80/ollama"),
    ],
)
def test_host_url(value: str, expected: str) -> None:
    assert host_url(value) == expected


def test_base_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    assert Ollama("m").base_url == "http://localhost:11434"
    monkeypatch.setenv("OLLAMA_HOST", "10.0.0.5")
    assert Ollama("m").base_url == "http://10.0.0.5:11434"
    assert Ollama("m", base_url="http://other:1/").base_url == "http://other:1"


def test_key_from_environment_never_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_API_KEY", KEY)
    adapter = Ollama("gpt-oss:120b", base_url="https://ollama.com")
    assert adapter._headers()["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(adapter)


async def test_cloud_without_key_fails_at_first_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OLLAMA_API_KEY", raising=False)
    adapter = Ollama("gpt-oss:120b", base_url="https://ollama.com")
    with pytest.raises(ProviderError) as caught:
        async for _ in adapter.stream(ModelRequest()):
            pass
    assert caught.value.kind == "auth"
    assert "OLLAMA_API_KEY" in caught.value.message


# ---- request body ----


def test_body_matches_recorded_request() -> None:
    recorded = wire.load("ollama/api-chat-stream-text")["request"]["body"]
    request = ModelRequest(
        messages=[UserMessage.of("Count from 1 to 5")], max_tokens=50, temperature=0
    )
    body = Ollama("gemma3:1b").build_body(request)
    assert body["model"] == recorded["model"]
    assert body["messages"] == recorded["messages"]
    assert body["stream"] is True
    assert body["options"] == recorded["options"]
    assert body["think"] is False
    assert "tools" not in body and "format" not in body


def test_tools_match_recorded_request() -> None:
    recorded = wire.load("ollama/api-chat-tool-call-cloud")["request"]["body"]
    spec = recorded["tools"][0]["function"]
    request = ModelRequest(
        messages=[UserMessage.of("What's the weather like in San Francisco?")],
        tools=[
            ToolSpec(
                name=spec["name"], description=spec["description"], parameters=spec["parameters"]
            )
        ],
    )
    body = Ollama("gpt-oss:120b", stream=False).build_body(request)
    assert body["tools"] == recorded["tools"]
    assert body["messages"] == recorded["messages"]
    assert body["stream"] is False


def test_tool_choice_approximations() -> None:
    tools = [ToolSpec(name="a"), ToolSpec(name="b")]
    adapter = Ollama("qwen3:8b")
    assert "tools" not in adapter.build_body(ModelRequest(tools=tools, tool_choice="none"))
    only = adapter.build_body(ModelRequest(tools=tools, tool_choice={"name": "b"}))
    assert [t["function"]["name"] for t in only["tools"]] == ["b"]
    both = adapter.build_body(ModelRequest(tools=tools, tool_choice="required"))
    assert [t["function"]["name"] for t in both["tools"]] == ["a", "b"]


def test_history_conversion() -> None:
    png = ImageContent(data="iVBORw0KGgo=", mime_type="image/png")
    request = ModelRequest(
        system_prompt="Be brief.",
        messages=[
            UserMessage.of("What is this?", png),
            ExtensionMessage(kind="ui", data=1),
            AssistantMessage(content=[], stop_reason="error"),
            AssistantMessage(
                content=[
                    ThinkingContent(thinking="Need a look.", signature="sig-from-anthropic"),
                    ThinkingContent(thinking="", signature="x", redacted=True),
                    TextContent(text="Checking."),
                    ToolCall(id="toolu_1", name="zoom", arguments={"factor": 2}),
                ],
                provider="anthropic",
            ),
            ToolResultMessage(
                tool_call_id="toolu_1", tool_name="zoom", content=[TextContent(text="zoomed"), png]
            ),
        ],
        thinking_level="high",
        response_format={"type": "object", "properties": {"x": {"type": "integer"}}},
        extra_body={"options": {"num_ctx": 8192}, "keep_alive": "5m"},
    )
    body = Ollama("qwen3:8b", options={"seed": 7}).build_body(request)
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is this?", "images": ["iVBORw0KGgo="]},
        {
            "role": "assistant",
            "content": "Checking.",
            "thinking": "Need a look.",
            "tool_calls": [
                {"id": "toolu_1", "function": {"name": "zoom", "arguments": {"factor": 2}}}
            ],
        },
        {
            "role": "tool",
            "content": "zoomed",
            "tool_name": "zoom",
            "tool_call_id": "toolu_1",
            "images": ["iVBORw0KGgo="],
        },
    ]
    assert body["think"] is True
    assert body["format"] == {"type": "object", "properties": {"x": {"type": "integer"}}}
    assert body["options"] == {"seed": 7, "num_ctx": 8192}
    assert body["keep_alive"] == "5m"
    assert "sig-from-anthropic" not in json.dumps(body)


@pytest.mark.parametrize(
    ("model", "level", "expected"),
    [
        ("qwen3:8b", "off", False),
        ("qwen3:8b", "low", True),
        ("gpt-oss:20b", "off", False),
        ("gpt-oss:20b", "minimal", "low"),
        ("gpt-oss:120b", "high", "high"),
        ("library/gpt-oss:20b", "medium", "medium"),
    ],
)
def test_think_value(model: str, level: Any, expected: bool | str) -> None:
    assert think_value(model, level) == expected


def test_request_model_wins() -> None:
    body = Ollama("gemma3:1b").build_body(ModelRequest(model="llama3.2"))
    assert body["model"] == "llama3.2"
