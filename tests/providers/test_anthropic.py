"""Anthropic adapter: every recorded Messages exchange replayed over several chunkings."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import respx
from tests import wire

from treadle.cancellation import CancellationToken
from treadle.providers.anthropic import Anthropic
from treadle.providers.base import (
    ModelRequest,
    ProviderError,
    StreamDone,
    StreamEvent,
    StreamStart,
)
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

URL = "https://api.anthropic.com/v1/messages"
KEY = "test-anthropic-key-never-shown"
ANTHROPIC_FIXTURES = wire.names("anthropic")


def request(**kwargs: Any) -> ModelRequest:
    kwargs.setdefault("messages", [UserMessage.of("hi")])
    return ModelRequest(**kwargs)


async def collect(
    provider: Anthropic, req: ModelRequest | None = None, cancel: CancellationToken | None = None
) -> list[StreamEvent]:
    return [event async for event in provider.stream(req or request(), cancel=cancel)]


def is_streaming(fixture: dict[str, Any]) -> bool:
    return bool(fixture["request"]["body"].get("stream"))


def check_consistency(events: list[StreamEvent]) -> AssistantMessage:
    return wire.check_consistency(events, "anthropic")


# Concrete values read from each fixture: model, id, stop reason,
# usage (input, output, reasoning, cache_read, cache_write, total), content.
EXPECTED: dict[str, dict[str, Any]] = {
    "anthropic/messages-text": {
        "model": "claude-3-opus-20240229",
        "id": "msg_01Fg1JVgvCYUHWsxrj9GkpEv",
        "stop": "stop",
        "usage": (20, 10, 0, 0, 0, 30),
        "content": [("text", "The capital of France is Paris.")],
    },
    "anthropic/messages-parallel-tool-use": {
        "model": "claude-haiku-4-5-20251001",
        "id": "msg_011S3wxtqL5CVescWqS3zeg2",
        "stop": "tool_use",
        "usage": (423, 202, 0, 0, 0, 625),
        "content": [
            ("text", "I'll help you find out who is the youngest", "to compare their ages."),
            ("tool", "toolu_0167cfEnoQaPviGdVXA95zcu", "retrieve_entity_info", {"name": "Alice"}),
            ("tool", "toolu_01EEe2V5HD1Ac4rKiUR4HD2T", "retrieve_entity_info", {"name": "Bob"}),
            ("tool", "toolu_01XFyAjstT3966qvRynZyVPo", "retrieve_entity_info", {"name": "Charlie"}),
            ("tool", "toolu_013mnQZbgtK2oe3Mo3XKJsx3", "retrieve_entity_info", {"name": "Daisy"}),
        ],
    },
    "anthropic/messages-stream-text": {
        "model": "claude-3-opus-20240229",
        "id": "msg_01Ju7oPaDmjgrhWq8gNP4AUj",
        "stop": "stop",
        "usage": (15, 13, 0, 0, 0, 28),
        "content": [("text", "1\n2\n3\n4\n5")],
    },
    "anthropic/messages-stream-text-short": {
        "model": "claude-haiku-4-5-20251001",
        "id": "msg_01T8kTq7cYyYJeQ5DxcVUc6D",
        "stop": "stop",
        "usage": (10, 4, 0, 0, 0, 14),
        "content": [("text", "Hello")],
    },
    "anthropic/messages-stream-tool-use": {
        "model": "claude-sonnet-4-6",
        "id": "msg_01E3Wn1NynZw9FALZ68znj9S",
        "stop": "tool_use",
        "usage": (1591, 175, 0, 0, 0, 1766),
        # The server-side tool search blocks (indices 1 and 2 on the wire) are left out.
        "content": [
            (
                "text",
                "Let me search for a tool that can provide current exchange rate information.",
            ),
            (
                "text",
                "I found the right tool! Let me fetch the current USD to EUR exchange rate "
                "for you.",
            ),
            (
                "tool",
                "toolu_01EFn5wTNBYA8Reni8rbmnHT",
                "get_exchange_rate",
                {"from_currency": "USD", "to_currency": "EUR"},
            ),
        ],
    },
    "anthropic/messages-stream-parallel-tool-use": {
        "model": "claude-haiku-4-5-20251001",
        "id": "msg_01V2noLbAb2NgKnjaNw6Cn3w",
        "stop": "tool_use",
        "usage": (542, 62, 0, 0, 0, 604),
        "content": [
            ("tool", "toolu_01LtHJmixrs9NcWQkK8hu8hj", "pelican_name_generator", {}),
            ("tool", "toolu_01N8a4jWyf116qKTMqKKmjyt", "pelican_name_generator", {}),
        ],
    },
    "anthropic/messages-stream-tool-result-text": {
        "model": "claude-haiku-4-5-20251001",
        "id": "msg_01XMATm4UFnjP841TckVuNF4",
        "stop": "stop",
        "usage": (678, 82, 0, 0, 0, 760),
        "content": [
            ("text", "Here are two great names for your pet pelican:", "your feathered friend! 🦅")
        ],
    },
    "anthropic/messages-stream-thinking": {
        "model": "claude-sonnet-4-20250514",
        "id": "msg_01ALwQ87pTS7hH1PjSdC9wJD",
        "stop": "stop",
        "usage": (43, 282, 0, 0, 0, 325),
        "content": [
            (
                "thinking",
                "This is a straightforward question about pedestrian safety. I should provide "
                "clear, helpful advice about how to safely cross a street. This is basic safety "
                "information that could help prevent accidents.",
                ("EvMCCkYICxgCKkCHP2cSuEdcJK", "xb7XsYeb1vgb7wwzDvP/UhjfQYAQ=="),
            ),
            (
                "text",
                "Here are the basic steps for safely cros",
                "safety over speed when crossing streets.",
            ),
        ],
    },
    "anthropic/messages-stream-thinking-tool-use": {
        "model": "claude-haiku-4-5-20251001",
        "id": "msg_01JdU4xqNHXL9QCFWkwCDKGr",
        "stop": "tool_use",
        "usage": (598, 92, 53, 0, 0, 690),
        "content": [
            (
                "thinking",
                "The user wants me to:\n1. Use the fixed_version tool\n2. Tell them the version\n"
                "3. Make a short joke about it\n\nLet me first call the fixed_version tool to see "
                "what version it returns.",
                ("EoQDCm0IDhgCKkCDzGs2kL2PgnDCZU", "d4Pu+/EsjoneYwyxQQtUVgzhVGhhANWRjSBwUxgB"),
            ),
            ("tool", "toolu_01825dXWLSoJwCst1qTsiWdb", "fixed_version", {}),
        ],
    },
    "anthropic/messages-stream-redacted-thinking": {
        "model": "claude-sonnet-4-5-20250929",
        "id": "msg_018XZkwvj9asBiffg3fXt88s",
        "stop": "stop",
        "usage": (92, 189, 0, 0, 0, 281),
        "content": [
            ("redacted", ("EqkECkYIBxgCKkA8AZ4noDfV5VcOJe", "X67EWkkWuR0AhDIXXjpot45vnBd4ewJ/hgB")),
            ("redacted", ("EtgBCkYIBxgCKkDQfGkwzflEJP5asG3o", "/6RjRRFuab/DBV3yRYdZ1J0GAE=")),
            (
                "text",
                "I notice that you've sent what appears to be",
                "a legitimate task or question?",
            ),
        ],
    },
}
SUCCESS = sorted(EXPECTED)
ERRORS = {
    "anthropic/messages-error-400": (
        "bad_request",
        400,
        "This model does not support effort level 'xhigh'. Supported levels: high, low, max, "
        "medium.",
    ),
    "anthropic/messages-error-404": ("bad_request", 404, "model: claude-sonet-4-5"),
    "anthropic/quoted-http-529-overloaded": ("overloaded", 529, "Overloaded"),
}


def test_every_fixture_is_covered() -> None:
    covered = set(EXPECTED) | set(ERRORS) | {"anthropic/quoted-stream-error-event-overloaded"}
    assert covered == set(ANTHROPIC_FIXTURES)


def check_content(message: AssistantMessage, expected: list[tuple[Any, ...]]) -> None:
    assert len(message.content) == len(expected)
    for block, spec in zip(message.content, expected, strict=True):
        kind = spec[0]
        if kind == "text":
            assert isinstance(block, TextContent)
            if len(spec) == 2:
                assert block.text == spec[1]
            else:
                assert block.text.startswith(spec[1]) and block.text.endswith(spec[2])
        elif kind == "thinking":
            assert isinstance(block, ThinkingContent) and not block.redacted
            assert block.thinking == spec[1]
            assert block.signature is not None
            assert block.signature.startswith(spec[2][0]) and block.signature.endswith(spec[2][1])
        elif kind == "redacted":
            assert isinstance(block, ThinkingContent)
            assert block.redacted and block.thinking == ""
            assert block.signature is not None
            assert block.signature.startswith(spec[1][0]) and block.signature.endswith(spec[1][1])
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
    provider = Anthropic("claude-test", api_key=KEY, stream=is_streaming(fixture))
    with respx.mock:
        route = respx.post(URL).mock(return_value=wire.response(fixture, how))
        events = await collect(provider)
    message = check_consistency(events)
    assert events[0] == StreamStart(model=expected["model"], response_id=expected["id"])
    assert message.model == expected["model"]
    assert message.response_id == expected["id"]
    assert message.stop_reason == expected["stop"]
    u = message.usage
    assert (u.input, u.output, u.reasoning, u.cache_read, u.cache_write, u.total_tokens) == (
        expected["usage"]
    )
    check_content(message, expected["content"])
    sent = route.calls.last.request
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert json.loads(sent.content)["stream"] is is_streaming(fixture)


@pytest.mark.anyio
@pytest.mark.parametrize("how", wire.CHUNKINGS)
@pytest.mark.parametrize("name", sorted(ERRORS))
@pytest.mark.one_backend  # parsing recorded bytes: the backend cannot matter
async def test_http_errors(name: str, how: str | int) -> None:
    kind, status, message = ERRORS[name]
    for streaming in (True, False):
        provider = Anthropic("claude-test", api_key=KEY, stream=streaming)
        with respx.mock:
            respx.post(URL).mock(return_value=wire.response(wire.load(name), how))
            with pytest.raises(ProviderError) as caught:
                await collect(provider)
        error = caught.value
        assert (error.kind, error.status_code, error.message) == (kind, status, message)
        assert error.provider == "anthropic"
        assert error.retry_after is None  # none of these bodies carries a hint
        assert KEY not in str(error) and KEY not in repr(error)


@pytest.mark.anyio
async def test_overloaded_keeps_retry_after_header() -> None:
    fixture = wire.load("anthropic/quoted-http-529-overloaded")
    fixture["response"]["headers"]["retry-after"] = "7"
    with respx.mock:
        respx.post(URL).mock(return_value=wire.response(fixture))
        with pytest.raises(ProviderError) as caught:
            await collect(Anthropic("claude-test", api_key=KEY))
    assert caught.value.kind == "overloaded"
    assert caught.value.retryable
    assert caught.value.retry_after == 7.0


def cut_before(body: str, marker: str) -> str:
    at = body.index(marker)
    return body[:at]


@pytest.mark.anyio
@pytest.mark.parametrize("how", wire.CHUNKINGS)
async def test_mid_stream_error_event(how: str | int) -> None:
    """A normal start, some text, then Anthropic's in-band ``error`` event (quoted payload)."""
    fixture = wire.load("anthropic/messages-stream-text")
    error = wire.load("anthropic/quoted-stream-error-event-overloaded")["response"]["body"]
    body = cut_before(fixture["response"]["body"], "event: message_delta")
    fixture["response"]["body"] = f"{body}event: error\ndata: {error}\n\n"
    provider = Anthropic("claude-test", api_key=KEY)
    seen: list[StreamEvent] = []
    with respx.mock:
        respx.post(URL).mock(return_value=wire.response(fixture, how))
        with pytest.raises(ProviderError) as caught:
            async for event in provider.stream(request()):
                seen.append(event)
    assert caught.value.kind == "overloaded"
    assert caught.value.message == "Overloaded"
    assert caught.value.status_code is None
    assert caught.value.retryable
    assert seen[0] == StreamStart(
        model="claude-3-opus-20240229", response_id="msg_01Ju7oPaDmjgrhWq8gNP4AUj"
    )
    assert "".join(e.text for e in seen if isinstance(e, TextDelta)) == "1\n2\n3\n4\n5"
    assert not any(isinstance(e, StreamDone) for e in seen)


