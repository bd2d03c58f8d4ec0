"""SessionRecorder: the write-ahead hook that keeps a store in step with a context."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from ..errors import ConfigurationError
from ..loop.config import Hooks, RunEnding, RunHandle
from ..loop.context import AgentContext
from ..loop.decisions import Suspension
from ..tools import Tool, traits_of
from ..types import AgentMessage, AssistantMessage, Usage
from .base import (
    SessionExists,
    SessionStore,
    SessionWriteFailed,
    SessionWriter,
    open_calls_at_end,
    repair_history,
)

T = TypeVar("T")


def _rerunnable(messages: Sequence[AgentMessage], context: AgentContext) -> list[str]:
    """Unanswered calls at the end of ``messages`` whose tool is idempotent."""
    safe = {t.name for t in context.tools if isinstance(t, Tool) and traits_of(t).idempotent}
    last = next((m for m in reversed(messages) if isinstance(m, AssistantMessage)), None)
    names = {c.id: c.name for c in last.tool_calls} if last is not None else {}
    return [c for c in open_calls_at_end(messages) if names.get(c) in safe]


def _restore_suspended(
    context: AgentContext,
    waiting: Sequence[str],
    stored: Mapping[str, Mapping[str, Any]],
) -> None:
    """The calls a stored run suspended on, as the context's suspensions: judged on their
    stored arguments, and judged again by the hooks when approved (``restored``), with
    the question and the tool's saved state the run suspended with."""
    last = next((m for m in reversed(context.messages) if isinstance(m, AssistantMessage)), None)
    calls = {c.id: c for c in last.tool_calls} if last is not None else {}
    external = {t.name for t in context.tools if isinstance(t, Tool) and traits_of(t).external}
    context.suspended.clear()
    context.approvals.clear()
    for call_id in waiting:
        call = calls.get(call_id)
        if call is not None:
            held = stored.get(call_id, {})
            context.suspended[call_id] = Suspension(
                call.name,
                dict(call.arguments),
                call.name in external,
                restored=True,
                prompt=held.get("prompt"),
                saved=held.get("saved"),
            )


async def _in_thread(fn: Callable[[], T]) -> T:
    """Run blocking store I/O in a worker thread. Shielded: a write that started finishes
    (the history and the store must not disagree about whether a message exists). A raw
    ``OSError`` or ``sqlite3`` error becomes :class:`SessionWriteFailed`."""
    with anyio.CancelScope(shield=True):
        try:
            result = await anyio.to_thread.run_sync(fn)
        except (OSError, sqlite3.Error) as exc:
            raise SessionWriteFailed(
                f"the session store could not write ({type(exc).__name__}: {exc}); the "
                "messages reported before this are stored"
            ) from exc
    return result


