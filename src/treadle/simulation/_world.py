"""The pieces a scenario's moves turn into: tools, sub-agents, providers, hooks, filters."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import anyio.lowlevel

from ..context import repair_transcript
from ..loop import (
    Allow,
    Ask,
    Deny,
    Hooks,
    InputFilter,
    Pass,
    Reject,
    RunEnding,
    RunHandle,
    Warn,
)
from ..providers.base import ModelRequest, ProviderError
from ..tools import ApprovalRequired, ToolContext, ToolResult, tool
from ..types import (
    AgentMessage,
    AssistantMessage,
    Citation,
    ExtensionMessage,
    FileContent,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    TurnEnd,
    UserMessage,
)
from ._scenario import Move, Scenario

MID_RUN_EVENT = "sim.hook"
"""The name of the custom events the simulation's hooks send mid-run (``emit``)."""


class SimAbort(BaseException):
    """What a simulated tool raises for "a BaseException" (not an Exception)."""


class Unconvertible:
    """A tool's return value that is neither JSON nor printable."""

    def __str__(self) -> str:
        raise TypeError("this value cannot be shown")

    __repr__ = __str__


@dataclass
class Execution:
    """One time a simulated tool body started."""

    key: str
    tool: str
    idempotent: bool
    finished: bool = False
    """An async body got past its last wait: its outcome is decided."""
    approved: bool = False  # ctx.approved
    saved: Any = None  # ctx.saved
    asked: Any = None  # it raised ApprovalRequired with this saved state (no effects)


@dataclass
class Ledger:
    """What the simulation's own pieces saw: tool runs, hook calls, messages handed out."""

    executions: list[Execution] = field(default_factory=list)
    hooks: list[tuple[str, int, Any]] = field(default_factory=list)
    handed_out: list[tuple[Any, str]] = field(default_factory=list)
    call_index: int = 0
    aborts: int = 0
    judged: list[str] = field(default_factory=list)  # call ids a resumed run's hook judged
    gauge: Any = None

    def hold(self, key: str) -> None:
        """In a worker thread: wait for the virtual clock's turn (see ``ThreadGauge``)."""
        if self.gauge is not None:
            self.gauge.hold_if_worker(key)

    def hand_out(self, message: UserMessage) -> UserMessage:
        self.handed_out.append((message, message.model_dump_json()))
        return message


def _key(ctx: ToolContext[Any]) -> str:
    return ctx.tool_call_id if ctx.depth == 0 else f"{ctx.loop_id}/{ctx.tool_call_id}"


def make_tool(move: Move, ledger: Ledger) -> Any:
    """A FunctionTool behaving as the move says."""
    name, behaviour, delay = move["name"], move["behaviour"], float(move["delay"])
    idempotent = bool(move["idempotent"] or move["eager"])
    retries = int(move["retries"]) if idempotent else 0
    asks = int(move.get("asks") or 0)

    def began(ctx: ToolContext[Any]) -> Execution:
        """The run recorded; a question asked mid-call first, while ``asks`` are left."""
        execution = Execution(_key(ctx), name, idempotent, approved=ctx.approved, saved=ctx.saved)
        ledger.executions.append(execution)
        saved = ctx.saved if ctx.approved and isinstance(ctx.saved, dict) else {}
        step = int(saved.get("step", 0))
        if step < asks:
            execution.asked = {"step": step + 1, "key": execution.key}
            raise ApprovalRequired(f"{name}: go on? ({step + 1}/{asks})", execution.asked)
        return execution

    def outcome() -> Any:
        if behaviour == "raise":
            raise ValueError(f"{name} failed on purpose")
        if behaviour == "abort":
            ledger.aborts += 1
            raise SimAbort(f"{name} raised a BaseException")
        if behaviour == "huge":
            return "h" * 250_000
        if behaviour == "unconvertible":
            return Unconvertible()
        return f"{name} ok"

    if move["sync"]:

        def body_sync(x: int, ctx: ToolContext[Any]) -> Any:
            try:
                began(ctx)
                return outcome()
            finally:
                ledger.hold(_key(ctx))

        body: Callable[..., Any] = body_sync
    else:

        async def body_async(x: int, ctx: ToolContext[Any]) -> Any:
            execution = began(ctx)
            if behaviour == "progress":
                for i in range(2):
                    await ctx.update(f"{name} step {i}")
                    await anyio.sleep(delay)
            elif delay or behaviour == "slow":
                await anyio.sleep(delay if behaviour != "slow" else delay * 10 + 1.0)
            try:
                value = outcome()
            except BaseException:
                execution.finished = retries == 0  # else a retry may follow (and be cut)
                raise
            execution.finished = True
            return value

        body = body_async
    body.__name__ = name
    body.__doc__ = f"Simulated tool {name}."
    return tool(
        name=name,
        timeout=move["timeout"],
        sequential=bool(move["sequential"]),
        idempotent=idempotent,
        eager=bool(move["eager"]),
        retries=retries,
        requires_approval=bool(move.get("requires_approval")),
    )(body)