@pytest.mark.anyio
@pytest.mark.parametrize("marker", ["event: message_stop", "event: content_block_stop"])
@pytest.mark.parametrize("how", wire.CHUNKINGS)
async def test_truncated_stream(marker: str, how: str | int) -> None:
    fixture = wire.load("anthropic/messages-stream-tool-use")
    fixture["response"]["body"] = cut_before(fixture["response"]["body"], marker)
    with respx.mock:
        respx.post(URL).mock(return_value=wire.response(fixture, how))
        with pytest.raises(ProviderError) as caught:
            await collect(Anthropic("claude-test", api_key=KEY))
    assert caught.value.kind == "truncated_stream"
    assert caught.value.retryable


@pytest.mark.anyio
async def test_cache_usage_is_split_out() -> None:
    fixture = wire.load("anthropic/messages-stream-text-short")
    body = fixture["response"]["body"].replace(
        '"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":4',
        '"cache_creation_input_tokens":300,"cache_read_input_tokens":1200,"output_tokens":4',
    )
    assert body != fixture["response"]["body"]
    fixture["response"]["body"] = body
    with respx.mock:
        respx.post(URL).mock(return_value=wire.response(fixture, "lines"))
        events = await collect(Anthropic("claude-test", api_key=KEY))
    usage = check_consistency(events).usage
    assert (usage.input, usage.cache_read, usage.cache_write, usage.output) == (10, 1200, 300, 4)
    assert usage.total_tokens == 1514


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("reason", "stop"),
    [
        ("max_tokens", "length"),
        ("stop_sequence", "stop"),
        ("refusal", "stop"),
        ("pause_turn", "stop"),
        ("model_context_window_exceeded", "length"),
    ],
)
async def test_stop_reasons(reason: str, stop: str) -> None:
    fixture = wire.load("anthropic/messages-text")
    payload = json.loads(fixture["response"]["body"])
    payload["stop_reason"] = reason
    fixture["response"]["body"] = json.dumps(payload)
    with respx.mock:
        respx.post(URL).mock(return_value=wire.response(fixture))
        events = await collect(Anthropic("claude-test", api_key=KEY, stream=False))
    assert check_consistency(events).stop_reason == stop


