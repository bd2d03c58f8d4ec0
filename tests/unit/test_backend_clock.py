"""The loop reads the clock of the backend running the current task.

Under trio's guest mode (``trio.lowlevel.start_guest_run``, the documented way to run trio
inside another event loop) an asyncio loop is running in the same thread; trio's clock is
not asyncio's, so a deadline computed from the wrong one fires at once (every model call
timed out). Two event loops in two threads each run their own runs at once."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import anyio
import trio
import trio.lowlevel

from treadle import AgentContext, AgentEvent, AgentLoopConfig, AgentMessage, agent_loop, tool
from treadle.loop import ExecutionLimits
from treadle.testing import ScriptedProvider, WireFake, serve
from treadle.types import AssistantMessage, ToolCall


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _call() -> AssistantMessage:
    return AssistantMessage(
        content=[ToolCall(id="c1", name="add", arguments={"a": 2, "b": 3})],
        stop_reason="tool_use",
    )


async def _scripted_run() -> tuple[list[AgentMessage], list[str]]:
    """A full run (a tool round, then an answer) with a short idle limit, events consumed."""
    provider = ScriptedProvider([_call(), "five it is"], chunks=4, delay=0.001)
    limits = ExecutionLimits(max_idle_s=30.0, max_call_duration_s=60.0)
    config = AgentLoopConfig(provider=provider, limits=limits)
    send, receive = anyio.create_memory_object_stream[AgentEvent](1000)
    async with send:
        result = await agent_loop("add 2 and 3", AgentContext(tools=[add]), config, send)
    async with receive:
        types: list[str] = [event.type async for event in receive]
    return result, types


async def _wire_run() -> list[AgentMessage]:
    """A full run through the OpenAI adapter over a real local socket."""
    fake = WireFake.openai([_call(), "five it is"], delay=0.001)
    async with serve(fake) as url:
        provider = fake.provider(client=None, base_url=f"{url}/v1")
        config = AgentLoopConfig(provider=provider, limits=ExecutionLimits(max_idle_s=30.0))
        try:
            return await agent_loop("add 2 and 3", AgentContext(tools=[add]), config)
        finally:
            await provider.aclose()


def _in_guest_mode(main: Any) -> Any:
    """Run ``main`` on trio in guest mode, hosted by an asyncio loop in this thread."""

    async def host() -> Any:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Any] = loop.create_future()
        trio.lowlevel.start_guest_run(
            main,
            run_sync_soon_threadsafe=loop.call_soon_threadsafe,
            done_callback=done.set_result,
            host_uses_signal_set_wakeup_fd=False,
        )
        outcome = await done
        return outcome.unwrap()

    return asyncio.run(host())


def _assert_finished(messages: list[AgentMessage]) -> None:
    last = messages[-1]
    assert isinstance(last, AssistantMessage)
    assert last.error is None, last.error
    assert last.text == "five it is"
    assert len(messages) == 4  # the prompt, the call, its result, the answer


def test_a_run_in_trio_guest_mode_inside_asyncio_finishes() -> None:
    result, types = _in_guest_mode(_scripted_run)
    _assert_finished(result)
    assert types[0] == "agent_start" and types[-1] == "agent_end"
    assert "tool_execution_end" in types


def test_a_wire_run_in_trio_guest_mode_inside_asyncio_finishes() -> None:
    _assert_finished(_in_guest_mode(_wire_run))


def test_event_loops_in_several_threads_run_at_once() -> None:
    """An asyncio loop, a trio loop and trio hosted by asyncio (guest mode), each in its own
    thread, each running runs while the others do; a barrier holds them until all three are
    inside their loops."""
    results: dict[str, list[list[AgentMessage]]] = {}
    failures: list[BaseException] = []
    ready = threading.Barrier(3, timeout=30)

    async def runs(name: str) -> None:
        await anyio.to_thread.run_sync(ready.wait)
        done = []
        for _ in range(3):
            done.append((await _scripted_run())[0])
            done.append(await _wire_run())
        results[name] = done

    def thread(name: str) -> None:
        try:
            if name == "guest":
                _in_guest_mode(lambda: runs(name))
            else:
                anyio.run(runs, name, backend=name)
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)

    threads = [
        threading.Thread(target=thread, args=(name,)) for name in ("asyncio", "trio", "guest")
    ]
    for each in threads:
        each.start()
    for each in threads:
        each.join(timeout=120)
    assert not failures, failures
    assert sorted(results) == ["asyncio", "guest", "trio"]
    for done in results.values():
        for messages in done:
            _assert_finished(messages)
