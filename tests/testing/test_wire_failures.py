"""Injected failures reach the adapters as the right ProviderError; the fake's bookkeeping."""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from tests.testing.wire_cases import FORMATS, collect

from treadle.providers import ModelRequest, Provider, ProviderError
from treadle.providers.openai_chat import OpenAIChat
from treadle.testing import (
    Fail,
    FakeTransport,
    RecordedRequest,
    Slow,
    StreamError,
    Truncate,
    WireFake,
)
from treadle.types import AssistantMessage, TextContent, UserMessage

pytestmark = pytest.mark.anyio


async def failure(fake: FakeTransport, **options: Any) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await collect(fake.provider(**options))
    return caught.value


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (429, "rate_limit"),
        (500, "server"),
        (401, "auth"),
        (400, "bad_request"),
        (404, "bad_request"),
    ],
)
@pytest.mark.one_backend  # parsing recorded bytes: the backend cannot matter
async def test_http_errors_in_the_providers_shape(fmt: str, status: int, kind: str) -> None:
    error = await failure(FakeTransport(fmt, [Fail(status)]))
    assert (error.kind, error.status_code) == (kind, status)
    assert error.retry_after is None
    assert "HTTP" not in error.message  # the provider's own text, not a fallback


@pytest.mark.parametrize("fmt", FORMATS)
async def test_retry_after_is_sent_and_read(fmt: str) -> None:
    error = await failure(FakeTransport(fmt, [Fail(429, retry_after=0.25)]))
    assert (error.kind, error.retry_after) == ("rate_limit", 0.25)


@pytest.mark.parametrize(("fmt", "status"), [("openai", 503), ("anthropic", 529), ("gemini", 503)])
@pytest.mark.one_backend  # parsing recorded bytes: the backend cannot matter
async def test_overloaded_statuses(fmt: str, status: int) -> None:
    error = await failure(FakeTransport(fmt, [Fail(status)]))
    assert error.kind == "overloaded"


async def test_fail_with_own_body_message_and_headers() -> None:
    fake = WireFake.openai(
        [
            Fail(400, message="This model's maximum context length is 128000 tokens."),
            Fail(418, body={"error": {"message": "I'm a teapot", "type": "teapot"}}),
            Fail(502, body="<html>Bad gateway</html>", headers={"x-trace": "t1"}),
        ]
    )
    provider = fake.provider()
    assert (await failure_of(provider)).kind == "context_overflow"
    teapot = await failure_of(provider)
    assert (teapot.kind, teapot.message) == ("bad_request", "I'm a teapot")
    gateway = await failure_of(provider)
    assert gateway.kind == "server" and "Bad gateway" in gateway.message


async def failure_of(provider: Provider) -> ProviderError:
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    return caught.value


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("after", [0, 3, 10_000])
async def test_truncated_stream(fmt: str, after: int) -> None:
    error = await failure(
        FakeTransport(fmt, [Truncate("one two three four five six", after=after)])
    )
    assert error.kind == "truncated_stream"


@pytest.mark.parametrize("fmt", FORMATS)
async def test_stream_cut_inside_an_event_is_retryable(fmt: str) -> None:
    error = await failure(FakeTransport(fmt, [Truncate(after=2, mid_event=True)]))
    assert error.retryable


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "responses", "gemini", "ollama"])
async def test_stream_cut_inside_an_event_is_truncated_stream(fmt: str) -> None:
    error = await failure(FakeTransport(fmt, [Truncate(after=2, mid_event=True)]))
    assert error.kind == "truncated_stream"


@pytest.mark.parametrize("fmt", FORMATS)
async def test_dropped_connection_is_a_network_error(fmt: str) -> None:
    error = await failure(FakeTransport(fmt, [Truncate(after=2, reset=True)]))
    assert error.kind == "network" and "RemoteProtocolError" in error.message


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("after", [0, 3])
async def test_mid_stream_overloaded_error(fmt: str, after: int) -> None:
    error = await failure(FakeTransport(fmt, [StreamError(after=after)]))
    assert error.kind == "overloaded"
    assert "overloaded" in error.message.lower()


@pytest.mark.parametrize("fmt", ["openai", "anthropic", "responses", "gemini"])
@pytest.mark.parametrize("kind", ["rate_limit", "server"])
@pytest.mark.one_backend  # parsing recorded bytes: the backend cannot matter
async def test_mid_stream_error_kinds(fmt: str, kind: str) -> None:
    error = await failure(FakeTransport(fmt, [StreamError(kind=kind, error="custom text")]))  # type: ignore[arg-type]
    assert error.kind == kind and "custom text" in error.message


