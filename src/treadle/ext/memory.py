"""Durable memory: facts kept in SQLite, searched with FTS5 (bm25), recalled into a fresh
conversation before its first model call.

::

    store = MemoryStore("memory.db")
    agent = Agent(model, tools=[store.remember_tool()], hooks=[MemoryRecall(store)])
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigurationError, StateError
from ..loop import Hooks, RunHandle
from ..providers import ModelRequest
from ..tools import FunctionTool
from ..types import UserMessage
from ._db import Database
from ._run import in_thread, log
from ._text import keywords

__all__ = [
    "RECALL_HEADER",
    "USER_MEMORY_HEADER",
    "Fact",
    "MemoryRecall",
    "MemoryStore",
    "UserMemory",
]

RECALL_HEADER = "[Recalled memory: facts saved in earlier sessions; they may be out of date]"
USER_MEMORY_HEADER = "## What I remember about the user"
STATE_KEY = "treadle.ext.memory"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS facts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    text TEXT NOT NULL UNIQUE,
    created REAL NOT NULL
);
"""
_FTS = "CREATE VIRTUAL TABLE IF NOT EXISTS facts_fts USING fts5(text, tokenize='porter unicode61')"


@dataclass(frozen=True)
class Fact:
    """One remembered fact. ``score`` is the search relevance (higher is better; 0 outside
    a search)."""

    id: int
    text: str
    created: float
    score: float = 0.0


class MemoryStore:
    """Facts in a SQLite file (``":memory:"`` for a throwaway store), safe to share between
    processes.

    Search uses an FTS5 index ranked by bm25 when this SQLite has FTS5; otherwise (or with
    ``fts=False``) it falls back to ``LIKE`` matching, ranked by how many of the query's
    words a fact contains. ``fts`` tells which one is in use. The facts table is the truth
    either way: the index is rebuilt when it is out of step.
    """

    def __init__(self, path: str | Path = ":memory:", *, fts: bool | None = None) -> None:
        self._db = Database(path, _SCHEMA)
        self.fts = False
        if fts is not False:
            try:
                with self._db.transaction() as conn:
                    conn.execute(_FTS)
                self.fts = True
            except sqlite3.OperationalError as exc:
                if fts:
                    raise StateError(f"this SQLite has no FTS5: {exc}") from exc
                log.info("FTS5 unavailable (%s); memory search falls back to LIKE", exc)
        if self.fts:
            self._sync_index()

    def _sync_index(self) -> None:
        (indexed,) = self._db.query("SELECT count(*) FROM facts_fts")[0]
        (stored,) = self._db.query("SELECT count(*) FROM facts")[0]
        if indexed != stored:
            with self._db.transaction() as conn:
                conn.execute("DELETE FROM facts_fts")
                conn.execute("INSERT INTO facts_fts(rowid, text) SELECT id, text FROM facts")

    def remember(self, text: str) -> Fact:
        """Store a fact (an exact repeat returns the stored one)."""
        text = " ".join(text.split())
        if not text:
            raise ConfigurationError("a fact needs some text")
        with self._db.transaction() as conn:
            row = conn.execute(
                "SELECT id, text, created FROM facts WHERE text = ?", (text,)
            ).fetchone()
            if row is not None:
                return Fact(*row)
            now = time.time()
            cursor = conn.execute("INSERT INTO facts(text, created) VALUES (?, ?)", (text, now))
            fact_id = int(cursor.lastrowid or 0)
            if self.fts:
                conn.execute("INSERT INTO facts_fts(rowid, text) VALUES (?, ?)", (fact_id, text))
        return Fact(fact_id, text, now)

    def forget(self, fact: int | str | Fact) -> bool:
        """Remove a fact by id, text or value; False when there was none."""
        if isinstance(fact, Fact):
            fact = fact.id
        column = "id" if isinstance(fact, int) else "text"
        with self._db.transaction() as conn:
            rows = conn.execute(f"SELECT id FROM facts WHERE {column} = ?", (fact,)).fetchall()
            for (fact_id,) in rows:
                conn.execute("DELETE FROM facts WHERE id = ?", (fact_id,))
                if self.fts:
                    conn.execute("DELETE FROM facts_fts WHERE rowid = ?", (fact_id,))
        return bool(rows)

    def stamp(self) -> tuple[int, int] | None:
        """Changes whenever the facts may have changed (here or in another process): equal
        stamps mean a cached answer still holds. Cheap, no disk I/O; None when busy."""
        return self._db.stamp()

    def changes(self) -> int:
        """Changes made through this store (not by other processes); no I/O at all."""
        return self._db.changes()

    def facts(self) -> list[Fact]:
        """Every fact, oldest first."""
        rows = self._db.query("SELECT id, text, created FROM facts ORDER BY id")
        return [Fact(*row) for row in rows]

    def __len__(self) -> int:
        return int(self._db.query("SELECT count(*) FROM facts")[0][0])

    def search(self, query: str, limit: int = 5) -> list[Fact]:
        """The facts most relevant to ``query``, best first (empty when none match)."""
        terms = keywords(query, min_len=2)
        if not terms or limit <= 0:
            return []
        if self.fts:
            match = " OR ".join(f'"{t}"' for t in terms)
            rows = self._db.query(
                "SELECT f.id, f.text, f.created, bm25(facts_fts) AS rank FROM facts_fts "
                "JOIN facts f ON f.id = facts_fts.rowid WHERE facts_fts MATCH ? "
                "ORDER BY rank, f.id DESC LIMIT ?",
                (match, limit),
            )
            return [Fact(i, text, created, -rank) for i, text, created, rank in rows]
        like = " OR ".join("lower(text) LIKE ? ESCAPE '\\'" for _ in terms)
        patterns = tuple(f"%{_escape(t)}%" for t in terms)
        rows = self._db.query(f"SELECT id, text, created FROM facts WHERE {like}", patterns)
        scored = []
        for fact_id, text, created in rows:
            lowered = text.lower()
            score = float(sum(1 for t in terms if t in lowered))
            scored.append(Fact(fact_id, text, created, score))
        scored.sort(key=lambda f: (-f.score, -f.id))
        return scored[:limit]

    def close(self) -> None:
        self._db.close()

    def remember_tool(self, name: str = "remember") -> FunctionTool:
        """A tool the model calls to save a durable fact."""
        store = self

        async def remember(fact: str) -> str:
            """Save a fact worth knowing in later conversations (the user's preferences,
            names, decisions). Only durable facts, not the task in hand.

            Args:
                fact: one short, self-contained sentence
            """
            saved = await in_thread(lambda: store.remember(fact))
            return f"Remembered (fact #{saved.id})."

        return FunctionTool(remember, name=name, category="edit")

    def search_tool(self, name: str = "search_memory", limit: int = 5) -> FunctionTool:
        """A read-only tool the model calls to search the facts itself."""
        store = self

        async def search_memory(query: str) -> str:
            """Search facts saved in earlier conversations.

            Args:
                query: words to look for
            """
            found = await in_thread(lambda: store.search(query, limit))
            return "\n".join(f"- {f.text}" for f in found) or "Nothing found."

        return FunctionTool(search_memory, name=name, category="info", idempotent=True)


