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
from ..loop import Hooks, Suspension
from ..streaming import EventLog, EventLogGap, KeyedLog
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
    """ASCII digits only (``str.isdigit`` also accepts ``"¹"``, which ``int`` refuses), and
    no more than a ``seq`` can have (``int`` refuses thousands of digits too)."""
    return text.isascii() and text.isdigit() and len(text) <= 18


def parse_cursor(value: str | None) -> Cursor | None:
    """``"12"`` → (12, 0), ``"12.3"`` → (12, 3); ``None`` for anything else (a reader with
    no usable cursor starts from the beginning)."""
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
    """One protocol frame: ``data`` is a JSON object, or a literal string (``[DONE]``).
    Its SSE bytes are made once, when it is made: every reader is sent the same bytes."""

    cursor: Cursor
    data: dict[str, Any] | str
    wire: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "wire", self._encode(with_id=True))

    def sse(self, *, with_id: bool = True) -> bytes:
        return self.wire if with_id else self._encode(with_id=False)

    def _encode(self, *, with_id: bool) -> bytes:
        # (a custom event's value that is no JSON is sent as its text rather than failing)
        body = self.data if isinstance(self.data, str) else json.dumps(self.data, default=str)
        head = f"id: {format_cursor(self.cursor)}\n" if with_id else ""
        return f"{head}data: {body}\n\n".encode()


class FrameLog(KeyedLog[Frame, Cursor]):
    """A run's frames in cursor order, for any number of readers (bounded: a reader whose
    cursor fell out gets :class:`~treadle.streaming.EventLogGap`); :attr:`nbytes` is the size of
    their SSE bytes."""

    def __init__(self, *, max_frames: int = 50_000) -> None:
        super().__init__(_cursor_of, max_items=max_frames, size=_frame_size)

    @property
    def frames(self) -> Sequence[Frame]:
        return self.items

    def append(self, seq: int, items: Sequence[dict[str, Any] | str]) -> None:
        """The frames one event became, numbered ``seq.0``, ``seq.1`` ..."""
        for index, item in enumerate(items):
            self.add(Frame((seq, index), item))


def _cursor_of(frame: Frame) -> Cursor:
    return frame.cursor


def _frame_size(frame: Frame) -> int:
    return len(frame.wire)


@dataclass(frozen=True, slots=True)
class EncodedEvent:
    """One treadle event as a reader is sent it (for example an SSE frame), made once."""

    seq: int
    data: bytes


class EncodedEventLog(KeyedLog[EncodedEvent, int]):
    """A run's events encoded as they happen, in ``seq`` order, for any number of readers
    (every reader is sent the same bytes); :attr:`nbytes` is their size."""

    def __init__(self, *, max_events: int = 50_000) -> None:
        super().__init__(_seq_of, max_items=max_events, size=_encoded_size)


def _seq_of(item: EncodedEvent) -> int:
    return item.seq


def _encoded_size(item: EncodedEvent) -> int:
    return len(item.data)


EventEncoder = Callable[[AgentEvent], "bytes | None"]
"""Encodes one run's events, in order, each once (``None``: the event is left out)."""


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
    encoded: EncodedEventLog | None = None
    """Every treadle event of the run encoded once, when the runs encode them
    (``UIRuns(encode_events=...)``)."""

    @property
    def nbytes(self) -> int:
        """The size of what the run keeps for its readers: its frames' and encoded events'
        bytes."""
        return self.frames.nbytes + (self.encoded.nbytes if self.encoded is not None else 0)


class UIRuns:
    """The runs of one UI endpoint.

    ``agent`` is an :class:`~treadle.Agent` used as a template (each request runs on a
    fresh branch of it: same model, tools and settings, the history the client sent) or a
    function ``thread_id -> Agent`` for conversations the server keeps (with
    ``history="server"``, e.g. agents with a session store: only the newest input of a
    request is used). Runs live in ``task_group`` (the server's), so a dropped connection
    does not end them. Finished runs are kept for reconnects, the newest first, while
    there are at most ``max_runs`` of them and their frames and encoded events
    (:attr:`LiveRun.nbytes`) take at most ``max_bytes`` together; older ones are forgotten
    (a run in progress never is, nor the newest). ``keep_events=True`` also keeps each
    run's raw events (:attr:`LiveRun.events`); ``encode_events`` (a function making one
    :data:`EventEncoder` per run) keeps each event encoded once instead
    (:attr:`LiveRun.encoded`), so that readers share the bytes.
    """

    def __init__(
        self,
        agent: Agent[Any] | Callable[[str], Agent[Any]],
        *,
        history: HistoryMode = "client",
        max_runs: int = 200,
        max_frames: int = 50_000,
        max_bytes: int = 256 * 1024 * 1024,
        keep_events: bool = False,
        encode_events: Callable[[], EventEncoder] | None = None,
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
        self.max_bytes = max_bytes
        self.keep_events = keep_events
        self.encode_events = encode_events
        self.runs: OrderedDict[str, LiveRun] = OrderedDict()
        # per thread, the calls its last run suspended on, as the server judged them: the
        # only calls a request may decide (ui/_gate.py)
        self._waiting: OrderedDict[str, dict[str, Suspension]] = OrderedDict()
        self._threads: dict[str, Agent[Any]] = {}
        self.task_group: TaskGroup | None = None
        self.run_hooks: Sequence[Hooks] = ()  # added to every run (the web app's observers)

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
            encoded=EncodedEventLog(max_events=self.max_frames) if self.encode_events else None,
        )
        self._waiting.pop(thread_id, None)  # whatever it waited on is this run's now
        self.runs[live.run_id] = live
        self._forget_old()
        encode = self.encode_events() if self.encode_events is not None else None
        self.task_group.start_soon(self._drive, live, list(prompt), encode)
        return live

    def _forget_old(self) -> None:
        """Forget finished runs, oldest first, past ``max_runs`` or ``max_bytes`` (never
        the newest run, however large: its reader may be reconnecting)."""
        total = sum(live.nbytes for live in self.runs.values() if live.done.is_set())
        for live in list(self.runs.values())[:-1]:
            if len(self.runs) <= self.max_runs and total <= self.max_bytes:
                return
            if live.done.is_set():
                total -= live.nbytes
                del self.runs[live.run_id]

    async def _drive(
        self, live: LiveRun, prompt: list[AgentMessage], encode: EventEncoder | None
    ) -> None:
        last_seq = 0
        try:
            async with live.agent.stream(prompt, hooks=self.run_hooks) as events:
                async for event in events:
                    last_seq = max(last_seq, event.seq)
                    if live.events is not None:
                        live.events.publish(event)
                    if live.encoded is not None and encode is not None:
                        data = encode(event)
                        if data is not None:
                            live.encoded.add(EncodedEvent(event.seq, data))
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
            if live.encoded is not None:
                live.encoded.close()
            live.done.set()
            self._forget_old()

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