@pytest.mark.anyio
async def test_invalid_tool_json_is_kept_raw() -> None:
    fixture = wire.load("anthropic/messages-stream-tool-use")
    body = fixture["response"]["body"].replace(
        '"partial_json":": \\"EUR\\"}"', '"partial_json":": "'
    )
    assert body != fixture["response"]["body"]
    fixture["response"]["body"] = body
    with respx.mock:
        respx.post(URL).mock(return_value=wire.response(fixture, 1))
        events = await collect(Anthropic("claude-test", api_key=KEY))
    call = check_consistency(events).tool_calls[0]
    assert call.arguments == {}
    assert call.raw_arguments == '{"from_currency": "USD", "to_currency": '


@pytest.mark.anyio
async def test_cancel_between_chunks() -> None:
    fixture = wire.load("anthropic/messages-stream-thinking")
    token = CancellationToken()
    seen: list[StreamEvent] = []
    with respx.mock:
        respx.post(URL).mock(return_value=wire.response(fixture, "lines"))
        with pytest.raises(ProviderError) as caught:
            async for event in Anthropic("claude-test", api_key=KEY).stream(
                request(), cancel=token
            ):
                seen.append(event)
                if isinstance(event, ThinkingDelta):
                    token.cancel()
    assert caught.value.kind == "cancelled"
    assert sum(isinstance(e, ThinkingDelta) for e in seen) == 1