def _escape(term: str) -> str:
    return term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


class MemoryRecall(Hooks):
    """A hook: before the first model call of a run that starts a conversation, search the
    store with the user's input and put the best ``limit`` facts in front of the request as
    one user message starting with :data:`RECALL_HEADER`.

    Skipped on resumed conversations (history already there) and when nothing matches.
    The recalled block is kept in ``context.state`` and sent with every later request of the
    conversation, but never stored in the history. What the hook knows about a run is kept
    in ``run.state_for(self)``, so one instance serves any number of runs at once;
    ``recalled`` holds the facts of the last search (of any run), to look at.
    """

    def __init__(self, store: MemoryStore, *, limit: int = 3, min_score: float = 0.0) -> None:
        self.store = store
        self.limit = limit
        self.min_score = min_score
        self.recalled: list[Fact] = []
        self._empty_at: tuple[int, int] | None = None  # the stamp at which the store was empty

    async def before_loop(self, run: RunHandle) -> bool:
        # whether the run started the conversation; "searched" is set at the first search
        run.state_for(self)["fresh"] = not run.context.messages
        return True

    # No on_message (the loop calls only the hook methods a hook has): in a conversation
    # this run started, the history is the run's own, so its first user message, read at
    # the first request, is the input.

    async def before_model_request(self, run: RunHandle, request: ModelRequest) -> ModelRequest:
        context = run.context
        block = context.state.get(STATE_KEY)
        if block is None:
            seen = run.state_for(self)
            if not seen.get("fresh") or seen.get("searched"):
                return request
            text = next((m.text for m in context.messages if isinstance(m, UserMessage)), None)
            if not text:
                return request  # no input yet: looked for again at the next request
            seen["searched"] = True
            limit = self.limit
            stamp = self.store.stamp()
            if stamp is not None and stamp == self._empty_at:
                return request  # still no facts at all: no thread, no query

            def search() -> list[Fact]:
                found = self.store.search(text, limit)
                self._empty_at = stamp if not found and len(self.store) == 0 else None
                return found

            found = await in_thread(search)
            recalled = self.recalled = [f for f in found if f.score > self.min_score]
            if recalled:
                lines = "\n".join(f"- {f.text}" for f in recalled)
                block = context.state[STATE_KEY] = f"{RECALL_HEADER}\n{lines}"
        if not isinstance(block, str):
            return request
        messages = [UserMessage.of(block), *request.messages]
        return request.model_copy(update={"messages": messages})


class UserMemory(Hooks):
    """A hook that puts one "what I remember about the user" message — :data:`USER_MEMORY_HEADER`
    and the facts that match ``query`` (the newest ``limit`` facts with ``query=None``) — in
    front of every model request, like a system prompt built fresh for each call: it is
    never stored in the history. The facts are read again only after the store changed: a
    ``remember`` call through this store shows from the next request on, another process's
    from the next run. Nothing is added when there are no facts.
    """

    def __init__(self, store: MemoryStore, *, query: str | None = "user", limit: int = 10) -> None:
        self.store = store
        self.query = query
        self.limit = limit
        self.block: str | None = None
        self._stamp: tuple[int, int] | None = None

    def _read(self) -> list[Fact]:
        if self.query is None:
            return self.store.facts()[-self.limit :] if self.limit > 0 else []
        return self.store.search(self.query, self.limit)

    async def before_model_request(self, run: RunHandle, request: ModelRequest) -> ModelRequest:
        # Other processes' changes are looked for once per run; this process's own (a
        # remember call) before every request, for free.
        known = self._stamp
        seen = run.state_for(self)
        if not seen or known is None or known[1] != self.store.changes():
            seen["checked"] = True
            stamp = self.store.stamp()
            if stamp is None or stamp != known:
                self._stamp = stamp
                facts = await in_thread(self._read)
                lines = "\n".join(f"- {f.text}" for f in facts)
                self.block = f"{USER_MEMORY_HEADER}\n\n{lines}" if facts else None
        if self.block is None:
            return request
        messages = [UserMessage.of(self.block), *request.messages]
        return request.model_copy(update={"messages": messages})
