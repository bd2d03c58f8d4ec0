"""What every session store shares: the protocols, the data they return, the errors, and the
log model (own records + a shared prefix resolved through the parent chain)."""

from __future__ import annotations

import builtins
import json
import os
import re
import threading
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import Field

from ..context.transcript import repair_transcript
from ..errors import ConfigurationError, OutOfRange, TreadleError, UsageError
from ..types import (
    AgentMessage,
    AssistantMessage,
    ExtensionMessage,
    ToolResultMessage,
    UserMessage,
    message_from_dict,
    message_from_json,
)
from ..types._base import Model
from ..types.messages import CANCELLED_TEXT  # one definition, the loop's own

TITLE_LENGTH = 200
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


# ---- errors ----


class SessionError(TreadleError):
    """Base of every session store error."""


class SessionNotFound(SessionError):
    """No session has this id."""


class SessionExists(SessionError):
    """``create`` was given an id that is already taken."""


class SessionLocked(SessionError):
    """Another writer (another Agent, here or in another process) holds this session."""


class SessionCorrupt(SessionError):
    """A stored session cannot be read (damaged beyond a torn last record)."""


class SessionWriteFailed(SessionError):
    """The store could not write (the disk is full, a file size limit, a database error).
    The run that was recording ends with ``reason="error"`` saying so."""


# ---- data ----


class SessionInfo(Model):
    """What a store knows about one session without loading its messages.

    Times are unix milliseconds. ``title`` is the first user text (shortened).
    ``parent_id`` / ``branch_index``: the session this one was branched from, and how many
    of its messages it shares. ``message_count`` counts stored messages (before repair).
    """

    id: str
    created_at: int
    updated_at: int
    title: str | None = None
    parent_id: str | None = None
    branch_index: int | None = None
    message_count: int = 0
    agent_id: str | None = None


class StoredSession(Model):
    """A loaded session: its info and its history.

    ``messages`` follows the transcript rules unless loaded with ``repair=False``: a tool call
    left without a result (the process died while it ran) gets the error result
    ``Cancelled``; its id is listed in ``repaired_tool_calls``. Calls a suspended run is
    waiting on (approvals) stay open and are listed in ``pending_tool_calls``. ``torn_tail``
    says a half-written last record (a write cut off by a crash) was ignored.
    """

    info: SessionInfo
    messages: list[AgentMessage] = Field(default_factory=list)
    pending_tool_calls: list[str] = Field(default_factory=list)
    suspensions: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """For pending calls a run suspended on with a question or state (``{"prompt": ...,
    "saved": ...}`` by call id): what restores ``Suspension.prompt`` and ``.saved``."""
    repaired_tool_calls: list[str] = Field(default_factory=list)
    torn_tail: bool = False
    missing_files: list[str] = Field(default_factory=list)
    """With ``load(..., missing_files="note")``: each file whose blob is missing or damaged
    (which session, message and blob), replaced by a text note in ``messages``."""

    @property
    def id(self) -> str:
        return self.info.id


# ---- protocols ----


