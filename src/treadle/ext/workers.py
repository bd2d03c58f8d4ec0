"""Post-run workers and session-end callbacks.

Workers run after a run, before its ``agent_end`` (the core ``Hooks.before_end``): each gets
the run's new messages, usage, token counts and a provider to call, and may send events on
the run's stream. Session-end callbacks run after ``agent_end`` on every way out
(``Hooks.after_loop``).

::

    store = MemoryStore("memory.db")
    agent = Agent(model, hooks=[PostRunWorkers([CompressionWorker(store)]),
                                SessionEnd(lambda end: print("run ended:", end.reason))])
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Union, runtime_checkable

from ..context import estimate_tokens
from ..loop import (
    AgentContext,
    AgentLoopConfig,
    Hooks,
    RunEnding,
    RunHandle,
    call_model,
    side_request,
)
from ..providers import Provider, ProviderError
from ..types import (
    AgentMessage,
    AssistantMessage,
    ErrorInfo,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ._run import in_thread, log

__all__ = [
    "SUMMARY_EVENT",
    "SUMMARY_INSTRUCTION",
    "WORKER_FAILED_EVENT",
    "CompressionWorker",
    "PostRunWorkers",
    "SessionEnd",
    "SessionEndInfo",
    "Worker",
    "WorkerContext",
]

SUMMARY_EVENT = "treadle.ext.summary"
WORKER_FAILED_EVENT = "treadle.ext.worker_failed"
SUMMARY_INSTRUCTION = (
    "Summarise the conversation below in at most three sentences for your own memory: what "
    "the user wanted, what was decided or done, and anything about the user worth knowing "
    "next time. Write plain sentences, no preamble."
)


@dataclass
class WorkerContext:
    """What a worker gets: the run as it ends and a model to call.

    ``new_messages``, ``usage``, ``reason`` and ``error`` are the run's (as ``agent_end``
    will carry them); ``tokens`` estimates the whole conversation now, ``new_tokens`` the
    run's messages. ``provider``/``model`` are the workers' model (the run's unless
    :class:`PostRunWorkers` was given one); :meth:`complete` calls it and adds what it
    cost to ``spent``. :meth:`emit` sends a ``CustomEvent`` on the run's stream. ``run``
    is the run's handle (ids, ``deps``, ``state_for``).
    """

    context: AgentContext
    config: AgentLoopConfig
    new_messages: list[AgentMessage]
    usage: Usage
    reason: str
    error: ErrorInfo | None
    tokens: int
    new_tokens: int
    provider: Provider
    model: str
    run: RunHandle
    spent: Usage = field(default_factory=Usage)

    async def emit(self, name: str, value: Any = None) -> None:
        await self.run.emit(name, value)

    async def complete(
        self, prompt: str, *, system: str | None = None, max_tokens: int | None = 512
    ) -> AssistantMessage:
        """One tool-free model call through the loop's model-call path (the run's
        ``before_model_request`` hooks, ``RetryPolicy`` and model settings; ``max_tokens``
        None: the run's); its answer (raises ``ProviderError`` once the retries failed)."""
        request = side_request(
            self.config,
            [UserMessage.of(prompt)],
            purpose="worker",
            system_prompt=system,
            provider=self.provider,
            model=self.model,
            max_tokens=max_tokens,
        )
        message = await call_model(self.config, request, provider=self.provider, run=self.run)
        self.spent = self.spent + message.usage
        if message.stop_reason in ("error", "aborted"):
            error = message.error
            if error is None:
                raise ProviderError("cancelled", "the worker's model call was cancelled")
            kind: Any = error.kind  # one of the provider's error kinds, as it was raised
            raise ProviderError(kind, error.message, status_code=error.status_code)
        return message


@runtime_checkable
class Worker(Protocol):
    """A post-run worker: ``name`` and ``async run(ctx)``. What ``run`` returns, when not
    None, is sent as a ``CustomEvent`` named ``treadle.ext.worker.<name>``."""

    name: str

    async def run(self, ctx: WorkerContext) -> Any: ...


