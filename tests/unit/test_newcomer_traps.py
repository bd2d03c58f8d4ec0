"""The mistakes a newcomer makes in the first hour each get an immediate, clear error (or a
logged warning, for a stream left unread or unclosed) that says what to do."""

from __future__ import annotations

import gc
import logging
import subprocess
import sys
import textwrap
import time
import weakref
from typing import Any

import anyio
import pytest

import treadle.loop.sink as sink
from treadle import (
    Agent,
    AgentContext,
    AgentEvent,
    AgentLoopConfig,
    AssistantMessage,
    ConfigurationError,
    TextContent,
    ToolCall,
    ToolResultMessage,
    TreadleError,
    UsageError,
    UserMessage,
    agent_loop,
    tool,
)
from treadle.loop import EventChannel, RetryPolicy, _watcher
from treadle.loop.channel import SeqCounter
from treadle.providers import Anthropic, Gemini, Ollama, OpenAIChat, OpenAIResponses, get_provider
from treadle.testing import ScriptedProvider
from treadle.tools import ToolContext
from treadle.types import ProviderRetry

# ---------------------------------------------------------------- a dict as the prompt

DICT_PROMPT = {"role": "user", "content": "hi"}


@pytest.mark.anyio
async def test_agent_loop_refuses_a_dict_prompt_before_any_model_call() -> None:
    provider = ScriptedProvider("never sent")
    config = AgentLoopConfig(provider=provider)
    with pytest.raises(UsageError) as failed:
        await agent_loop(DICT_PROMPT, AgentContext(), config)  # type: ignore[arg-type]
    message = str(failed.value)
    assert "a dict is not a prompt" in message and "UserMessage.of('hi')" in message
    assert isinstance(failed.value, TypeError) and isinstance(failed.value, TreadleError)
    assert provider.requests == []  # not sent as two user messages, "role" and "content"


@pytest.mark.anyio
async def test_agent_loop_refuses_a_list_of_dicts_the_same_way() -> None:
    config = AgentLoopConfig(provider=ScriptedProvider("never sent"))
    with pytest.raises(UsageError, match=r"UserMessage\.of\('hi'\)"):
        await agent_loop([DICT_PROMPT], AgentContext(), config)  # type: ignore[list-item]


def test_agent_run_sync_refuses_a_dict_prompt() -> None:
    provider = ScriptedProvider("never sent")
    agent = Agent(provider)
    with pytest.raises(UsageError, match="a dict is not a prompt"):
        agent.run_sync(DICT_PROMPT)  # type: ignore[arg-type]
    assert provider.requests == [] and agent.messages == []


def test_an_assistant_shaped_dict_points_at_assistant_message() -> None:
    agent = Agent(ScriptedProvider("never sent"))
    with pytest.raises(UsageError, match=r"AssistantMessage\(content='done'\)"):
        agent.run_sync({"role": "assistant", "content": "done"})  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["after_batch", "next_tool", "interrupt"])
def test_steer_refuses_a_dict_at_once_and_queues_nothing(mode: str) -> None:
    provider = ScriptedProvider("the answer")
    agent = Agent(provider)
    with pytest.raises(UsageError, match=r"a dict is not a prompt.*UserMessage\.of\('hi'\)"):
        agent.steer(DICT_PROMPT, mode=mode)  # type: ignore[arg-type]
    agent.run_sync("the question")  # nothing half-queued joins the next run
    assert [m.text for m in agent.messages] == ["the question", "the answer"]


def test_follow_up_refuses_a_dict_at_once_and_queues_nothing() -> None:
    provider = ScriptedProvider("the answer")
    agent = Agent(provider)
    with pytest.raises(UsageError, match="a dict is not a prompt"):
        agent.follow_up(DICT_PROMPT)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="expected a message"):
        agent.follow_up(42)  # type: ignore[arg-type]
    agent.run_sync("the question")
    assert [m.text for m in agent.messages] == ["the question", "the answer"]


# ---------------------------------------------------------------- a message built positionally


def test_user_message_with_a_positional_text_says_how_to_write_it() -> None:
    with pytest.raises(UsageError) as failed:
        UserMessage("hi")  # type: ignore[call-arg]
    assert "UserMessage.of('hi')" in str(failed.value)
    assert "UserMessage(content='hi')" in str(failed.value)
    assert isinstance(failed.value, TypeError)