SOURCE = "https://sim.example/source"  # what a cited reply's text cites (``cite`` moves)


def assistant(
    calls: list[tuple[str, str, dict[str, Any]]],
    text: str | None,
    thinking: bool,
    cite: bool = False,
) -> AssistantMessage:
    content: list[Any] = []
    if thinking:
        content.append(ThinkingContent(thinking="thinking it over"))
    if text:
        source = Citation(kind="url_citation", url=SOURCE, start=0, end=len(text))
        content.append(TextContent(text=text, citations=[source] if cite else []))
    content.extend(ToolCall(id=cid, name=n, arguments=args) for cid, n, args in calls)
    return AssistantMessage(content=content, stop_reason="tool_use" if calls else "stop")


def reply_message(move: Move, subagents: set[str]) -> AssistantMessage:
    calls = []
    for i, (tname, x) in enumerate(move["calls"]):
        args = {"task": f"task {x}"} if tname in subagents else {"x": x}
        calls.append((f"r{move['index']}c{i}", tname, args))
    return assistant(calls, move["text"], bool(move["thinking"]), bool(move.get("cite")))


def make_subagent(move: Move, ledger: Ledger, retry: Any) -> Any:
    """``Agent.as_tool`` of a scripted child agent (optionally with a grandchild)."""
    from ..agent import Agent
    from ..testing.scripted import ScriptedProvider

    name = move["name"]

    @tool(name=f"{name}_work")
    async def child_tool(x: int, ctx: ToolContext[Any]) -> str:
        """A sub-agent's own tool."""
        ledger.executions.append(Execution(_key(ctx), f"{name}_work", False))
        await anyio.sleep(0.01)
        if move["fail"]:
            raise RuntimeError("the child's tool failed")
        return "child tool ok"

    tools: list[Any] = [child_tool]
    if move["nested"]:
        grand = Agent(
            ScriptedProvider(["grandchild done"] * 40, delay=move["delay"]),
            name=f"{name}_grand",
            retry=retry,
        )
        tools.append(grand.as_tool(description="A grandchild agent."))

    def reply(request: ModelRequest) -> AssistantMessage:
        turn = sum(1 for m in request.messages if m.role == "assistant")
        if turn + 1 < move["turns"]:
            calls: list[tuple[str, str, dict[str, Any]]] = [
                (f"{name}-t{turn}-c0", f"{name}_work", {"x": turn})
            ]
            if move["nested"]:
                calls.append((f"{name}-t{turn}-c1", f"{name}_grand", {"task": "dig"}))
            return assistant(calls, None, False)
        return assistant([], f"{name} finished", False)

    child = Agent(
        ScriptedProvider([reply] * 60, delay=move["delay"]),
        tools=tools,
        name=name,
        retry=retry,
    )
    sub_tool = child.as_tool(description=f"Sub-agent {name}.")
    if move.get("eager"):
        sub_tool.traits = replace(sub_tool.traits, eager=True)  # type: ignore[attr-defined]
    return sub_tool


