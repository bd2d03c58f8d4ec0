"""Each wire fake's bytes, parsed by the matching treadle adapter, give back the script."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from tests import wire as fixtures
from tests.testing.wire_cases import (
    CALLS,
    FORMATS,
    TEXT,
    THINKING,
    collect,
    full_usage,
    rich_message,
    same_message,
)

from treadle.providers.gemini import Gemini
from treadle.testing import FakeTransport, Raw, WireFake
from treadle.testing.formats import pieces
from treadle.types import (
    AssistantMessage,
    TextContent,
    TextDelta,
    ThinkingContent,
    ThinkingDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallStart,
    Usage,
)

# Encoding and parsing only (no sockets, no timing): the backend cannot matter.
pytestmark = [pytest.mark.anyio, pytest.mark.one_backend]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_rich_message_round_trips(fmt: str, stream: bool) -> None:
    want = rich_message(fmt)
    fake = FakeTransport(fmt, [want])
    provider = fake.provider(stream=stream)
    events, got = await collect(provider)
    same_message(got, want)
    assert got.model == fake.format.default_model
    assert len(fake.requests) == 1
    field = {"gemini": "contents", "bedrock": "messages"}.get(fmt, "stream")  # always sent
    assert fake.requests[0].json[field] is not None
    if stream:
        # Text streams in several deltas, and the deltas add up to the text.
        text_deltas = [e.text for e in events if isinstance(e, TextDelta)]
        assert len(text_deltas) > 5 and "".join(text_deltas) == TEXT
        thinking = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
        assert thinking == THINKING
        starts = [e for e in events if isinstance(e, ToolCallStart)]
        assert [(s.id, s.name) for s in starts] == [(c.id, c.name) for c in CALLS]
        for call in CALLS:
            index = next(s.index for s in starts if s.id == call.id)
            args = "".join(
                e.arguments for e in events if isinstance(e, ToolCallDelta) and e.index == index
            )
            assert json.loads(args) == call.arguments
    await provider.aclose()


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "responses"])
async def test_arguments_arrive_in_fragments(fmt: str) -> None:
    fake = FakeTransport(fmt, [rich_message(fmt)])
    events, _ = await collect(fake.provider())
    fragments = [e.arguments for e in events if isinstance(e, ToolCallDelta) and e.arguments]
    assert len(fragments) >= 2 * 5  # two calls, each split like a model streams JSON
    assert '{"' in fragments


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("split", [1, 7])
async def test_any_byte_chunking_parses_the_same(fmt: str, split: int) -> None:
    want = rich_message(fmt)
    fake = FakeTransport(fmt, [want], split=split)
    _, got = await collect(fake.provider())
    same_message(got, want)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "json"])
async def test_plain_text_and_length(fmt: str, stream: bool) -> None:
    usage = full_usage(fmt)
    fake = FakeTransport(
        fmt,
        [
            "Just text.",
            AssistantMessage(
                content=[TextContent(text="Cut by max_tok")], stop_reason="length", usage=usage
            ),
        ],
        chunk_size=3,
    )
    provider = fake.provider(stream=stream)
    _, first = await collect(provider)
    assert first.content == [TextContent(text="Just text.")]
    assert first.stop_reason == "stop"
    _, second = await collect(provider)
    assert second.text == "Cut by max_tok" and second.stop_reason == "length"
    assert second.usage == usage


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "responses", "ollama"])
async def test_invalid_argument_json_is_kept_raw(fmt: str) -> None:
    call = ToolCall(id="call_bad", name="add", raw_arguments='{"a": 2, "b": ')
    fake = FakeTransport(fmt, [AssistantMessage(content=[call])])
    _, got = await collect(fake.provider())
    assert got.tool_calls == [call]
    assert got.stop_reason == "tool_use"


def test_unrepresentable_messages_are_refused_up_front() -> None:
    with pytest.raises(ValueError, match="raw"):
        WireFake.gemini([AssistantMessage(content=[ToolCall(id="x", name="f", raw_arguments="{")])])
    with pytest.raises(ValueError, match="aborted"):
        WireFake.anthropic(
            [AssistantMessage(content=[TextContent(text="x")], stop_reason="aborted")]
        )
    with pytest.raises(TypeError, match="not a wire script item"):
        WireFake.openai([42])  # type: ignore[list-item]


async def test_anthropic_redacted_thinking_round_trips() -> None:
    want = AssistantMessage(
        content=[
            ThinkingContent(thinking="", signature="EmwKAhgBEgy-redacted", redacted=True),
            TextContent(text="Done."),
        ],
        usage=Usage(input=5, output=3, total_tokens=8),
    )
    for stream in (True, False):
        fake = WireFake.anthropic([want])
        _, got = await collect(fake.provider(stream=stream))
        same_message(got, want)


async def test_openai_error_stop_reason_is_a_content_filter() -> None:
    fake = WireFake.openai(
        [AssistantMessage(content=[TextContent(text="I can")], stop_reason="error")]
    )
    _, got = await collect(fake.provider())
    assert got.stop_reason == "error"
    assert got.error is not None and got.error.kind == "content_filter"


async def test_openai_without_include_usage_sends_no_usage() -> None:
    fake = WireFake.openai(
        [
            AssistantMessage(
                content=[TextContent(text="hi")], usage=Usage(input=3, output=1, total_tokens=4)
            )
        ]
    )
    provider = fake.provider(include_usage=False)
    _, got = await collect(provider)
    assert got.usage == Usage()
    assert b'"usage"' not in b"".join(
        chunk for chunk in (await _raw_body(fake, {"model": "m", "stream": True}))
    )


async def _raw_body(fake: FakeTransport, body: dict[str, Any]) -> list[bytes]:
    fake.add("hi")
    async with fake.client() as client:
        async with client.stream("POST", "https://api.example/v1/chat/completions", json=body) as r:
            return [chunk async for chunk in r.aiter_raw()]


async def test_gemini_stream_without_alt_sse_is_a_json_array() -> None:
    want = rich_message("gemini")
    fake = WireFake.gemini([want])

    async def drop_alt(request: httpx.Request) -> None:
        request.url = request.url.copy_remove_param("alt")

    client = fake.client(event_hooks={"request": [drop_alt]})
    _, got = await collect(Gemini("gemini-2.5-flash", api_key="k", client=client))
    same_message(got, want)
    async with fake.client() as raw:
        fake.add("hello")
        url = "https://g.example/v1beta/models/gemini-2.5-flash:streamGenerateContent"
        response = await raw.post(url, json={})
        assert response.headers["content-type"].startswith("application/json")
        body = json.loads(response.text)
        assert isinstance(body, list) and body[-1]["candidates"][0]["finishReason"] == "STOP"


async def test_gemini_model_comes_from_the_url() -> None:
    fake = WireFake.gemini(["hi"])
    _, got = await collect(fake.provider("gemini-3-pro-preview"))
    assert got.model == "gemini-3-pro-preview"


async def test_scripted_model_and_response_id_win() -> None:
    want = AssistantMessage(
        content=[TextContent(text="hi")], model="gpt-4o-2024-08-06", response_id="chatcmpl-XYZ"
    )
    fake = WireFake.openai([want])
    _, got = await collect(fake.provider())
    assert (got.model, got.response_id) == ("gpt-4o-2024-08-06", "chatcmpl-XYZ")


# ---- the bytes look like the recordings ----


def _sse_payloads(body: str) -> list[tuple[str, Any]]:
    out = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        event, data = "message", None
        for line in block.split("\n"):
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        if data is not None:
            out.append((event, data if data == "[DONE]" else json.loads(data)))
    return out


async def _fake_body(fmt: str, url: str, request: dict[str, Any]) -> str:
    fake = FakeTransport(fmt, [AssistantMessage(content=[TextContent(text="Hi there"), CALLS[0]])])
    async with fake.client() as client:
        return (await client.post(url, json=request)).text


async def test_openai_chunks_have_the_recorded_shape() -> None:
    recorded = fixtures.load("openai/chat-stream-tool-call")
    ours = _sse_payloads(
        await _fake_body("openai", recorded["request"]["url"], recorded["request"]["body"])
    )
    theirs = _sse_payloads(recorded["response"]["body"])
    assert ours[-1] == theirs[-1] == ("message", "[DONE]")
    assert set(ours[0][1]) == set(theirs[0][1])  # every chunk carries the same fields
    assert ours[-2][1]["choices"] == [] and set(ours[-2][1]["usage"]) >= set(theirs[-2][1]["usage"])
    fragment = next(
        p
        for _, p in ours
        if p.get("choices")
        and "arguments" in json.dumps(p)
        and "id" not in p["choices"][0]["delta"].get("tool_calls", [{}])[0]
    )
    want = next(
        p
        for _, p in theirs
        if p.get("choices")
        and "arguments" in json.dumps(p)
        and "id" not in p["choices"][0]["delta"].get("tool_calls", [{}])[0]
    )
    assert fragment["choices"][0].keys() == want["choices"][0].keys()


async def test_anthropic_events_follow_the_recorded_sequence() -> None:
    recorded = fixtures.load("anthropic/messages-stream-text")
    ours = _sse_payloads(
        await _fake_body("anthropic", recorded["request"]["url"], recorded["request"]["body"])
    )
    names = [name for name, _ in ours]
    assert names[:3] == ["message_start", "content_block_start", "content_block_delta"]
    assert "ping" in names
    assert names[-2:] == ["message_delta", "message_stop"]
    assert all(payload["type"] == name for name, payload in ours)
    theirs = dict(_sse_payloads(recorded["response"]["body"]))
    assert set(ours[0][1]["message"]) <= set(theirs["message_start"]["message"])


async def test_raw_replays_a_recorded_fixture() -> None:
    fake = WireFake.openai(
        [Raw.from_fixture(fixtures.WIRE / "openai" / "chat-stream-tool-call.json")]
    )
    _, got = await collect(fake.provider())
    assert got.tool_calls[0].name == "multiply"
    assert got.tool_calls[0].arguments == {"a": 1231, "b": 2331}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a",
        "Hello, world!",
        "  leading and trailing  ",
        "tab\tand\nnewline",
        '{"a":[1,2]}',
        "Ünï ✓ 日本語テキスト",
    ],
)
def test_pieces_join_back(text: str) -> None:
    assert "".join(pieces(text, None)) == text
    assert "".join(pieces(text, 3)) == text
    assert all(pieces(text, None))


@pytest.mark.parametrize("fmt", FORMATS)
async def test_a_single_string_is_one_answer_not_one_per_character(fmt: str) -> None:
    fake = FakeTransport(fmt, "Hello!")
    assert fake.remaining == 1
    _, message = await collect(fake.provider(api_key="k"))
    assert message.text == "Hello!"
    fake.assert_done()


@pytest.mark.parametrize("fmt", FORMATS)
async def test_unscripted_usage_is_a_plausible_estimate_that_limits_can_use(fmt: str) -> None:
    from treadle import AgentContext, AgentLoopConfig, ExecutionLimits, agent_loop, tool

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    call = AssistantMessage(content=[ToolCall(id="c1", name="ping", arguments={})])
    fake = FakeTransport(fmt, [call, "Done."])
    limits = ExecutionLimits(max_total_tokens=50)
    config = AgentLoopConfig(provider=fake.provider(api_key="k"), limits=limits)
    context = AgentContext(system_prompt="Be brief. " * 20, tools=[ping])
    new = await agent_loop("hello there", context, config)
    reply = new[1]
    assert isinstance(reply, AssistantMessage)
    assert reply.usage.input == len(fake.requests[0].body) // 4 > 50
    assert reply.usage.output >= 1
    assert len(fake.requests) == 1  # the limit saw real numbers and stopped the run