@runtime_checkable
class SessionWriter(Protocol):
    """The one writer of a session, holding its lock until :meth:`close`.

    Every method is blocking and returns once the change is durable; call them from a worker
    thread in async code (``SessionRecorder`` does). ``length`` is the number of messages.
    """

    @property
    def session_id(self) -> str: ...

    @property
    def length(self) -> int: ...

    @property
    def closed(self) -> bool: ...

    def append(self, message: AgentMessage) -> int:
        """Store ``message`` at the end; return its index."""
        ...

    def extend(self, messages: Sequence[AgentMessage]) -> int:
        """Store several messages at once (one durable write); return the new length."""
        ...

    def truncate(self, length: int) -> None:
        """Drop the messages from index ``length`` on (the log keeps the record)."""
        ...

    def set_pending(
        self,
        tool_call_ids: Sequence[str],
        suspensions: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """Record which unanswered tool calls a suspended run waits on (they are not
        repaired on load), and for some of them what the run suspended with
        (``{"prompt": ..., "saved": ...}``, JSON; :attr:`StoredSession.suspensions`). A
        store written before ``suspensions`` existed is still called without it when a
        run suspends with neither."""
        ...

    def close(self) -> None:
        """Release the lock. Idempotent."""
        ...

    def __enter__(self) -> SessionWriter: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class SessionStore(Protocol):
    """Where conversations live between processes.

    Methods are blocking (file or database I/O) and thread-safe; async code calls them from a
    worker thread (``anyio.to_thread.run_sync``). Writes go through a :class:`SessionWriter`,
    one per session at a time: a second one gets :class:`SessionLocked`.
    """

    def create(self, session_id: str | None = None, *, agent_id: str | None = None) -> str:
        """A new, empty session; returns its id (a UUID unless given)."""
        ...

    def exists(self, session_id: str) -> bool: ...

    def info(self, session_id: str) -> SessionInfo: ...

    def load(self, session_id: str, *, repair: bool = True) -> StoredSession:
        """The session's history (the parent's shared prefix included). The three stores
        also take ``missing_files="error"`` (default) or ``"note"`` (docs/sessions.md#files)."""
        ...

    def open_writer(self, session_id: str) -> SessionWriter:
        """Take the session's write lock (:class:`SessionLocked` if someone holds it)."""
        ...

    def append(self, session_id: str, message: AgentMessage) -> int:
        """One message, through a short-lived writer; returns its index."""
        ...

    def branch(self, session_id: str, at_index: int, *, agent_id: str | None = None) -> str:
        """A new session that shares the first ``at_index`` messages of ``session_id``
        without copying them; returns its id."""
        ...

    def delete(self, session_id: str) -> None:
        """Remove a session. Its branches keep their shared prefix (it is copied into them
        first). :class:`SessionLocked` while a writer holds it."""
        ...

    def list(self, *, limit: int | None = None) -> builtins.list[SessionInfo]:
        """Sessions, most recently updated first."""
        ...

    def close(self) -> None: ...


# ---- helpers shared by the stores ----


def new_session_id() -> str:
    return str(uuid.uuid4())


def check_id(session_id: str) -> str:
    """Ids become file names: letters, digits, ``.``, ``_`` and ``-`` only."""
    if not isinstance(session_id, str) or not _ID.fullmatch(session_id):
        raise ConfigurationError(
            f"invalid session id {session_id!r}: use 1-128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return session_id


def check_message(message: Any) -> AgentMessage:
    kinds = (UserMessage, AssistantMessage, ToolResultMessage, ExtensionMessage)
    if not isinstance(message, kinds):
        raise UsageError(f"expected a message, got {type(message).__name__}")
    return message


def ns_to_ms(ns: int) -> int:
    return ns // 1_000_000


def _shorten(text: str) -> str | None:
    text = " ".join(text.split())
    if not text:
        return None
    return text if len(text) <= TITLE_LENGTH else text[: TITLE_LENGTH - 1] + "…"


def title_of(message: AgentMessage) -> str | None:
    """The title a user message gives a session (``None`` for other messages)."""
    if isinstance(message, UserMessage):
        return _shorten(message.text)
    return None


def payload_title(payload: Any) -> str | None:
    """:func:`title_of` for a stored payload (a JSON string or a decoded dict)."""
    data = json.loads(payload) if isinstance(payload, (str, bytes)) else payload
    if not isinstance(data, dict) or data.get("role") != "user":
        return None
    blocks = data.get("content")
    if isinstance(blocks, str):
        return _shorten(blocks)
    texts = [
        b.get("text", "") for b in blocks or () if isinstance(b, dict) and b.get("type") == "text"
    ]
    return _shorten("\n".join(texts))


def first_title(payloads: Sequence[Any]) -> str | None:
    for payload in payloads:
        title = payload_title(payload)
        if title is not None:
            return title
    return None


def parse_payload(payload: Any) -> AgentMessage:
    """A stored message: a JSON string (SQLite, memory) or a decoded object (JSONL)."""
    if isinstance(payload, (str, bytes)):
        return message_from_json(payload)
    return message_from_dict(payload)


@dataclass
class LogView:
    """One session's own log as a store reads it: where it branched from (or the copied
    prefix, ``base``, once its parent was deleted) and its history records in order:
    ``("m", payload)`` appends a message, ``("t", n)`` cuts the history to ``n`` messages."""

    parent_id: str | None = None
    branch_index: int | None = None
    parent_pos: int | None = None
    base: list[Any] | None = None
    records: list[tuple[str, Any]] = field(default_factory=list)


def replay(
    fetch: Callable[[str, int | None], LogView], session_id: str, upto: int | None = None
) -> list[Any]:
    """The payloads of a session's history. A branch starts from its parent's history as it
    was when the branch was made (the first ``parent_pos`` records of the parent's log, cut
    to ``branch_index`` messages); the parent's log is append-only, so later changes to the
    parent never reach the branch."""
    chain: list[LogView] = []
    seen: set[str] = set()
    sid: str | None = session_id
    while sid is not None:
        if sid in seen:
            raise SessionCorrupt(f"session {session_id!r}: its parent chain loops at {sid!r}")
        seen.add(sid)
        try:
            view = fetch(sid, upto)
        except SessionNotFound:
            if sid == session_id:
                raise
            raise SessionCorrupt(
                f"session {session_id!r} branches from {sid!r}, which is missing"
            ) from None
        chain.append(view)
        if view.base is not None or view.parent_id is None:
            break
        sid, upto = view.parent_id, view.parent_pos or 0
    items: list[Any] = []
    for i, view in enumerate(reversed(chain)):
        if i == 0:
            items = list(view.base or ())
        else:
            items = items[: view.branch_index or 0]
        for kind, value in view.records:
            if kind == "m":
                items.append(value)
            else:
                del items[value:]
    return items


def limit_records(records: list[tuple[str, Any]], upto: int | None) -> list[tuple[str, Any]]:
    return records if upto is None else records[:upto]


def open_calls_at_end(messages: Sequence[AgentMessage]) -> list[str]:
    """Ids of the last assistant message's tool calls that have no result after it."""
    answered: set[str] = set()
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            return [c.id for c in message.tool_calls if c.id not in answered]
        if isinstance(message, ToolResultMessage):
            answered.add(message.tool_call_id)
        elif not isinstance(message, ExtensionMessage):
            return []
    return []


def repair_history(
    messages: Sequence[AgentMessage], pending: Sequence[str] = ()
) -> tuple[list[AgentMessage], list[str], list[str]]:
    """``(messages, still_pending, repaired_ids)``: every unanswered tool call gets the
    result ``Cancelled`` except those in ``pending`` that are still open at the end."""
    still_pending = [c for c in open_calls_at_end(messages) if c in set(pending)]
    repaired = repair_transcript(
        messages, missing_text=CANCELLED_TEXT, missing_cancelled=True, allow_pending=still_pending
    )
    known = {id(m) for m in messages}
    fixed = [
        m.tool_call_id for m in repaired if isinstance(m, ToolResultMessage) and id(m) not in known
    ]
    return repaired, still_pending, fixed


def json_suspensions(
    ids: Sequence[str], suspensions: Mapping[str, Mapping[str, Any]], session_id: str
) -> dict[str, dict[str, Any]]:
    """``suspensions`` of pending ``ids`` as stored: JSON values, copied (a store keeps
    none of the caller's objects). Raises :class:`SessionError` naming a value that is
    not JSON."""
    kept: dict[str, dict[str, Any]] = {}
    for call_id, record in suspensions.items():
        if call_id not in ids:
            continue
        try:
            kept[str(call_id)] = json.loads(json.dumps(dict(record)))
        except (TypeError, ValueError) as exc:
            raise SessionError(
                f"session {session_id!r}: what tool call {call_id!r} suspended with is not "
                f"JSON ({exc}); a tool's ApprovalRequired(saved=...) must be JSON-able"
            ) from None
    return kept


def read_suspensions(value: Any) -> dict[str, dict[str, Any]]:
    """Stored suspensions checked: a dict of dicts by call id."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
        raise SessionCorrupt(
            "the stored suspended calls are not an object of objects by tool call id; "
            "the session's pending calls cannot be restored"
        )
    return {str(k): v for k, v in value.items()}


def finish_load(
    info: SessionInfo,
    payloads: Sequence[Any],
    pending: Sequence[str],
    *,
    torn: bool,
    repair: bool,
    missing: Sequence[str] = (),
    suspensions: Mapping[str, dict[str, Any]] | None = None,
) -> StoredSession:
    messages = [parse_payload(p) for p in payloads]
    held = suspensions or {}
    info = info.model_copy(update={"message_count": len(messages)})
    if not repair:
        still = [c for c in open_calls_at_end(messages) if c in set(pending)]
        return StoredSession(
            info=info,
            messages=messages,
            pending_tool_calls=still,
            suspensions={c: held[c] for c in still if c in held},
            torn_tail=torn,
            missing_files=list(missing),
        )
    repaired, still, fixed = repair_history(messages, pending)
    return StoredSession(
        info=info,
        messages=repaired,
        pending_tool_calls=still,
        suspensions={c: held[c] for c in still if c in held},
        repaired_tool_calls=fixed,
        torn_tail=torn,
        missing_files=list(missing),
    )


def check_branch_index(session_id: str, at_index: int, length: int) -> int:
    if isinstance(at_index, bool) or not isinstance(at_index, int):
        raise UsageError("at_index must be an int")
    if not 0 <= at_index <= length:
        raise OutOfRange(
            f"at_index {at_index} is outside session {session_id!r}, which has {length} messages"
        )
    return at_index


def pid_alive(pid: int) -> bool:
    """Whether a process with this id runs on this machine (unknown counts as alive)."""
    if os.name != "posix" or pid <= 0:
        return True  # os.kill(pid, 0) would terminate the process on Windows
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


class StoreBase:
    """Conveniences every store implements the same way."""

    def open_writer(self, session_id: str) -> SessionWriter:  # pragma: no cover - abstract
        raise NotImplementedError

    def info(self, session_id: str) -> SessionInfo:  # pragma: no cover - abstract
        raise NotImplementedError

    def append(self, session_id: str, message: AgentMessage) -> int:
        with self.open_writer(session_id) as writer:
            return writer.append(message)

    def exists(self, session_id: str) -> bool:
        try:
            self.info(session_id)
        except (SessionNotFound, ValueError):
            return False
        return True

    def close(self) -> None:
        """Nothing to release (overridden where there is)."""

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WriterBase:
    """The shape every writer shares: one lock, a length, close-once release (also run when
    a forgotten writer is garbage-collected, so its session is not locked forever)."""

    def __init__(self, session_id: str, length: int) -> None:
        self._session_id = session_id
        self._length = length
        self._closed = False
        self._mutex = threading.Lock()
        self._finalizer: weakref.finalize[Any, Any] | None = None

    def _on_release(self, fn: Callable[..., Any], *args: Any) -> None:
        self._finalizer = weakref.finalize(self, fn, *args)

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def length(self) -> int:
        return self._length

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self._length} messages"
        return f"{type(self).__name__}({self._session_id!r}, {state})"

    def _check_open(self) -> None:
        if self._closed:
            raise SessionError(f"the writer of session {self._session_id!r} is closed")

    # the store-specific parts; each returns only once the change is durable
    def _write_messages(self, messages: Sequence[AgentMessage]) -> None:
        raise NotImplementedError

    def _write_truncate(self, length: int) -> None:
        raise NotImplementedError

    def _write_pending(
        self, ids: builtins.list[str], suspensions: dict[str, dict[str, Any]]
    ) -> None:
        raise NotImplementedError

    def append(self, message: AgentMessage) -> int:
        return self.extend([message]) - 1

    def extend(self, messages: Sequence[AgentMessage]) -> int:
        checked = [check_message(m) for m in messages]
        with self._mutex:
            self._check_open()
            if checked:
                self._write_messages(checked)
                self._length += len(checked)
            return self._length

    def truncate(self, length: int) -> None:
        with self._mutex:
            self._check_open()
            if not 0 <= length <= self._length:
                raise OutOfRange(f"cannot cut {self._length} messages to {length}")
            if length != self._length:
                self._write_truncate(length)
                self._length = length

    def set_pending(
        self,
        tool_call_ids: Sequence[str],
        suspensions: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        ids = [str(i) for i in tool_call_ids]
        kept = json_suspensions(ids, suspensions or {}, self._session_id)
        with self._mutex:
            self._check_open()
            self._write_pending(ids, kept)

    def close(self) -> None:
        with self._mutex:
            if self._closed:
                return
            self._closed = True
            if self._finalizer is not None:
                self._finalizer()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