@pytest.mark.anyio
async def test_missing_key_fails_at_first_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    provider = Anthropic("claude-test")  # constructing without a key works
    with respx.mock:
        route = respx.post(URL).mock(return_value=httpx.Response(500))
        with pytest.raises(ProviderError) as caught:
            await collect(provider)
    assert caught.value.kind == "auth"
    assert "ANTHROPIC_API_KEY" in caught.value.message
    assert not route.called


@pytest.mark.anyio
async def test_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    provider = Anthropic("claude-test", base_url="http://localhost:9999/")
    assert KEY not in repr(provider)
    with respx.mock:
        route = respx.post("http://localhost:9999/v1/messages").mock(
            return_value=wire.response(wire.load("anthropic/messages-stream-text-short"))
        )
        events = await collect(provider)
    assert check_consistency(events).text == "Hello"
    assert route.calls.last.request.headers["x-api-key"] == KEY


# ---- request bodies ----


def tool_turn() -> list[Any]:
    """The history recorded in messages-stream-tool-result-text, as treadle messages."""
    return [
        UserMessage.of("Two names for a pet pelican"),
        AssistantMessage(
            provider="anthropic",
            model="claude-haiku-4-5-20251001",
            stop_reason="tool_use",
            content=[
                TextContent(text=" "),
                ToolCall(id="toolu_01LtHJmixrs9NcWQkK8hu8hj", name="pelican_name_generator"),
                ToolCall(id="toolu_01N8a4jWyf116qKTMqKKmjyt", name="pelican_name_generator"),
            ],
        ),
        ToolResultMessage(
            tool_call_id="toolu_01LtHJmixrs9NcWQkK8hu8hj",
            tool_name="pelican_name_generator",
            content=[TextContent(text="Charles")],
        ),
        ToolResultMessage(
            tool_call_id="toolu_01N8a4jWyf116qKTMqKKmjyt",
            tool_name="pelican_name_generator",
            content=[TextContent(text="Sammy")],
        ),
    ]


