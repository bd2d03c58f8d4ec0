"""The world of one scenario while it runs: the loop calls, their streams and observers."""

from __future__ import annotations

import contextlib
import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import ObjectSendStream

from ..cancellation import CancellationToken
from ..loop import (
    AgentContext,
    AgentLoopConfig,
    ExecutionLimits,
    Hooks,
    RetryPolicy,
    ToolExecution,
    agent_loop,
    agent_loop_continue,
)
from ..streaming import EventLog
from ..types import AgentEvent, AgentMessage, MessageEnd, MessageUpdate, UserMessage
from ._invariants import (
    InvariantViolation,
)
from ._scenario import Move, Scenario
from ._world import (
    BreakingProvider,
    GatedStore,
    Ledger,
    OverflowingProvider,
    QuietSimHooks,
    RequestCheck,
    SimAbort,
    SimFilter,
    SimHooks,
    approval_handler,
    assistant,
    earlier_history,
    make_subagent,
    make_tool,
    reply_message,
    scripted_fault,
    sim_files,
    wire_fault,
)

#: Continuations after a suspended run (approvals given) before the scenario stops.
MAX_RESUMES = 3


class _Observer(Hooks):
    """The first hook: counts events (cancelling at a chosen one), snapshots a crash."""

    def __init__(self, sim: _Sim) -> None:
        self.sim = sim

    def on_event(self, run: Any, event: Any) -> None:
        self.sim.on_event(event)


@dataclass
class _Call:
    """One loop call: its stream's events, its subscribers' views."""

    events: list[AgentEvent] = field(default_factory=list)
    observed: list[AgentEvent] = field(default_factory=list)
    subscribers: list[tuple[str, list[AgentEvent], int | None, list[AgentEvent]]] = field(
        default_factory=list
    )
    progress: anyio.Event = field(default_factory=anyio.Event)
    done: bool = False
    looked: list[tuple[MessageUpdate, str]] = field(default_factory=list)  # update, its JSON then


