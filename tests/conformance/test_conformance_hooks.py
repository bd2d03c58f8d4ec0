"""docs/contract.md §3: hooks, input filters, steering and follow-ups."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest
from harness import Recorded, call, calls_message, check, results_of, run_recorded

from treadle import (
    AgentContext,
    AgentLoopConfig,
    Allow,
    Ask,
    AssistantMessage,
    Deny,
    Hooks,
    ModelRequest,
    ProviderError,
    RunEnding,
    RunHandle,
    TextContent,
    ToolCall,
    ToolResult,
    UserMessage,
    agent_loop,
    tool,
)
from treadle.loop import InputFilter, Pass, Reject, ToolExecution, Warn
from treadle.testing import ScriptedProvider
from treadle.types import (
    AgentEnd,
    AgentStart,
    InputRejected,
    MessageEnd,
    ToolExecutionEnd,
    ToolExecutionStart,
    TurnEnd,
    TurnStart,
    TurnTrigger,
)

pytestmark = pytest.mark.anyio


def make_add(log: list[Any]) -> Any:
    @tool
    async def add(a: int, b: int) -> int:
        log.append((a, b))
        return a + b

    return add


async def run(
    script: list[Any], tools: list[Any] = (), prompts: list[Any] | None = None, **config: Any
) -> tuple[Recorded, ScriptedProvider]:
    provider = ScriptedProvider(script)
    context = AgentContext(tools=list(tools))
    rec = await run_recorded(
        prompts or ["go"], context, AgentLoopConfig(provider=provider, **config)
    )
    check(rec, requests=provider.requests)
    return rec, provider


class Recording(Hooks):
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def before_loop(self, run: RunHandle) -> bool:
        self.calls.append("before_loop")
        return True

    async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
        self.calls.append(f"after_loop:{ending.reason}:{len(ending.new_messages)}")

    async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
        self.calls.append(f"before_turn:{turn_index}")
        return True

    async def after_turn(self, run: RunHandle, event: Any) -> None:
        self.calls.append(f"after_turn:{event.turn_index}")

    async def before_model_request(self, run: RunHandle, request: Any) -> Any:
        self.calls.append("before_model_request")
        return request


async def test_hook_call_order() -> None:
    hooks = Recording()
    await run([calls_message(call("c1", "add", a=1, b=1)), "two"], [make_add([])], hooks=[hooks])
    assert hooks.calls == [
        "before_loop",
        "before_turn:0",
        "before_model_request",
        "after_turn:0",
        "before_turn:1",
        "before_model_request",
        "after_turn:1",
        "after_loop:completed:4",
    ]


async def test_after_turn_gets_its_turn_end_without_an_event_stream() -> None:
    """With ``events=None`` no turn_end is sent, yet ``after_turn`` still gets a whole one."""
    seen: list[Any] = []

    class After(Hooks):
        async def after_turn(self, run: RunHandle, event: Any) -> None:
            seen.append(event)

    provider = ScriptedProvider([calls_message(call("c1", "add", a=1, b=2)), "three"])
    config = AgentLoopConfig(provider=provider, hooks=[After()])
    await agent_loop(["go"], AgentContext(tools=[make_add([])]), config)
    assert [type(e) for e in seen] == [TurnEnd, TurnEnd]
    assert [e.turn_index for e in seen] == [0, 1]
    assert seen[0].message.tool_calls[0].id == "c1"
    assert [r.tool_call_id for r in seen[0].tool_results] == ["c1"]
    assert seen[1].message.text == "three" and seen[1].tool_results == []


async def test_the_turn_s_request_has_every_field_and_validates() -> None:
    """The loop builds a turn's request without validation: it must still be whole."""
    seen: list[ModelRequest] = []

    class Look(Hooks):
        async def before_model_request(self, run: RunHandle, request: ModelRequest) -> None:
            seen.append(request)

    config = AgentLoopConfig(
        provider=ScriptedProvider(["hi"]),
        hooks=[Look()],
        model_settings={"stop": "END", "temperature": 0.5},
    )
    await agent_loop(["go"], AgentContext(system_prompt="be brief"), config)
    (request,) = seen
    assert set(request.__dict__) == set(ModelRequest.model_fields) == request.model_fields_set
    assert ModelRequest.model_validate(request.model_dump()) == request
    assert (request.system_prompt, request.stop, request.temperature) == ("be brief", ["END"], 0.5)