PELICAN_TOOL = ToolSpec(
    name="pelican_name_generator", parameters={"properties": {}, "type": "object"}
)


def test_body_matches_recorded_tool_result_request() -> None:
    recorded = wire.load("anthropic/messages-stream-tool-result-text")["request"]["body"]
    body = Anthropic("claude-haiku-4-5-20251001").build_body(
        request(messages=tool_turn(), tools=[PELICAN_TOOL], temperature=1.0, prompt_cache="off")
    )
    assert body["model"] == recorded["model"]
    assert body["max_tokens"] == recorded["max_tokens"] == 8192
    assert body["temperature"] == 1.0
    assert body["stream"] is True
    assert body["tools"] == [
        {"name": "pelican_name_generator", "input_schema": PELICAN_TOOL.parameters}
    ]
    assert [m["role"] for m in body["messages"]] == [m["role"] for m in recorded["messages"]]
    assert body["messages"][:2] == recorded["messages"][:2]
    # Both results in one user turn; content as blocks rather than the recorded plain string.
    results = body["messages"][2]["content"]
    assert [r["tool_use_id"] for r in results] == [
        r["tool_use_id"] for r in recorded["messages"][2]["content"]
    ]
    assert [r["content"] for r in results] == [
        [{"type": "text", "text": "Charles"}],
        [{"type": "text", "text": "Sammy"}],
    ]
    assert "system" not in body and "thinking" not in body and "tool_choice" not in body