class OverflowingProvider:
    """A provider in front of another that counts a request as a llama.cpp server whose
    tokenizer makes 1.6 times the loop's heuristic would, and refuses one over ``limit``
    with llama.cpp's error (the ``overflow`` move): the loop must learn from the refusal."""

    def __init__(self, inner: Any, limit: int) -> None:
        self.inner = inner
        self.limit = limit
        self.name = getattr(inner, "name", "scripted")

    def count(self, request: ModelRequest) -> int:
        from ..context.tokens import TokenCounter

        counter = TokenCounter(encoding=None)
        tokens = counter.text(request.system_prompt or "") + counter.messages(request.messages)
        return math.ceil(1.6 * tokens)

    async def stream(self, request: ModelRequest, cancel: Any = None) -> AsyncIterator[Any]:
        size = self.count(request)
        if size > self.limit:
            raise ProviderError(
                "context_overflow",
                f"request ({size} tokens) exceeds the available context size "
                f"({self.limit} tokens), try increasing it",
                status_code=400,
                provider=self.name,
            )
        async for event in self.inner.stream(request, cancel=cancel):
            yield event


class BreakingProvider:
    """A provider in front of another whose requests numbered in ``at`` stream up to their
    first complete tool call and then fail, overloaded (the ``fallback`` move): an eager
    call may have started, so a FallbackModel must not move on unless it allows it."""

    def __init__(self, inner: Any, at: list[int]) -> None:
        self.inner = inner
        self.at = set(at)
        self.count = 0
        self.name = getattr(inner, "name", "scripted")
        self.model = getattr(inner, "model", "")

    async def stream(self, request: ModelRequest, cancel: Any = None) -> AsyncIterator[Any]:
        number, self.count = self.count, self.count + 1
        events = self.inner.stream(request, cancel=cancel)
        try:
            async for event in events:
                yield event
                if number in self.at and event.type == "tool_call_end":
                    raise ProviderError("overloaded", "overloaded mid-answer", status_code=529)
        finally:
            await events.aclose()


def scripted_fault(kind: str) -> ProviderError:
    if kind == "429":
        return ProviderError("rate_limit", "slow down", status_code=429, retry_after=0.5)
    if kind == "5xx":
        return ProviderError("server", "internal error", status_code=500)
    if kind == "overloaded":
        return ProviderError("overloaded", "overloaded", status_code=529)
    return ProviderError("bad_request", "the request was refused", status_code=400)


def wire_fault(kind: str, message: AssistantMessage, fmt: str) -> Any:
    from ..testing.wire import Fail, Raw, Slow, StreamError, Truncate

    if kind == "429":
        return Fail(429, retry_after=0.5)
    if kind == "5xx":
        return Fail(503 if fmt == "openai" else 500)
    if kind == "disconnect":
        return Truncate(message, after=2, reset=True)
    if kind == "truncate":
        return Truncate(message, after=3, mid_event=True)
    if kind == "stream_error":
        return StreamError("a partial answer", after=2)
    if kind == "hang":
        return Slow(message, delay=10_000.0)
    body = (
        b'data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":'
        b'{"content":"Hel"}}]}\n\ndata: {"id":"x","choices":[{"index":0,"delta":{"cont\n\n'
        if fmt == "openai"
        else b'event: message_start\ndata: {"type":"message_start","message":{"id":"m",'
        b'"role":"assistant","content":[],"model":"m","usage":{"input_tokens":1,'
        b'"output_tokens":0}}}\n\nevent: content_block_delta\ndata: {"type":"content_bl\n\n'
    )
    return Raw(body, headers={"content-type": "text/event-stream"})


class SimFilter(InputFilter):
    def __init__(self, moves: list[Move]) -> None:
        self.moves = moves
        self.calls = 0

    def filter(self, text: str) -> Any:
        n, self.calls = self.calls, self.calls + 1
        for m in self.moves:
            if m["at"] == n:
                return Warn("careful") if m["action"] == "warn" else Reject("not allowed")
        return Pass()


def sim_files(move: Move | None) -> list[FileContent]:
    """The files a ``files`` move attaches to every prompt: one PDF of ``pages`` pages,
    ``size`` bytes of padding (the same bytes each time: stores keep it once)."""
    if move is None:
        return []
    pages = b"".join(b"<< /Type /Page >>\n" for _ in range(move["pages"]))
    raw = b"%PDF-1.4\n" + pages + b"%" + b"x" * move["size"] + b"\n%%EOF\n"
    return [FileContent.from_bytes(raw, "application/pdf", name="sim.pdf")]