async def test_before_loop_veto() -> None:
    class Veto(Hooks):
        async def before_loop(self, run: RunHandle) -> bool:
            return False

    after = Recording()
    rec, provider = await run(["never"], hooks=[Veto(), after])
    assert [e.type for e in rec.events] == ["agent_end"]
    assert not rec.of_type(AgentStart)
    assert rec.end.reason == "vetoed" and rec.end.messages == []
    assert rec.returned == [] and rec.after == []
    assert provider.requests == []
    assert "before_loop" not in after.calls, "hooks after the vetoing one are not asked"


async def test_before_turn_veto() -> None:
    class VetoSecondTurn(Hooks):
        async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
            return turn_index < 1

    log: list[Any] = []
    rec, provider = await run(
        [calls_message(call("c1", "add", a=1, b=2)), "never"],
        [make_add(log)],
        hooks=[VetoSecondTurn()],
    )
    assert rec.end.reason == "vetoed"
    assert [e.turn_index for e in rec.of_type(TurnStart)] == [0]
    assert len(provider.requests) == 1
    assert log == [(1, 2)]


async def test_before_turn_veto_first_turn() -> None:
    class VetoAll(Hooks):
        async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
            return False

    rec, provider = await run(["never"], hooks=[VetoAll()])
    assert rec.types() == ["agent_start", "agent_end"]
    assert rec.end.reason == "vetoed"
    assert provider.requests == []


async def test_before_tool_call_deny_allow_and_ask() -> None:
    log: list[Any] = []

    class Gate(Hooks):
        async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Any:
            if call.id == "deny":
                return Deny("not allowed here")
            if call.id == "rewrite":
                return Allow(arguments={"a": 10, "b": 20})
            if call.id.startswith("ask"):
                return Ask("may I?")
            return None

    asked: list[tuple[str, str | None]] = []

    async def approve(run: RunHandle, call: ToolCall, ask: Ask) -> Any:
        asked.append((call.id, ask.prompt))
        return {"ask-yes": True, "ask-no": False}.get(call.id, Deny("handler says no"))

    msg = calls_message(
        call("deny", "add", a=1, b=1),
        call("rewrite", "add", a=1, b=1),
        call("ask-yes", "add", a=2, b=2),
        call("ask-no", "add", a=3, b=3),
        call("ask-deny", "add", a=4, b=4),
        call("plain", "add", a=5, b=5),
    )
    rec, _ = await run(
        [msg, "ok"],
        [make_add(log)],
        hooks=[Gate()],
        approval_handler=approve,
        tool_execution=ToolExecution.sequential(),
    )
    results = results_of(rec.after)
    assert results["deny"].is_error and results["deny"].text == "not allowed here"
    assert results["rewrite"].text == "30" and not results["rewrite"].is_error
    assert results["ask-yes"].text == "4"
    assert results["ask-no"].is_error
    assert results["ask-deny"].is_error and results["ask-deny"].text == "handler says no"
    assert results["plain"].text == "10"
    assert log == [(10, 20), (2, 2), (5, 5)], "denied calls never run"
    assert sorted(asked) == [("ask-deny", "may I?"), ("ask-no", "may I?"), ("ask-yes", "may I?")]
    # Denied calls still get their start and end.
    started = [e.tool_call_id for e in rec.of_type(ToolExecutionStart)]
    assert started == ["deny", "rewrite", "ask-yes", "ask-no", "ask-deny", "plain"]
    rewrite_start = next(e for e in rec.of_type(ToolExecutionStart) if e.tool_call_id == "rewrite")
    assert rewrite_start.args == {"a": 10, "b": 20}


