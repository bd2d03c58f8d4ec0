"""Hooks are called for the methods they implement — in a subclass or set on the instance,
the same for every method; the methods a hook does not implement are skipped; a method
written for the shapes before the run handle is refused before the run starts."""

from __future__ import annotations

from typing import Any

import pytest

from treadle import (
    AgentContext,
    AgentLoopConfig,
    AssistantMessage,
    Hooks,
    RunEnding,
    RunHandle,
    ToolCall,
    agent_loop,
    tool,
)
from treadle.errors import ConfigurationError
from treadle.testing import ScriptedProvider

pytestmark = pytest.mark.anyio


async def test_subclass_and_instance_methods_are_called() -> None:
    seen: list[str] = []

    class OnMessage(Hooks):
        async def on_message(self, run: RunHandle, message: Any) -> None:
            seen.append(f"subclass:{message.role}")

    patched = Hooks()

    async def on_turn(run: RunHandle, event: Any) -> None:
        seen.append("instance:after_turn")

    patched.after_turn = on_turn  # type: ignore[method-assign]
    config = AgentLoopConfig(
        provider=ScriptedProvider(["hi"]), hooks=[OnMessage(), patched, Hooks()]
    )
    await agent_loop("hello", AgentContext(), config)
    assert seen == ["subclass:user", "subclass:assistant", "instance:after_turn"]


async def test_instance_assigned_before_end_and_on_event_are_called() -> None:
    """Before the dispatcher, ``before_end`` and ``on_event`` set on an instance were
    skipped silently (only methods of the class counted for them)."""
    seen: list[str] = []
    patched = Hooks()

    async def before_end(run: RunHandle, ending: RunEnding) -> None:
        seen.append(f"before_end:{ending.reason}")

    def on_event(run: RunHandle, event: Any) -> None:
        if event.type in ("agent_start", "agent_end"):
            seen.append(f"on_event:{event.type}")

    patched.before_end = before_end  # type: ignore[method-assign]
    patched.on_event = on_event  # type: ignore[method-assign]
    config = AgentLoopConfig(provider=ScriptedProvider(["hi"]), hooks=[patched])
    await agent_loop("hello", AgentContext(), config)
    assert seen == ["on_event:agent_start", "before_end:completed", "on_event:agent_end"]


async def test_every_method_counts_on_the_instance_as_in_a_subclass() -> None:
    """Each hook method, set on an instance, is called as the same method of a subclass
    is: the same calls, in the same order."""
    names = [
        "before_loop",
        "after_loop",
        "before_end",
        "before_turn",
        "after_turn",
        "on_message",
        "before_model_request",
        "before_tool_call",
        "after_tool_call",
        "on_event",
    ]

    def recorder(log: list[str], name: str) -> Any:
        if name == "on_event":

            def observe(run: RunHandle, event: Any) -> None:
                log.append(f"{name}:{event.type}")

            return observe

        async def method(run: RunHandle, *args: Any) -> Any:
            assert isinstance(run, RunHandle)
            log.append(name)
            if name in ("before_loop", "before_turn"):
                return True
            if name == "before_model_request":
                return args[0]
            return None

        return method

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    async def run_with(hook: Hooks) -> None:
        reply = AssistantMessage(content=[ToolCall(id="c1", name="ping", arguments={})])
        provider = ScriptedProvider([reply, "done"])
        config = AgentLoopConfig(provider=provider, hooks=[hook])
        await agent_loop("go", AgentContext(tools=[ping]), config)

    by_instance: list[str] = []
    instance = Hooks()
    for name in names:
        setattr(instance, name, recorder(by_instance, name))
    await run_with(instance)

    by_class: list[str] = []
    methods: dict[str, Any] = {}
    for name in names:
        fn = recorder(by_class, name)
        methods[name] = lambda self, *a, _fn=fn: _fn(*a)
    await run_with(type("Subclassed", (Hooks,), methods)())
    assert by_instance == by_class
    assert {entry.split(":")[0] for entry in by_instance} == set(names)


async def test_a_hook_of_the_old_shape_is_refused_before_the_run() -> None:
    class Old(Hooks):
        async def on_message(self, message: Any) -> None:  # type: ignore[override]
            pass

    config = AgentLoopConfig(provider=ScriptedProvider(["hi"]), hooks=[Old()])
    with pytest.raises(ConfigurationError, match=r"on_message.*\(run, message\)"):
        await agent_loop("hello", AgentContext(), config)


async def test_the_dispatch_follows_the_config_s_hooks() -> None:
    """Kept on the config, but made again for a copy with other hooks."""
    seen: list[str] = []

    class Named(Hooks):
        def __init__(self, name: str) -> None:
            self.name = name

        async def before_loop(self, run: RunHandle) -> bool:
            seen.append(self.name)
            return True

    config = AgentLoopConfig(provider=ScriptedProvider(["a", "b", "c"]), hooks=[Named("one")])
    await agent_loop("hi", AgentContext(), config)
    other = config.model_copy(update={"hooks": [Named("two")]})
    await agent_loop("hi", AgentContext(), other)
    config.hooks.append(Named("three"))
    await agent_loop("hi", AgentContext(), config)
    assert seen == ["one", "two", "one", "three"]