def test_other_messages_name_their_keyword_fields() -> None:
    with pytest.raises(UsageError, match=r"AssistantMessage\(content=\.\.\.\)"):
        AssistantMessage("x")  # type: ignore[call-arg]
    with pytest.raises(UsageError, match=r"tool_call_id=\.\.\., tool_name=\.\.\."):
        ToolResultMessage("a", "b")  # type: ignore[call-arg]


def test_messages_still_build_from_keywords_and_validation() -> None:
    assert UserMessage(content="hi").text == "hi"
    assert UserMessage.model_validate({"role": "user", "content": "hi"}).text == "hi"
    assert AssistantMessage(content=[TextContent(text="a")]).text == "a"


# ---------------------------------------------------------------- async forgotten on a tool


async def _fetch(url: str) -> str:
    return f"page at {url}"


@tool
def fetch(url: str) -> str:
    """Fetch a page."""
    return _fetch(url)  # type: ignore[return-value]  # async forgotten: a coroutine


def _calls(name: str, arguments: dict[str, Any]) -> ScriptedProvider:
    return ScriptedProvider(
        [AssistantMessage(content=[ToolCall(id="c1", name=name, arguments=arguments)]), "ok"]
    )


@pytest.mark.anyio
async def test_a_sync_tool_returning_a_coroutine_is_an_error_naming_the_tool(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = AgentLoopConfig(provider=_calls("fetch", {"url": "x"}))
    with caplog.at_level(logging.WARNING, logger="treadle"):
        new = await agent_loop("go", AgentContext(tools=[fetch]), config)
    result = next(m for m in new if isinstance(m, ToolResultMessage))
    assert result.is_error
    assert "tool 'fetch' returned a coroutine" in result.text and "async def fetch" in result.text
    assert "<coroutine object" not in result.text
    assert any("tool 'fetch' returned a coroutine" in r.getMessage() for r in caplog.records)


class Lazy:
    """A Tool whose ``run`` hands back an awaitable instead of the value."""

    name = "lazy"
    description = "Returns an awaitable by mistake."
    parameters: dict[str, Any] = {"type": "object", "properties": {}}

    async def run(self, arguments: dict[str, Any], ctx: ToolContext[Any]) -> Any:
        return _fetch("y")


@pytest.mark.anyio
async def test_any_tool_returning_an_awaitable_is_an_error_naming_the_tool() -> None:
    config = AgentLoopConfig(provider=_calls("lazy", {}))
    new = await agent_loop("go", AgentContext(tools=[Lazy()]), config)
    result = next(m for m in new if isinstance(m, ToolResultMessage))
    assert result.is_error and "tool 'lazy' returned a coroutine" in result.text


# ---------------------------------------------------------------- base_url without a scheme


@pytest.mark.parametrize("adapter", [OpenAIChat, OpenAIResponses, Anthropic, Gemini, Ollama])
def test_a_base_url_without_a_scheme_is_refused_at_construction(adapter: Any) -> None:
    with pytest.raises(ConfigurationError) as failed:
        adapter("m", base_url="localhost:8000/v1", api_key="k")
    assert "did you mean 'http://localhost:8000/v1'" in str(failed.value)
    assert isinstance(failed.value, ValueError)


def test_a_model_string_with_a_schemeless_url_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="http://"):
        get_provider("openai-compatible:qwen@gpu-box:8000/v1")


def test_the_refusal_never_shows_a_credential_in_the_url() -> None:
    with pytest.raises(ConfigurationError) as failed:
        OpenAIChat("m", base_url="ftp://user:s3cret-pass@host/v1?key=s3cret-key", api_key="k")
    assert "s3cret" not in str(failed.value)