async def test_after_tool_call_replaces_result() -> None:
    class Redact(Hooks):
        async def after_tool_call(self, run: RunHandle, call: ToolCall, result: ToolResult) -> Any:
            if call.id == "c1":
                return ToolResult.of(f"redacted ({result.text} chars hidden)", details={"r": 1})
            return None

    rec, provider = await run(
        [calls_message(call("c1", "add", a=1, b=2), call("c2", "add", a=3, b=4)), "ok"],
        [make_add([])],
        hooks=[Redact()],
    )
    results = results_of(rec.after)
    assert results["c1"].text == "redacted (3 chars hidden)"
    assert results["c1"].details == {"r": 1}
    assert results["c2"].text == "7"
    end = next(e for e in rec.of_type(ToolExecutionEnd) if e.tool_call_id == "c1")
    assert end.result.text == "redacted (3 chars hidden)"
    assert results_of(provider.requests[1].messages)["c1"].text == "redacted (3 chars hidden)"


async def test_before_model_request_edits_the_request() -> None:
    seen: list[ModelRequest] = []

    class Edit(Hooks):
        async def before_model_request(self, run: RunHandle, request: ModelRequest) -> ModelRequest:
            seen.append(request)
            return request.model_copy(
                update={"system_prompt": f"{request.system_prompt} [edited]", "tools": []}
            )

    provider = ScriptedProvider([ProviderError("server", "hiccup"), "fine"])
    from treadle.loop import RetryPolicy

    context = AgentContext(system_prompt="Base.", tools=[make_add([])])
    config = AgentLoopConfig(
        provider=provider, hooks=[Edit()], retry=RetryPolicy(initial_delay_s=0.001, jitter=0)
    )
    rec = await run_recorded(["go"], context, config)
    check(rec, requests=provider.requests)
    assert len(provider.requests) == 2
    assert len(seen) == 1, "before_model_request runs once per turn, not per retry"
    assert seen[0].system_prompt == "Base." and seen[0].tools
    for request in provider.requests:
        assert request.system_prompt == "Base. [edited]"
        assert request.tools == []
    assert context.system_prompt == "Base.", "the edit does not leak into the context"


async def test_on_error_for_error_turns_only() -> None:
    errors: list[AssistantMessage] = []

    class OnError(Hooks):
        async def on_error(self, run: RunHandle, message: AssistantMessage) -> None:
            errors.append(message)

    rec, _ = await run([ProviderError("auth", "bad key", status_code=401)], hooks=[OnError()])
    assert rec.end.reason == "error"
    assert len(errors) == 1
    assert errors[0].stop_reason == "error" and errors[0].error is not None
    assert errors[0] == rec.after[-1]

    errors.clear()
    rec, _ = await run(["fine"], hooks=[OnError()])
    assert errors == []


HOOK_SITES = [
    "before_loop",
    "before_turn",
    "after_turn",
    "before_model_request",
    "before_tool_call",
    "after_tool_call",
    "on_error",
    "input_filter",
    "steering",
    "transform_context",
    "system_prompt",
]


@pytest.mark.parametrize("where", HOOK_SITES)
@pytest.mark.parametrize("strategy", ["parallel", "sequential"])
async def test_hook_that_raises_ends_with_error(where: str, strategy: str) -> None:
    class Broken(Hooks):
        async def before_loop(self, run: RunHandle) -> bool:
            if where == "before_loop":
                raise RuntimeError("hook bug")
            return True

        async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
            if where == "before_turn":
                raise RuntimeError("hook bug")
            return True

        async def after_turn(self, run: RunHandle, event: Any) -> None:
            if where == "after_turn":
                raise RuntimeError("hook bug")

        async def before_model_request(self, run: RunHandle, request: Any) -> Any:
            if where == "before_model_request":
                raise RuntimeError("hook bug")
            return request

        async def before_tool_call(self, run: RunHandle, call: Any) -> Any:
            if where == "before_tool_call" and call.id == "c2":
                raise RuntimeError("hook bug")
            return None

        async def after_tool_call(self, run: RunHandle, call: Any, result: Any) -> Any:
            if where == "after_tool_call" and call.id == "c2":
                raise RuntimeError("hook bug")
            return None

        async def on_error(self, run: RunHandle, message: Any) -> None:
            if where == "on_error":
                raise RuntimeError("hook bug")

    class BrokenFilter(InputFilter):
        def filter(self, text: str) -> Any:
            raise RuntimeError("hook bug")

    def broken(*args: Any) -> Any:
        raise RuntimeError("hook bug")

    config: dict[str, Any] = {"hooks": [Broken()], "tool_execution": ToolExecution(strategy)}  # type: ignore[arg-type]
    if where == "input_filter":
        config["input_filters"] = [BrokenFilter()]
    if where == "steering":
        config["get_steering_messages"] = broken
    if where == "transform_context":
        config["transform_context"] = broken
    first: Any = calls_message(call("c1", "add", a=1, b=1), call("c2", "add", a=2, b=2))
    if where == "on_error":
        first = ProviderError("auth", "no")
    provider = ScriptedProvider([first, "second", "third"])
    context = AgentContext(tools=[make_add([])])
    if where == "system_prompt":
        context.system_prompt = broken
    # The call never raises: the run ends with reason=error and exactly one agent_end.
    with anyio.fail_after(10):
        rec = await run_recorded(["go"], context, AgentLoopConfig(provider=provider, **config))
    check(rec, requests=provider.requests)
    end = rec.end
    assert end.reason == "error"
    assert end.error is not None and "hook bug" in end.error.message
    assert rec.of_type(AgentStart), "agent_start is only missing after a veto"