class PostRunWorkers(Hooks):
    """A hook that runs ``workers`` one after the other when a run ends, before its
    ``agent_end``, for the reasons in ``reasons`` (default: ``completed`` only).

    A worker that raises is logged (logger ``treadle.ext``) and reported as a
    ``CustomEvent`` named :data:`WORKER_FAILED_EVENT`; the next worker still runs and the
    run keeps its reason. ``provider``/``model`` default to the run's. ``spent`` adds up
    what the workers' model calls cost (it is not in ``agent_end.usage``: the loop's usage
    counts its turns only).
    """

    def __init__(
        self,
        workers: Sequence[Worker],
        *,
        provider: Provider | None = None,
        model: str | None = None,
        reasons: Sequence[str] = ("completed",),
    ) -> None:
        self.workers = list(workers)
        self.provider = provider
        self.model = model
        self.reasons = frozenset(reasons)
        self.spent = Usage()

    async def before_end(self, run: RunHandle, ending: RunEnding) -> None:
        if ending.reason not in self.reasons or not self.workers:
            return
        config = run.config
        provider = self.provider or config.provider
        model = self.model or str(getattr(provider, "model", "") or "") or config.model_name
        everything = run.context.messages
        ctx = WorkerContext(
            context=run.context,
            config=config,
            new_messages=ending.new_messages,
            usage=ending.usage,
            reason=ending.reason,
            error=ending.error,
            tokens=estimate_tokens(everything, model=model, encoding=None),
            new_tokens=estimate_tokens(ending.new_messages, model=model, encoding=None),
            provider=provider,
            model=model,
            run=run,
        )
        for worker in self.workers:
            name = getattr(worker, "name", type(worker).__name__)
            try:
                value = await worker.run(ctx)
            except Exception as exc:
                log.exception("post-run worker %s failed", name)
                await run.emit(
                    WORKER_FAILED_EVENT,
                    {"worker": name, "error": f"{type(exc).__name__}: {exc}"},
                )
                continue
            if value is not None:
                await run.emit(f"treadle.ext.worker.{name}", value)
        self.spent = self.spent + ctx.spent


def transcript(messages: Sequence[AgentMessage], *, max_chars: int = 12_000) -> str:
    """The run's messages as plain lines for a summary prompt (the newest kept if long)."""
    lines: list[str] = []
    for message in messages:
        if isinstance(message, UserMessage):
            lines.append(f"User: {message.text}")
        elif isinstance(message, AssistantMessage):
            if message.text:
                lines.append(f"Assistant: {message.text}")
            for call in message.tool_calls:
                lines.append(f"Assistant called {call.name}({json.dumps(call.arguments)})")
        elif isinstance(message, ToolResultMessage):
            lines.append(f"Tool {message.tool_name}: {message.text[:500]}")
    text = "\n".join(lines)
    return text if len(text) <= max_chars else "…" + text[-max_chars:]


class CompressionWorker:
    """Summarises the run with the model and keeps the summary: in a memory store (an
    object with ``remember(text)``, such as ``treadle.ext.memory.MemoryStore``, so a later
    conversation can recall it) or with any callable ``keep(summary)`` (sync or async).

    Runs only when the run added at least ``min_tokens`` (estimated; default 0) and has
    some user text. Sends ``CustomEvent(SUMMARY_EVENT, {"summary", "usage", "stored"})``.
    """

    name = "compression"

    def __init__(
        self,
        store: Any,
        *,
        prefix: str = "Summary of an earlier conversation: ",
        instruction: str = SUMMARY_INSTRUCTION,
        min_tokens: int = 0,
        max_tokens: int = 300,
    ) -> None:
        self.store = store
        self.prefix = prefix
        self.instruction = instruction
        self.min_tokens = min_tokens
        self.max_tokens = max_tokens
        self.summaries: list[str] = []

    async def run(self, ctx: WorkerContext) -> None:
        if ctx.new_tokens < self.min_tokens:
            return
        if not any(isinstance(m, UserMessage) and m.text for m in ctx.new_messages):
            return
        answer = await ctx.complete(
            transcript(ctx.new_messages), system=self.instruction, max_tokens=self.max_tokens
        )
        summary = " ".join(answer.text.split())
        if not summary:
            return
        self.summaries.append(summary)
        stored = await self._keep(self.prefix + summary)
        await ctx.emit(
            SUMMARY_EVENT,
            {"summary": summary, "usage": answer.usage.model_dump(), "stored": stored},
        )

    async def _keep(self, text: str) -> Any:
        remember = getattr(self.store, "remember", None)
        if remember is not None:
            fact = await in_thread(lambda: remember(text))
            return getattr(fact, "id", None)
        kept = self.store(text)
        if inspect.isawaitable(kept):
            kept = await kept
        return kept if isinstance(kept, (str, int, float, bool, type(None))) else None


@dataclass(frozen=True)
class SessionEndInfo:
    """What a session-end callback gets: the run's context, new messages, usage and
    reason, when it ended (``time.time()``), and its session and loop ids."""

    context: AgentContext | None
    new_messages: list[AgentMessage]
    usage: Usage
    reason: str
    ended_at: float
    session_id: str | None = None
    loop_id: str | None = None


SessionCallback = Callable[[SessionEndInfo], Union[Awaitable[None], None]]


class SessionEnd(Hooks):
    """A hook calling ``callbacks`` (sync or async) after ``agent_end`` on every way out of
    a run: completed, error, cancelled (by the token or from outside), limit, suspended,
    rejected and vetoed. A callback that raises is logged and the next one still runs.
    Blocking callbacks (saving a file) should be async and use a thread themselves."""

    def __init__(self, *callbacks: SessionCallback) -> None:
        self.callbacks = list(callbacks)

    async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
        info = SessionEndInfo(
            run.context,
            list(ending.new_messages),
            ending.usage,
            ending.reason,
            time.time(),
            session_id=run.session_id,
            loop_id=run.loop_id,
        )
        for callback in self.callbacks:
            try:
                result = callback(info)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("session-end callback %r failed", callback)