def test_body_thinking_matches_recorded_request() -> None:
    recorded = wire.load("anthropic/messages-stream-thinking")["request"]["body"]
    body = Anthropic("claude-sonnet-4-0", max_tokens=4096).build_body(
        request(messages=[UserMessage.of("How do I cross the street?")], thinking_level="minimal")
    )
    assert body["thinking"] == recorded["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert body["max_tokens"] == recorded["max_tokens"]
    assert (
        body["messages"][0]["content"][0]["text"] == recorded["messages"][0]["content"][0]["text"]
    )


def test_body_system_tools_and_choice() -> None:
    recorded = wire.load("anthropic/messages-parallel-tool-use")["request"]["body"]
    spec = recorded["tools"][0]
    body = Anthropic("claude-haiku-4-5").build_body(
        request(
            system_prompt=recorded["system"],
            tools=[
                ToolSpec(
                    **{k: spec[k] for k in ("name", "description")}, parameters=spec["input_schema"]
                )
            ],
            tool_choice="auto",
            prompt_cache="off",
        )
    )
    assert body["system"] == [{"type": "text", "text": recorded["system"]}]
    assert body["tools"] == recorded["tools"]
    assert body["tool_choice"] == recorded["tool_choice"] == {"type": "auto"}


@pytest.mark.parametrize(
    ("choice", "wire_choice"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ({"name": "pelican_name_generator"}, {"type": "tool", "name": "pelican_name_generator"}),
    ],
)
def test_tool_choice_mapping(choice: Any, wire_choice: dict[str, Any]) -> None:
    provider = Anthropic("claude")
    assert (
        provider.build_body(request(tools=[PELICAN_TOOL], tool_choice=choice))["tool_choice"]
        == wire_choice
    )
    # Without tools there is neither a tools key nor a tool_choice.
    body = provider.build_body(request(tool_choice=choice))
    assert "tools" not in body and "tool_choice" not in body


@pytest.mark.parametrize(
    ("tier", "cache"),
    [("short", {"type": "ephemeral"}), ("long", {"type": "ephemeral", "ttl": "1h"})],
)
def test_cache_control_placement(tier: str, cache: dict[str, str]) -> None:
    history = [UserMessage.of("first question"), *tool_turn()]
    body = Anthropic("claude").build_body(
        request(
            system_prompt="Be brief.",
            messages=history,
            tools=[PELICAN_TOOL, ToolSpec(name="second")],
            prompt_cache=tier,
        )
    )
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": cache}]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][1]["cache_control"] == cache
    messages = body["messages"]
    # Only the last block of the last user turn (here: the second tool result) is marked.
    marked = [
        (i, j)
        for i, m in enumerate(messages)
        for j, block in enumerate(m["content"])
        if "cache_control" in block
    ]
    assert marked == [(len(messages) - 1, 1)]
    assert messages[-1]["content"][1]["tool_use_id"] == "toolu_01N8a4jWyf116qKTMqKKmjyt"
    assert messages[-1]["content"][1]["cache_control"] == cache


def test_cache_off_marks_nothing() -> None:
    body = Anthropic("claude").build_body(
        request(system_prompt="Be brief.", tools=[PELICAN_TOOL], prompt_cache="off")
    )
    assert "cache_control" not in json.dumps(body)


@pytest.mark.anyio
@pytest.mark.parametrize(("cache", "beta"), [("long", True), ("short", False), ("off", False)])
@respx.mock
async def test_only_the_long_cache_tier_sends_the_ttl_beta(cache: str, beta: bool) -> None:
    route = respx.post("https://api.anthropic.com/v1/messages").mock(
        return_value=wire.response(wire.load("anthropic/messages-stream-text-short"))
    )
    provider = Anthropic("claude", api_key=KEY)
    async for _ in provider.stream(request(messages=[UserMessage.of("hi")], prompt_cache=cache)):
        pass
    sent = route.calls.last.request.headers
    assert ("extended-cache-ttl-2025-04-11" in sent.get("anthropic-beta", "")) is beta


def test_tool_results_merge_with_following_user_text() -> None:
    history = [*tool_turn(), UserMessage.of("and a third?")]
    history.insert(3, ExtensionMessage(kind="note", data={"x": 1}))
    body = Anthropic("claude").build_body(request(messages=history, prompt_cache="off"))
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    last = body["messages"][-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "tool_result", "text"]
    assert last[2]["text"] == "and a third?"


def test_tool_result_with_image_and_error() -> None:
    image = ImageContent(data="aGVsbG8=", mime_type="image/png")
    history = [
        UserMessage.of("look", image),
        AssistantMessage(provider="anthropic", content=[ToolCall(id="toolu_1", name="shot")]),
        ToolResultMessage(
            tool_call_id="toolu_1",
            tool_name="shot",
            content=[TextContent(text="screen"), image],
            is_error=True,
            details={"never": "sent"},
        ),
    ]
    body = Anthropic("claude").build_body(request(messages=history, prompt_cache="off"))
    source = {"type": "base64", "media_type": "image/png", "data": "aGVsbG8="}
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image", "source": source},
    ]
    assert body["messages"][2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": [{"type": "text", "text": "screen"}, {"type": "image", "source": source}],
            "is_error": True,
        }
    ]
    assert "never" not in json.dumps(body)


def test_foreign_ids_are_normalised_for_call_and_result() -> None:
    foreign = "call:abc/123.x"
    history = [
        UserMessage.of("go"),
        AssistantMessage(provider="openai", content=[ToolCall(id=foreign, name="f")]),
        ToolResultMessage(tool_call_id=foreign, tool_name="f", content=[TextContent(text="ok")]),
    ]
    body = Anthropic("claude").build_body(request(messages=history, prompt_cache="off"))
    use_id = body["messages"][1]["content"][0]["id"]
    assert body["messages"][2]["content"][0]["tool_use_id"] == use_id
    assert use_id != foreign
    assert all(c.isalnum() or c in "_-" for c in use_id)


def test_thinking_round_trips_only_to_anthropic() -> None:
    thinking = ThinkingContent(thinking="Let me think.", signature="sig-123")
    redacted = ThinkingContent(thinking="", signature="opaque-data", redacted=True)
    blocks = [thinking, redacted, TextContent(text="Answer.")]
    own = AssistantMessage(provider="anthropic", model="claude-x", content=blocks)
    foreign = AssistantMessage(provider="openai", model="gpt-x", content=blocks)
    provider = Anthropic("claude-y")
    body = provider.build_body(request(messages=[UserMessage.of("q"), own]))
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "Let me think.", "signature": "sig-123"},
        {"type": "redacted_thinking", "data": "opaque-data"},
        {"type": "text", "text": "Answer."},
    ]
    body = provider.build_body(request(messages=[UserMessage.of("q"), foreign]))
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "<thinking>\nLet me think.\n</thinking>"},
        {"type": "text", "text": "Answer."},
    ]
    assert "sig-123" not in json.dumps(body) and "opaque-data" not in json.dumps(body)


