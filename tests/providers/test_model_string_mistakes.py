"""Model strings and adapters given the wrong way: each is refused before any request, with
the fix in the message, and nothing goes to a host the user did not name."""

from __future__ import annotations

import socket

import httpx
import pytest

from treadle import Agent, AgentContext, AgentLoopConfig, UserMessage, agent_loop
from treadle.errors import ConfigurationError, UsageError
from treadle.loop import RetryPolicy
from treadle.providers import OpenAIChat, get_provider
from treadle.providers._errors import transport_error
from treadle.providers._http import MODEL_STRING_PREFIXES
from treadle.providers.registry import KNOWN_PROVIDERS


@pytest.mark.parametrize(
    "spec",
    [
        "openai:gpt-4o-mini@localhost:8000/v1",
        "openai:gpt-4o-mini@127.0.0.1:8000",
        "openai:gpt-4o-mini@localhost",
        "openai:gpt-4o-mini@proxy.example.com/v1",
        "openai:gpt-4o-mini@[::1]:8000/v1",
    ],
)
def test_a_server_without_scheme_after_at_is_refused(spec: str) -> None:
    # Before: the whole "gpt-4o-mini@localhost:8000/v1" was the model name, sent with the
    # key to api.openai.com.
    with pytest.raises(ConfigurationError, match="has no scheme") as refused:
        get_provider(spec, api_key="sk-test-key-123456")
    server = spec.rpartition("@")[2]
    assert f"@http://{server}" in str(refused.value)


def test_a_version_tag_after_at_is_still_a_model_name() -> None:
    provider = get_provider("openai:claude-sonnet-4@20250514", api_key="k")
    assert provider.model == "claude-sonnet-4@20250514"


def test_the_scheme_form_still_works() -> None:
    provider = get_provider("openai:m@http://localhost:8000/v1", api_key="k")
    assert (provider.model, provider.base_url) == ("m", "http://localhost:8000/v1")  # type: ignore[attr-defined]


def test_slash_form_gets_a_did_you_mean() -> None:
    with pytest.raises(ConfigurationError, match="did you mean 'openai:gpt-4o-mini'"):
        get_provider("openai/gpt-4o-mini")


def test_openai_base_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    provider = get_provider("openai:gpt-4o-mini", api_key="k")
    assert provider.base_url == "http://127.0.0.1:9/v1"  # type: ignore[attr-defined]
    given = get_provider("openai:gpt-4o-mini", api_key="k", base_url="http://127.0.0.1:7/v1")
    assert given.base_url == "http://127.0.0.1:7/v1"  # type: ignore[attr-defined]
    # a compatible server's prefix never takes the OpenAI variable
    other = get_provider("vllm:m")
    assert other.base_url == "http://localhost:8000/v1"  # type: ignore[attr-defined]


def test_an_adapter_given_a_model_string_says_so() -> None:
    with pytest.raises(UsageError, match=r"OpenAIChat\('gpt-4o-mini'\)"):
        OpenAIChat("openai:gpt-4o-mini", api_key="k")
    assert OpenAIChat("llama3.2:1b", api_key="k", base_url="http://localhost:1/v1").model == (
        "llama3.2:1b"
    )


def test_the_prefix_lists_agree() -> None:
    assert set(KNOWN_PROVIDERS) == MODEL_STRING_PREFIXES


def test_agent_given_an_adapter_class_is_refused_at_once() -> None:
    with pytest.raises(UsageError, match=r"got the class OpenAIChat.*OpenAIChat\('gpt-4o-mini'\)"):
        Agent(OpenAIChat)  # type: ignore[arg-type]


def test_agent_offline_is_the_labelled_offline_model() -> None:
    result = Agent("offline").run_sync("hello there")
    assert result.reason == "completed"
    assert "offline" in result.text.lower()


def test_a_host_that_does_not_exist_is_unreachable_not_retried() -> None:
    cause = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    exc = httpx.ConnectError(str(cause))
    exc.__cause__ = cause
    error = transport_error(exc, "openai", "https://api.openai.invalid/v1")
    assert error.kind == "unreachable" and not error.retryable
    assert "does not exist" in error.message
    # a temporary resolver failure stays retryable
    again = socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    temporary = httpx.ConnectError(str(again))
    temporary.__cause__ = again
    assert transport_error(temporary, "openai", "https://x.example/v1").retryable


@pytest.mark.anyio
async def test_a_run_against_a_missing_host_asks_once() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        cause = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        raise httpx.ConnectError(str(cause), request=request) from cause

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        provider = OpenAIChat(
            "m", api_key="k", base_url="https://nowhere.invalid/v1", client=client
        )
        config = AgentLoopConfig(provider=provider, retry=RetryPolicy(initial_delay_s=0.01))
        new = await agent_loop([UserMessage.of("hi")], AgentContext(), config)
    error = new[-1].error  # type: ignore[union-attr]
    assert error is not None and error.kind == "unreachable"
    assert calls == 1
