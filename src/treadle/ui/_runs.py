"""What both UI protocols share: runs that outlive a connection, their frames, cursors.

A run is started in a task group that belongs to the server (not to the request), so a
dropped connection does not stop it. Each treadle event is translated once, as it happens,
into the protocol's frames; frames are kept in a :class:`FrameLog` under a cursor made of
the event's ``seq`` and the frame's place among that event's frames (``"12"``, ``"12.1"``).
A client that comes back with ``Last-Event-ID`` gets exactly the frames after its cursor.
"""

from __future__ import annotations

import json
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anyio
from anyio.abc import TaskGroup

from ..agent import Agent, AgentBusy, RunResult
from ..errors import ConfigurationError, StateError, TreadleError
from ..loop import EventLog, EventLogGap, KeyedLog, Suspension
from ..tools import ExternalTool
from ..types import AgentEnd, AgentEvent, AgentMessage

Cursor = tuple[int, int]
HistoryMode = Literal["client", "server"]


class RequestError(TreadleError, ValueError):
    """A request a UI endpoint cannot serve; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _digits(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also accepts ``"¹"``, which ``int`` refuses."""
    return text.isascii() and text.isdigit()


def parse_cursor(value: str | None) -> Cursor | None:
    """``"12"`` → (12, 0), ``"12.3"`` → (12, 3); ``None`` for anything else."""
    if not value:
        return None
    head, _, tail = value.strip().partition(".")
    if not _digits(head) or (tail and not _digits(tail)):
        return None
    return int(head), int(tail or 0)


def format_cursor(cursor: Cursor) -> str:
    seq, index = cursor
    return f"{seq}.{index}" if index else str(seq)


@dataclass(frozen=True, slots=True)
class Frame:
    """One protocol frame: ``data`` is a JSON object, or a literal string (``[DONE]``)."""

    cursor: Cursor
    data: dict[str, Any] | str

    def sse(self, *, with_id: bool = True) -> bytes:
        body = self.data if isinstance(self.data, str) else json.dumps(self.data)
        head = f"id: {format_cursor(self.cursor)}\n" if with_id else ""
        return f"{head}data: {body}\n\n".encode()


class FrameLog(KeyedLog[Frame, Cursor]):
    """A run's frames in cursor order, for any number of readers (bounded: a reader whose
    cursor fell out gets :class:`~treadle.EventLogGap`)."""

    def __init__(self, *, max_frames: int = 50_000) -> None:
        super().__init__(_cursor_of, max_items=max_frames)

    @property
    def frames(self) -> Sequence[Frame]:
        return self.items

    def append(self, seq: int, items: Sequence[dict[str, Any] | str]) -> None:
        """The frames one event became, numbered ``seq.0``, ``seq.1`` ..."""
        for index, item in enumerate(items):
            self.add(Frame((seq, index), item))


def _cursor_of(frame: Frame) -> Cursor:
    return frame.cursor


class Translator(Protocol):
    """Turns treadle events (top-level ones: ``depth == 0``) into protocol frames."""

    def translate(self, event: AgentEvent) -> list[dict[str, Any] | str]: ...

    def failure(self, message: str) -> list[dict[str, Any] | str]:
        """The frames that end a run that failed outside the loop (a bug, a crash)."""
        ...


@dataclass
class LiveRun:
    """A run a UI started: its frames, its agent, and (once over) its result."""

    run_id: str
    thread_id: str
    agent: Agent[Any]
    frames: FrameLog
    translator: Translator
    result: RunResult[Any] | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    events: EventLog | None = None
    """Every treadle event of the run (sub-agents' too), when the runs keep them
    (``UIRuns(keep_events=True)``: for an inspector)."""


