"""MCP tool curation: offer the model only the ``top_k`` MCP tools used most recently, so a
dozen servers do not flood every request with hundreds of tool descriptions.

::

    curation = McpCuration("audit.db", top_k=12)
    agent = Agent(model, tools=[github, jira], hooks=[curation])
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from ..errors import ConfigurationError
from ..loop import Hooks, RunEnding, RunHandle
from ..providers import ModelRequest
from ..types import ToolCall, ToolResult
from ._db import Database
from ._run import in_thread

__all__ = ["McpCuration", "mcp_name"]

_NAME = re.compile(r"^mcp__(?P<server>.+?)__(?P<tool>.+)$")
_AUDIT = """
CREATE TABLE IF NOT EXISTS mcp_calls (
    name TEXT NOT NULL,
    server TEXT NOT NULL,
    at REAL NOT NULL,
    is_error INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS mcp_calls_name ON mcp_calls(name, at);
"""


_INSERT = "INSERT INTO mcp_calls VALUES (?, ?, ?, ?)"


def mcp_name(name: str) -> tuple[str, str] | None:
    """``(server, tool)`` of a tool named ``mcp__{server}__{tool}``, else None."""
    match = _NAME.match(name)
    return (match["server"], match["tool"]) if match else None


class McpCuration(Hooks):
    """A hook that records every MCP tool call in an audit table (SQLite, ``db``) and trims
    the MCP tools of each request to the ``top_k`` used most recently (ties: more calls
    first). Tools never used come after those used, in their original order. Tools not
    named ``mcp__{server}__{tool}`` are always kept, and the order of the request's tools
    does not change. A trimmed tool still runs if the model calls it by name."""

    def __init__(self, db: str | Path = ":memory:", *, top_k: int = 10) -> None:
        if top_k < 0:
            raise ConfigurationError("top_k must be 0 or more")
        self._db = Database(db, _AUDIT)
        self.top_k = top_k

    def record(self, name: str, *, is_error: bool = False, at: float | None = None) -> None:
        """Add one call to the audit (blocking); non-MCP names are ignored."""
        parsed = mcp_name(name)
        if parsed is not None:
            self._db.execute(
                _INSERT, (name, parsed[0], time.time() if at is None else at, int(is_error))
            )

    def ranking(self) -> list[str]:
        """MCP tool names by recent use, best first."""
        rows = self._db.query(
            "SELECT name FROM mcp_calls GROUP BY name ORDER BY max(at) DESC, count(*) DESC"
        )
        return [name for (name,) in rows]

    def keep(self, names: list[str]) -> set[str]:
        """Which of ``names`` to offer (blocking)."""
        mcp = [n for n in names if mcp_name(n) is not None]
        if len(mcp) <= self.top_k:
            return set(names)
        used = [n for n in self.ranking() if n in set(mcp)]
        fresh = [n for n in mcp if n not in set(used)]
        chosen = set((used + fresh)[: self.top_k])
        return {n for n in names if mcp_name(n) is None or n in chosen}

    async def before_model_request(self, run: RunHandle, request: ModelRequest) -> ModelRequest:
        if len(request.tools) <= self.top_k:
            return request  # no more tools than top_k at all: nothing to trim (idle)
        names = [t.name for t in request.tools]
        if sum(1 for n in names if n.startswith("mcp__")) <= self.top_k:
            return request  # nothing to trim: no thread, no query
        kept = await in_thread(lambda: self.keep(names))
        if len(kept) == len(names):
            return request
        return request.model_copy(update={"tools": [t for t in request.tools if t.name in kept]})

    def record_later(self, name: str, *, is_error: bool = False) -> None:
        """Like :meth:`record`, written at the run's end (no I/O now) or before the next
        read of the audit."""
        parsed = mcp_name(name)
        if parsed is not None:
            self._db.defer(_INSERT, (name, parsed[0], time.time(), int(is_error)))

    async def after_tool_call(
        self, run: RunHandle, call: ToolCall, result: ToolResult
    ) -> ToolResult | None:
        if call.name.startswith("mcp__"):
            self.record_later(call.name, is_error=result.is_error)
        return None

    async def after_loop(self, run: RunHandle, ending: RunEnding) -> None:
        if self._db.pending:  # MCP calls of this run, audited in one transaction
            await self._db.flush_soon()

    def close(self) -> None:
        """Write what is pending and close the audit database."""
        self._db.close()