@pytest.mark.parametrize("fmt", FORMATS)
async def test_non_streamed_requests_fail_as_json(fmt: str) -> None:
    fake = FakeTransport(fmt, [StreamError(), Truncate()])
    overloaded = await failure(fake, stream=False)
    assert overloaded.status_code is not None and overloaded.retryable
    cut = await failure(fake, stream=False)
    assert cut.kind == "server" and "not JSON" in cut.message


@pytest.mark.parametrize("fmt", FORMATS)
async def test_exhausted_script_says_so(fmt: str) -> None:
    fake = FakeTransport(fmt, ["only answer"])
    provider = fake.provider()
    await collect(provider)
    fake.assert_done()
    error = await failure_of(provider)
    assert error.kind == "bad_request" and not error.retryable
    assert "script is exhausted" in error.message and "held 1 response" in error.message
    assert len(fake.unanswered) == 1
    with pytest.raises(AssertionError, match="found no item"):
        fake.assert_done()


def test_assert_done_reports_unused_items() -> None:
    fake = WireFake.openai(["a", "b"])
    with pytest.raises(AssertionError, match="2 script item"):
        fake.assert_done()


async def test_default_answers_after_the_script() -> None:
    fake = WireFake.anthropic(["first"], default="again and again")
    provider = fake.provider()
    texts = [(await collect(provider))[1].text for _ in range(3)]
    assert texts == ["first", "again and again", "again and again"]
    assert fake.remaining == 0 and not fake.unanswered


async def test_wrong_endpoint_gets_a_404_that_names_the_right_one() -> None:
    fake = WireFake.responses(["never sent"])
    chat = OpenAIChat("gpt-4o-mini", api_key="k", client=fake.client())
    error = await failure_of(chat)
    assert error.status_code == 404
    assert "no such endpoint" in error.message and "/v1/responses" in error.message
    assert fake.remaining == 1  # the item is still there for the right request


async def test_requests_are_recorded() -> None:
    fake = WireFake.openai(["hi"])
    provider = fake.provider(api_key="sk-do-not-print")
    await collect(
        provider, ModelRequest(system_prompt="Be brief.", messages=[UserMessage.of("yo")])
    )
    (request,) = fake.requests
    assert request.method == "POST" and request.path == "/v1/chat/completions"
    assert request.json["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "yo"},
    ]
    assert request.stream is True and request.connection is None
    assert request.headers["authorization"] == "Bearer sk-do-not-print"
    assert "sk-do-not-print" not in repr(request) and "sk-do-not-print" not in repr(fake)


async def test_callable_items_see_the_request() -> None:
    def echo(request: RecordedRequest) -> AssistantMessage:
        said = request.json["messages"][-1]["content"]
        return AssistantMessage(content=[TextContent(text=f"You said {said}")])

    async def later(request: RecordedRequest) -> Fail:
        await anyio.lowlevel.checkpoint()
        return Fail(503)

    fake = WireFake.openai([echo, later])
    provider = fake.provider()
    _, message = await collect(provider, ModelRequest(messages=[UserMessage.of("ping")]))
    assert message.text == "You said ping"
    assert (await failure_of(provider)).kind == "overloaded"


async def test_slow_paces_the_events() -> None:
    fake = WireFake.ollama([Slow("one two three four", delay=0.02)])
    provider = fake.provider()
    stamps: list[float] = []
    async for event in provider.stream(ModelRequest(messages=[UserMessage.of("x")])):
        if event.type == "text":
            stamps.append(anyio.current_time())
    assert len(stamps) == 4
    assert stamps[-1] - stamps[0] >= 3 * 0.02 * 0.9


async def test_slow_start_delay_and_wrapped_failures() -> None:
    fake = WireFake.anthropic([Slow(StreamError(after=1), delay=0.001, start_delay=0.03)])
    started = anyio.current_time()
    error = await failure(fake)
    assert error.kind == "overloaded"
    assert anyio.current_time() - started >= 0.03 * 0.9


async def test_fake_delay_applies_to_every_stream() -> None:
    fake = WireFake.gemini(["a b c"], delay=0.01)
    started = anyio.current_time()
    await collect(fake.provider())
    assert anyio.current_time() - started >= 0.03


@pytest.mark.one_backend  # parsing recorded bytes: the backend cannot matter
async def test_error_bodies_look_like_the_providers() -> None:
    fake = WireFake.openai([Fail(429)])
    async with fake.client() as client:
        response = await client.post("https://api.openai.com/v1/chat/completions", json={})
    assert response.status_code == 429
    assert response.text.startswith('{\n    "error": {')  # OpenAI pretty-prints errors
    assert json.loads(response.text)["error"]["code"] == "rate_limit_exceeded"
    fake = WireFake.anthropic([Fail(529)])
    async with fake.client() as client:
        response = await client.post("https://api.anthropic.com/v1/messages", json={})
    assert response.json()["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    assert response.headers["request-id"].startswith("req_")