class UIRuns:
    """The runs of one UI endpoint.

    ``agent`` is an :class:`~treadle.Agent` used as a template (each request runs on a
    fresh branch of it: same model, tools and settings, the history the client sent) or a
    function ``thread_id -> Agent`` for conversations the server keeps (with
    ``history="server"``, e.g. agents with a session store: only the newest input of a
    request is used). Runs live in ``task_group`` (the server's), so a dropped connection
    does not end them; ``max_runs`` finished runs are kept for reconnects.
    ``keep_events=True`` also keeps each run's raw events (:attr:`LiveRun.events`).
    """

    def __init__(
        self,
        agent: Agent[Any] | Callable[[str], Agent[Any]],
        *,
        history: HistoryMode = "client",
        max_runs: int = 200,
        max_frames: int = 50_000,
        keep_events: bool = False,
    ) -> None:
        if history not in ("client", "server"):
            raise ConfigurationError("history must be 'client' or 'server'")
        if history == "server" and isinstance(agent, Agent):
            raise ConfigurationError(
                "history='server' keeps one conversation per thread: pass a function "
                "thread_id -> Agent (for example one opening Agent(store=..., session_id=...))"
            )
        self._agent = agent
        self.history: HistoryMode = history
        self.max_runs = max_runs
        self.max_frames = max_frames
        self.keep_events = keep_events
        self.runs: OrderedDict[str, LiveRun] = OrderedDict()
        # per thread, the calls its last run suspended on, as the server judged them: the
        # only calls a request may decide (ui/_gate.py)
        self._waiting: OrderedDict[str, dict[str, Suspension]] = OrderedDict()
        self._threads: dict[str, Agent[Any]] = {}
        self.task_group: TaskGroup | None = None

    def agent_for(self, thread_id: str) -> Agent[Any]:
        """The agent a request on ``thread_id`` runs on."""
        if isinstance(self._agent, Agent):
            return self._agent.branch(0)
        agent = self._threads.get(thread_id)
        if agent is None:
            agent = self._threads[thread_id] = self._agent(thread_id)
        return agent

    def opened(self, thread_id: str) -> Agent[Any] | None:
        """With ``history="server"``: the agent serving ``thread_id``, if one was opened."""
        return self._threads.get(thread_id)

    def adopt(self, thread_id: str, agent: Agent[Any]) -> None:
        """Serve ``thread_id`` with ``agent`` (with ``history="server"``: a branch made
        elsewhere, for example)."""
        self._threads[thread_id] = agent

    def get(self, run_id: str) -> LiveRun | None:
        return self.runs.get(run_id)

    def waiting_on(self, thread_id: str) -> dict[str, Suspension]:
        """The calls the last run of ``thread_id`` suspended on (tool and the arguments
        the server's hooks judged), until the thread's next run starts."""
        return dict(self._waiting.get(thread_id, {}))

    def _note_end(self, thread_id: str, agent: Agent[Any], event: AgentEnd) -> None:
        self._waiting.pop(thread_id, None)
        if event.reason != "suspended":
            return
        suspended = agent.context.suspended
        self._waiting[thread_id] = {
            c: suspended[c] for c in event.pending_tool_calls if c in suspended
        }
        while len(self._waiting) > max(self.max_runs, 1):
            self._waiting.popitem(last=False)

    def latest(self, thread_id: str) -> LiveRun | None:
        for live in reversed(self.runs.values()):
            if live.thread_id == thread_id:
                return live
        return None

    def start(
        self,
        agent: Agent[Any],
        prompt: Sequence[AgentMessage],
        translator: Translator,
        *,
        thread_id: str,
        run_id: str | None = None,
    ) -> LiveRun:
        """Start a run (``prompt`` empty: continue the agent's history) in the server's task
        group and return it at once."""
        if self.task_group is None:
            raise StateError(
                "UIRuns has no task group: serve it inside `async with runs.serving():` "
                "(the ASGI apps do this in their lifespan)"
            )
        if agent.running:
            raise AgentBusy(f"thread {thread_id!r} already has a run in progress")
        live = LiveRun(
            run_id=run_id or uuid.uuid4().hex,
            thread_id=thread_id,
            agent=agent,
            frames=FrameLog(max_frames=self.max_frames),
            translator=translator,
            events=EventLog(max_events=self.max_frames) if self.keep_events else None,
        )
        self._waiting.pop(thread_id, None)  # whatever it waited on is this run's now
        self.runs[live.run_id] = live
        while len(self.runs) > self.max_runs:
            oldest = next(iter(self.runs.values()))
            if not oldest.done.is_set():
                break
            self.runs.popitem(last=False)
        self.task_group.start_soon(self._drive, live, list(prompt))
        return live

    async def _drive(self, live: LiveRun, prompt: list[AgentMessage]) -> None:
        last_seq = 0
        try:
            async with live.agent.stream(prompt) as events:
                async for event in events:
                    last_seq = max(last_seq, event.seq)
                    if live.events is not None:
                        live.events.publish(event)
                    if event.depth == 0:
                        if isinstance(event, AgentEnd):  # before the client hears of it
                            self._note_end(live.thread_id, live.agent, event)
                        live.frames.append(event.seq, live.translator.translate(event))
            live.result = events.result
        except Exception as exc:  # a bug or crash outside the loop: say so, then end
            live.frames.append(last_seq + 1, live.translator.failure(f"{type(exc).__name__}"))
        finally:
            live.frames.close()
            if live.events is not None:
                live.events.close()
            live.done.set()

    def serving(self) -> _Serving:
        """``async with runs.serving():`` — runs started inside live in this block's task
        group; leaving it cancels those still going."""
        return _Serving(self)


class _Serving:
    def __init__(self, runs: UIRuns) -> None:
        self._runs = runs
        self._tg: TaskGroup | None = None

    async def __aenter__(self) -> UIRuns:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._runs.task_group = self._tg
        return self._runs

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        self._runs.task_group = None
        return await self._tg.__aexit__(*exc)


def add_external_tools(agent: Agent[Any], tools: Sequence[ExternalTool]) -> None:
    """Offer the client's own tools (front-end tools) on this agent's next run."""
    kept = [
        t
        for t in agent.context.tools
        if not isinstance(t, ExternalTool) or t.name not in {x.name for x in tools}
    ]  # a client re-declaring its tools replaces them
    if not tools:
        return
    taken = {getattr(t, "name", None) for t in kept}
    clash = sorted(t.name for t in tools if t.name in taken)
    if clash:
        raise RequestError(
            f"the client declares tools the agent already has: {', '.join(clash)}; "
            "rename one of them",
            422,
        )
    agent.context.tools = [*kept, *tools]


async def sse_body(
    live: LiveRun, after: Cursor | None, prelude: Sequence[Frame] = ()
) -> AsyncIterator[bytes]:
    """The SSE body of a (re)connection: ``prelude`` frames (no ``id``), then the run's
    frames after ``after``."""
    for frame in prelude:
        yield frame.sse(with_id=False)
    try:
        async for frame in live.frames.subscribe(after):
            yield frame.sse()
    except EventLogGap as gap:
        for item in live.translator.failure(str(gap)):
            yield Frame((0, 0), item).sse(with_id=False)