async def test_after_loop_and_after_turn_observe() -> None:
    hooks = Recording()
    await run([ProviderError("auth", "no")], hooks=[hooks])
    assert hooks.calls[-1] == "after_loop:error:2"
    assert "after_turn:0" in hooks.calls


# ---------------------------------------------------------------- input filters


class Words(InputFilter):
    def __init__(self, verdicts: dict[str, Any]) -> None:
        self.verdicts = verdicts
        self.seen: list[str] = []

    def filter(self, text: str) -> Any:
        self.seen.append(text)
        for word, verdict in self.verdicts.items():
            if word in text:
                return verdict
        return Pass()


class AsyncWarn(InputFilter):
    async def filter(self, text: str) -> Any:
        await anyio.lowlevel.checkpoint()
        return Warn("w2")


async def test_input_filter_reject() -> None:
    first = Words({"secret": Warn("w1")})
    rejecting = Words({"secret": Reject("no secrets")})
    later = Words({"secret": Reject("later")})
    rec, provider = await run(
        ["never"], prompts=["my secret is 42", "and more"], input_filters=[first, rejecting, later]
    )
    assert rec.types() == ["agent_start", "input_rejected", "agent_end"]
    (rejected,) = rec.of_type(InputRejected)
    assert rejected.reason == "no secrets", "the first Reject wins"
    assert rec.end.reason == "rejected" and rec.end.messages == []
    assert rec.after == [] and provider.requests == []
    assert rejecting.seen == ["my secret is 42\nand more"], "filters see the joined prompt text"
    assert later.seen == []


async def test_input_filter_warnings_appended_as_one_block() -> None:
    rec, provider = await run(
        ["answer"],
        prompts=["first", UserMessage.of("second")],
        input_filters=[Words({"first": Warn("w1")}), Words({}), AsyncWarn()],
    )
    prompts = [m for m in rec.after if isinstance(m, UserMessage)]
    assert [m.content for m in prompts] == [
        [TextContent(text="first")],
        [TextContent(text="second"), TextContent(text="[Warning: w1]\n[Warning: w2]")],
    ]
    # Appended before the pair was reported and before the model saw it.
    user_ends = [e.message for e in rec.of_type(MessageEnd) if e.message.role == "user"]
    assert user_ends[-1].content[-1].text == "[Warning: w1]\n[Warning: w2]"
    assert provider.requests[0].messages[1].content[-1].text == "[Warning: w1]\n[Warning: w2]"
    assert rec.end.reason == "completed"


