"""Cassettes: record through a transport, replay from the file, never write a secret."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from tests import wire as fixtures
from tests.conformance.harness import check, run_recorded
from tests.testing.wire_cases import FORMATS, collect, rich_message, same_message

from treadle import AgentContext, AgentLoopConfig, tool
from treadle.providers import ModelRequest, ProviderError
from treadle.providers.anthropic import Anthropic
from treadle.providers.openai_chat import OpenAIChat
from treadle.testing import (
    Cassette,
    CassetteError,
    Fail,
    FakeTransport,
    NoMatchingExchange,
    Raw,
    Truncate,
    WireFake,
    WireItem,
    serve,
)
from treadle.types import AssistantMessage, ToolCall, UserMessage

pytestmark = pytest.mark.anyio

SECRET = "sk-live-SECRET-0123456789abcdef"


@pytest.mark.parametrize("fmt", FORMATS)
async def test_auto_mode_never_records_a_failure_as_the_answer(fmt: str, tmp_path: Path) -> None:
    path = tmp_path / f"{fmt}.json"
    real = FakeTransport(fmt, [Fail(429, retry_after=0), Fail(500), rich_message(fmt)])
    recorder = Cassette(path)  # no file yet: auto mode records
    provider = real.provider(api_key=SECRET, client=recorder.client(real))
    for _ in range(2):
        with pytest.raises(ProviderError):
            await collect(provider)
    assert not path.exists()  # a run that saw only failures leaves nothing to replay
    _, recorded = await collect(provider)
    await provider.aclose()
    assert [status for _, status in recorder.not_recorded] == [429, 500]
    assert SECRET not in repr(recorder.not_recorded)
    data = json.loads(path.read_text())
    assert [e["response"]["status"] for e in data["exchanges"]] == [200]

    replay = Cassette(path)
    provider = FakeTransport(fmt, []).provider(api_key="k", client=replay.client())
    _, replayed = await collect(provider)
    same_message(replayed, recorded)


@pytest.mark.parametrize("fmt", FORMATS)
async def test_record_then_replay(fmt: str, tmp_path: Path) -> None:
    path = tmp_path / "cassettes" / f"{fmt}.json"
    real = FakeTransport(fmt, [rich_message(fmt), Fail(429, retry_after=3)])

    recorder = Cassette(path, mode="record")  # records failures too (auto mode would not)
    assert recorder.recording
    provider = real.provider(api_key=SECRET, client=recorder.client(real))
    _, recorded = await collect(provider)
    with pytest.raises(ProviderError) as limited:
        await collect(provider)
    await provider.aclose()
    assert len(real.requests) == 2

    text = path.read_text()
    assert SECRET not in text
    for header in ("authorization", "x-api-key", "x-goog-api-key"):
        assert header not in text.lower()
    data = json.loads(text)
    assert data["treadle_cassette"] == 1 and len(data["exchanges"]) == 2
    first = data["exchanges"][0]
    assert first["request"]["method"] == "POST" and isinstance(first["request"]["body"], dict)
    # the body as text; an AWS eventstream as its frames, readable and scrubbed like text
    body = first["response"].get("frames" if fmt == "bedrock" else "body")
    assert first["response"]["status"] == 200 and isinstance(
        body, list if fmt == "bedrock" else str
    )
    assert data["exchanges"][1]["response"]["headers"]["retry-after"] == "3"

    replay = Cassette(path)  # the file exists now: auto mode replays
    assert not replay.recording
    offline = FakeTransport(fmt, [])  # the "real" server is not consulted any more
    provider = offline.provider(api_key="any-other-key", client=replay.client())
    _, replayed = await collect(provider)
    same_message(replayed, recorded)
    same_message(replayed, rich_message(fmt))
    with pytest.raises(ProviderError) as again:
        await collect(provider)
    assert (again.value.kind, again.value.retry_after) == (limited.value.kind, 3.0)
    assert not offline.requests
    replay.assert_all_played()


async def test_agent_run_replays_from_a_cassette(tmp_path: Path) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    path = tmp_path / "run.json"
    script: list[WireItem] = [
        AssistantMessage(content=[ToolCall(id="call_1", name="add", arguments={"a": 2, "b": 3})]),
        "5.",
    ]
    for upstream in (WireFake.openai(script), None):  # record, then replay
        cassette = Cassette(path)
        assert cassette.recording == (upstream is not None)
        provider = OpenAIChat("gpt-4o-mini", api_key=SECRET, client=cassette.client(upstream))
        context = AgentContext(tools=[add])
        rec = await run_recorded(["2+3?"], context, AgentLoopConfig(provider=provider))
        check(rec)
        assert context.messages[-1].text == "5."  # type: ignore[union-attr]
        await provider.aclose()
    assert SECRET not in path.read_text()


async def test_key_query_params_and_echoed_secrets_are_redacted(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    upstream = WireFake.gemini([Raw(f"data: echo {SECRET} and tok-extra\r\n\r\n")])
    cassette = Cassette(path, secrets=["tok-extra"])
    async with cassette.client(upstream) as client:
        url = f"https://user:pw-hidden@g.example/v1beta/models/m:streamGenerateContent?alt=sse&key={SECRET}"
        response = await client.post(
            url, json={"note": f"key is {SECRET}"}, headers={"x-goog-api-key": SECRET}
        )
        assert SECRET in response.text  # the caller still gets the real body
    text = path.read_text()
    for secret in (SECRET, "tok-extra", "pw-hidden"):
        assert secret not in text
    exchange = json.loads(text)["exchanges"][0]
    assert exchange["request"]["url"] == (
        "https://g.example/v1beta/models/m:streamGenerateContent?alt=sse&key=REDACTED"
    )
    assert exchange["request"]["body"] == {"note": "key is REDACTED"}
    assert exchange["response"]["body"] == "data: echo REDACTED and REDACTED\r\n\r\n"
    # Replay matches on everything but the redacted parameter.
    async with Cassette(path).client() as client:
        url = "https://g.example/v1beta/models/m:streamGenerateContent?alt=sse&key=other"
        replayed = await client.post(url, json={"note": "key is REDACTED"})
    assert replayed.text == "data: echo REDACTED and REDACTED\r\n\r\n"


async def test_only_allowlisted_headers_are_written(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    upstream = WireFake.anthropic(["hi"])
    cassette = Cassette(path, keep_headers=["x-custom", "authorization"])
    provider = upstream.provider(
        api_key=SECRET,
        client=cassette.client(upstream),
        headers={"x-custom": "kept", "cookie": "c=1"},
    )
    await collect(provider)
    exchange = json.loads(path.read_text())["exchanges"][0]
    assert exchange["request"]["headers"] == {
        "accept": "*/*",
        "content-type": "application/json",
        "anthropic-version": "2023-06-01",
        "x-custom": "kept",
    }
    assert exchange["response"]["headers"] == {"content-type": "text/event-stream; charset=utf-8"}


async def test_no_matching_exchange_says_where_the_body_differs(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    upstream = WireFake.openai(["hi"])
    async with Cassette(path).client(upstream) as client:
        await client.post(
            "https://api.openai.com/v1/chat/completions", json={"messages": [{"content": "hello"}]}
        )
    replay = Cassette(path)
    async with replay.client() as client:
        with pytest.raises(NoMatchingExchange) as caught:
            await client.post(
                "https://api.openai.com/v1/chat/completions",
                json={"messages": [{"content": "bye"}]},
            )
    message = str(caught.value)
    assert "POST https://api.openai.com/v1/chat/completions" in message
    assert "$.messages[0].content" in message and '"hello" recorded' in message
    async with replay.client() as client:
        with pytest.raises(NoMatchingExchange, match="method or path differs"):
            await client.post("https://api.openai.com/v1/responses", json={})


async def test_each_exchange_plays_once_and_match_modes(tmp_path: Path) -> None:
    path = tmp_path / "o.json"
    upstream = WireFake.openai(["one", "two"])
    url = "https://api.openai.com/v1/chat/completions"
    async with Cassette(path).client(upstream) as client:
        for n in (1, 2):
            await client.post(url, json={"n": n, "stream": False})

    def text(response: httpx.Response) -> str:
        return str(response.json()["choices"][0]["message"]["content"])

    body = Cassette(path)  # match="body": by content, any order
    async with body.client() as client:
        assert text(await client.post(url, json={"stream": False, "n": 2})) == "two"
        assert text(await client.post(url, json={"n": 1, "stream": False})) == "one"
        with pytest.raises(NoMatchingExchange, match="every exchange has been played"):
            await client.post(url, json={"n": 1, "stream": False})
    by_path = Cassette(path, match="path")  # bodies ignored, first unplayed first
    async with by_path.client() as client:
        assert text(await client.post(url, json={"other": True})) == "one"
    assert len(by_path.unplayed) == 1
    with pytest.raises(AssertionError, match="never replayed"):
        by_path.assert_all_played()
    in_order = Cassette(path, match="order")
    async with in_order.client() as client:
        assert text(await client.post(url, json={})) == "one"
        with pytest.raises(NoMatchingExchange):
            await client.post("https://api.openai.com/v1/elsewhere", json={})


async def test_a_wire_fixture_replays_as_a_cassette() -> None:
    path = fixtures.WIRE / "openai" / "chat-stream-tool-call.json"
    cassette = Cassette(path, mode="replay", match="path")
    provider = OpenAIChat("gpt-4o-mini", api_key="k", client=cassette.client())
    _, message = await collect(
        provider, ModelRequest(messages=[UserMessage.of("What is 1231 * 2331?")])
    )
    assert message.tool_calls[0].arguments == {"a": 1231, "b": 2331}
    assert message.usage.total_tokens == 74


async def test_a_replaying_cassette_can_be_served(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    upstream = WireFake.openai(["served from tape"])
    recorder = Cassette(path)
    await collect(upstream.provider(client=recorder.client(upstream)))
    async with serve(Cassette(path)) as url:
        provider = OpenAIChat("gpt-4o-mini", api_key="k", base_url=f"{url}/v1")
        _, message = await collect(provider)
        await provider.aclose()
    assert message.text == "served from tape"


def test_modes_and_bad_files(tmp_path: Path) -> None:
    with pytest.raises(CassetteError, match="does not exist"):
        Cassette(tmp_path / "missing.json", mode="replay")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(CassetteError, match="not JSON"):
        Cassette(bad)
    bad.write_text('{"something": "else"}')
    with pytest.raises(CassetteError, match="neither"):
        Cassette(bad)
    assert Cassette(bad, mode="record").recording  # record mode rewrites whatever is there
    with pytest.raises(ValueError):
        Cassette(bad, mode="rewind")  # type: ignore[arg-type]


async def test_recording_through_a_real_http_transport(tmp_path: Path) -> None:
    path = tmp_path / "net.json"
    server = WireFake.anthropic([rich_message("anthropic"), Truncate(after=3)])
    async with serve(server) as url:
        cassette = Cassette(path)  # no inner transport: a real httpx.AsyncHTTPTransport
        provider = Anthropic(
            "claude-sonnet-4-5", api_key=SECRET, base_url=url, client=cassette.client()
        )
        _, recorded = await collect(provider)
        with pytest.raises(ProviderError, match="message_stop"):
            await collect(provider)
        await provider.aclose()
    assert server.requests[0].headers["accept-encoding"] == "identity"
    assert SECRET not in path.read_text()
    replay = Cassette(path)
    provider = Anthropic("claude-sonnet-4-5", api_key="k", base_url=url, client=replay.client())
    _, replayed = await collect(provider)
    same_message(replayed, recorded)
    with pytest.raises(ProviderError) as cut:
        await collect(provider)
    assert cut.value.kind == "truncated_stream"