class SessionRecorder(Hooks):
    """Persists ``context.messages`` to a session as it grows.

    ``on_message`` runs when a message joins the history, before its ``message_end`` is
    sent, so the user's prompt is durable before the turn's first model call and every
    message is durable by the time anyone hears of it (the write-ahead rule). Writes
    run in a worker thread (the event loop never waits on a disk).

    The recorder keeps a copy of what it stored. When the history changed by other means
    than appending (``Agent.continue_`` dropping a failed message, ``restore``, an edit
    between runs) the next write cuts the stored history back to the common prefix and
    appends the rest: the store always ends up equal to ``context.messages``. Replace
    messages rather than mutating them in place; an in-place edit of a stored message is not
    noticed.

    Low-level use with ``agent_loop``::

        recorder = SessionRecorder.open(store, context)      # or session_id=... to resume
        config = AgentLoopConfig(provider=..., hooks=[recorder])
        await agent_loop(prompts, context, config)
        recorder.close()
    """

    def __init__(
        self,
        writer: SessionWriter,
        context: AgentContext,
        *,
        stored: Sequence[AgentMessage] = (),
        pending: Sequence[str] = (),
    ) -> None:
        if len(stored) != writer.length:
            raise ConfigurationError(
                f"stored has {len(stored)} messages but session {writer.session_id!r} holds "
                f"{writer.length}"
            )
        self.writer = writer
        self.context = context
        self._stored: list[AgentMessage] = list(stored)
        self._list: list[AgentMessage] = context.messages
        self._pending: list[str] = list(pending)
        self._suspensions: dict[str, dict[str, Any]] = {}
        self._ahead = 0  # trailing stored messages written ahead of the history
        self._mutex = threading.Lock()

    @classmethod
    def open(
        cls,
        store: SessionStore,
        context: AgentContext,
        session_id: str | None = None,
        *,
        rerun: bool = False,
    ) -> SessionRecorder:
        """Take a session for ``context`` (blocking; call it from a thread in async code).

        Without ``session_id``, or with one the store does not have, a new session is created
        and whatever ``context.messages`` holds is stored. With an existing one, its write
        lock is taken (:class:`SessionLocked` if another writer has it), its history is loaded
        into ``context.messages`` (unanswered tool calls get the result ``Cancelled``; that
        repair is stored too) and ``context.session_id`` / ``agent_id`` are restored.

        ``rerun=True``: an unanswered call of a tool in ``context.tools`` marked
        ``idempotent`` is left open instead, so the next run (``Agent.continue_()``) runs it
        again through the ``before_tool_call`` hooks (a ``Deny`` answers it with the
        reason); other calls still get ``Cancelled``. The calls a suspended run waits on
        stay open and can be decided (``context.approve(id)``).
        """
        if session_id is None or not store.exists(session_id):
            try:
                sid = store.create(session_id, agent_id=context.agent_id)
            except SessionExists:  # created meanwhile by someone else: resume it
                assert session_id is not None
            else:
                writer = store.open_writer(sid)
                context.session_id = sid
                recorder = cls(writer, context)
                try:
                    recorder.sync_now()
                except BaseException:
                    writer.close()
                    raise
                return recorder
        assert session_id is not None
        writer = store.open_writer(session_id)
        try:
            loaded = store.load(session_id, repair=False)
            again = _rerunnable(loaded.messages, context) if rerun else []
            messages, pending, _ = repair_history(
                loaded.messages, [*loaded.pending_tool_calls, *again]
            )
            context.messages[:] = messages
            # only the calls the run suspended on wait for a decision; a call left open to
            # run again is no decision's business: the hooks judge it when the run goes on
            waiting = [c for c in loaded.pending_tool_calls if c in pending]
            _restore_suspended(context, waiting, loaded.suspensions)
            context.session_id = session_id
            if loaded.info.agent_id:
                context.agent_id = loaded.info.agent_id
            recorder = cls(writer, context, stored=loaded.messages, pending=pending)
            recorder.sync_now()  # stores the repair, if there was one
            return recorder
        except BaseException:
            writer.close()
            raise

    @property
    def session_id(self) -> str:
        return self.writer.session_id

    @property
    def closed(self) -> bool:
        return self.writer.closed

    def close(self) -> None:
        """Release the session's write lock."""
        self.writer.close()

    # ---- keeping the store equal to the history ----

    def in_sync(self) -> bool:
        """Whether the store holds exactly ``context.messages`` (cheap: identity checks)."""
        messages, stored = self.context.messages, self._stored
        return len(messages) == len(stored) and all(
            a is b for a, b in zip(messages, stored, strict=True)
        )

    def sync_now(self) -> int:
        """Make the store equal to ``context.messages`` (blocking); returns how many
        messages were written."""
        with self._mutex:
            return self._sync()

    def _sync(self, keep_ahead: bool = False) -> int:
        target, stored = list(self.context.messages), self._stored
        common = 0
        for a, b in zip(target, stored, strict=False):
            if a is not b and a != b:
                break
            common += 1
        extra = len(stored) - common
        if keep_ahead and common == len(target) and 0 < extra <= self._ahead:
            self._ahead = extra  # written ahead and not in the history yet: keep waiting
            self._list = self.context.messages
            return 0
        self._ahead = 0
        if common < len(stored):
            self.writer.truncate(common)
            del stored[common:]
        tail = target[common:]
        if tail:
            self.writer.extend(tail)
            stored.extend(tail)
        self._list = self.context.messages
        return len(tail)

    def _append(self, message: AgentMessage) -> None:
        with self._mutex:
            messages, stored = self.context.messages, self._stored
            n = len(stored)
            if (
                messages is self._list
                and len(messages) == n + 1
                and messages[n] is message
                and (n == 0 or messages[n - 1] is stored[n - 1])
            ):
                self.writer.append(message)  # the usual case: the loop appended one message
                stored.append(message)
            else:
                self._sync(keep_ahead=True)

    def _write_ahead(self, messages: Sequence[AgentMessage]) -> None:
        with self._mutex:
            self._sync()
            self.writer.extend(messages)
            # copies: if a message is edited before it joins the history (an input filter's
            # warning), the comparison sees the change and the stored copy is replaced
            self._stored.extend(m.model_copy(deep=True) for m in messages)
            self._ahead = len(messages)

    def _sync_keep_ahead(self) -> None:
        with self._mutex:
            self._sync(keep_ahead=True)

    def _save_pending(self) -> None:
        with self._mutex:
            self._sync()
            pending = self.context.pending_tool_calls
            suspended = self.context.suspended
            details = {  # only what a Suspension keeps beyond the call itself
                c: {"prompt": suspended[c].prompt, "saved": suspended[c].saved}
                for c in pending
                if c in suspended and (suspended[c].prompt, suspended[c].saved) != (None, None)
            }
            if pending != self._pending or details != self._suspensions:
                if details:
                    self.writer.set_pending(pending, details)
                else:  # a store written before suspensions existed takes this call
                    self.writer.set_pending(pending)
                self._pending, self._suspensions = pending, details

    async def sync(self) -> None:
        """:meth:`sync_now` in a worker thread (nothing to do: no thread is used)."""
        if not self.in_sync():
            await _in_thread(self.sync_now)

    async def write_ahead(self, messages: Sequence[AgentMessage]) -> None:
        """Store ``messages`` before they join the history (for a model call that comes
        before the loop, such as a planning call). While the history catches up with them
        nothing is rewritten; :meth:`sync` drops those that never joined it."""
        items = list(messages)
        await _in_thread(lambda: self._write_ahead(items))

    # ---- hooks ----

    async def before_loop(self, run: RunHandle) -> bool:
        if run.context is self.context and not self.in_sync():
            await _in_thread(self._sync_keep_ahead)
        return True

    async def on_message(self, run: RunHandle, message: AgentMessage) -> None:
        await _in_thread(lambda: self._append(message))

    async def after_compaction(self, run: RunHandle, stats: dict[str, Any]) -> None:
        await self.sync()  # the compacted history replaced the old one in place

    async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
        await _in_thread(self._save_pending)

    def __repr__(self) -> str:
        return f"SessionRecorder({self.session_id!r}, {len(self._stored)} messages)"


def usage_of(messages: Sequence[Any]) -> Usage:
    """The summed usage of the assistant messages in a history."""
    total = Usage()
    for message in messages:
        usage = getattr(message, "usage", None)
        if isinstance(usage, Usage):
            total = total + usage
    return total