async def test_steering_and_follow_ups() -> None:
    steering: list[list[Any]] = [[], [UserMessage.of("steer: use b=5")]]
    follow_ups: list[list[Any]] = [["follow up please"]]
    steer_polls: list[int] = []

    def get_steering() -> list[Any]:
        steer_polls.append(1)
        return steering.pop(0) if steering else []

    async def get_follow_ups() -> list[Any]:
        return follow_ups.pop(0) if follow_ups else []

    filt = Words({})
    log: list[Any] = []
    script = [
        calls_message(call("c1", "add", a=1, b=1)),
        "after steering",
        "after follow-up",
    ]
    rec, provider = await run(
        script,
        [make_add(log)],
        get_steering_messages=get_steering,
        get_follow_up_messages=get_follow_ups,
        input_filters=[filt],
    )
    assert rec.end.reason == "completed", rec.end.error
    roles_texts = [(m.role, getattr(m, "text", "")) for m in rec.after]
    assert roles_texts == [
        ("user", "go"),
        ("assistant", ""),
        ("tool_result", "2"),
        ("user", "steer: use b=5"),
        ("assistant", "after steering"),
        ("user", "follow up please"),
        ("assistant", "after follow-up"),
    ]
    triggers = [(e.turn_index, e.trigger) for e in rec.of_type(TurnStart)]
    assert triggers == [
        (0, TurnTrigger.USER),
        (1, TurnTrigger.CONTINUATION),
        (2, TurnTrigger.USER),
    ]
    # Steering is injected inside the turn, as a pair, before the model call of that turn.
    turn1 = _turn_slice(rec, 1)
    assert [e.type for e in turn1[:3]] == ["turn_start", "message_start", "message_end"]
    assert turn1[2].message.text == "steer: use b=5"
    assert provider.requests[1].messages[-1].text == "steer: use b=5"
    assert provider.requests[2].messages[-1].text == "follow up please"
    # Filters see steering and follow-ups too.
    assert "steer: use b=5" in filt.seen and "follow up please" in filt.seen
    assert len(steer_polls) >= 3


async def test_rejected_steering_ends_the_run() -> None:
    steering: list[list[Any]] = [[], ["forbidden words"]]

    def get_steering() -> list[Any]:
        return steering.pop(0) if steering else []

    rec, provider = await run(
        [calls_message(call("c1", "add", a=1, b=1)), "never"],
        [make_add([])],
        get_steering_messages=get_steering,
        input_filters=[Words({"forbidden": Reject("nope")})],
    )
    assert rec.types()[-2:] == ["input_rejected", "agent_end"]
    assert rec.end.reason == "rejected"
    assert len(provider.requests) == 1
    assert all(getattr(m, "text", "") != "forbidden words" for m in rec.after)


def _turn_slice(rec: Recorded, index: int) -> list[Any]:
    start = next(
        i for i, e in enumerate(rec.events) if isinstance(e, TurnStart) and e.turn_index == index
    )
    end = next(
        i for i, e in enumerate(rec.events) if isinstance(e, TurnEnd) and e.turn_index == index
    )
    return rec.events[start : end + 1]


async def test_agent_end_last_event_and_after_loop_after_it() -> None:
    order: list[str] = []

    class Watch(Hooks):
        async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
            order.append(f"after_loop:{len(events_seen)}")

    events_seen: list[Any] = []

    def on_event(rec: Recorded, e: Any) -> None:
        events_seen.append(e)

    provider = ScriptedProvider(["hi"])
    send_ctx = AgentContext()
    rec = await run_recorded(
        ["go"],
        send_ctx,
        AgentLoopConfig(provider=provider, hooks=[Watch()]),
        on_event=on_event,
        buffer=0,
    )
    check(rec)
    assert isinstance(rec.events[-1], AgentEnd)
    assert order and order[0] != "after_loop:0"


async def test_pending_steering_follows_the_prompts_in_the_first_turn() -> None:
    steering: list[list[Any]] = [[UserMessage.of("also: be quick")]]

    def get_steering() -> list[Any]:
        return steering.pop(0) if steering else []

    rec, provider = await run(["ok"], prompts=["p1", "p2"], get_steering_messages=get_steering)
    turn0 = _turn_slice(rec, 0)
    pairs = [(e.type, e.message.text) for e in turn0[1:7]]
    assert pairs == [
        ("message_start", "p1"),
        ("message_end", "p1"),
        ("message_start", "p2"),
        ("message_end", "p2"),
        ("message_start", "also: be quick"),
        ("message_end", "also: be quick"),
    ]
    assert [m.text for m in provider.requests[0].messages] == ["p1", "p2", "also: be quick"]