def earlier_history(move: Move) -> list[AgentMessage]:
    """The history a ``history`` move starts the run with: ``exchanges`` questions and
    answers, the first with a tool round, and an extension message at ``note_at``."""
    messages: list[AgentMessage] = []
    for i in range(move["exchanges"]):
        messages.append(UserMessage.of(f"earlier question {i}"))
        if i == 0:
            call = ToolCall(id="h-c0", name="lookup", arguments={"q": i})
            messages.append(AssistantMessage(content=[call]))
            messages.append(
                ToolResultMessage(tool_call_id="h-c0", tool_name="lookup", content="found")
            )
        messages.append(AssistantMessage(content=f"earlier answer {i}"))
    note = ExtensionMessage(kind="sim_note", data={"at": move["note_at"]})
    messages.insert(min(move["note_at"], len(messages)), note)
    return messages


def _shape(messages: Any) -> list[tuple[Any, ...]]:
    """What a request carries of each message (a synthetic result gets its own timestamp)."""
    return [
        (
            m.role,
            getattr(m, "text", ""),  # (an extension message has none)
            getattr(m, "tool_call_id", ""),
            tuple(c.id for c in getattr(m, "tool_calls", ())),
        )
        for m in messages
    ]


class RequestCheck(Hooks):
    """INV-REQUEST, seen from the last hook: each turn's request carries the history as it
    stands, extension messages left out and repaired — whichever way the loop's request view
    got there (a short history afresh, a long one from what it kept)."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    async def before_model_request(self, run: RunHandle, request: Any) -> Any:
        if request.purpose != "turn":
            return None
        history = [m for m in run.context.messages if not isinstance(m, ExtensionMessage)]
        expected = _shape(repair_transcript(history))
        got = _shape(request.messages)
        if got != expected:
            self.problems.append(f"request of {len(got)} messages: {got} != {expected}")
        return None


class SimHooks(Hooks):
    """Every hook kind, logging each call into the ledger and acting as the moves say."""

    def __init__(self, scenario: Scenario, ledger: Ledger, subagents: set[str]) -> None:
        self.moves = scenario.of("hook")
        self.ledger = ledger
        self.subagents = subagents
        self.counts: dict[str, int] = {}

    def _action(self, kind: str) -> str | None:
        n = self.counts.get(kind, 0)
        self.counts[kind] = n + 1
        for m in self.moves:
            if m["kind"] == kind and m["at"] == n:
                return str(m["action"])
        return None

    def _log(self, kind: str, info: Any) -> None:
        self.ledger.hooks.append((kind, self.ledger.call_index, info))

    async def _emit_if(self, run: RunHandle, action: str | None, kind: str) -> None:
        """``emit``: a custom event sent mid-run (``run.emit``), on this run's stream."""
        if action == "emit":
            await run.emit(MID_RUN_EVENT, {"kind": kind})

    def _raise_if(self, action: str | None, kind: str) -> None:
        if action == "raise":
            raise RuntimeError(f"simulated {kind} hook failure")

    async def before_loop(self, run: RunHandle) -> bool:
        action = self._action("before_loop")
        self._log("before_loop", None)
        await anyio.lowlevel.checkpoint()
        self._raise_if(action, "before_loop")
        return action != "veto"

    async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
        action = self._action("after_loop")
        self._log("after_loop", ending.reason)
        self._raise_if(action, "after_loop")

    async def before_turn(self, run: RunHandle, turn_index: int) -> bool:
        action = self._action("before_turn")
        ok = action not in ("veto", "raise")
        self._log("before_turn", (turn_index, ok))
        await anyio.lowlevel.checkpoint()
        await self._emit_if(run, action, "before_turn")
        self._raise_if(action, "before_turn")
        return ok

    async def after_turn(self, run: RunHandle, event: Any) -> None:
        action = self._action("after_turn")
        # a turn_end is owed even when nobody hears of events: anything else logs None, which
        # pairs with no before_turn (INV-HOOK-PAIRS)
        self._log("after_turn", event.turn_index if isinstance(event, TurnEnd) else None)
        await self._emit_if(run, action, "after_turn")
        self._raise_if(action, "after_turn")

    async def before_model_request(self, run: RunHandle, request: Any) -> Any:
        action = self._action("before_model_request")
        self._log("before_model_request", None)
        await anyio.lowlevel.checkpoint()
        await self._emit_if(run, action, "before_model_request")
        self._raise_if(action, "before_model_request")
        return request

    async def before_tool_call(self, run: RunHandle, call: Any) -> Any:
        action = self._action("before_tool_call")
        self._log("before_tool_call", call.id)
        await anyio.lowlevel.checkpoint()
        await self._emit_if(run, action, "before_tool_call")
        self._raise_if(action, "before_tool_call")
        if action == "ask":
            return Ask("may I?")
        if action == "deny":
            return Deny("simulated denial")
        if action == "replace" and call.name not in self.subagents:
            return Allow(arguments={"x": 42})
        return None

    async def after_tool_call(self, run: RunHandle, call: Any, result: Any) -> Any:
        action = self._action("after_tool_call")
        self._log("after_tool_call", call.id)
        await self._emit_if(run, action, "after_tool_call")
        self._raise_if(action, "after_tool_call")
        if action == "replace":
            return ToolResult.of("replaced by a hook")
        return None

    async def before_compaction(self, run: RunHandle, estimate: int) -> bool:
        action = self._action("before_compaction")
        ok = action not in ("veto", "raise")
        self._log("before_compaction", ok)
        self._raise_if(action, "before_compaction")
        return ok

    async def after_compaction(self, run: RunHandle, stats: Any) -> None:
        action = self._action("after_compaction")
        self._log("after_compaction", None)
        self._raise_if(action, "after_compaction")

    async def on_error(self, run: RunHandle, message: Any) -> None:
        self._raise_if(self._action("on_error"), "on_error")

    async def on_message(self, run: RunHandle, message: Any) -> None:
        self._raise_if(self._action("on_message"), "on_message")

    async def before_end(self, run: RunHandle, ending: RunEnding) -> None:
        action = self._action("before_end")
        self._log("before_end", ending.reason)
        if action == "emit":
            await run.emit("sim", {"reason": ending.reason})
        self._raise_if(action, "before_end")

    def on_event(self, run: RunHandle, event: Any) -> None:
        self._raise_if(self._action("on_event"), "on_event")