class _Sim:
    def __init__(self, scenario: Scenario, backend: str, tmp: Path) -> None:
        self.sc = scenario
        self.backend = backend
        self.tmp = tmp
        self.ledger = Ledger()
        self.token: CancellationToken | None = None
        self.scope: anyio.CancelScope | None = None
        self.cancel_move = scenario.first("cancel")
        self.event_count = 0
        self.call: _Call = _Call()
        self.main_loop: str | None = None
        self.context: AgentContext | None = None
        self.request_check = RequestCheck()
        self.crash: dict[str, Any] | None = None
        consumer = scenario.first("consumer") or {}
        # nobody hears of events: no stream and no on_event observer (the quiet path)
        self.quiet = consumer.get("kind") == "none" and bool(consumer.get("quiet"))
        self.steer_polls = 0
        self.follow_polls = 0
        self.store: Any = None
        self.session_id: str | None = None
        self.first_call = True

    # ---- building ----

    def build(self) -> tuple[AgentContext, AgentLoopConfig, list[UserMessage]]:
        sc = self.sc
        retry_move = sc.first("retry")
        retry = RetryPolicy(
            max_retries=retry_move["max_retries"] if retry_move else 3,
            initial_delay_s=0.5,
            jitter=0.0,
        )
        subagent_moves = sc.of("subagent")
        subagents = {m["name"] for m in subagent_moves}
        tools: list[Any] = [make_tool(m, self.ledger) for m in sc.of("tool")]
        tools += [make_subagent(m, self.ledger, retry) for m in subagent_moves]
        self.provider = self.make_provider(subagents)
        if self.quiet:  # nobody hears of events: neither observer is installed
            hooks: list[Hooks] = [QuietSimHooks(sc, self.ledger, subagents)]
        else:
            hooks = [_Observer(self), SimHooks(sc, self.ledger, subagents)]
        hooks.append(self.request_check)  # last: it sees the request every hook left
        execution = sc.first("execution")
        tool_execution = ToolExecution()
        steering_mode = "after_batch"
        if execution is not None:
            steering_mode = execution["steering_mode"]
            if execution["mode"] == "sequential":
                tool_execution = ToolExecution.sequential()
            elif execution["mode"] == "batched":
                tool_execution = ToolExecution.batched(execution["n"])
            else:
                tool_execution = ToolExecution.parallel(execution["max_concurrency"])
        limit = sc.first("limit")
        limits = ExecutionLimits()
        if limit is not None:
            limits = ExecutionLimits(
                **{limit["kind"]: limit["value"]},
                on_limit=limit["on_limit"],
                max_idle_s=limit["max_idle_s"] or 300.0,
            )
        consumer = sc.first("consumer")
        approval = sc.first("approval")
        filters = sc.of("filter")
        config = AgentLoopConfig(
            provider=self.provider,
            hooks=hooks,
            input_filters=[SimFilter(filters)] if filters else [],
            tool_execution=tool_execution,
            steering_mode=steering_mode,
            limits=limits,
            retry=retry,
            slow_consumer=consumer["slow_consumer"] if consumer else "merge",
            coalesce_deltas=consumer.get("coalesce", True) if consumer else True,
            get_steering_messages=self.steering if sc.of("steer") else None,
            get_follow_up_messages=self.follow_ups if sc.of("follow_up") else None,
            approval_handler=approval_handler(approval["handler"]) if approval else None,
            compaction=self.compaction(),
        )
        context = AgentContext(system_prompt="You are simulated.", tools=tools, agent_id="sim")
        history = sc.first("history")
        if history is not None:
            context.messages = earlier_history(history)
        prompts_move = sc.first("prompts")
        count = prompts_move["count"] if prompts_move else 1
        attached = sim_files(sc.first("files"))
        prompts = [UserMessage.of(f"prompt {i}", files=attached) for i in range(count)]
        session = sc.first("session")
        if session is not None:
            self.open_session(session, context, config)
        return context, config, prompts

    def compaction(self) -> Any:
        move = self.sc.first("compaction")
        if move is None:
            return None
        # The heuristic estimate: the same numbers wherever tiktoken's files are or are not.
        return {"context_window": move["context_window"], "tokenizer": None}

    def make_provider(self, subagents: set[str]) -> Any:
        move = self.sc.first("provider") or {"kind": "scripted", "format": "openai", "delay": 0.0}
        replies = self.sc.of("reply")
        items: list[Any] = []
        if move["kind"] == "wire":
            from ..testing.wire import FakeTransport

            for r in replies:
                message = reply_message(r, subagents)
                if r["fault"]:
                    items.append(wire_fault(r["fault"], message, move["format"]))
                items.append(message)
            fake = FakeTransport(move["format"], items, default="All done.", delay=move["delay"])
            return self.overflowing(self.falling_back(fake.provider(), subagents))
        from ..testing.scripted import ScriptedProvider

        for r in replies:
            if r["fault"]:
                items.append(scripted_fault(r["fault"]))
            items.append(reply_message(r, subagents))
        return self.overflowing(
            self.falling_back(
                ScriptedProvider([*items, *(["All done."] * 60)], delay=move["delay"]), subagents
            )
        )

    def falling_back(self, primary: Any, subagents: set[str]) -> Any:
        """The ``fallback`` move: a FallbackModel whose backup answers each turn with that
        turn's scripted reply (its call ids its own), for whatever the primary's faults leave."""
        move = self.sc.first("fallback")
        if move is None:
            return primary
        from ..providers import FallbackModel
        from ..testing.scripted import ScriptedProvider

        replies = self.sc.of("reply")
        served = [0]

        def backup(request: Any) -> Any:
            turn = sum(1 for m in request.messages if m.role == "assistant")
            served[0] += 1
            if turn >= len(replies):
                return assistant([], "All done by the backup.", False)
            message = reply_message(replies[turn], subagents)
            for block in message.tool_calls:
                block.id = f"fb{served[0]}-{block.id}"
            return message

        spare = ScriptedProvider([backup] * 200, model="sim-backup")
        if move["break_at"]:
            primary = BreakingProvider(primary, move["break_at"])
        return FallbackModel(primary, spare, after_tool_call=move["after_tool_call"])

    def overflowing(self, provider: Any) -> Any:
        move = self.sc.first("overflow")
        return provider if move is None else OverflowingProvider(provider, move["limit"])

    def open_session(self, move: Move, context: AgentContext, config: AgentLoopConfig) -> None:
        from ..sessions import SessionRecorder

        self.store = self.make_store(move["store"], self.tmp / "store")
        recorder = SessionRecorder.open(GatedStore(self.store, self.ledger), context)
        self.recorder = recorder
        self.session_id = recorder.session_id
        config.hooks.insert(1, recorder)

    @staticmethod
    def make_store(kind: str, where: Path) -> Any:
        from ..sessions import JsonlStore, MemoryStore, SqliteStore

        if kind == "memory":
            return MemoryStore()
        if kind == "jsonl":
            return JsonlStore(where, fsync=False)
        where.mkdir(parents=True, exist_ok=True)
        return SqliteStore(where / "sessions.db", synchronous="NORMAL")

    # ---- polls the loop makes ----

    def steering(self) -> list[AgentMessage]:
        n, self.steer_polls = self.steer_polls, self.steer_polls + 1
        return [
            self.ledger.hand_out(UserMessage.of(m["text"]))
            for m in self.sc.of("steer")
            if m["at"] == n
        ]

    def follow_ups(self) -> list[AgentMessage]:
        n, self.follow_polls = self.follow_polls, self.follow_polls + 1
        return [
            self.ledger.hand_out(UserMessage.of(m["text"]))
            for m in self.sc.of("follow_up")
            if m["at"] == n
        ]

    # ---- observing ----

    def on_event(self, event: Any) -> None:
        self.call.observed.append(event)
        move = self.cancel_move
        if move is not None and self.first_call and "at_event" in move:
            if self.event_count == move["at_event"]:
                self.fire_cancel(move["how"])
        if move is not None and self.first_call and move.get("in_child"):
            if isinstance(event, MessageUpdate) and event.depth > 0:
                self.fire_cancel(move["how"])  # while a sub-agent streams (idempotent)
        self.event_count += 1
        session = self.sc.first("session")
        if (
            session is not None
            and session["crash_at"] is not None
            and self.crash is None
            and isinstance(event, MessageEnd)
            and event.depth == 0
        ):
            ends = sum(1 for e in self.call.observed if isinstance(e, MessageEnd) and e.depth == 0)
            if ends - 1 == session["crash_at"]:
                self.snapshot(session["store"])

    def fire_cancel(self, how: str) -> None:
        if how == "scope":
            if self.scope is not None:
                self.scope.cancel()
        elif self.token is not None:
            self.token.cancel("immediate" if how == "immediate" else "after_turn")

    def snapshot(self, kind: str) -> None:
        """What a process killed right now would leave in the store."""
        assert self.context is not None and self.session_id is not None
        reported = list(self.context.messages)
        crash: dict[str, Any] = {
            "reported": reported,
            "executions": len(self.ledger.executions),
            "kind": kind,
        }
        if kind == "memory":
            crash["messages"] = list(self.store.load(self.session_id, repair=False).messages)
        elif kind == "jsonl":
            # the files first: a record names only blobs written before it
            blobs = self.store.blob_directory
            crash["blobs"] = {
                path.relative_to(blobs): path.read_bytes()
                for path in (blobs.rglob("*") if blobs.exists() else ())
                if path.is_file()
            }
            crash["bytes"] = self.store.path(self.session_id).read_bytes()
        else:
            copy = self.tmp / "crash.db"
            src = sqlite3.connect(self.tmp / "store" / "sessions.db")
            dst = sqlite3.connect(copy)
            with dst:
                src.backup(dst)
            src.close()
            dst.close()
            crash["path"] = copy
        self.crash = crash

    # ---- one loop call ----

    async def one_call(
        self,
        prompts: Sequence[AgentMessage] | None,
        context: AgentContext,
        config: AgentLoopConfig,
    ) -> tuple[_Call, list[AgentMessage] | None, list[AgentMessage], BaseException | None]:
        call = _Call()
        self.call = call
        before = list(context.messages)
        consumer = self.sc.first("consumer") or {"kind": "fast", "buffer": 64, "delay": 0.0}
        kind = consumer["kind"]
        subscribers = self.sc.of("subscriber") if kind != "none" else []
        log = EventLog() if subscribers else None
        returned: list[AgentMessage] | None = None
        raised: BaseException | None = None
        token = CancellationToken()
        self.token = token

        async def consume(receive: Any) -> None:
            async with receive:
                async for event in receive:
                    call.events.append(event)
                    if consumer.get("look") and isinstance(event, MessageUpdate):
                        call.looked.append((event, event.delta.model_dump_json()))
                    progress, call.progress = call.progress, anyio.Event()
                    progress.set()
                    if log is not None:
                        try:
                            log.publish(event)
                        except ValueError as exc:
                            raise InvariantViolation(
                                "INV-SEQ", f"EventLog refused: {exc}"
                            ) from None
                    if kind == "slow":
                        await anyio.sleep(consumer["delay"])
            if log is not None:
                log.close()
            call.done = True
            call.progress.set()

        async def subscribe(n: int, move: Move) -> None:
            assert log is not None
            while len(call.events) < move["join_after"] and not call.done:
                await call.progress.wait()
            seen: list[AgentEvent] = []
            cursor: int | None = None
            limit = move["reconnect_after"]
            async with contextlib.aclosing(log.subscribe(None)) as stream:  # type: ignore[type-var]
                async for event in stream:
                    seen.append(event)
                    if limit is not None and len(seen) >= limit:
                        break  # the client goes away, and comes back below
                else:
                    call.subscribers.append((f"subscriber {n}", seen, None, seen))
                    return
            keep = max(0, len(seen) - move["back"])
            first = seen[:keep]
            cursor = first[-1].seq if first else None
            again: list[AgentEvent] = []
            async for event in log.subscribe(cursor):
                again.append(event)
            call.subscribers.append((f"subscriber {n}", first + again, cursor, again))

        async def cancel_later(at: float) -> None:
            await anyio.sleep(at)
            self.fire_cancel(self.cancel_move["how"] if self.cancel_move else "immediate")

        async with anyio.create_task_group() as tg:
            send: Any = None
            if kind != "none":
                buffer = consumer["buffer"]
                send, receive = anyio.create_memory_object_stream[AgentEvent](
                    math.inf if buffer is None else buffer
                )
                tg.start_soon(consume, receive)
                if self.sc.first("channel") is not None:
                    send = Forwarding(send)  # the user's own stream: every event awaited
                for n, move in enumerate(subscribers):
                    tg.start_soon(subscribe, n, move)
            cancel_move = self.cancel_move
            timer = anyio.CancelScope()
            if cancel_move is not None and self.first_call and "at_time" in cancel_move:
                at = float(cancel_move["at_time"])

                async def timed() -> None:
                    with timer:
                        await cancel_later(at)

                tg.start_soon(timed)
            with anyio.CancelScope() as scope:
                self.scope = scope
                try:
                    if prompts is None:
                        returned = await agent_loop_continue(context, config, send, token)
                    else:
                        returned = await agent_loop(prompts, context, config, send, token)
                except SimAbort as exc:
                    raised = exc
                except InvariantViolation:
                    raise
                except Exception as exc:  # the contract lets nothing else through
                    raise InvariantViolation(
                        "INV-NO-RAISE", f"the loop raised {type(exc).__name__}: {exc}"
                    ) from exc
                finally:
                    if send is not None:
                        await send.aclose()
            timer.cancel()
        self.scope = None
        return call, returned, before, raised


class Forwarding(ObjectSendStream[AgentEvent]):
    """A stream of the user's own: forwards each event to ``inner`` (the loop cannot look
    into its buffer, so it sends every event and awaits each send). Its ``send`` is
    anyio's memory stream's, which, cancelled as its reader takes the item, raises
    although it delivered: the loop must never cancel it (seed 16000927)."""

    def __init__(self, inner: ObjectSendStream[AgentEvent]) -> None:
        self.inner = inner

    async def send(self, item: AgentEvent) -> None:
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()