@pytest.mark.anyio
async def test_redacted_thinking_from_a_stream_goes_back_unchanged() -> None:
    fixture = wire.load("anthropic/messages-stream-redacted-thinking")
    with respx.mock:
        respx.post(URL).mock(return_value=wire.response(fixture, 3))
        events = await collect(Anthropic("claude-sonnet-4-5", api_key=KEY))
    message = check_consistency(events)
    body = Anthropic("claude-sonnet-4-5").build_body(
        request(messages=[UserMessage.of("q"), message, UserMessage.of("again")])
    )
    sent = body["messages"][1]["content"]
    blocks = [
        json.loads(line[6:])
        for line in fixture["response"]["body"].splitlines()
        if line.startswith('data: {"type":"content_block_start"')
    ]
    assert [b["type"] for b in sent] == ["redacted_thinking", "redacted_thinking", "text"]
    assert [b["data"] for b in sent[:2]] == [b["content_block"]["data"] for b in blocks[:2]]


def test_empty_assistant_and_empty_text_are_skipped() -> None:
    history = [
        UserMessage.of("q"),
        AssistantMessage(provider="anthropic", content=[]),
        AssistantMessage(provider="anthropic", content=[TextContent(text="")]),
        UserMessage.of("again"),
    ]
    body = Anthropic("claude").build_body(request(messages=history, prompt_cache="off"))
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "q"}, {"type": "text", "text": "again"}],
        }
    ]


def test_thinking_budget_temperature_and_max_tokens() -> None:
    provider = Anthropic("claude", max_tokens=4096)
    body = provider.build_body(request(thinking_level="high", temperature=0.2))
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assert body["max_tokens"] == 4096 + 16384  # room for the answer beyond the budget
    assert "temperature" not in body  # Anthropic rejects it while thinking
    body = provider.build_body(request(thinking_level="low", max_tokens=32000))
    assert body["thinking"]["budget_tokens"] == 2048 and body["max_tokens"] == 32000
    body = provider.build_body(request(temperature=0.2))
    assert body["temperature"] == 0.2 and "thinking" not in body and body["max_tokens"] == 4096


def test_thinking_is_dropped_for_a_foreign_tool_turn() -> None:
    history = [
        UserMessage.of("go"),
        AssistantMessage(provider="openai", content=[ToolCall(id="call_1", name="f")]),
        ToolResultMessage(tool_call_id="call_1", tool_name="f", content=[TextContent(text="ok")]),
    ]
    body = Anthropic("claude").build_body(request(messages=history, thinking_level="medium"))
    assert "thinking" not in body
    history.append(UserMessage.of("next question"))
    body = Anthropic("claude").build_body(request(messages=history, thinking_level="medium"))
    assert body["thinking"]["budget_tokens"] == 8192


@pytest.mark.parametrize("choice", ["required", {"name": "pelican_name_generator"}])
def test_thinking_is_dropped_when_a_tool_is_forced(choice: Any) -> None:
    provider = Anthropic("claude")
    forced = request(tools=[PELICAN_TOOL], tool_choice=choice, thinking_level="low")
    assert "thinking" not in provider.build_body(forced)
    free = request(tools=[PELICAN_TOOL], tool_choice="auto", thinking_level="low")
    assert provider.build_body(free)["thinking"]["budget_tokens"] == 2048


def test_model_response_format_and_extra_body() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    provider = Anthropic("claude-default", stream=False)
    body = provider.build_body(
        request(
            model="claude-override",
            response_format={"name": "answer", "schema": schema},
            extra_body={"metadata": {"user_id": "u1"}, "max_tokens": 77},
        )
    )
    assert body["model"] == "claude-override"
    assert body["output_config"] == {"format": {"type": "json_schema", "schema": schema}}
    assert body["metadata"] == {"user_id": "u1"} and body["max_tokens"] == 77
    assert body["stream"] is False
    assert (
        provider.build_body(request(response_format=schema))["output_config"]["format"]["schema"]
        == schema
    )
    assert provider.build_body(request())["model"] == "claude-default"