class GateHook(Hooks):
    """The hook of a run resumed after a crash: logs each call it judges, and denies every
    one when the scenario says so (a re-run passes the hooks: INV-GATE)."""

    def __init__(self, ledger: Ledger, deny: bool) -> None:
        self.ledger = ledger
        self.deny = deny

    async def before_tool_call(self, run: Any, call: Any) -> Any:
        self.ledger.judged.append(call.id)
        return Deny("the resumed run's policy denies it") if self.deny else None


class QuietSimHooks(SimHooks):
    """:class:`SimHooks` without ``on_event``: with it, a run always has a listener."""

    on_event = Hooks.on_event


def approval_handler(kind: str) -> Any:
    if kind == "none":
        return None

    async def handler(run: Any, call: Any, ask: Any) -> Any:
        await anyio.sleep(0.01)
        if kind == "raise":
            raise RuntimeError("simulated approval handler failure")
        return kind == "allow"

    return handler


class GatedStore:
    """A session store whose writers' calls, made from worker threads, return in the virtual
    clock's turn (so a write never races the loop's own work)."""

    def __init__(self, store: Any, ledger: Ledger) -> None:
        self._store = store
        self._ledger = ledger

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def open_writer(self, session_id: str) -> Any:
        return _GatedWriter(self._store.open_writer(session_id), self._ledger)


class _GatedWriter:
    def __init__(self, writer: Any, ledger: Ledger) -> None:
        self._writer = writer
        self._ledger = ledger
        self._calls = 0

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._writer, name)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            self._calls += 1
            try:
                return value(*args, **kwargs)
            finally:
                self._ledger.hold(f"~store-{self._calls:06d}")

        return call

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._writer.close()