async def test_steering_in_next_tool_mode_skips_the_rest_of_the_batch() -> None:
    delivered: list[int] = []
    log: list[Any] = []

    def get_steering() -> list[Any]:
        # Nothing before the tools run; one message once the first tool has finished.
        if len(log) == 1 and not delivered:
            delivered.append(1)
            return [UserMessage.of("stop, do this instead")]
        return []

    msg = calls_message(
        call("c1", "add", a=1, b=1), call("c2", "add", a=2, b=2), call("c3", "add", a=3, b=3)
    )
    rec, provider = await run(
        [msg, "changed course"],
        [make_add(log)],
        get_steering_messages=get_steering,
        steering_mode="next_tool",
        tool_execution=ToolExecution.sequential(),
    )
    assert log == [(1, 1)], "the calls after the steering never run"
    results = results_of(rec.after)
    assert results["c1"].text == "2"
    for cid in ("c2", "c3"):
        assert results[cid].text == "Skipped: a user message arrived"
    started = [e.tool_call_id for e in rec.of_type(ToolExecutionStart)]
    assert started == ["c1", "c2", "c3"], "skipped calls still get start and end"
    roles = [m.role for m in rec.after]
    assert roles == [
        "user",
        "assistant",
        "tool_result",
        "tool_result",
        "tool_result",
        "user",
        "assistant",
    ]
    assert rec.after[-2].text == "stop, do this instead"  # type: ignore[union-attr]
    assert provider.requests[1].messages[-1].text == "stop, do this instead"
    assert rec.end.reason == "completed"


async def test_hook_raising_in_approval_handler_ends_with_error() -> None:
    class AskAll(Hooks):
        async def before_tool_call(self, run: RunHandle, call: ToolCall) -> Any:
            return Ask()

    async def handler(run: RunHandle, call: ToolCall, ask: Ask) -> Any:
        raise RuntimeError("handler bug")

    rec, _ = await run(
        [calls_message(call("c1", "add", a=1, b=1)), "never"],
        [make_add([])],
        hooks=[AskAll()],
        approval_handler=handler,
    )
    assert rec.end.reason == "error"
    assert rec.end.error is not None and "handler bug" in rec.end.error.message


async def test_transform_and_convert_run_before_the_request_hook() -> None:
    order: list[str] = []

    def transform(messages: list[Any]) -> list[Any]:
        order.append("transform")
        return messages[-1:]  # keep only the newest message

    async def convert(messages: list[Any]) -> list[Any]:
        order.append("convert")
        return [*messages, UserMessage.of("(converted)")]

    class Look(Hooks):
        async def before_model_request(self, run: RunHandle, request: ModelRequest) -> ModelRequest:
            order.append("before_model_request")
            assert [m.text for m in request.messages] == ["new", "(converted)"]
            return request

    provider = ScriptedProvider(["ok"])
    context = AgentContext(messages=[UserMessage.of("old"), AssistantMessage(content="old a")])
    config = AgentLoopConfig(
        provider=provider, transform_context=transform, convert_to_llm=convert, hooks=[Look()]
    )
    rec = await run_recorded(["new"], context, config)
    check(rec, requests=provider.requests)
    assert order == ["transform", "convert", "before_model_request"]
    assert [m.text for m in provider.requests[0].messages] == ["new", "(converted)"]
    assert [m.role for m in context.messages] == ["user", "assistant", "user", "assistant"]


async def test_request_is_repaired_before_it_reaches_the_provider() -> None:
    from treadle import ToolResultMessage
    from treadle.context import validate_transcript

    broken = [
        UserMessage.of("earlier"),
        AssistantMessage(content=[call("X", "add", a=1, b=1)], stop_reason="tool_use"),
        ToolResultMessage(tool_call_id="Y", tool_name="add", content="orphan"),
        UserMessage.of("later"),
    ]
    provider = ScriptedProvider(["fine"])
    context = AgentContext(messages=list(broken), tools=[make_add([])])
    rec = await run_recorded(["go"], context, AgentLoopConfig(provider=provider))
    sent = provider.requests[0].messages
    assert validate_transcript(sent) == []
    answered = results_of(sent)
    assert set(answered) == {"X"} and answered["X"].is_error
    assert rec.end.reason == "completed"
    assert context.messages[: len(broken)] == broken, "the stored history is left as it was"