@pytest.mark.anyio
async def test_an_unsendable_request_is_a_configuration_error_never_retried() -> None:
    provider = OpenAIChat("m", base_url="http://127.0.0.1:9/v1", api_key="k")
    provider.base_url = "localhost:8000/v1"  # changed after construction: no check then
    config = AgentLoopConfig(provider=provider, retry=RetryPolicy(initial_delay_s=2.0))
    send, receive = anyio.create_memory_object_stream[AgentEvent](1000)
    started = time.monotonic()
    async with send, receive:
        new = await agent_loop("hi", AgentContext(), config, send)
        events = [receive.receive_nowait() for _ in range(receive.statistics().current_buffer_used)]
    elapsed = time.monotonic() - started
    await provider.aclose()
    error = new[-1].error  # type: ignore[union-attr]
    assert error is not None and error.kind == "bad_request"
    assert "configuration error" in error.message and "base_url" in error.message
    assert not [e for e in events if isinstance(e, ProviderRetry)]
    assert elapsed < 2.0  # not even the first back-off (2 s) was slept


# ---------------------------------------------------------------- an extra not installed


def test_importing_an_extension_without_its_extra_names_the_extra() -> None:
    script = textwrap.dedent(
        """
        import sys
        from treadle.errors import MissingExtra
        for module, dependency, extra in [
            ("treadle.durable", "dbos", "dbos"),
            ("treadle.mcp", "mcp", "mcp"),
            ("treadle.otel", "opentelemetry", "otel"),
        ]:
            sys.modules[dependency] = None  # as if not installed
            try:
                __import__(module)
            except MissingExtra as exc:
                assert isinstance(exc, ImportError)
                assert f"pip install 'treadle[{extra}]'" in str(exc), str(exc)
                assert f"from a clone, pip install -e '.[{extra}]'" in str(exc), str(exc)
                print("ok", module)
            else:
                raise SystemExit(f"{module} imported without {dependency}")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    imported = done.stdout.split()[1::2]
    assert imported == ["treadle.durable", "treadle.mcp", "treadle.otel"]


# ---------------------------------------------------------------- a stream unread or unclosed


@pytest.fixture
def quick_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sink, "STALL_WARNING_S", 0.2)
    monkeypatch.setattr(sink, "CANCEL_GRACE_S", 0.2)  # a cancelled run stops waiting soon


@pytest.mark.anyio
@pytest.mark.usefixtures("quick_warnings")
async def test_a_stream_nobody_reads_is_logged_naming_the_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    send, receive = anyio.create_memory_object_stream[AgentEvent](0)
    config = AgentLoopConfig(provider=ScriptedProvider("hi"))
    with caplog.at_level(logging.WARNING, logger="treadle.loop"):
        with anyio.move_on_after(1.0):
            await agent_loop("x", AgentContext(), config, send)
    texts = [r.getMessage() for r in caplog.records]
    assert len([t for t in texts if "nobody reads it" in t]) == 1, texts  # once, not per wait
    assert any("tg.start_soon" in t for t in texts)
    send.close()
    receive.close()


async def _run_with_reader(close: bool) -> None:
    send, receive = anyio.create_memory_object_stream[AgentEvent](100)
    config = AgentLoopConfig(provider=ScriptedProvider("hi"))

    async def reader() -> None:
        async with receive:
            async for _ in receive:
                pass

    with anyio.move_on_after(1.0):
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            if close:
                async with send:
                    await agent_loop("x", AgentContext(), config, send)
            else:
                await agent_loop("x", AgentContext(), config, send)
    send.close()


@pytest.mark.anyio
@pytest.mark.usefixtures("quick_warnings")
async def test_a_send_end_never_closed_is_logged_naming_the_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="treadle.loop"):
        await _run_with_reader(close=False)
    texts = [r.getMessage() for r in caplog.records]
    assert any("still open" in t and "async with send:" in t for t in texts), texts


@pytest.mark.anyio
@pytest.mark.usefixtures("quick_warnings")
async def test_a_stream_closed_after_the_run_is_not_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="treadle.loop"):
        await _run_with_reader(close=True)
        await anyio.sleep(0.4)  # past the check's delay
    assert not [r for r in caplog.records if "still open" in r.getMessage()]


@pytest.mark.anyio
@pytest.mark.usefixtures("quick_warnings")
async def test_two_runs_on_one_stream_never_closed_are_still_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    send, receive = anyio.create_memory_object_stream[AgentEvent](100)
    provider = ScriptedProvider(["one", "two"])

    async def reader() -> None:
        async with receive:
            async for _ in receive:
                pass

    with caplog.at_level(logging.WARNING, logger="treadle.loop"):
        with anyio.move_on_after(1.0):
            async with anyio.create_task_group() as tg:
                tg.start_soon(reader)
                context = AgentContext()
                channel = EventChannel(send)  # the two loops share the stream
                await agent_loop("a", context, AgentLoopConfig(provider=provider), channel)
                await agent_loop("b", context, AgentLoopConfig(provider=provider), channel)
    send.close()
    warned = [r for r in caplog.records if "still open" in r.getMessage()]
    assert len(warned) == 1


@pytest.mark.usefixtures("quick_warnings")
def test_a_waiting_unclosed_check_keeps_no_stream_alive() -> None:
    pending = _watcher.pending()
    send, receive = anyio.create_memory_object_stream[AgentEvent](1)
    counter = SeqCounter()
    sink.watch_unclosed(send, counter)
    sink.watch_unclosed(send, counter)  # a second run's check while one waits: not added
    assert _watcher.pending() == pending + 1
    ref = weakref.ref(send)
    del send, receive, counter
    gc.collect()
    assert ref() is None  # collected before its deadline: the watcher held it weakly


def test_the_unclosed_checks_share_one_thread_that_ends_when_none_waits() -> None:
    """Checks of many runs wait on one watcher thread (not one per run, no task on any
    event loop); it ends once none waits, and the next check starts it again. In a fresh
    process, so no other test's checks are waiting."""
    script = textwrap.dedent(
        """
        import threading, time
        import anyio
        import treadle.loop.sink as sink
        from treadle.loop import _watcher
        from treadle.loop.channel import SeqCounter

        sink.STALL_WARNING_S = 0.1

        def watchers():
            return sum(t.name == _watcher.THREAD_NAME for t in threading.enumerate())

        def idle(timeout=5.0):
            end = time.monotonic() + timeout
            while watchers() and time.monotonic() < end:
                time.sleep(0.01)
            return watchers() == 0

        assert watchers() == 0
        streams = [anyio.create_memory_object_stream(1) for _ in range(50)]
        counters = [SeqCounter() for _ in streams]
        for (send, _), counter in zip(streams, counters):
            sink.watch_unclosed(send, counter)
        print(watchers(), _watcher.pending())
        assert idle(), "the watcher thread did not end"
        print(watchers(), _watcher.pending())
        sink.watch_unclosed(streams[0][0], counters[0])  # expired: may be checked again
        print(watchers())
        assert idle(), "the restarted watcher thread did not end"
        print(watchers())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "50", "0", "0", "1", "0"]


@pytest.mark.anyio
@pytest.mark.usefixtures("quick_warnings")
async def test_a_long_run_is_not_taken_for_an_unclosed_stream(
    caplog: pytest.LogCaptureFixture,
) -> None:
    send, receive = anyio.create_memory_object_stream[AgentEvent](100)
    quick = AgentLoopConfig(provider=ScriptedProvider("one"))
    slow = AgentLoopConfig(provider=ScriptedProvider("t w o", chunks=5, delay=0.15))

    async def reader() -> None:
        async with receive:
            async for _ in receive:
                pass

    with caplog.at_level(logging.WARNING, logger="treadle.loop"):
        async with anyio.create_task_group() as tg:
            tg.start_soon(reader)
            async with send:
                context = AgentContext()
                channel = EventChannel(send)  # the two loops share the stream
                await agent_loop("a", context, quick, channel)
                await agent_loop("b", context, slow, channel)  # longer than the check's delay
        await anyio.sleep(0.4)
    assert not [r for r in caplog.records if "still open" in r.getMessage()]


def test_the_simulations_trio_backend_without_trio_says_how_to_get_it() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["trio"] = None  # as if not installed
        from treadle.errors import MissingExtra
        from treadle.simulation._clock import trio_clock
        try:
            trio_clock()
        except MissingExtra as exc:
            assert "pip install 'treadle[trio]'" in str(exc), str(exc)
            assert "pip install -e '.[trio]'" in str(exc), str(exc)
            print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.strip() == "ok", done.stderr
