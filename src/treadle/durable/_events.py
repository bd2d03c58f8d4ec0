"""A durable run's events, kept in the DBOS system database beside its steps.

Each event is stored once under the run's own ``seq`` (0, 1, 2 ... across every execution
of the workflow). After a crash the workflow replays; :class:`Replay` matches the replayed
events against those already stored and keeps them back while they agree, so readers see
no duplicate; from the first event that is new, events are stored with ``seq`` continuing.
If the crash cut a streaming answer, the stored part of it is superseded: a
``provider_retry`` event (``discard_partial=True``) comes first, then the answer from its
``message_start``.
"""

from __future__ import annotations

import json
from typing import Any

import anyio.to_thread
import sqlalchemy as sa
from pydantic import TypeAdapter

from ..types import AgentEvent, MessageStart, MessageUpdate, ProviderRetry

_EVENT: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)
_META = sa.MetaData()
EVENTS = sa.Table(
    "treadle_durable_events",
    _META,
    sa.Column("workflow_id", sa.String(128), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("signature", sa.Text, nullable=False),
    sa.Column("event", sa.Text, nullable=False),
)


def signature(event: AgentEvent) -> str:
    """What identifies an event across a replay (not its time, ids or durations)."""
    data: dict[str, Any] = {"type": event.type}
    if isinstance(event, MessageUpdate):
        data["delta"] = event.delta.model_dump(mode="json")
    for name in ("turn_index", "tool_call_id", "reason", "is_error"):
        if hasattr(event, name):
            data[name] = getattr(event, name)
    message: Any = None if isinstance(event, MessageUpdate) else getattr(event, "message", None)
    if hasattr(message, "role"):
        data["role"] = message.role
        data["text"] = getattr(message, "text", "")
        data["calls"] = [c.id for c in getattr(message, "tool_calls", [])]
    result = getattr(event, "result", None)
    if result is not None:
        data["result"] = result.text
    return json.dumps(data, sort_keys=True, default=str)


class EventStore:
    """The events table (created on first use)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        _META.create_all(engine, checkfirst=True)

    def _write(self, workflow_id: str, rows: list[tuple[int, str, str]]) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                EVENTS.insert(),
                [
                    {"workflow_id": workflow_id, "seq": s, "signature": g, "event": e}
                    for s, g, e in rows
                ],
            )

    async def write(self, workflow_id: str, rows: list[tuple[int, str, str]]) -> None:
        if rows:
            await anyio.to_thread.run_sync(self._write, workflow_id, rows)

    def _signatures(self, workflow_id: str) -> list[str]:
        with self.engine.connect() as conn:
            query = sa.select(EVENTS.c.signature).where(EVENTS.c.workflow_id == workflow_id)
            return [row[0] for row in conn.execute(query.order_by(EVENTS.c.seq))]

    async def signatures(self, workflow_id: str) -> list[str]:
        return await anyio.to_thread.run_sync(self._signatures, workflow_id)

    def _read(self, workflow_id: str, after: int, limit: int) -> list[AgentEvent]:
        with self.engine.connect() as conn:
            query = (
                sa.select(EVENTS.c.event)
                .where(EVENTS.c.workflow_id == workflow_id, EVENTS.c.seq > after)
                .order_by(EVENTS.c.seq)
                .limit(limit)
            )
            return [_EVENT.validate_json(row[0]) for row in conn.execute(query)]

    async def read(self, workflow_id: str, after: int, limit: int = 1000) -> list[AgentEvent]:
        return await anyio.to_thread.run_sync(self._read, workflow_id, after, limit)


class Replay:
    """Turns one execution's events into the run's stored events (see the module doc)."""

    def __init__(self, store: EventStore, workflow_id: str, stored: list[str]) -> None:
        self.store = store
        self.workflow_id = workflow_id
        self.stored = stored
        self.position = 0
        self.matching = bool(stored)
        self.next_seq = len(stored)
        self.held: list[AgentEvent] = []  # kept back since the current answer began
        self.pending: list[tuple[int, str, str]] = []
        self.cut_answer = False

    def add(self, event: AgentEvent) -> list[AgentEvent]:
        """The events to store and show for ``event`` (none while the replay agrees)."""
        sig = signature(event)
        if self.matching:
            if self.position < len(self.stored) and self.stored[self.position] == sig:
                self.position += 1
                if isinstance(event, MessageStart):
                    self.held = [event]
                elif self.held:
                    self.held.append(event)
                if not isinstance(event, (MessageStart, MessageUpdate)):
                    self.held = []
                return []
            self.matching = False
            out: list[AgentEvent] = []
            if self.position < len(self.stored):  # what was stored goes no further
                self.cut_answer = True
                out.append(
                    ProviderRetry(
                        attempt=1,
                        max_retries=1,
                        delay_s=0.0,
                        error_kind="worker_restarted",
                        message="the worker stopped mid-answer; the answer was requested again",
                        discard_partial=True,
                        loop_id=event.loop_id,
                        depth=event.depth,
                    )
                )
                out.extend(self.held)
            self.held = []
            return [self._stamp(e) for e in [*out, event]]
        return [self._stamp(event)]

    def _stamp(self, event: AgentEvent) -> AgentEvent:
        stamped = event.model_copy(update={"seq": self.next_seq})
        self.next_seq += 1
        self.pending.append((stamped.seq, signature(stamped), stamped.model_dump_json()))
        return stamped

    async def flush(self) -> None:
        rows, self.pending = self.pending, []
        await self.store.write(self.workflow_id, rows)
